//! Liveness and identity on Windows: a process handle and a zero-timeout wait.
//!
//! Windows has no zombies, but it has their twin: a process that has exited
//! while someone still holds a handle to it keeps its pid and its process
//! object (exit code, times) until the last handle closes. `OpenProcess`
//! then still succeeds. So "running" is never "OpenProcess succeeded"; it is
//! "the handle is not signalled" (`WaitForSingleObject(h, 0)`), and such an
//! exited-but-held process reads as state `zombie`.
//!
//! Identity: the creation time (`GetProcessTimes`, 100 ns units since 1601,
//! UTC). Unlike Linux's start tick it is absolute, not counted from the
//! boot, so a process of a later boot has a later creation time and no boot
//! id is needed to tell them apart; the boot field holds the fixed tag `win`.
//! A different process on the same pid would need the same creation time to
//! the 100 ns, which the kernel never hands out twice for one pid (a pid is
//! only reused after the previous process object is gone).

use std::io;
use std::os::windows::io::OwnedHandle;

use windows_sys::Win32::Foundation::ERROR_ACCESS_DENIED;

use super::{Identity, InfoError, ProcState, ProcessInfo, ThreadOf};
use crate::pid::Pid;
use crate::sys;

// No pidfd, no stat line, no boot id; a process is identified by its handle
// alone (`identity_of_handle`), never by pid (see `unsupported`).
pub use super::unsupported::{
    child_identity, current_boot, forget, identity_from, identity_of, identity_of_pidfd,
    pidfd_inode, prepare_identity, start_tick_between, stat_and_identity_of_pidfd, stat_of,
    stopped_running,
};

/// The call whose failure a liveness or info error names.
pub const INFO_CALL: &str = "OpenProcess";

/// Why a process that exists cannot be seen ([`InfoError::Hidden`]).
pub const HIDDEN_REASON: &str = "the process exists but cannot be opened";

const BOOT_TAG: &str = "win";

/// The identity of the process behind `h` (any process handle with
/// PROCESS_QUERY_LIMITED_INFORMATION).
pub fn identity_of_handle(h: &OwnedHandle) -> io::Result<Identity> {
    Ok(Identity {
        boot: BOOT_TAG.to_owned(),
        start_time: sys::creation_time(h)?,
        inode: None,
    })
}

enum Found {
    None,
    /// A handle that can wait (SYNCHRONIZE) and query.
    Waitable(OwnedHandle),
    /// Only query access (a protected process): liveness from the exit code.
    QueryOnly(OwnedHandle),
}

fn open(pid: Pid) -> io::Result<Found> {
    let pid = pid.as_raw() as u32;
    match sys::open_process(
        pid,
        sys::PROCESS_SYNCHRONIZE | sys::PROCESS_QUERY_LIMITED_INFORMATION,
    ) {
        Ok(Some(h)) => Ok(Found::Waitable(h)),
        Ok(None) => Ok(Found::None),
        Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) => {
            match sys::open_process(pid, sys::PROCESS_QUERY_LIMITED_INFORMATION)? {
                Some(h) => Ok(Found::QueryOnly(h)),
                None => Ok(Found::None),
            }
        }
        Err(e) => Err(e),
    }
}

fn exited(found: &Found) -> io::Result<bool> {
    match found {
        Found::None => Ok(true),
        Found::Waitable(h) => sys::has_exited(h),
        Found::QueryOnly(h) => Ok(sys::exit_code(h)? != sys::STILL_ACTIVE),
    }
}

fn handle(found: &Found) -> Option<&OwnedHandle> {
    match found {
        Found::None => None,
        Found::Waitable(h) | Found::QueryOnly(h) => Some(h),
    }
}

/// Exists and has not exited. A process this user may not open at all
/// (ERROR_ACCESS_DENIED even for query access) exists, so it counts as
/// running.
pub fn is_running(pid: Pid) -> io::Result<bool> {
    match open(pid) {
        Ok(found) => Ok(!exited(&found)?),
        Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) => Ok(true),
        Err(e) => Err(e),
    }
}

fn info_io(e: io::Error) -> InfoError {
    if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) {
        InfoError::Hidden
    } else {
        InfoError::Io(e)
    }
}

/// Running, and the very process `identity` names.
pub fn is_running_as(pid: Pid, identity: &str) -> Result<bool, InfoError> {
    let Some(want) = Identity::decode(identity) else {
        return Ok(false);
    };
    let found = open(pid).map_err(info_io)?;
    let Some(h) = handle(&found) else {
        return Ok(false);
    };
    if exited(&found).map_err(info_io)? {
        return Ok(false);
    }
    let have = identity_of_handle(h).map_err(info_io)?;
    Ok(have.same_process(&want))
}

/// A snapshot: pid, parent (as recorded at creation), state (`running`, or
/// `zombie` for an exited process someone still holds), identity and image
/// name. `pgid` is 0: Windows has no process groups in the Unix sense.
pub fn process_info(pid: Pid) -> Result<Option<ProcessInfo>, InfoError> {
    let found = open(pid).map_err(info_io)?;
    let Some(h) = handle(&found) else {
        return Ok(None);
    };
    let state = if exited(&found).map_err(info_io)? {
        ProcState::Zombie
    } else {
        ProcState::Running
    };
    let identity = identity_of_handle(h).map_err(info_io)?;
    let name = sys::image_name(h).unwrap_or_default();
    let ppid = sys::parent_pid(pid.as_raw() as u32)
        .ok()
        .flatten()
        .unwrap_or(0);
    Ok(Some(ProcessInfo {
        pid: pid.as_raw(),
        ppid: ppid as i32,
        pgid: 0,
        state,
        identity,
        name,
    }))
}

/// Thread ids and process ids share one number space on Windows, but
/// nothing here ever signals a thread: `OpenProcess` on a thread id fails
/// like on a free pid. So no pid is a thread for our purposes.
pub fn thread_of(_pid: Pid) -> ThreadOf {
    ThreadOf::NotAThread
}
