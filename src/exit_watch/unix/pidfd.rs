//! Who holds a child's pidfd, and when it may close. One fd per child,
//! owned by its `Watched`: every wait goes through it, the JS loop polls it
//! (`js_loop`), the reaper's epoll holds it. It is closed once
//! the child is settled and the loop no longer polls it; another holder
//! (the reaper) is told first, and hands back what it kept for the child.
//!
//! The holder is two plain functions the driver leaves here when it takes the
//! fd ([`Watched::lend_pidfd`]): this module never names a driver, so the
//! arrow runs one way, from the reaper to `Watched`.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::{Arc, TryLockError};

use super::{Inner, State, Watched};
use crate::exit_watch::{ExitStatus, OnExit};
use crate::sys;

/// Another holder of the pidfd (the reaper's epoll, under `key`): `let_go`
/// hands back what it kept for the child (called under the state lock);
/// `unhold` then takes the fd out of it, still open (called with no lock
/// held, after the delivery).
pub(super) struct Holder {
    pub(super) key: u64,
    pub(super) let_go: fn(u64) -> Hold,
    pub(super) unhold: Unhold,
}

/// Takes a released pidfd out of its holder, before it closes.
pub(super) type Unhold = fn(BorrowedFd<'_>);

/// What a holder kept for a child: the child, and the delivery to run
/// after its settle (None: the JS loop delivers).
pub(super) type Hold = Option<(Arc<Watched>, Option<OnExit>)>;

/// A released pidfd, taken out of the child's state, and what its holder
/// kept. The delivery runs first ([`Released::deliver`]), once the state
/// lock is released; the fd is let go of and closed after it, when this is
/// dropped: those system calls are tidying, and the exit is not made to
/// wait for them. The fd, out of the state, is no one else's by then: no
/// `waitid` can be under way on it, and its number is not reused until it
/// closes.
#[derive(Default)]
#[must_use]
pub(super) struct Released {
    hold: Hold,
    fd: Option<(OwnedFd, Option<Unhold>)>,
}

impl Released {
    pub(super) fn deliver(mut self, status: ExitStatus) {
        if let Some((_hold, Some(on_exit))) = self.hold.take() {
            on_exit(status);
        }
    }
}

impl Drop for Released {
    fn drop(&mut self) {
        if let Some((fd, unhold)) = self.fd.take() {
            if let Some(unhold) = unhold {
                unhold(fd.as_fd());
            }
            drop(fd);
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

    /// Takes the pidfd out of the state once the child is settled and the
    /// JS loop no longer polls it (libuv must stop polling an fd before it
    /// is closed: its epoll would hold a stale entry, and a later fd with
    /// the same number could be mistaken for it), with what its other
    /// holder kept. Under the state lock, so no `waitid` on it can be under
    /// way; it closes when the [`Released`] drops, after the delivery.
    pub(super) fn release(&self, inner: &mut Inner) -> Released {
        if inner.loop_polls || inner.state == State::Running {
            return Released::default();
        }
        let Some(fd) = inner.pidfd.take() else {
            return Released::default();
        };
        match inner.holder.take() {
            Some(h) => Released {
                hold: (h.let_go)(h.key),
                fd: Some((fd, Some(h.unhold))),
            },
            None => Released {
                hold: None,
                fd: Some((fd, None)),
            },
        }
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

    /// Whether the pidfd says the child has exited (readable), for a loop
    /// that found nothing to reap: a tracer then holds the zombie.
    pub fn pidfd_readable(&self) -> bool {
        let inner = self.lock();
        let pidfd = inner.pidfd.as_ref().map(|fd| fd.as_fd());
        pidfd.is_some_and(|fd| sys::is_readable_now(fd).unwrap_or(false))
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
