//! The one settle path, taken by every driver (the JS loop, the reaper, a
//! waiter thread): peek, then drain or settle. A driver that saw the
//! child's pidfd turn readable calls [`Watched::look`]; a waiter thread,
//! whose blocking `waitid` already saw the exit, [`Watched::settle_seen`].
//! What differs between drivers is only whether they may block while a
//! contained child's cgroup empties ([`Driver`]), as tokio's back-ends
//! differ only in how they are woken, not in how they reap.
//!
//! The settle itself, once per child whoever calls it: the last look at
//! the unreaped zombie (identity completed, group swept), the reap through
//! the pidfd, the status published, the waiters woken, the pidfd released.

use std::os::fd::AsFd;
use std::sync::Arc;

use super::{Ident, Inner, State, Watched};
use crate::cgroup;
use crate::exit_watch::{ExitStatus, OnExit};
use crate::pid::Signal;
use crate::proc_info;
use crate::spawn_trace;
use crate::sys::{self, WaitStatus};

/// What the driver may do while a contained child's cgroup empties (or
/// another driver drains it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Driver {
    /// The JS loop or the reaper: never waits; the wait goes on to
    /// procward's runtime (or a thread of its own).
    HandOn,
    /// A waiter thread: blocks until the child is settled.
    Block,
}

/// What one look at the child came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Settle {
    /// Swept, reaped and published (here, or by another driver before).
    Done(ExitStatus),
    /// No exit to be seen: still running, or a tracer holds the zombie.
    NotSeen,
    /// Under way elsewhere (another driver drains, or the wait for the
    /// cgroup was handed on): the settle will come (`on_settle`).
    Pending,
    /// The wait for the cgroup could not be handed on (no runtime, no
    /// thread): the drain was given back; look again later.
    Refused,
}

impl Watched {
    /// Peek, then drain or settle: for a driver told that the child exited
    /// (its pidfd turned readable). Never blocks with [`Driver::HandOn`].
    pub(super) fn look(self: &Arc<Self>, driver: Driver) -> Settle {
        if let Some(status) = self.exit_status() {
            return Settle::Done(status);
        }
        match self.peek() {
            Ok(WaitStatus::StillAlive) => Settle::NotSeen,
            Ok(seen) => self.settle_seen(Some(seen), driver),
            Err(_) => self.settle_seen(None, driver),
        }
    }

    /// The exit was seen (`seen` is the WNOWAIT status, or None when the
    /// child was reaped behind our back): drain a contained child's cgroup,
    /// then settle.
    pub(super) fn settle_seen(
        self: &Arc<Self>,
        seen: Option<WaitStatus>,
        driver: Driver,
    ) -> Settle {
        match (self.contained.as_ref(), seen) {
            (Some(c), Some(seen)) => self.drain(c, seen, driver),
            _ => Settle::Done(self.settle(seen)),
        }
    }

    /// For a driver that watches the pidfd itself (the JS thread's event
    /// loop, see `js_loop`): call when the pidfd turns readable. `Some` once
    /// the child has been swept and reaped (here or by another driver);
    /// `None` if no exit can be seen (it has not exited, or a tracer holds
    /// the zombie) or its settle is under way elsewhere.
    pub fn try_settle(self: &Arc<Self>) -> Option<ExitStatus> {
        match self.look(Driver::HandOn) {
            Settle::Done(status) => Some(status),
            Settle::NotSeen | Settle::Pending | Settle::Refused => None,
        }
    }

    /// A waiter thread's end: settle what it saw, waiting as long as it
    /// takes, and deliver.
    pub(super) fn finish(self: &Arc<Self>, seen: Option<WaitStatus>, on_exit: OnExit) {
        if let Settle::Done(status) = self.settle_seen(seen, Driver::Block) {
            on_exit(status);
        }
    }

    /// The exit seen or not, without reaping: `waitid(WNOWAIT | WNOHANG)`
    /// through the pidfd when there is one. ECHILD once settled (its pidfd
    /// may be closed, and its pid someone else's).
    fn peek(&self) -> std::io::Result<WaitStatus> {
        let inner = self.lock();
        if inner.state != State::Running {
            return Err(std::io::Error::from_raw_os_error(libc::ECHILD));
        }
        let pidfd = inner.pidfd.as_ref().map(|fd| fd.as_fd());
        let peek = libc::WEXITED | libc::WNOWAIT | libc::WNOHANG;
        sys::waitid_child(self.pid, pidfd, peek)
    }

    /// The last look at the child before its group and pid are given up,
    /// under the lock while it is an unreaped zombie: its identity is
    /// completed (after the reap the pid is not ours to read), and its
    /// group swept (the pgid is still ours; ESRCH = nobody else left).
    pub(super) fn last_look(&self, inner: &mut Inner) {
        self.complete_identity(inner);
        if self.sweep_group {
            if let Some(pgid) = self.pgid {
                let _ = sys::killpg(pgid, Signal::KILL);
            }
        }
    }

    /// The exit was seen (`seen` is the WNOWAIT status, or None when the
    /// child was reaped behind our back): complete the identity, sweep,
    /// reap, publish. The reap goes through the pidfd when there is one.
    /// A contained child's drain, if any, is over.
    pub(super) fn settle(&self, seen: Option<WaitStatus>) -> ExitStatus {
        let (status, wakes, released, waiters) = {
            let mut inner = self.lock();
            if let State::Reaped(status) = inner.state {
                return status;
            }
            let status = match seen {
                Some(seen) => {
                    self.last_look(&mut inner);
                    // WNOHANG: the zombie was seen, so this reaps at once;
                    // were it taken meanwhile by someone else, it must not
                    // block on whoever got the pid next.
                    let pidfd = inner.pidfd.as_ref().map(|fd| fd.as_fd());
                    match sys::waitid_child(self.pid, pidfd, libc::WEXITED | libc::WNOHANG) {
                        Ok(WaitStatus::StillAlive) | Err(_) => ExitStatus::from(seen),
                        Ok(w) => ExitStatus::from(w),
                    }
                }
                // Reaped by someone else: the pid may already be recycled,
                // so the group is not ours to sweep any more.
                None => {
                    if let Ident::Seed(_) = inner.identity {
                        inner.identity = Ident::Lost(libc::ECHILD);
                    }
                    // The cgroup is still ours (held by its directory, not
                    // a number): kill what is left, remove it once empty.
                    if let Some(c) = self.contained.as_ref().filter(|_| !inner.draining) {
                        let _ = c.cgroup.kill();
                        cgroup::remove_when_empty(c.cgroup.clone());
                    }
                    ExitStatus::Unknown
                }
            };
            inner.state = State::Reaped(status);
            let released = self.release(&mut inner);
            let waiters = inner.settle_waiters > 0;
            (
                status,
                std::mem::take(&mut inner.on_settle),
                released,
                waiters,
            )
        };
        if waiters {
            self.settled.notify_all();
        }
        // Its cached fds (liveness, info) name a process that is gone.
        proc_info::forget(self.pid);
        self.reaped.send_replace(Some(status));
        for wake in wakes {
            wake();
        }
        spawn_trace::mark_shared(spawn_trace::REAPER_SETTLED);
        released.deliver(status);
        spawn_trace::mark_shared(spawn_trace::REAPER_CALLED);
        status
    }
}
