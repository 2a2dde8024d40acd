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
use std::os::fd::OwnedFd;

use super::{Exited, Opened};
use crate::exit_watch::ExitStatus;
use crate::pid::Pid;
use crate::proc_info::{self, Identity, InfoError};
use crate::sys;

/// The call whose failure a wait error names.
pub const OPEN_CALL: &str = "kevent";

/// A kqueue watching `pid` for its exit.
pub fn open(pid: Pid) -> io::Result<Opened<OwnedFd>> {
    match sys::kqueue_for_exit(pid) {
        Ok(Some(kq)) => Ok(Opened::Held(kq)),
        // kevent(2) ESRCH: no such process, or one past being watched (a
        // zombie, or exiting): either way it has exited.
        Ok(None) => Ok(Opened::Ended(Exited::GONE)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => Ok(Opened::Poll),
        Err(e) => Err(e),
    }
}

/// Read after the kqueue is registered: if the process holding the pid then
/// is the one asked about, the registration is on it (module docs).
pub fn holder(pid: Pid, _kq: &OwnedFd) -> Result<Option<Identity>, InfoError> {
    proc_info::process_info(pid).map(|o| o.map(|info| info.identity))
}

/// None: only the parent is told the status (module docs).
pub fn status(_pid: Pid, _kq: &OwnedFd) -> Option<ExitStatus> {
    None
}
