//! macOS: a kqueue with `EVFILT_PROC`/`NOTE_EXIT` on the process, awaited on
//! the runtime's reactor (a kqueue fd is itself pollable: kqueue(2), "the
//! queue can be monitored with select(2), poll(2) and kqueue(2)").
//!
//! Unlike a pidfd, the kqueue pins nothing: it reports the exit of the
//! process it was registered on, whatever holds the pid later. So the
//! identity is checked *after* registering: if the process holding the pid
//! then is the one asked about, the registration is on it. (Were it to exit
//! and its pid be taken in the microseconds between the two, the wait would
//! report a reused pid instead of a plain exit: macOS hands out pids in
//! order up to 99999 before wrapping, so this needs the whole pid space to
//! turn over in between.)
//!
//! No status: `NOTE_EXITSTATUS` reports one only to the process's parent
//! (kqueue(2)), and this process is not it.

use std::io;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::watch;

use super::budget::Slot;
use super::{judge_holder, poll_wait, Exited};
use crate::exit_watch;
use crate::pid::Pid;
use crate::proc_info;
use crate::sys;

/// The call whose failure a wait error names.
pub const OPEN_CALL: &str = "kevent";

/// Must run inside a tokio runtime (the kqueue joins its reactor).
pub async fn wait_for_exit(
    pid: Pid,
    identity: Option<&str>,
    mut cancel: watch::Receiver<bool>,
) -> io::Result<Option<Exited>> {
    if exit_watch::forced_fallback() {
        return poll_wait(pid, identity, cancel).await;
    }
    let Some(_slot) = Slot::take() else {
        return poll_wait(pid, identity, cancel).await;
    };
    let kq = match sys::kqueue_for_exit(pid) {
        Ok(Some(kq)) => kq,
        // kevent(2) ESRCH: no such process, or one past being watched (a
        // zombie, or exiting): either way it has exited.
        Ok(None) => return Ok(Some(Exited::GONE)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) => {
            return poll_wait(pid, identity, cancel).await;
        }
        Err(e) => return Err(e),
    };
    if let Some(wanted) = identity {
        let found = proc_info::process_info(pid).map(|o| o.map(|info| info.identity));
        if let Some(done) = judge_holder(found, wanted)? {
            return Ok(Some(done));
        }
    }
    // SAFETY: the OwnedFd moves into the AsyncFd and stays open (same fd)
    // until the AsyncFd is dropped.
    let afd = unsafe { AsyncFd::register_with_interest(kq, Interest::READABLE) }
        .map_err(|e| e.into_parts().1)?;
    tokio::select! {
        ready = afd.readable() => drop(ready?),
        _ = cancel.wait_for(|c| *c) => return Ok(None),
    }
    Ok(Some(Exited::GONE))
}
