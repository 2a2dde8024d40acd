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
    /// Once it has exited: whether that exit was SIGKILL's. `None` where
    /// the status is not ours to read (a bare pid).
    fn killed_by_sigkill(&self) -> Option<bool> {
        None
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

    let mut ended = clock.wait(target, |d| d.give_up_at).await;
    if !ended && target.has_exited() {
        // Dead, yet not reaped: a contained child's reap waits for its
        // cgroup to empty, bounded by the spawn's own killTimeoutMs, which
        // may have begun just before our bound ran out. It did die: wait
        // for that reap once more, at most this stop's killTimeoutMs.
        ended = target
            .wait_exit(Instant::now() + plan.kill_timeout.as_duration())
            .await;
    }
    if ended {
        // SIGKILL sent to a child that was already on its way out (its exit
        // fell between our look and the kill): it exited, with its status.
        if target.killed_by_sigkill() == Some(false) {
            return done(Outcome::Exited, signals);
        }
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
        /// From its death to its reap (a contained child's drain).
        reap_after: Duration,
        eperm: bool,
        sent: Vec<(Signal, Instant)>,
    }

    impl Fake {
        fn new(after_term: Option<Duration>, after_kill: Option<Duration>) -> Fake {
            Fake {
                exit_at: None,
                after_term,
                after_kill,
                reap_after: Duration::ZERO,
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
            let exit_at = self.exit_at.map(|at| at + self.reap_after);
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

    /// Ignores SIGTERM, and exits with a status of its own just as
    /// SIGKILL is sent (the kill finds it on its way out).
    struct ExitsAsKilled {
        sent: Vec<Signal>,
        killed_by_sigkill: bool,
    }

    impl StopTarget for ExitsAsKilled {
        fn has_exited(&mut self) -> bool {
            false
        }
        fn send(&mut self, sig: Signal) -> io::Result<bool> {
            self.sent.push(sig);
            Ok(true)
        }
        fn wait_exit(&mut self, deadline: Instant) -> impl Future<Output = bool> + Send {
            let killed = self.sent.contains(&Signal::KILL);
            async move {
                if !killed {
                    tokio::time::sleep_until(deadline).await;
                }
                killed
            }
        }
        fn killed_by_sigkill(&self) -> Option<bool> {
            Some(self.killed_by_sigkill)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn killed_only_when_the_status_says_sigkill() {
        for (by_kill, outcome) in [(true, Outcome::Killed), (false, Outcome::Exited)] {
            let mut t = ExitsAsKilled {
                sent: Vec::new(),
                killed_by_sigkill: by_kill,
            };
            let r = run_alone(&mut t, &plan()).await.unwrap();
            assert_eq!(r.outcome, outcome);
            // What was sent is reported either way.
            assert_eq!(r.signals, vec![Signal::TERM, Signal::KILL]);
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
    async fn eperm_is_an_error_and_sends_nothing() {
        let mut t = Fake::new(Some(MS(1)), Some(MS(1)));
        t.eperm = true;
        let err = run_alone(&mut t, &plan()).await.unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM));
        assert!(t.sent.is_empty());
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

    /// A stop of a `Fake` that exits this long after SIGTERM and after
    /// SIGKILL (None: never), by `plan`, tightened `later` (ms into the stop)
    /// by another caller's plan; what it must come to, and (where given) when
    /// SIGKILL went out and when the stop ended, in ms from its start.
    struct Case {
        name: &'static str,
        exits: (Option<u64>, Option<u64>),
        plan: StopPlan,
        later: Option<(u64, StopPlan)>,
        outcome: Outcome,
        signals: &'static [Signal],
        kill_sent: Option<u64>,
        took: Option<u64>,
    }

    #[rustfmt::skip]
    fn cases() -> Vec<Case> {
        use Outcome::{Exited, Killed, Unkillable};
        const TERM_KILL: &[Signal] = &[Signal::TERM, Signal::KILL];
        let max = u64::from(u32::MAX >> 1);
        vec![
            Case { name: "exits within the grace", exits: (Some(40), Some(1)), plan: plan(), later: None,
                outcome: Exited, signals: &[Signal::TERM], kill_sent: None, took: Some(40) },
            Case { name: "ignores SIGTERM and is killed", exits: (None, Some(3)), plan: plan(), later: None,
                outcome: Killed, signals: TERM_KILL, kill_sent: Some(5000), took: Some(5003) },
            Case { name: "never exits: unkillable, bounded", exits: (None, None), plan: plan(), later: None,
                outcome: Unkillable, signals: TERM_KILL, kill_sent: Some(5000), took: Some(7000) },
            // Exits exactly at the end of the grace period: SIGKILL is not sent.
            Case { name: "an exit racing the kill", exits: (Some(5000), Some(1)), plan: plan(), later: None,
                outcome: Exited, signals: &[Signal::TERM], kill_sent: None, took: None },
            Case { name: "SIGKILL first skips the grace", exits: (None, Some(2)),
                plan: StopPlan { signal: Signal::KILL, ..plan() }, later: None,
                outcome: Killed, signals: &[Signal::KILL], kill_sent: None, took: Some(2) },
            Case { name: "no grace escalates at once", exits: (Some(10), Some(1)),
                plan: StopPlan { grace: Millis::ZERO, ..plan() }, later: None,
                outcome: Killed, signals: TERM_KILL, kill_sent: Some(0), took: Some(1) },
            Case { name: "the longest durations neither overflow nor go unbounded", exits: (None, None),
                plan: StopPlan { signal: Signal::TERM, grace: Millis::MAX, kill_timeout: Millis::MAX },
                later: None, outcome: Unkillable, signals: TERM_KILL, kill_sent: Some(max), took: Some(2 * max) },
            Case { name: "a later SIGKILL kills at once", exits: (None, Some(3)), plan: plan(),
                later: Some((1000, kill_plan(2000))),
                outcome: Killed, signals: TERM_KILL, kill_sent: Some(1000), took: Some(1003) },
            Case { name: "a sooner grace moves the kill earlier", exits: (None, Some(3)), plan: plan(),
                later: Some((1000, StopPlan { grace: millis(500), ..plan() })),
                outcome: Killed, signals: TERM_KILL, kill_sent: Some(1500), took: Some(1503) },
            Case { name: "a later deadline changes nothing", exits: (None, None), plan: plan(),
                later: Some((1000, StopPlan { grace: millis(60_000), kill_timeout: millis(60_000), ..plan() })),
                outcome: Unkillable, signals: TERM_KILL, kill_sent: Some(5000), took: Some(7000) },
            // The first caller would wait until 7000; a SIGKILL caller at 5500
            // with killTimeoutMs 100 bounds the whole stop at 5600.
            Case { name: "an escalation after SIGKILL shortens the final wait", exits: (None, None),
                plan: plan(), later: Some((5500, kill_plan(100))),
                outcome: Unkillable, signals: TERM_KILL, kill_sent: Some(5000), took: Some(5600) },
            // A later SIGKILL caller with a long kill timeout kills now, but the
            // first caller's own bound (start + grace + kill timeout) still holds.
            Case { name: "the final bound is the soonest of all callers'", exits: (None, None),
                plan: plan(), later: Some((1000, kill_plan(60_000))),
                outcome: Unkillable, signals: TERM_KILL, kill_sent: Some(1000), took: Some(7000) },
            Case { name: "an exit during the grace beats a later escalation", exits: (Some(40), Some(1)),
                plan: plan(), later: Some((1000, kill_plan(2000))),
                outcome: Exited, signals: &[Signal::TERM], kill_sent: None, took: Some(40) },
        ]
    }

    /// Killed, dead, and its reap still waiting (a contained child's drain
    /// for its cgroup): the reap is waited for once more, one killTimeoutMs.
    #[tokio::test(start_paused = true)]
    async fn a_death_whose_reap_lags_is_killed_not_unkillable() {
        for (reap_after, outcome, took) in [
            (2500, Outcome::Killed, 7503),
            (6000, Outcome::Unkillable, 9000),
        ] {
            let mut t = Fake::new(None, Some(MS(3)));
            t.reap_after = MS(reap_after);
            let start = Instant::now();
            let r = run_alone(&mut t, &plan()).await.unwrap();
            assert_eq!(r.outcome, outcome, "reap {reap_after} ms after the death");
            assert_eq!(r.signals, [Signal::TERM, Signal::KILL]);
            assert_eq!(
                Instant::now() - start,
                MS(took),
                "reap {reap_after} ms after the death"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn stops_end_as_planned_and_as_escalated() {
        for c in cases() {
            let mut t = Fake::new(c.exits.0.map(MS), c.exits.1.map(MS));
            let esc = Escalation::new();
            if let Some((after, later)) = c.later {
                escalate_after(&esc, MS(after), later);
            }
            let start = Instant::now();
            let r = run(&mut t, &c.plan, &esc).await.unwrap();
            assert_eq!(r.outcome, c.outcome, "{}", c.name);
            assert_eq!(r.signals, c.signals, "{}", c.name);
            assert_eq!(t.signals(), c.signals, "{}", c.name);
            if let Some(ms) = c.kill_sent {
                assert_eq!(t.sent[1].1 - start, MS(ms), "{}: SIGKILL", c.name);
            }
            if let Some(ms) = c.took {
                assert_eq!(start.elapsed(), MS(ms), "{}", c.name);
            }
        }
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
