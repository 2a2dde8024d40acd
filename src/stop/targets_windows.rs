//! The real stop targets on Windows: a child of ours (its `Watched`, and its
//! job for a group stop), and a bare pid held through a process handle.
//!
//! The soft step is CTRL_BREAK_EVENT (`Signal` SIGBREAK, chosen by the
//! binding only for a child of ours that leads a console group sharing our
//! console); SIGKILL is `TerminateJobObject` for a group stop of our child,
//! `TerminateProcess` otherwise (a bare pid gets only that). A bare pid is opened once, checked against the identity
//! through that handle, and every later step goes through it: the handle
//! pins the process, so a recycled pid is never hit.

use std::io;

use tokio::time::Instant;
use windows_sys::Win32::Foundation::ERROR_ACCESS_DENIED;

use super::StopTarget;
use crate::exit_watch::{HandleWait, Watched};
use crate::pid::{Pid, Signal};
use crate::proc_info::{self, Identity};
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
}

pub enum Open<T> {
    /// No such process, or it has exited.
    Gone,
    /// A live process holds the pid, but not the one `identity` named.
    Reused,
    Target(T),
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
}
