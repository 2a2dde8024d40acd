//! The real things a stop acts on, the same on every OS: a child of ours
//! ([`ChildTarget`]) and a bare pid ([`stop_pid`], which opens and pins the
//! process once and stops it through that). `unix`: signals, pidfds and
//! polls; `windows`: CTRL_BREAK_EVENT, `TerminateJobObject` and
//! `TerminateProcess` on a process handle.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as imp;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as imp;

pub use imp::{stop_pid, ChildTarget};

use std::io;

use super::{Escalation, StopPlan, StopReport, StopTarget};

/// A bare pid to stop, or why there is nothing to stop.
pub enum Open<T> {
    Target(T),
    /// No such process, or a zombie (whoever it is).
    Gone,
    /// A live process holds the pid, but not the one `identity` names: the
    /// pid was reused (or `identity` is not one we issued).
    Reused,
}

/// How a bare-pid stop ended.
pub enum PidStop {
    /// Nothing was there to stop: nothing sent.
    Gone,
    /// A different process holds the pid now: nothing sent.
    Reused,
    Stopped(StopReport),
}

/// Runs the stop on an opened bare pid, or says why there was nothing to stop.
async fn run_opened<T: StopTarget>(
    opened: Open<T>,
    plan: &StopPlan,
    escalation: &Escalation,
) -> io::Result<PidStop> {
    match opened {
        Open::Gone => Ok(PidStop::Gone),
        Open::Reused => Ok(PidStop::Reused),
        Open::Target(mut t) => Ok(PidStop::Stopped(
            super::run(&mut t, plan, escalation).await?,
        )),
    }
}
