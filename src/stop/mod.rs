//! The stop escalation: `signal` (SIGTERM), up to `grace` for the exit,
//! SIGKILL, up to `kill_timeout` for the exit, and a verdict.
//!
//! Pure: it knows nothing of pids or pidfds, only a [`StopTarget`] that can
//! say whether it has exited, take a signal, and wait for its exit until a
//! deadline. Real targets live in [`targets`]; the tests below drive it with
//! fakes on tokio's paused clock.
//!
//! Bounded by construction: two waits, each ending at a deadline fixed when
//! the stop starts, and no loop that can move a deadline later, so a stop
//! settles within `grace + kill_timeout` (plus the time of a few syscalls)
//! whatever the target does.
//!
//! Escalation (the "second Ctrl-C"): a later caller may [`Escalation::tighten`]
//! the deadlines of a running stop. Each caller's plan gives two instants,
//! when to send SIGKILL and when to give up; the stop uses the earliest of
//! each over all callers, and notices a tightening at once. A later
//! `signal: SIGKILL` is a kill deadline of "now". Nothing can loosen them:
//! the combined stop ends no later than the soonest bound any caller asked for.

pub mod targets;

use std::future::Future;
use std::io;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::duration::Millis;
use crate::pid::Signal;

pub trait StopTarget {
    /// Has it exited already (a zombie counts)?
    fn has_exited(&mut self) -> bool;
    /// `Ok(true)`: sent. `Ok(false)`: not sent because the target is gone.
    /// `Err`: could not be sent (EPERM).
    fn send(&mut self, sig: Signal) -> io::Result<bool>;
    /// True as soon as the target has exited; false once `deadline` passed
    /// (at once if it already has).
    fn wait_exit(&mut self, deadline: Instant) -> impl Future<Output = bool> + Send;
    /// The first signal actually sent for a plan's `requested` one: itself,
    /// where the target can take it (Windows has no SIGTERM: see
    /// `targets::windows`).
    fn first_signal(&self, requested: Signal) -> Signal {
        requested
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopPlan {
    pub signal: Signal,
    pub grace: Millis,
    pub kill_timeout: Millis,
}

/// When a stop sends SIGKILL and when it gives up waiting for the exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadlines {
    pub kill_at: Instant,
    pub give_up_at: Instant,
}

impl Deadlines {
    /// `plan` started at `now`. A SIGKILL-first plan kills at once.
    pub fn of(plan: &StopPlan, now: Instant) -> Deadlines {
        let kill_at = if plan.signal == Signal::KILL {
            now
        } else {
            now + plan.grace.as_duration()
        };
        Deadlines {
            kill_at,
            give_up_at: kill_at + plan.kill_timeout.as_duration(),
        }
    }

    fn earliest(self, other: Deadlines) -> Deadlines {
        Deadlines {
            kill_at: self.kill_at.min(other.kill_at),
            give_up_at: self.give_up_at.min(other.give_up_at),
        }
    }
}

/// Later callers' deadlines for one stop, shared with the stop itself.
/// Tightening may happen before the stop has started; it applies then too.
#[derive(Clone, Debug)]
pub struct Escalation(watch::Sender<Option<Deadlines>>);

impl Default for Escalation {
    fn default() -> Self {
        Escalation::new()
    }
}

impl Escalation {
    pub fn new() -> Escalation {
        Escalation(watch::Sender::new(None))
    }

    /// Moves the deadlines earlier where `d` ends sooner; never later. Wakes
    /// the running stop only when something changed.
    pub fn tighten(&self, d: Deadlines) {
        self.0.send_if_modified(|cur| {
            let next = cur.map_or(d, |c| c.earliest(d));
            let changed = *cur != Some(next);
            *cur = Some(next);
            changed
        });
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It had exited before we sent anything; nothing was sent.
    AlreadyExited,
    /// It exited after `signal`, within the grace period.
    Exited,
    /// It needed SIGKILL.
    Killed,
    /// It outlived SIGKILL by `kill_timeout` (e.g. stuck in an
    /// uninterruptible sleep). It may still die later.
    Unkillable,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::AlreadyExited => "already-exited",
            Outcome::Exited => "exited",
            Outcome::Killed => "killed",
            Outcome::Unkillable => "unkillable",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopReport {
    pub outcome: Outcome,
    pub signals: Vec<Signal>,
}

/// The deadlines in force: this stop's own, tightened by any escalation.
struct Clock {
    own: Deadlines,
    escalation: watch::Receiver<Option<Deadlines>>,
}

impl Clock {
    fn current(&mut self) -> Deadlines {
        match *self.escalation.borrow_and_update() {
            Some(e) => self.own.earliest(e),
            None => self.own,
        }
    }

    /// Waits for the exit until the deadline `pick`ed from the current ones,
    /// starting over with the new deadline whenever an escalation moves it.
    async fn wait<T: StopTarget>(
        &mut self,
        target: &mut T,
        pick: fn(&Deadlines) -> Instant,
    ) -> bool {
        loop {
            let deadline = pick(&self.current());
            let exit = target.wait_exit(deadline);
            tokio::select! {
                biased;
                exited = exit => return exited,
                // Err: every sender is gone, so nothing can tighten any more;
                // the branch is then disabled and the wait runs to its end.
                Ok(()) = self.escalation.changed() => {}
            }
        }
    }
}

pub async fn run<T: StopTarget>(
    target: &mut T,
    plan: &StopPlan,
    escalation: &Escalation,
) -> io::Result<StopReport> {
    let plan = &StopPlan {
        signal: target.first_signal(plan.signal),
        ..*plan
    };
    let mut clock = Clock {
        own: Deadlines::of(plan, Instant::now()),
        escalation: escalation.0.subscribe(),
    };
    let mut signals = Vec::new();
    let done = |outcome, signals| Ok(StopReport { outcome, signals });

    // Exited before we sent anything. For our child the exit we wait for is
    // the reap, which may still be a moment away (the watcher is about to
    // settle it): wait for it, bounded as everything else, so that
    // `already-exited` means the pid is gone and the status is at hand.
    if target.has_exited() || !target.send(plan.signal)? {
        clock.wait(target, |d| d.give_up_at).await;
        return done(Outcome::AlreadyExited, signals);
    }
    signals.push(plan.signal);

    if plan.signal != Signal::KILL {
        if clock.wait(target, |d| d.kill_at).await {
            return done(Outcome::Exited, signals);
        }
        // It may have exited right at the deadline; then SIGKILL would be
        // a lie in the report. The reap (for our children) follows at once.
        if target.has_exited() {
            clock.wait(target, |d| d.give_up_at).await;
            return done(Outcome::Exited, signals);
        }
        if !target.send(Signal::KILL)? {
            clock.wait(target, |d| d.give_up_at).await;
            return done(Outcome::Exited, signals);
        }
        signals.push(Signal::KILL);
    }

    if clock.wait(target, |d| d.give_up_at).await {
        done(Outcome::Killed, signals)
    } else {
        done(Outcome::Unkillable, signals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A process whose behaviour is scripted: how long after each signal it
    /// exits (None: ignores it), and whether it may be signalled at all.
    struct Fake {
        exit_at: Option<Instant>,
        after_term: Option<Duration>,
        after_kill: Option<Duration>,
        eperm: bool,
        sent: Vec<(Signal, Instant)>,
    }

    impl Fake {
        fn new(after_term: Option<Duration>, after_kill: Option<Duration>) -> Fake {
            Fake {
                exit_at: None,
                after_term,
                after_kill,
                eperm: false,
                sent: vec![],
            }
        }
        fn exited(&self) -> bool {
            self.exit_at.is_some_and(|t| t <= Instant::now())
        }
        fn signals(&self) -> Vec<Signal> {
            self.sent.iter().map(|&(s, _)| s).collect()
        }
    }

    impl StopTarget for Fake {
        fn has_exited(&mut self) -> bool {
            self.exited()
        }
        fn send(&mut self, sig: Signal) -> io::Result<bool> {
            if self.exited() {
                return Ok(false);
            }
            if self.eperm {
                return Err(io::Error::from_raw_os_error(libc::EPERM));
            }
            self.sent.push((sig, Instant::now()));
            let delay = if sig == Signal::KILL {
                self.after_kill
            } else {
                self.after_term
            };
            if let Some(d) = delay {
                let at = Instant::now() + d;
                self.exit_at = Some(self.exit_at.map_or(at, |e| e.min(at)));
            }
            Ok(true)
        }
        fn wait_exit(&mut self, deadline: Instant) -> impl Future<Output = bool> + Send {
            let exit_at = self.exit_at;
            async move {
                match exit_at {
                    Some(at) if at <= deadline => {
                        tokio::time::sleep_until(at).await;
                        true
                    }
                    _ => {
                        tokio::time::sleep_until(deadline).await;
                        false
                    }
                }
            }
        }
    }

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn millis(ms: u32) -> Millis {
        Millis::new(ms).unwrap()
    }

    fn plan() -> StopPlan {
        StopPlan {
            signal: Signal::TERM,
            grace: millis(5000),
            kill_timeout: millis(2000),
        }
    }

    async fn run_alone<T: StopTarget>(t: &mut T, p: &StopPlan) -> io::Result<StopReport> {
        run(t, p, &Escalation::new()).await
    }

    #[tokio::test(start_paused = true)]
    async fn exits_within_grace() {
        let mut t = Fake::new(Some(MS(40)), Some(MS(1)));
        let start = Instant::now();
        let r = run_alone(&mut t, &plan()).await.unwrap();
        assert_eq!(r.outcome, Outcome::Exited);
        assert_eq!(r.signals, vec![Signal::TERM]);
        assert_eq!(start.elapsed(), MS(40));
    }

    #[tokio::test(start_paused = true)]
    async fn ignores_term_and_is_killed() {
        let mut t = Fake::new(None, Some(MS(3)));
        let start = Instant::now();
        let r = run_alone(&mut t, &plan()).await.unwrap();
        assert_eq!(r.outcome, Outcome::Killed);
        assert_eq!(r.signals, vec![Signal::TERM, Signal::KILL]);
        assert_eq!(start.elapsed(), MS(5003));
    }

    #[tokio::test(start_paused = true)]
    async fn never_exits_is_unkillable_and_bounded() {
        let mut t = Fake::new(None, None);
        let start = Instant::now();
        let r = run_alone(&mut t, &plan()).await.unwrap();
        assert_eq!(r.outcome, Outcome::Unkillable);
        assert_eq!(r.signals, vec![Signal::TERM, Signal::KILL]);
        assert_eq!(start.elapsed(), MS(7000));
    }

    #[tokio::test(start_paused = true)]
    async fn already_gone_sends_nothing() {
        let mut t = Fake::new(None, None);
        t.exit_at = Some(Instant::now());
        let r = run_alone(&mut t, &plan()).await.unwrap();
        assert_eq!(r.outcome, Outcome::AlreadyExited);
        assert!(r.signals.is_empty());
        assert!(t.sent.is_empty());
    }

    /// Exited, but its reap (what `wait_exit` reports for our children)
    /// comes a little later.
    struct Unreaped {
        reaped_at: Instant,
    }

    impl StopTarget for Unreaped {
        fn has_exited(&mut self) -> bool {
            true
        }
        fn send(&mut self, _sig: Signal) -> io::Result<bool> {
            panic!("nothing may be sent to an exited target")
        }
        fn wait_exit(&mut self, deadline: Instant) -> impl Future<Output = bool> + Send {
            let at = self.reaped_at;
            async move {
                tokio::time::sleep_until(at.min(deadline)).await;
                at <= deadline
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn already_exited_waits_for_the_reap_bounded() {
        let start = Instant::now();
        let mut t = Unreaped {
            reaped_at: start + MS(3),
        };
        let r = run_alone(&mut t, &plan()).await.unwrap();
        assert_eq!(r.outcome, Outcome::AlreadyExited);
        assert!(r.signals.is_empty());
        assert_eq!(start.elapsed(), MS(3));
        // Never reaped: bounded by the whole stop's bound.
        let mut t = Unreaped {
            reaped_at: start + MS(60_000),
        };
        let start = Instant::now();
        let r = run_alone(&mut t, &plan()).await.unwrap();
        assert_eq!(r.outcome, Outcome::AlreadyExited);
        assert_eq!(start.elapsed(), MS(7000));
    }

    #[tokio::test(start_paused = true)]
    async fn exit_racing_the_kill_is_exited() {
        // Exits exactly at the end of the grace period: SIGKILL is not sent.
        let mut t = Fake::new(Some(MS(5000)), Some(MS(1)));
        let r = run_alone(&mut t, &plan()).await.unwrap();
        assert_eq!(r.outcome, Outcome::Exited);
        assert_eq!(t.signals(), vec![Signal::TERM]);
    }

    #[tokio::test(start_paused = true)]
    async fn eperm_is_an_error_and_sends_nothing() {
        let mut t = Fake::new(Some(MS(1)), Some(MS(1)));
        t.eperm = true;
        let err = run_alone(&mut t, &plan()).await.unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM));
        assert!(t.sent.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn sigkill_first_skips_the_grace() {
        let mut t = Fake::new(None, Some(MS(2)));
        let p = StopPlan {
            signal: Signal::KILL,
            ..plan()
        };
        let start = Instant::now();
        let r = run_alone(&mut t, &p).await.unwrap();
        assert_eq!(r.outcome, Outcome::Killed);
        assert_eq!(r.signals, vec![Signal::KILL]);
        assert_eq!(start.elapsed(), MS(2));
    }

    #[tokio::test(start_paused = true)]
    async fn zero_grace_escalates_at_once() {
        let mut t = Fake::new(Some(MS(10)), Some(MS(1)));
        let p = StopPlan {
            grace: Millis::ZERO,
            ..plan()
        };
        let r = run_alone(&mut t, &p).await.unwrap();
        assert_eq!(r.outcome, Outcome::Killed);
        assert_eq!(r.signals, vec![Signal::TERM, Signal::KILL]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_longest_durations_are_bounded_and_do_not_overflow() {
        let mut t = Fake::new(None, None);
        let p = StopPlan {
            signal: Signal::TERM,
            grace: Millis::MAX,
            kill_timeout: Millis::MAX,
        };
        let start = Instant::now();
        let r = run_alone(&mut t, &p).await.unwrap();
        assert_eq!(r.outcome, Outcome::Unkillable);
        assert_eq!(start.elapsed(), Millis::MAX.as_duration() * 2);
    }

    /// Tightens `esc` with `later`'s plan, `after` into the stop.
    fn escalate_after(esc: &Escalation, after: Duration, later: StopPlan) {
        let esc = esc.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            esc.tighten(Deadlines::of(&later, Instant::now()));
        });
    }

    fn kill_plan(kill_timeout: u32) -> StopPlan {
        StopPlan {
            signal: Signal::KILL,
            grace: millis(5000),
            kill_timeout: millis(kill_timeout),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_later_sigkill_kills_at_once() {
        let mut t = Fake::new(None, Some(MS(3)));
        let esc = Escalation::new();
        let start = Instant::now();
        escalate_after(&esc, MS(1000), kill_plan(2000));
        let r = run(&mut t, &plan(), &esc).await.unwrap();
        assert_eq!(r.outcome, Outcome::Killed);
        assert_eq!(r.signals, vec![Signal::TERM, Signal::KILL]);
        assert_eq!(t.sent[1].1 - start, MS(1000));
        assert_eq!(start.elapsed(), MS(1003));
    }

    #[tokio::test(start_paused = true)]
    async fn a_sooner_grace_moves_the_kill_earlier() {
        let mut t = Fake::new(None, Some(MS(3)));
        let esc = Escalation::new();
        let start = Instant::now();
        let sooner = StopPlan {
            grace: millis(500),
            ..plan()
        };
        escalate_after(&esc, MS(1000), sooner);
        let r = run(&mut t, &plan(), &esc).await.unwrap();
        assert_eq!(r.outcome, Outcome::Killed);
        assert_eq!(t.sent[1].1 - start, MS(1500));
    }

    #[tokio::test(start_paused = true)]
    async fn a_later_deadline_changes_nothing() {
        let mut t = Fake::new(None, None);
        let esc = Escalation::new();
        let start = Instant::now();
        let lax = StopPlan {
            grace: millis(60_000),
            kill_timeout: millis(60_000),
            ..plan()
        };
        escalate_after(&esc, MS(1000), lax);
        let r = run(&mut t, &plan(), &esc).await.unwrap();
        assert_eq!(r.outcome, Outcome::Unkillable);
        assert_eq!(t.sent[1].1 - start, MS(5000));
        assert_eq!(start.elapsed(), MS(7000));
    }

    #[tokio::test(start_paused = true)]
    async fn escalation_after_sigkill_shortens_the_final_wait() {
        // Unkillable: the first caller would wait until 7000; a SIGKILL
        // caller at 5500 with killTimeoutMs 100 bounds the whole stop at 5600.
        let mut t = Fake::new(None, None);
        let esc = Escalation::new();
        let start = Instant::now();
        escalate_after(&esc, MS(5500), kill_plan(100));
        let r = run(&mut t, &plan(), &esc).await.unwrap();
        assert_eq!(r.outcome, Outcome::Unkillable);
        assert_eq!(r.signals, vec![Signal::TERM, Signal::KILL]);
        assert_eq!(start.elapsed(), MS(5600));
    }

    #[tokio::test(start_paused = true)]
    async fn the_final_bound_is_the_soonest_of_all_callers() {
        // A later SIGKILL caller with a long kill timeout kills now, but the
        // first caller's own bound (start + grace + kill timeout) still holds.
        let mut t = Fake::new(None, None);
        let esc = Escalation::new();
        let start = Instant::now();
        escalate_after(&esc, MS(1000), kill_plan(60_000));
        let r = run(&mut t, &plan(), &esc).await.unwrap();
        assert_eq!(r.outcome, Outcome::Unkillable);
        assert_eq!(t.sent[1].1 - start, MS(1000));
        assert_eq!(start.elapsed(), MS(7000));
    }

    #[tokio::test(start_paused = true)]
    async fn tightened_before_the_start_applies() {
        let mut t = Fake::new(None, Some(MS(2)));
        let esc = Escalation::new();
        esc.tighten(Deadlines::of(&kill_plan(2000), Instant::now()));
        let start = Instant::now();
        let r = run(&mut t, &plan(), &esc).await.unwrap();
        assert_eq!(r.outcome, Outcome::Killed);
        assert_eq!(r.signals, vec![Signal::TERM, Signal::KILL]);
        assert_eq!(start.elapsed(), MS(2));
    }

    #[tokio::test(start_paused = true)]
    async fn an_exit_during_the_grace_beats_a_later_escalation() {
        let mut t = Fake::new(Some(MS(40)), Some(MS(1)));
        let esc = Escalation::new();
        escalate_after(&esc, MS(1000), kill_plan(2000));
        let r = run(&mut t, &plan(), &esc).await.unwrap();
        assert_eq!(r.outcome, Outcome::Exited);
        assert_eq!(t.signals(), vec![Signal::TERM]);
    }

    #[test]
    fn tighten_only_moves_earlier() {
        let now = Instant::now();
        let esc = Escalation::new();
        let rx = esc.0.subscribe();
        esc.tighten(Deadlines::of(&plan(), now));
        let first = rx.borrow().unwrap();
        esc.tighten(Deadlines::of(&plan(), now + MS(10)));
        assert_eq!(*rx.borrow(), Some(first));
        esc.tighten(Deadlines::of(&kill_plan(100), now));
        assert_eq!(
            *rx.borrow(),
            Some(Deadlines {
                kill_at: now,
                give_up_at: now + MS(100)
            })
        );
    }
}
