//! macOS back-end: kqueue `EVFILT_PROC` / `NOTE_EXIT` tells that the child
//! exited without reaping it; then the same WNOWAIT peek → sweep → reap as
//! on Linux (the one settle path, `Watched::settle_seen`).
//!
//! One kqueue per child, registered with procward's tokio runtime (a kqueue
//! fd is itself pollable: kqueue(2), "the queue can be monitored with
//! select(2), poll(2) and kqueue(2)"), so no thread per child. Where no
//! kqueue can be had, or the child is already past being watched (exiting,
//! or a zombie: `kevent` says ESRCH), or `PROCWARD_EXIT_WATCH=fallback` is
//! set, a waiter thread blocks instead (`fallback`; on macOS its blocking
//! wait is itself a kqueue wait, see `sys::waitid_pid` on macOS).
//!
//! There is no delivery on the JS loop here (`js_loop` is Linux-only), so
//! no reaper beside it either.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::{fallback, Watched};
use crate::exit_watch::{forced_fallback, Backend, OnExit};
use crate::sys::{self, WaitStatus};

fn start(watched: Arc<Watched>, kq: OwnedFd, on_exit: OnExit) -> io::Result<()> {
    crate::runtime::handle()?.spawn(async move {
        let peek = || sys::waitid_pid(watched.pid(), libc::WEXITED | libc::WNOWAIT | libc::WNOHANG);
        // NOTE_EXIT fires only for an exit after the kqueue was registered;
        // one just before is seen by this peek.
        if matches!(peek(), Ok(WaitStatus::StillAlive)) {
            // SAFETY: the OwnedFd moves into the AsyncFd and stays open
            // (same fd) until the AsyncFd is dropped.
            if let Ok(afd) = unsafe { AsyncFd::register_with_interest(kq, Interest::READABLE) } {
                let _ = afd.readable().await;
            }
        }
        // NOTE_EXIT fired (or the reactor refused the kqueue). kqueue(2)
        // does not promise the child is waitable at that instant: peek, and
        // if it is not yet, finish the wait on a blocking thread.
        let seen = match peek() {
            Ok(WaitStatus::StillAlive) => {
                let w = watched.clone();
                tokio::task::spawn_blocking(move || fallback::wait_exit(&w))
                    .await
                    .ok()
                    .flatten()
            }
            Ok(w) => Some(w),
            Err(_) => None,
        };
        watched.finish(seen, on_exit);
    });
    Ok(())
}

/// Starts watching a freshly spawned child.
pub fn watch(watched: &Arc<Watched>, on_exit: OnExit) -> io::Result<Backend> {
    if !forced_fallback() {
        // EMFILE and the like: the waiter thread needs no fd.
        if let Ok(Some(kq)) = sys::kqueue_for_exit(watched.pid) {
            start(watched.clone(), kq, on_exit)?;
            return Ok(Backend::Kqueue);
        }
    }
    fallback::start(watched.clone(), on_exit)?;
    Ok(Backend::Fallback)
}
