//! Linux: a pidfd, awaited on the runtime's reactor.
//!
//! The status: the kernel records it in the pidfd when the parent *reaps*
//! the process (`ioctl(PIDFD_GET_INFO)` with `PIDFD_INFO_EXIT`, Linux 6.15),
//! not when it becomes a zombie; a wait that resolves on the zombie (as it
//! must: a zombie has exited) would find nothing there. So a zombie's status
//! is read from its `/proc/<pid>/stat` (field 52, what `waitpid` would
//! return). That read is of our process only if the process still holds the
//! pid: checked after the read through the pidfd (`pidfd_send_signal(0)`
//! fails with ESRCH once it is reaped), and if it was reaped meanwhile the
//! kernel now has the status in the pidfd. The kernel shows field 52 as 0 to
//! a reader that may not ptrace the process, so a 0 counts only where we
//! may (root, or the process's /proc entry is ours); otherwise no status.
//! A process whose main thread exited before the others reports the main
//! thread's status there, as `PIDFD_INFO_EXIT` does.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

use super::{decode_wait_status, Exited, Opened};
use crate::exit_watch::ExitStatus;
use crate::pid::Pid;
use crate::proc_info::{self, Identity, InfoError, ProcState};
use crate::sys;

/// The call whose failure a wait error names.
pub const OPEN_CALL: &str = "pidfd_open";

/// A pidfd on `pid`: it pins the process, so what is read through it holds.
pub fn open(pid: Pid) -> io::Result<Opened<OwnedFd>> {
    match sys::pidfd_open(pid) {
        Ok(fd) => Ok(Opened::Held(fd)),
        Err(e) => match e.raw_os_error() {
            // No such process; or a thread id, not a process (ENOENT since
            // Linux 6.9, EINVAL before): liveness calls it no process, and
            // so does this.
            Some(libc::ESRCH | libc::ENOENT | libc::EINVAL) => Ok(Opened::Ended(Exited::GONE)),
            Some(libc::ENOSYS | libc::EMFILE | libc::ENFILE) => Ok(Opened::Poll),
            _ => Err(e),
        },
    }
}

pub fn holder(pid: Pid, pidfd: &OwnedFd) -> Result<Option<Identity>, InfoError> {
    proc_info::stat_and_identity_of_pidfd(pid, pidfd).map(|o| o.map(|(_, i)| i))
}

/// The status of the exited process `pidfd` refers to (see the module docs).
pub fn status(pid: Pid, pidfd: &OwnedFd) -> Option<ExitStatus> {
    if let Some(status) = sys::pidfd_exit_status(pidfd.as_fd()) {
        return Some(decode_wait_status(status));
    }
    let zombie = zombie_status(pid);
    match sys::pidfd_unreaped(pidfd.as_fd()) {
        // Still holds the pid, so the read above was of this process.
        Ok(true) => zombie.map(decode_wait_status),
        // Reaped meanwhile: the kernel has the status now (6.15+).
        _ => sys::pidfd_exit_status(pidfd.as_fd()).map(decode_wait_status),
    }
}

/// Field 52 of whatever zombie holds `pid` now, when it can be trusted.
fn zombie_status(pid: Pid) -> Option<i32> {
    let stat = proc_info::stat_of(pid).ok().flatten()?;
    if stat.state != ProcState::Zombie {
        return None;
    }
    let status = stat.exit_code?;
    if status != 0 {
        return Some(status);
    }
    let euid = crate::sys::euid();
    let owner = std::fs::metadata(format!("/proc/{}", pid.as_raw()))
        .ok()?
        .uid();
    (euid == 0 || owner == euid).then_some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child of this test that has exited: a zombie until we reap it.
    fn zombie(script: &str) -> (std::process::Child, Pid, OwnedFd) {
        let child = std::process::Command::new("sh")
            .args(["-c", script])
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(child.id() as i32).unwrap();
        let fd = sys::pidfd_open(pid).unwrap();
        while !sys::is_readable_now(fd.as_fd()).unwrap() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        (child, pid, fd)
    }

    #[test]
    fn status_of_a_zombie_then_of_the_reaped_process() {
        let (mut child, pid, fd) = zombie("exit 7");
        assert!(sys::pidfd_unreaped(fd.as_fd()).unwrap());
        // Unreaped: the kernel has no status in the pidfd yet; /proc has it.
        assert_eq!(sys::pidfd_exit_status(fd.as_fd()), None);
        assert_eq!(status(pid, &fd), Some(ExitStatus::Code(7)));
        child.wait().unwrap();
        assert!(!sys::pidfd_unreaped(fd.as_fd()).unwrap());
        // Reaped: from the pidfd on 6.15+, else none (the pid may be reused).
        let reaped = status(pid, &fd);
        if sys::pidfd_exit_status(fd.as_fd()).is_some() {
            assert_eq!(reaped, Some(ExitStatus::Code(7)));
        } else {
            assert_eq!(reaped, None);
        }
    }

    #[test]
    fn status_of_a_killed_zombie() {
        let (mut child, pid, fd) = zombie("kill -TERM $$");
        assert_eq!(status(pid, &fd), Some(ExitStatus::Signal(libc::SIGTERM)));
        child.wait().unwrap();
    }
}
