//! macOS: `proc_pidinfo(PROC_PIDTBSDINFO)` gives the status (`SZOMB` for a
//! zombie), parent, group and start time (seconds + microseconds) of any
//! process; identity is the boot time (`kern.boottime`) plus that start time.
//!
//! Where macOS differs from Linux:
//! - Zombies are reported only when asked: XNU's `proc_pidinfo` looks a
//!   zombie up for `PROC_PIDTBSDINFO` only when `arg` is non-zero
//!   (`bsd/kern/proc_info.c`, `findzomb`); with 0 a zombie is ESRCH. We pass
//!   1, so a zombie is found and is `'zombie'`, not missing.
//! - Another user's process may be refused (EPERM) where Linux's /proc shows
//!   every stat line: then `kill(pid, 0)` decides, and a zombie of another
//!   user is reported running (nothing unprivileged tells it apart).
//! - The start time has microsecond resolution, and there is no pidfs inode:
//!   two processes on one pid within one microsecond would share an identity.
//! - There is no pidfd, so the `*_of_pidfd` functions are never reached
//!   (`sys::pidfd_open` is ENOSYS here); they exist so callers compile.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::OnceLock;

use super::{Identity, InfoError, ProcState, ProcessInfo};
use crate::pid::Pid;

// No pidfd, no stat line, no boot id as Linux has it, no process handle;
// nothing cached (see `unsupported`). The start time comes from
// `proc_pidinfo` (see `child_identity`), not from a seed.
pub use super::unsupported::{
    current_boot, forget, identity_of_handle, pidfd_inode, start_tick_between,
    stat_and_identity_of_pidfd, stat_of,
};

/// The call whose failure a liveness or info error names.
pub const INFO_CALL: &str = "proc_pidinfo";

/// Why a process that exists cannot be seen ([`InfoError::Hidden`]).
pub const HIDDEN_REASON: &str = "the process exists but this user may not inspect it";

/// `kern.boottime` as a string, read once: a pidfile from before a reboot
/// never matches.
fn boot_id() -> &'static str {
    static BOOT: OnceLock<String> = OnceLock::new();
    BOOT.get_or_init(|| {
        let mut tv = std::mem::MaybeUninit::<libc::timeval>::zeroed();
        let mut len = std::mem::size_of::<libc::timeval>();
        let mut mib = [libc::CTL_KERN, libc::KERN_BOOTTIME];
        // SAFETY: mib names kern.boottime, whose value is a timeval; the
        // buffer is ours and `len` says its size.
        let ret = unsafe {
            libc::sysctl(
                mib.as_mut_ptr(),
                2,
                tv.as_mut_ptr().cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        if ret != 0 {
            return "noboot".to_owned();
        }
        // SAFETY: sysctl succeeded and filled the timeval.
        let tv = unsafe { tv.assume_init() };
        format!("{}{:06}", tv.tv_sec, tv.tv_usec)
    })
}

/// `Ok(None)`: no such process. `Err(EPERM)`: it exists, but we may not look.
fn bsdinfo(pid: Pid) -> io::Result<Option<libc::proc_bsdinfo>> {
    let mut info = std::mem::MaybeUninit::<libc::proc_bsdinfo>::zeroed();
    let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
    // SAFETY: the buffer is ours and `size` bytes long; arg 1 asks for
    // zombies too (see the module docs).
    let n = unsafe {
        libc::proc_pidinfo(
            pid.as_raw(),
            libc::PROC_PIDTBSDINFO,
            1,
            info.as_mut_ptr().cast(),
            size,
        )
    };
    if n == size {
        // SAFETY: the kernel filled all `size` bytes.
        return Ok(Some(unsafe { info.assume_init() }));
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ESRCH) => Ok(None),
        Some(libc::EPERM) => Err(err),
        // A short answer without an errno: the process went away mid-call.
        _ if n >= 0 => Ok(None),
        _ => Err(err),
    }
}

fn state(status: u32) -> ProcState {
    ProcState::from_bsd_status(status)
}

fn identity(info: &libc::proc_bsdinfo) -> Identity {
    Identity {
        boot: boot_id().to_owned(),
        start_time: info
            .pbi_start_tvsec
            .saturating_mul(1_000_000)
            .saturating_add(info.pbi_start_tvusec),
        inode: None,
    }
}

/// Exists by `kill(pid, 0)` (EPERM counts: it exists, it is not ours).
fn exists_unreadable(pid: Pid) -> bool {
    match crate::sys::probe(pid) {
        Ok(()) => true,
        Err(e) => e.raw_os_error() == Some(libc::EPERM),
    }
}

/// `PROC_FLAG_INEXIT` (`<sys/proc_info.h>`; libc does not export it): XNU's
/// `fill_procbsdinfo` sets it from `P_LEXIT`, which `exit1` sets before
/// `proc_exit` closes the process's descriptors (and drops its locks).
const PROC_FLAG_INEXIT: u32 = 4;

/// Whether the process with this pid and start time (microseconds, as in
/// its identity), just judged running, has stopped since: in its exit (it
/// may have dropped its locks while it still looks alive), a zombie, gone,
/// or its pid now another process's. False (running) when it may not be
/// read.
pub fn stopped_running(pid: Pid, start_time: u64) -> bool {
    match bsdinfo(pid) {
        Ok(Some(info)) => {
            identity(&info).start_time != start_time
                || !state(info.pbi_status).is_running()
                || info.pbi_flags & PROC_FLAG_INEXIT != 0
        }
        Ok(None) => true,
        Err(_) => false,
    }
}

pub fn is_running(pid: Pid) -> io::Result<bool> {
    match bsdinfo(pid) {
        Ok(Some(info)) => Ok(state(info.pbi_status).is_running()),
        Ok(None) => Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Ok(exists_unreadable(pid)),
        Err(e) => Err(e),
    }
}

fn info_or_hidden(pid: Pid) -> Result<Option<libc::proc_bsdinfo>, InfoError> {
    match bsdinfo(pid) {
        Ok(v) => Ok(v),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(InfoError::Hidden),
        Err(e) => Err(InfoError::Io(e)),
    }
}

pub fn process_info(pid: Pid) -> Result<Option<ProcessInfo>, InfoError> {
    Ok(info_or_hidden(pid)?.map(|info| {
        let name = crate::sys::c_field(&info.pbi_comm);
        ProcessInfo {
            pid: info.pbi_pid as i32,
            ppid: info.pbi_ppid as i32,
            pgid: info.pbi_pgid as i32,
            state: state(info.pbi_status),
            identity: identity(&info),
            name: String::from_utf8_lossy(&name).into_owned(),
        }
    }))
}

pub fn identity_of(pid: Pid) -> Result<Option<Identity>, InfoError> {
    Ok(info_or_hidden(pid)?.map(|info| identity(&info)))
}

pub fn is_running_as(pid: Pid, identity_str: &str) -> Result<bool, InfoError> {
    let Some(wanted) = Identity::decode(identity_str) else {
        return Ok(false);
    };
    Ok(match info_or_hidden(pid)? {
        Some(info) => state(info.pbi_status).is_running() && identity(&info).same_process(&wanted),
        None => false,
    })
}

/// The identity of our own unreaped child (see the Linux version). macOS
/// has no cheap seed: the start time is read from the zombie or the live
/// child alike, and there are no pidfds.
pub fn child_identity(
    pid: Pid,
    _seed: &super::IdentitySeed,
    _pidfd: Option<std::os::fd::BorrowedFd<'_>>,
) -> Result<Identity, InfoError> {
    identity_of(pid)?.ok_or_else(|| InfoError::Io(io::Error::from_raw_os_error(libc::ESRCH)))
}

/// Reads the boot time once, ahead of the first identity.
pub fn prepare_identity() {
    let _ = boot_id();
}

/// Thread ids on macOS are not pids: every pid is a process.
pub fn thread_of(_pid: Pid) -> super::ThreadOf {
    super::ThreadOf::NotAThread
}

/// The identity of this boot's process that started at `start_time`.
pub fn identity_from(start_time: u64, inode: Option<u64>) -> io::Result<Identity> {
    Ok(Identity {
        boot: boot_id().to_owned(),
        start_time,
        inode,
    })
}

/// No pidfds here: the identity by pid (exact for our own unreaped child,
/// whose pid cannot be reused).
pub fn identity_of_pidfd(pid: Pid, _pidfd: &OwnedFd) -> Result<Option<Identity>, InfoError> {
    identity_of(pid)
}
