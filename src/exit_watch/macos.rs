//! macOS back-end: kqueue `EVFILT_PROC` / `NOTE_EXIT` tells that the child
//! exited without reaping it; then the same `waitid(WNOWAIT)` → sweep → reap
//! as on Linux (`Watched::settle`).
//!
//! NOT COMPILED OR RUN: these machines are Linux-only and cannot fetch the
//! Apple targets. It is written on the same seam as `linux.rs` so that the
//! macOS port is a matter of making `sys` portable, not of redesigning the
//! watcher. One kqueue per child, registered with the tokio reactor (a kqueue
//! fd is itself pollable), so no thread per child.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::{fallback, OnExit, Watched};

fn kqueue_for_exit(pid: i32) -> io::Result<Option<OwnedFd>> {
    // SAFETY: kqueue takes no arguments and returns a new fd or -1.
    let kq = unsafe { libc::kqueue() };
    if kq < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the fd was just created for us.
    let kq = unsafe { OwnedFd::from_raw_fd(kq) };
    // SAFETY: an all-zero kevent is a valid value to fill in.
    let mut ev: libc::kevent = unsafe { std::mem::zeroed() };
    ev.ident = pid as libc::uintptr_t;
    ev.filter = libc::EVFILT_PROC;
    ev.flags = libc::EV_ADD | libc::EV_ONESHOT;
    ev.fflags = libc::NOTE_EXIT;
    // SAFETY: registers one change, asks for no events back.
    let rc = unsafe {
        libc::kevent(
            kq.as_raw_fd(),
            &ev,
            1,
            std::ptr::null_mut(),
            0,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        // ESRCH: it has exited already (a zombie can no longer be watched).
        return if err.raw_os_error() == Some(libc::ESRCH) {
            Ok(None)
        } else {
            Err(err)
        };
    }
    Ok(Some(kq))
}

pub fn start(watched: Arc<Watched>, on_exit: OnExit) -> io::Result<()> {
    let kq = match kqueue_for_exit(watched.pid().as_raw())? {
        Some(kq) => kq,
        None => {
            let seen = fallback::wait_exit(&watched);
            watched.finish(seen, None, on_exit);
            return Ok(());
        }
    };
    crate::runtime::handle()?.spawn(async move {
        // SAFETY: the OwnedFd moves into the AsyncFd and stays open until it
        // is dropped.
        if let Ok(afd) = unsafe { AsyncFd::register_with_interest(kq, Interest::READABLE) } {
            let _ = afd.readable().await;
        }
        // NOTE_EXIT fired (or the reactor failed): the WNOWAIT wait returns
        // at once for an exited child, and blocks only in the failure case.
        let seen = fallback::wait_exit(&watched);
        watched.finish(seen, None, on_exit);
    });
    Ok(())
}
