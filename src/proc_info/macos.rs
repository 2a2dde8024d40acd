//! macOS: `proc_pidinfo(PROC_PIDTBSDINFO)` gives status (SZOMB for a zombie),
//! parents and the start time in microseconds; identity is the boot time
//! (`kern.boottime`) plus that start time.
//!
//! Not compiled or run on the Linux machines this project is tested on:
//! kept small, on the same seam as `linux.rs`.

use std::io;
use std::sync::OnceLock;

use super::{Identity, InfoError, ProcState, ProcessInfo};
use crate::pid::Pid;

const SIDL: u32 = 1;
const SRUN: u32 = 2;
const SSLEEP: u32 = 3;
const SSTOP: u32 = 4;
const SZOMB: u32 = 5;

fn boot_id() -> &'static str {
    static BOOT: OnceLock<String> = OnceLock::new();
    BOOT.get_or_init(|| {
        let mut tv = std::mem::MaybeUninit::<libc::timeval>::zeroed();
        let mut len = std::mem::size_of::<libc::timeval>();
        let mut mib = [libc::CTL_KERN, libc::KERN_BOOTTIME];
        // SAFETY: mib names kern.boottime, whose value is a timeval we own.
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

fn bsdinfo(pid: Pid) -> io::Result<Option<libc::proc_bsdinfo>> {
    let mut info = std::mem::MaybeUninit::<libc::proc_bsdinfo>::zeroed();
    let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
    // SAFETY: the buffer is ours and `size` bytes long.
    let n = unsafe {
        libc::proc_pidinfo(
            pid.as_raw(),
            libc::PROC_PIDTBSDINFO,
            0,
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
        // Another user's process: it exists, but we cannot read its status.
        Some(libc::EPERM) => Err(err),
        _ if n == 0 => Ok(None),
        _ => Err(err),
    }
}

fn state(status: u32) -> ProcState {
    match status {
        SRUN => ProcState::Running,
        SSLEEP => ProcState::Sleeping,
        SSTOP => ProcState::Stopped,
        SZOMB => ProcState::Zombie,
        SIDL => ProcState::Other,
        _ => ProcState::Other,
    }
}

fn identity(info: &libc::proc_bsdinfo) -> Identity {
    Identity {
        boot: boot_id().to_owned(),
        start_time: info.pbi_start_tvsec * 1_000_000 + info.pbi_start_tvusec,
        inode: None,
    }
}

fn exists_unreadable(pid: Pid) -> bool {
    // SAFETY: plain syscall; pid is positive.
    let ret = unsafe { libc::kill(pid.as_raw(), 0) };
    ret == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
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
        let name_bytes: Vec<u8> = info
            .pbi_comm
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        ProcessInfo {
            pid: info.pbi_pid as i32,
            ppid: info.pbi_ppid as i32,
            pgid: info.pbi_pgid as i32,
            state: state(info.pbi_status),
            identity: identity(&info),
            name: String::from_utf8_lossy(&name_bytes).into_owned(),
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

/// Nothing is cached on macOS.
pub fn forget(_pid: Pid) {}

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
