//! Linux: the facts of one process, each a read of its `/proc` entry (or
//! of `/proc/self`'s); the scans of the whole table are `scan`'s and the
//! sockets `sockets`'. A process that is gone (no entry) is `None`; any
//! other failure (EMFILE, EACCES) is the error, for the caller to judge.

use std::fs::{File, OpenOptions};
use std::io::{self, IsTerminal};
use std::os::fd::IntoRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use super::parse::{self, OwnStatus};
use crate::pid::Pid;
use crate::proc_info::procfs::{is_gone, parse_stat, read_stat, STAT_BUF};
use crate::proc_info::stat::{self, Stat, Terminal};
use crate::proc_info::ProcState;

pub use super::scan::marked_processes;
pub use super::sockets::{child_accepted, child_listens, listening_inodes};

/// `/proc` is this OS's process table.
pub const PROCFS: bool = true;

/// The whole of a `/proc` file; `None` when it is not there (the process
/// has gone).
pub(super) fn read(path: &str) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `pid`'s stat line (the one parser, `proc_info::stat`): its fields and
/// its controlling terminal, from one read.
pub fn stat(pid: Pid) -> io::Result<Option<(Stat, Terminal)>> {
    let mut buf = [0u8; STAT_BUF];
    let Some((n, _)) = read_stat(pid, &mut buf)? else {
        return Ok(None);
    };
    let st = parse_stat(&buf[..n])?;
    let terminal = stat::parse_terminal(&buf[..n])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.0))?;
    Ok(Some((st, terminal)))
}

/// This process's signal masks and effective capabilities, as the thread
/// that calls sees them (`SigPnd` is that thread's; the JS thread's, when
/// called from JS, which is the main thread `/proc/self` shows).
pub fn own_status() -> io::Result<Option<OwnStatus>> {
    Ok(read("/proc/self/status")?.map(|text| parse::status(&text)))
}

/// Whether a thread of this process other than its main thread (the JS
/// thread, which asks) is runnable now (state R): one woken at the same
/// moment that has not had the CPU yet. A signal such a thread has taken
/// from the kernel is pending nowhere, and its handler has not run yet.
/// Threads that vanish while read are passed over.
pub fn other_threads_runnable() -> io::Result<bool> {
    let main = std::process::id();
    let dir = match std::fs::read_dir("/proc/self/task") {
        Ok(dir) => dir,
        Err(e) if is_gone(&e) => return Ok(false),
        Err(e) => return Err(e),
    };
    for task in dir {
        let task = task?;
        let name = task.file_name();
        let Some(tid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if tid == main {
            continue;
        }
        let Some(line) = read(&format!("/proc/self/task/{tid}/stat"))? else {
            continue;
        };
        if parse_stat(&line).is_ok_and(|st| st.state == ProcState::Running) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `pid`'s name (`comm`: at most 15 bytes, set by exec or `PR_SET_NAME`).
pub fn comm(pid: Pid) -> io::Result<Option<String>> {
    Ok(read(&format!("/proc/{}/comm", pid.as_raw()))?
        .map(|text| String::from_utf8_lossy(&text).trim().to_owned()))
}

/// The uid that owns `pid`: its `/proc` entry's owner, the effective uid it
/// runs as (root for one that made itself not dumpable).
pub fn owner(pid: Pid) -> io::Result<Option<u32>> {
    match std::fs::metadata(format!("/proc/{}", pid.as_raw())) {
        Ok(meta) => Ok(Some(meta.uid())),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `pid`'s command line, as it stands (a process may write over it); empty
/// for a kernel thread or a zombie.
pub fn argv(pid: Pid) -> io::Result<Option<Vec<String>>> {
    Ok(read(&format!("/proc/{}/cmdline", pid.as_raw()))?.map(|raw| parse::cmdline(&raw)))
}

/// `pid`'s `/proc/<pid>/cgroup` text.
pub fn cgroup_text(pid: Pid) -> io::Result<Option<String>> {
    Ok(read(&format!("/proc/{}/cgroup", pid.as_raw()))?
        .map(|text| String::from_utf8_lossy(&text).into_owned()))
}

/// This process's mount table (`/proc/self/mountinfo`).
pub fn mountinfo() -> io::Result<Option<String>> {
    Ok(read("/proc/self/mountinfo")?.map(|text| String::from_utf8_lossy(&text).into_owned()))
}

/// The inode of the file at `path` (a cgroup's directory: its id); `None`
/// when there is none.
pub fn inode(path: &Path) -> io::Result<Option<u64>> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(Some(meta.ino())),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A file description of our own for the terminal open on our `fd`,
/// non-blocking and close-on-exec, as a raw fd the caller now owns; `None`
/// when `fd` is not a terminal. Opening `/proc/self/fd/N` opens the file
/// anew (a terminal's open makes a new description), where `dup` would
/// share the one whose O_NONBLOCK others see: setting it there would make
/// the terminal non-blocking for every process that shares it.
pub fn open_own_terminal(fd: i32) -> io::Result<Option<i32>> {
    let file: File = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{fd}"))?;
    Ok(file.is_terminal().then(|| file.into_raw_fd()))
}
