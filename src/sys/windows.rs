//! Thin safe wrappers over the Win32 calls procward makes:
//! process and job handles, zero-timeout waits, creation times, console
//! control events, and the Win32 → errno mapping for errors bound for JS.
//!
//! A process handle is Windows' pidfd: while any handle to a process is
//! open, its pid is not handed to another process, and a wait on it ends
//! when the process exits. Every call here takes a handle, never a pid,
//! except the two that open one (`open_process`, `parent_pid`).

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::ptr;

use windows_sys::Win32::Foundation::{
    ERROR_INVALID_PARAMETER, FALSE, FILETIME, HANDLE, INVALID_HANDLE_VALUE, WAIT_OBJECT_0,
    WAIT_TIMEOUT,
};
use windows_sys::Win32::System::Console::{GenerateConsoleCtrlEvent, GetConsoleProcessList};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Process32FirstW, Process32NextW, PROCESSENTRY32W, TH32CS_SNAPPROCESS,
};
use windows_sys::Win32::System::JobObjects::{
    CreateJobObjectW, JobObjectExtendedLimitInformation, SetInformationJobObject,
    TerminateJobObject, JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, GetProcessTimes, OpenProcess, QueryFullProcessImageNameW, TerminateProcess,
    WaitForSingleObject, PROCESS_NAME_WIN32,
};

pub use windows_sys::Win32::System::Threading::{
    PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE, PROCESS_TERMINATE,
};

/// `CTRL_BREAK_EVENT` (wincon.h): the one console event that can be sent to
/// a single process group (CTRL_C_EVENT only reaches group 0, everyone).
const CTRL_BREAK_EVENT: u32 = 1;

/// The exit code a process gets when procward terminates it (libuv and so
/// Node's `child.kill()` use 1 too).
pub const TERMINATED_CODE: u32 = 1;

pub fn raw(h: &OwnedHandle) -> HANDLE {
    h.as_raw_handle() as HANDLE
}

/// Takes ownership of a handle a Win32 call returned, or its error.
/// `invalid` is the failure value of that call (NULL or INVALID_HANDLE_VALUE).
pub fn owned(h: HANDLE, invalid: HANDLE) -> io::Result<OwnedHandle> {
    if h == invalid || h.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh handle from the kernel, owned by nobody else.
    Ok(unsafe { OwnedHandle::from_raw_handle(h as _) })
}

/// A handle to process `pid` with `access`; `None` when no process has that
/// pid (ERROR_INVALID_PARAMETER is what OpenProcess says then). A process
/// that has exited but whose object someone still holds open is found: the
/// caller tells it apart with [`has_exited`].
pub fn open_process(pid: u32, access: u32) -> io::Result<Option<OwnedHandle>> {
    // SAFETY: plain call; the handle returned is ours to close.
    let h = unsafe { OpenProcess(access, FALSE, pid) };
    if h.is_null() {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(ERROR_INVALID_PARAMETER as i32) {
            return Ok(None);
        }
        return Err(e);
    }
    // SAFETY: a fresh handle, owned by nobody else.
    Ok(Some(unsafe { OwnedHandle::from_raw_handle(h as _) }))
}

/// Has the process (or job, or any waitable object) been signalled? A
/// zero-timeout wait: never blocks. Needs SYNCHRONIZE access.
pub fn has_exited(h: &OwnedHandle) -> io::Result<bool> {
    // SAFETY: a valid handle; a 0 ms timeout returns at once.
    match unsafe { WaitForSingleObject(raw(h), 0) } {
        WAIT_OBJECT_0 => Ok(true),
        WAIT_TIMEOUT => Ok(false),
        _ => Err(io::Error::last_os_error()),
    }
}

/// `STILL_ACTIVE`: what GetExitCodeProcess says of a running process (and,
/// ambiguously, of one that exited with 259; only used where no wait right
/// could be had).
pub const STILL_ACTIVE: u32 = 259;

pub fn exit_code(h: &OwnedHandle) -> io::Result<u32> {
    let mut code = 0u32;
    // SAFETY: a valid handle and a valid out pointer.
    if unsafe { GetExitCodeProcess(raw(h), &mut code) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(code)
}

/// The creation time, in 100 ns units since 1601 (UTC): absolute, not
/// relative to the boot, and fixed for the life of the process object.
pub fn creation_time(h: &OwnedHandle) -> io::Result<u64> {
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: a valid handle and four valid out pointers.
    let ok = unsafe { GetProcessTimes(raw(h), &mut created, &mut exited, &mut kernel, &mut user) };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((u64::from(created.dwHighDateTime) << 32) | u64::from(created.dwLowDateTime))
}

pub fn terminate_process(h: &OwnedHandle) -> io::Result<()> {
    // SAFETY: a valid handle.
    if unsafe { TerminateProcess(raw(h), TERMINATED_CODE) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A new, unnamed, non-inheritable job. With `kill_on_close` its processes
/// are all killed when its last handle closes — ours, at the latest when
/// this process dies.
pub fn job(kill_on_close: bool) -> io::Result<OwnedHandle> {
    // SAFETY: no security attributes, no name.
    let job = owned(
        unsafe { CreateJobObjectW(ptr::null(), ptr::null()) },
        ptr::null_mut(),
    )?;
    // SAFETY: all-zero is a valid JOBOBJECT_EXTENDED_LIMIT_INFORMATION (no limits).
    let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
    // Never JOB_OBJECT_LIMIT_BREAKAWAY_OK: no descendant may leave the job.
    if kill_on_close {
        limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    }
    set_limits(&job, &limits)?;
    Ok(job)
}

/// Drops KILL_ON_JOB_CLOSE: what is left in the job then outlives the job's
/// handles (see `exit_watch`: a child whose group is not swept).
pub fn keep_on_close(job: &OwnedHandle) -> io::Result<()> {
    // SAFETY: all-zero is a valid JOBOBJECT_EXTENDED_LIMIT_INFORMATION (no limits).
    let limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
    set_limits(job, &limits)
}

fn set_limits(job: &OwnedHandle, limits: &JOBOBJECT_EXTENDED_LIMIT_INFORMATION) -> io::Result<()> {
    // SAFETY: a valid job handle and a pointer to a struct of the size given.
    let ok = unsafe {
        SetInformationJobObject(
            raw(job),
            JobObjectExtendedLimitInformation,
            (limits as *const JOBOBJECT_EXTENDED_LIMIT_INFORMATION).cast(),
            std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Kills every process in the job (the group sweep).
pub fn terminate_job(job: &OwnedHandle) -> io::Result<()> {
    // SAFETY: a valid job handle.
    if unsafe { TerminateJobObject(raw(job), TERMINATED_CODE) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The executable's file name without its directory ("node.exe").
pub fn image_name(h: &OwnedHandle) -> io::Result<String> {
    let mut buf = vec![0u16; 1024];
    let mut len = buf.len() as u32;
    // SAFETY: a valid handle; `len` is the buffer's size in u16s.
    let ok = unsafe {
        QueryFullProcessImageNameW(raw(h), PROCESS_NAME_WIN32, buf.as_mut_ptr(), &mut len)
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    let full = String::from_utf16_lossy(&buf[..len as usize]);
    Ok(full.rsplit(['\\', '/']).next().unwrap_or(&full).to_owned())
}

/// The parent's pid as a process snapshot records it (the pid it had at
/// creation; Windows does not re-parent, so the parent may be long gone or
/// its pid reused). None when the snapshot does not list `pid` (it has
/// exited).
pub fn parent_pid(pid: u32) -> io::Result<Option<u32>> {
    // SAFETY: plain call; the snapshot handle is ours to close.
    let snap = owned(
        unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0) },
        INVALID_HANDLE_VALUE,
    )?;
    // SAFETY: all-zero is a valid PROCESSENTRY32W; dwSize is set below.
    let mut entry: PROCESSENTRY32W = unsafe { std::mem::zeroed() };
    entry.dwSize = std::mem::size_of::<PROCESSENTRY32W>() as u32;
    // SAFETY: a valid snapshot and an entry with dwSize set.
    let mut more = unsafe { Process32FirstW(raw(&snap), &mut entry) } != 0;
    while more {
        if entry.th32ProcessID == pid {
            return Ok(Some(entry.th32ParentProcessID));
        }
        // SAFETY: as above.
        more = unsafe { Process32NextW(raw(&snap), &mut entry) } != 0;
    }
    Ok(None)
}

/// Is `pid` attached to this process's console? Only then does a console
/// control event from us reach it. False when we have no console.
pub fn shares_console(pid: u32) -> bool {
    let mut pids = vec![0u32; 64];
    loop {
        // SAFETY: the buffer holds `pids.len()` u32s.
        let n = unsafe { GetConsoleProcessList(pids.as_mut_ptr(), pids.len() as u32) } as usize;
        if n == 0 {
            return false;
        }
        if n <= pids.len() {
            return pids[..n].contains(&pid);
        }
        pids.resize(n + 16, 0);
    }
}

/// CTRL_BREAK_EVENT to the console process group `group` (the pid of the
/// process created with CREATE_NEW_PROCESS_GROUP). Node sees it as SIGBREAK.
pub fn ctrl_break(group: u32) -> io::Result<()> {
    // SAFETY: plain call; a group id of 0 would reach every process on the
    // console, which the callers never pass (a Pid is never 0).
    if unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, group) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The errno for a Win32 error, for errors bound for JS (whose codes are
/// errno names): the common cases, as libuv maps them. None for one of ours
/// that says the OS lacks something (`ErrorKind::Unsupported`).
pub fn errno_of(err: &io::Error) -> Option<i32> {
    use windows_sys::Win32::Foundation as f;
    let Some(code) = err.raw_os_error() else {
        return (err.kind() != io::ErrorKind::Unsupported).then_some(libc::EIO);
    };
    Some(match code as u32 {
        f::ERROR_FILE_NOT_FOUND
        | f::ERROR_PATH_NOT_FOUND
        | f::ERROR_INVALID_NAME
        | f::ERROR_MOD_NOT_FOUND
        | f::ERROR_BAD_NETPATH => libc::ENOENT,
        f::ERROR_ACCESS_DENIED | f::ERROR_PRIVILEGE_NOT_HELD => libc::EACCES,
        f::ERROR_SHARING_VIOLATION | f::ERROR_LOCK_VIOLATION => libc::EBUSY,
        f::ERROR_INVALID_PARAMETER | f::ERROR_INVALID_HANDLE => libc::EINVAL,
        f::ERROR_NOT_ENOUGH_MEMORY | f::ERROR_OUTOFMEMORY => libc::ENOMEM,
        f::ERROR_TOO_MANY_OPEN_FILES => libc::EMFILE,
        f::ERROR_DIRECTORY => libc::ENOTDIR,
        f::ERROR_FILENAME_EXCED_RANGE => libc::ENAMETOOLONG,
        f::ERROR_NOT_SUPPORTED | f::ERROR_CALL_NOT_IMPLEMENTED => libc::ENOTSUP,
        f::ERROR_BAD_EXE_FORMAT | f::ERROR_EXE_MACHINE_TYPE_MISMATCH => libc::ENOEXEC,
        f::ERROR_ALREADY_EXISTS | f::ERROR_FILE_EXISTS => libc::EEXIST,
        f::ERROR_DISK_FULL => libc::ENOSPC,
        f::ERROR_WRITE_PROTECT => libc::EROFS,
        f::ERROR_BROKEN_PIPE | f::ERROR_NO_DATA => libc::EPIPE,
        f::ERROR_CANT_RESOLVE_FILENAME => libc::ELOOP,
        _ => libc::EIO,
    })
}
