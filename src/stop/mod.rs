//! The stop escalation: `signal` (SIGTERM), up to `grace` for the exit,
//! SIGKILL, up to `kill_timeout` for the exit, and a verdict.
//!
//! Pure: it knows nothing of pids or pidfds, only a [`StopTarget`] that can
//! say whether it has exited, take a signal, and wait for its exit until a
//! timeout. Real targets live in [`targets`]; the tests below drive it with
//! fakes on tokio's paused clock.
//!
//! Bounded by construction: two waits, each capped by its own timeout, and
//! no loop, so a stop settles within `grace + kill_timeout` (plus the time
//! of a few syscalls) whatever the target does.

pub mod targets;

use std::future::Future;
use std::io;
use std::time::Duration;

use crate::pid::Signal;

pub trait StopTarget {
    /// Has it exited already (a zombie counts)?
    fn has_exited(&mut self) -> bool;
    /// `Ok(true)`: sent. `Ok(false)`: not sent because the target is gone.
    /// `Err`: could not be sent (EPERM).
    fn send(&mut self, sig: Signal) -> io::Result<bool>;
    /// True as soon as the target has exited; false once `timeout` passed.
    fn wait_exit(&mut self, timeout: Duration) -> impl Future<Output = bool> + Send;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopPlan {
    pub signal: Signal,
    pub grace: Duration,
    pub kill_timeout: Duration,
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

pub async fn run<T: StopTarget>(target: &mut T, plan: &StopPlan) -> io::Result<StopReport> {
    let mut signals = Vec::new();
    let done = |outcome, signals| Ok(StopReport { outcome, signals });

    if target.has_exited() {
        return done(Outcome::AlreadyExited, signals);
    }
    if !target.send(plan.signal)? {
        return done(Outcome::AlreadyExited, signals);
    }
    signals.push(plan.signal);

    if plan.signal != Signal::KILL {
        if target.wait_exit(plan.grace).await {
            return done(Outcome::Exited, signals);
        }
        // It may have exited right at the deadline; then SIGKILL would be
        // a lie in the report. The reap (for our children) follows at once.
        if target.has_exited() {
            target.wait_exit(plan.kill_timeout).await;
            return done(Outcome::Exited, signals);
        }
        if !target.send(Signal::KILL)? {
            target.wait_exit(plan.kill_timeout).await;
            return done(Outcome::Exited, signals);
        }
        signals.push(Signal::KILL);
    }

    if target.wait_exit(plan.kill_timeout).await {
        done(Outcome::Killed, signals)
    } else {
        done(Outcome::Unkillable, signals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    /// A process whose behaviour is scripted: how long after each signal it
    /// exits (None: ignores it), and whether it may be signalled at all.
    struct Fake {
        exit_at: Option<Instant>,
        after_term: Option<Duration>,
        after_kill: Option<Duration>,
        eperm: bool,
        sent: Vec<Signal>,
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
            self.sent.push(sig);
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
        fn wait_exit(&mut self, timeout: Duration) -> impl Future<Output = bool> + Send {
            let deadline = Instant::now() + timeout;
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

    fn plan() -> StopPlan {
        StopPlan {
            signal: Signal::TERM,
            grace: MS(5000),
            kill_timeout: MS(2000),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn exits_within_grace() {
        let mut t = Fake::new(Some(MS(40)), Some(MS(1)));
        let start = Instant::now();
        let r = run(&mut t, &plan()).await.unwrap();
        assert_eq!(r.outcome, Outcome::Exited);
        assert_eq!(r.signals, vec![Signal::TERM]);
        assert_eq!(start.elapsed(), MS(40));
    }

    #[tokio::test(start_paused = true)]
    async fn ignores_term_and_is_killed() {
        let mut t = Fake::new(None, Some(MS(3)));
        let start = Instant::now();
        let r = run(&mut t, &plan()).await.unwrap();
        assert_eq!(r.outcome, Outcome::Killed);
        assert_eq!(r.signals, vec![Signal::TERM, Signal::KILL]);
        assert_eq!(start.elapsed(), MS(5003));
    }

    #[tokio::test(start_paused = true)]
    async fn never_exits_is_unkillable_and_bounded() {
        let mut t = Fake::new(None, None);
        let start = Instant::now();
        let r = run(&mut t, &plan()).await.unwrap();
        assert_eq!(r.outcome, Outcome::Unkillable);
        assert_eq!(r.signals, vec![Signal::TERM, Signal::KILL]);
        assert_eq!(start.elapsed(), MS(7000));
    }

    #[tokio::test(start_paused = true)]
    async fn already_gone_sends_nothing() {
        let mut t = Fake::new(None, None);
        t.exit_at = Some(Instant::now());
        let r = run(&mut t, &plan()).await.unwrap();
        assert_eq!(r.outcome, Outcome::AlreadyExited);
        assert!(r.signals.is_empty());
        assert!(t.sent.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn exit_racing_the_kill_is_exited() {
        // Exits exactly at the end of the grace period: SIGKILL is not sent.
        let mut t = Fake::new(Some(MS(5000)), Some(MS(1)));
        let r = run(&mut t, &plan()).await.unwrap();
        assert_eq!(r.outcome, Outcome::Exited);
        assert_eq!(t.sent, vec![Signal::TERM]);
    }

    #[tokio::test(start_paused = true)]
    async fn eperm_is_an_error_and_sends_nothing() {
        let mut t = Fake::new(Some(MS(1)), Some(MS(1)));
        t.eperm = true;
        let err = run(&mut t, &plan()).await.unwrap_err();
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
        let r = run(&mut t, &p).await.unwrap();
        assert_eq!(r.outcome, Outcome::Killed);
        assert_eq!(r.signals, vec![Signal::KILL]);
        assert_eq!(start.elapsed(), MS(2));
    }

    #[tokio::test(start_paused = true)]
    async fn zero_grace_escalates_at_once() {
        let mut t = Fake::new(Some(MS(10)), Some(MS(1)));
        let p = StopPlan {
            grace: MS(0),
            ..plan()
        };
        let r = run(&mut t, &p).await.unwrap();
        assert_eq!(r.outcome, Outcome::Killed);
        assert_eq!(r.signals, vec![Signal::TERM, Signal::KILL]);
    }
}
