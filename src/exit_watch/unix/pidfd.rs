//! Who holds a child's pidfd, and when it may close. One fd per child,
//! owned by its `Watched`: every wait goes through it, the JS loop polls it
//! (`js_loop`), the reaper's epoll holds it. It is closed once
//! the child is settled and the loop no longer polls it; another holder
//! (the reaper) is told first, and hands back what it kept for the child.
//!
//! The holder is a plain function the driver leaves here when it takes the
//! fd ([`Watched::lend_pidfd`]): this module never names a driver, so the
//! arrow runs one way, from the reaper to `Watched`.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::{Arc, TryLockError};

use super::{Inner, State, Watched};
use crate::exit_watch::{ExitStatus, OnExit};

/// Another holder of the pidfd (the reaper's epoll, under `key`): `let_go`
/// returns what it held for the child, and the fd's close takes it out of
/// the epoll. Called under the state lock, before the close.
pub(super) struct Holder {
    pub(super) key: u64,
    pub(super) let_go: fn(u64) -> Released,
}

/// What a holder kept for a child whose pidfd was just released: its
/// delivery runs, and the hold is dropped, once the state lock is released.
#[derive(Default)]
#[must_use]
pub(super) struct Released(pub(super) Option<(Arc<Watched>, Option<OnExit>)>);

impl Released {
    pub(super) fn deliver(self, status: ExitStatus) {
        if let Some((_hold, Some(on_exit))) = self.0 {
            on_exit(status);
        }
    }
}

impl Watched {
    /// Lends the pidfd to another holder: `add` puts it in (an epoll), under
    /// the state lock, if the child runs and no one else holds it yet; on
    /// success `holder` is told before the fd closes. False: not lent (no
    /// pidfd, settled, held already, or `add` failed).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) fn lend_pidfd(
        &self,
        holder: Holder,
        add: impl FnOnce(BorrowedFd<'_>, u64) -> bool,
    ) -> bool {
        let mut inner = self.lock();
        let added = match (&inner.pidfd, inner.state) {
            (Some(fd), State::Running) if inner.holder.is_none() => add(fd.as_fd(), holder.key),
            _ => false,
        };
        if added {
            inner.holder = Some(holder);
        }
        added
    }

    /// Closes the pidfd once the child is settled and the JS loop no longer
    /// polls it (libuv must stop polling an fd before it is closed: its
    /// epoll would hold a stale entry, and a later fd with the same number
    /// could be mistaken for it), letting its other holder go first.
    /// Under the state lock, so no `waitid` on it can be under way.
    pub(super) fn release(&self, inner: &mut Inner) -> Released {
        if inner.loop_polls || inner.state == State::Running {
            return Released::default();
        }
        let Some(fd) = inner.pidfd.take() else {
            return Released::default();
        };
        let released = inner
            .holder
            .take()
            .map_or_else(Released::default, |h| (h.let_go)(h.key));
        drop(fd);
        released
    }

    /// The JS loop starts polling the pidfd: its raw number, valid until
    /// [`Watched::detach_loop`]. None: no pidfd (or the child is settled).
    pub fn attach_loop(&self) -> Option<RawFd> {
        let mut inner = self.lock();
        let fd = inner.pidfd.as_ref()?.as_raw_fd();
        inner.loop_polls = true;
        Some(fd)
    }

    /// The JS loop has stopped polling the pidfd (`uv_poll_stop`): it may
    /// be closed once the child is settled.
    pub fn detach_loop(&self) {
        let (released, status) = {
            let mut inner = self.lock();
            inner.loop_polls = false;
            (self.release(&mut inner), inner.state)
        };
        if let State::Reaped(status) = status {
            released.deliver(status);
        }
    }

    /// Whether the reaper leaves this child's exit to the JS loop for its
    /// grace: the loop polls it and may settle it (a contained one too, when
    /// its cgroup is empty once killed; else the loop hands the wait on).
    /// The reaper wakes at the same moment as the loop; if the loop holds
    /// the state lock (settling, most likely), it looks again after the
    /// grace rather than wait for the lock and make the loop wait next.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) fn loop_first(&self) -> bool {
        match self.inner.try_lock() {
            Ok(inner) => inner.loop_polls,
            Err(TryLockError::WouldBlock) => true,
            Err(TryLockError::Poisoned(e)) => e.into_inner().loop_polls,
        }
    }
}
