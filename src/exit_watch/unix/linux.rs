//! pidfd back-end: the pidfd turns readable when the child exits; a task on
//! procward's own runtime (see `runtime`) waits for that with `AsyncFd`
//! (epoll, edge-triggered), then peeks the status through the same pidfd
//! with `waitid(P_PIDFD, WNOWAIT | WNOHANG)`.
//!
//! Costs one tokio task and one fd per child, no thread. If the runtime
//! cannot register the fd, the child moves to the fallback thread.
//!
//! Readable but nothing to see: a tracer holds the zombie (see the module
//! docs of `exit_watch`). The readiness is cleared and the task sleeps until
//! the next wake-up of the pidfd, which the kernel sends when the tracer
//! detaches or waits; being edge-triggered, it never spins meanwhile.
//! Settled by another driver (the JS loop): every wake-up looks at the
//! state first, and the pidfd wait cannot mistake a newcomer on the same pid
//! for the child, so the task ends at the exit whoever reaps.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::{fallback, forced_fallback, guardian, OnExit, Ordering, Watched};
use crate::cgroup::{self, Cgroup, CgroupError};
use crate::exit_watch::Backend;
use crate::sys::{self, WaitStatus};

/// `defer`: another driver (the JS loop) normally settles this child; wait
/// that long after the exit before settling it here, so the two do not
/// contend for the lock when the loop is free.
pub fn start(
    watched: Arc<Watched>,
    pidfd: OwnedFd,
    on_exit: OnExit,
    defer: Option<std::time::Duration>,
) -> std::io::Result<()> {
    crate::runtime::handle()?.spawn(async move {
        // SAFETY: the OwnedFd is moved into the AsyncFd and stays open, and
        // the same fd, until the AsyncFd is dropped.
        let afd = match unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) } {
            Ok(afd) => afd,
            Err(_) => {
                // Rare (the runtime's epoll refused the fd): wait in a
                // blocking thread instead, as the fallback back-end does.
                let w = watched.clone();
                let seen = tokio::task::spawn_blocking(move || fallback::wait_exit(&w))
                    .await
                    .ok()
                    .flatten();
                watched.finish_async(seen, None, on_exit).await;
                return;
            }
        };
        let peek = libc::WEXITED | libc::WNOWAIT | libc::WNOHANG;
        let seen = loop {
            let mut guard = match afd.readable().await {
                Ok(g) => g,
                Err(_) => break None,
            };
            if watched.exit_status().is_some() {
                break None; // settled by another driver
            }
            match sys::waitid_child(watched.pid, Some(afd.get_ref().as_fd()), peek) {
                Ok(WaitStatus::StillAlive) => guard.clear_ready(),
                Ok(w) => break Some(w),
                Err(_) => break None,
            }
        };
        // (A zero delay, for a contained child, skips the timer: tokio's
        // has millisecond ticks.)
        if let Some(delay) = defer.filter(|d| !d.is_zero()) {
            if watched.exit_status().is_none() {
                tokio::time::sleep(delay).await;
            }
            if watched.exit_status().is_some() {
                return; // the loop settled it
            }
        }
        watched
            .finish_async(seen, Some(afd.get_ref().as_fd()), on_exit)
            .await;
    });
    Ok(())
}

/// The native reaper beside the JS loop (the binding's `js_loop`): settles the child
/// itself only if the loop has not done so within `defer` of the exit — at
/// once when the loop is free, a millisecond later when it is blocked.
pub fn watch_beside_loop(
    watched: &Arc<Watched>,
    pidfd: Option<OwnedFd>,
    defer: std::time::Duration,
) -> std::io::Result<()> {
    // A contained child is never settled by the loop (see `try_settle`):
    // no reason to leave it to the loop first.
    let defer = if watched.contained.is_some() {
        std::time::Duration::ZERO
    } else {
        defer
    };
    match pidfd {
        Some(fd) if crate::runtime::handle().is_ok() => {
            start(watched.clone(), fd, Box::new(|_| {}), Some(defer))
        }
        _ => fallback::start(watched.clone(), Box::new(|_| {})),
    }?;
    watched.native.store(true, Ordering::Release);
    Ok(())
}

/// Starts watching a freshly spawned child on a back-end of this module.
/// `on_exit` runs (on a runtime or waiter thread) after the reap.
pub fn watch(
    watched: &Arc<Watched>,
    pidfd: Option<OwnedFd>,
    on_exit: OnExit,
) -> std::io::Result<Backend> {
    // Without the runtime (it could not start: EMFILE, say) the pidfd is
    // dropped and a waiter thread serves.
    let backend = match pidfd {
        Some(fd) if !forced_fallback() && crate::runtime::handle().is_ok() => {
            start(watched.clone(), fd, on_exit, None)?;
            Backend::PidfdTokio
        }
        _ => {
            fallback::start(watched.clone(), on_exit)?;
            Backend::Fallback
        }
    };
    watched.native.store(true, Ordering::Release);
    Ok(backend)
}

/// A contained spawn's cgroup, made before the child. `guarded` (the child
/// dies with this process): named for the guardian, which is told of the
/// parent first and kills the cgroup when this process dies.
pub fn contain(
    parent: Option<&std::path::Path>,
    guarded: bool,
) -> Result<Arc<Cgroup>, CgroupError> {
    cgroup::contain(parent, guarded, |dir| {
        if !guarded {
            return Ok(());
        }
        guardian::guard(dir, &cgroup::guarded_prefix()).map_err(|e| {
            CgroupError::Unavailable(format!(
                "the guardian that kills contained children when this process dies (/bin/sh) could not start: {}",
                crate::errors::io_text(&e)
            ))
        })
    })
}
