//! pidfd back-end: the pidfd turns readable when the child exits; a task on
//! procward's own runtime (see `runtime`) waits for that with `AsyncFd`
//! (epoll), then peeks the status with `waitid(WNOWAIT | WNOHANG)`.
//!
//! Costs one tokio task and one fd per child, no thread. If the runtime
//! cannot register the fd, the child moves to the fallback thread.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::{fallback, OnExit, Watched};
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
                watched.finish(seen, on_exit);
                return;
            }
        };
        let seen = loop {
            let mut guard = match afd.readable().await {
                Ok(g) => g,
                Err(_) => break None,
            };
            match sys::waitid_pid(watched.pid, libc::WEXITED | libc::WNOWAIT | libc::WNOHANG) {
                Ok(WaitStatus::StillAlive) => guard.clear_ready(),
                Ok(w) => break Some(w),
                Err(_) => break None,
            }
        };
        drop(afd);
        if let Some(delay) = defer {
            tokio::time::sleep(delay).await;
            if watched.exit_status().is_some() {
                return; // the loop settled it
            }
        }
        watched.finish(seen, on_exit);
    });
    Ok(())
}
