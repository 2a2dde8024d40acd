//! The real stop targets on Windows: a child of ours (its `Watched`, and its
//! job for a group stop), and a bare pid held through a process handle.
//!
//! The soft step is CTRL_BREAK_EVENT (`Signal` SIGBREAK), sent only to a
//! child of ours that leads a console group sharing our console; where it
//! cannot reach the target, the stop goes straight to SIGKILL and says so
//! (`first_signal`). SIGKILL is `TerminateJobObject` for a group stop of our child,
//! `TerminateProcess` otherwise (a bare pid gets only that). A bare pid is opened once, checked against the identity
//! through that handle, and every later step goes through it: the handle
//! pins the process, so a recycled pid is never hit.

use std::io;

use tokio::time::Instant;
use windows_sys::Win32::Foundation::ERROR_ACCESS_DENIED;

use super::{run_opened, Open, PidStop};
use crate::exit_watch::{HandleWait, Watched};
use crate::pid::{Pid, Signal};
use crate::proc_info::{self, Identity};
use crate::stop::{Escalation, StopPlan, StopTarget};
use crate::sys;
use std::sync::Arc;

pub struct ChildTarget {
    watched: Arc<Watched>,
    group: bool,
}

impl ChildTarget {
    pub fn new(watched: Arc<Watched>, group: bool) -> ChildTarget {
        ChildTarget { watched, group }
    }
}

impl StopTarget for ChildTarget {
    fn has_exited(&mut self) -> bool {
        self.watched.is_settled()
    }

    fn send(&mut self, sig: Signal) -> io::Result<bool> {
        if sig == Signal::KILL {
            if self.group {
                self.watched.terminate_job()
            } else {
                self.watched.terminate(sig)
            }
        } else {
            self.watched.ctrl_break()
        }
    }

    async fn wait_exit(&mut self, deadline: Instant) -> bool {
        self.watched.wait_settled(deadline).await
    }

    fn first_signal(&self, requested: Signal) -> Signal {
        soft_step(requested, self.watched.can_break())
    }
}

/// The first step of a stop: CTRL_BREAK_EVENT where it can reach the
/// target, else none at all (the stop goes straight to SIGKILL).
fn soft_step(requested: Signal, can_break: bool) -> Signal {
    if requested != Signal::KILL && can_break {
        Signal::BREAK
    } else {
        Signal::KILL
    }
}

pub struct HandleTarget {
    wait: HandleWait,
}

impl HandleTarget {
    /// `group` has no meaning for a bare pid on Windows (no job of ours
    /// holds its tree): only the process itself is terminated.
    pub fn open(pid: Pid, identity: Option<&str>, _group: bool) -> io::Result<Open<HandleTarget>> {
        let access = sys::PROCESS_SYNCHRONIZE
            | sys::PROCESS_TERMINATE
            | sys::PROCESS_QUERY_LIMITED_INFORMATION;
        let handle = match sys::open_process(pid.as_raw() as u32, access) {
            Ok(Some(h)) => h,
            Ok(None) => return Ok(Open::Gone),
            Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) => {
                return Err(io::Error::from_raw_os_error(ERROR_ACCESS_DENIED as i32))
            }
            Err(e) => return Err(e),
        };
        if sys::has_exited(&handle)? {
            return Ok(Open::Gone);
        }
        if let Some(want) = identity.and_then(Identity::decode) {
            if !proc_info::identity_of_handle(&handle)?.same_process(&want) {
                return Ok(Open::Reused);
            }
        }
        Ok(Open::Target(HandleTarget {
            wait: HandleWait::new(handle)?,
        }))
    }
}

impl StopTarget for HandleTarget {
    fn has_exited(&mut self) -> bool {
        self.wait.has_exited()
    }

    fn send(&mut self, sig: Signal) -> io::Result<bool> {
        if self.wait.has_exited() {
            return Ok(false);
        }
        // Only SIGKILL is ever planned for a bare pid (see the binding).
        let _ = sig;
        sys::terminate_process(self.wait.handle())?;
        Ok(true)
    }

    async fn wait_exit(&mut self, deadline: Instant) -> bool {
        self.wait.until(deadline).await
    }

    /// A bare pid gets no CTRL_BREAK_EVENT: it need not lead a console
    /// group, and an event for a group id that names none is not confined
    /// to it. Straight to TerminateProcess.
    fn first_signal(&self, _requested: Signal) -> Signal {
        Signal::KILL
    }
}

/// Stops a bare pid: opened once, identity-checked through the handle.
pub async fn stop_pid(
    pid: Pid,
    identity: Option<&str>,
    group: bool,
    plan: &StopPlan,
    escalation: &Escalation,
) -> io::Result<PidStop> {
    run_opened(HandleTarget::open(pid, identity, group)?, plan, escalation).await
}
