//! Linux: `/proc/<pid>/stat` for state and start time, pidfs for the exact
//! identity.
//!
//! A check of a pid opens `/proc/<pid>/stat` and keeps the fd in a small
//! cache. Such an fd stays bound to the process it was opened for: once that
//! process is gone, reading it fails with ESRCH even if the pid has been
//! reused. So a repeated check (a supervisor or a lock polling the same pid)
//! costs one `pread` instead of open + read + close, and can never read a
//! newcomer's state through a stale fd.
//!
//! `hidepid`: when `/proc` is mounted with `hidepid=1|2` and the process
//! belongs to another user, its `/proc/<pid>` is invisible. Liveness then
//! asks a pidfd instead (pidfd_open is not subject to hidepid, and a pidfd
//! turns readable once the process is a zombie), so the answer stays
//! zombie-aware; without pidfd support it degrades to `kill(pid, 0)`, which
//! counts a hidden zombie as running. `process_info` cannot describe a
//! hidden process and says so with [`InfoError::Hidden`].

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Mutex, OnceLock};

use super::stat::{self, Stat};
use super::{Identity, InfoError, ProcState, ProcessInfo};
use crate::pid::Pid;
use crate::sys;

/// Enough for any stat line (about 300 bytes; the name is at most 15 bytes).
const STAT_BUF: usize = 1024;
/// Cached stat fds. Bounded so the addon never holds more than this many fds
/// for liveness checks.
const CACHE_SLOTS: usize = 32;

static STAT_CACHE: Mutex<Vec<(i32, OwnedFd)>> = Mutex::new(Vec::new());

fn boot_id() -> &'static str {
    static BOOT: OnceLock<String> = OnceLock::new();
    BOOT.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().replace('-', ""))
            .unwrap_or_else(|_| "noboot".to_owned())
    })
}

fn is_gone(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH))
}

/// Reads the stat line of `pid` through the cache, or opens it afresh.
/// `Ok(None)`: no such entry in /proc (no process, or hidden).
fn read_stat(pid: Pid, buf: &mut [u8; STAT_BUF]) -> io::Result<Option<usize>> {
    {
        let mut cache = STAT_CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(idx) = cache.iter().position(|(p, _)| *p == pid.as_raw()) {
            match sys::pread0(cache[idx].1.as_fd(), buf) {
                Ok(n) if n > 0 => return Ok(Some(n)),
                // ESRCH (or anything odd): that process is gone; the pid may
                // now be someone else's, so drop the fd and look afresh.
                _ => {
                    cache.swap_remove(idx);
                }
            }
        }
    }
    let mut file = match File::open(format!("/proc/{}/stat", pid.as_raw())) {
        Ok(f) => f,
        Err(e) if is_gone(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let n = match file.read(buf) {
        Ok(n) => n,
        Err(e) if is_gone(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut cache = STAT_CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if cache.len() >= CACHE_SLOTS {
        // Oldest first out; entries for dead processes age out this way.
        cache.remove(0);
    }
    cache.push((pid.as_raw(), OwnedFd::from(file)));
    Ok(Some(n))
}

/// Liveness for a pid that /proc does not show: absent, or hidden by hidepid.
fn is_running_unlisted(pid: Pid) -> io::Result<bool> {
    match sys::pidfd_open(pid) {
        Ok(fd) => Ok(!sys::is_readable_now(fd.as_fd())?),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
        Err(_) => match sys::probe(pid) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
            Err(e) => Err(e),
        },
    }
}

pub fn is_running(pid: Pid) -> io::Result<bool> {
    let mut buf = [0u8; STAT_BUF];
    match read_stat(pid, &mut buf)? {
        Some(n) => Ok(stat::parse_state(&buf[..n])
            .map(ProcState::is_running)
            .unwrap_or(false)),
        None => is_running_unlisted(pid),
    }
}

fn parse_stat(buf: &[u8]) -> io::Result<Stat> {
    stat::parse(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.0))
}

/// Stat + identity, read so that both describe the same process: the pidfd is
/// opened first and pins the process; if it then reports an exit while stat
/// shows a live process, the pid was reused in between and we read again.
fn stat_and_identity(pid: Pid) -> Result<Option<(Stat, Identity)>, InfoError> {
    for _ in 0..3 {
        let pidfd = sys::pidfd_open(pid).ok();
        match stat_for(pid, pidfd.as_ref())? {
            StatRead::Consistent(st, id) => return Ok(Some((st, id))),
            StatRead::Gone => return Ok(None),
            StatRead::Reused => continue,
        }
    }
    // Three reuses of one pid in a few microseconds: treat as gone.
    Ok(None)
}

enum StatRead {
    Consistent(Stat, Identity),
    /// The pidfd's process is gone and the pid shows someone else.
    Reused,
    Gone,
}

fn stat_for(pid: Pid, pidfd: Option<&OwnedFd>) -> Result<StatRead, InfoError> {
    let mut buf = [0u8; STAT_BUF];
    let n = match read_stat(pid, &mut buf).map_err(InfoError::Io)? {
        Some(n) => n,
        None => {
            return if is_running_unlisted(pid).map_err(InfoError::Io)? {
                Err(InfoError::Hidden)
            } else {
                Ok(StatRead::Gone)
            };
        }
    };
    let st = parse_stat(&buf[..n]).map_err(InfoError::Io)?;
    let inode = match pidfd {
        Some(fd) => {
            let exited = sys::is_readable_now(fd.as_fd()).unwrap_or(false);
            if exited && st.state.is_running() {
                return Ok(StatRead::Reused);
            }
            pidfs_inode(fd)
        }
        None => None,
    };
    let identity = Identity {
        boot: boot_id().to_owned(),
        start_time: st.start_time,
        inode,
    };
    Ok(StatRead::Consistent(st, identity))
}

/// The identity of the process a pidfd refers to, read through its pid.
/// `None` when that process is gone (the pid may now be someone else's).
pub fn identity_of_pidfd(pid: Pid, pidfd: &OwnedFd) -> Result<Option<Identity>, InfoError> {
    match stat_for(pid, Some(pidfd))? {
        StatRead::Consistent(_, id) => Ok(Some(id)),
        StatRead::Reused | StatRead::Gone => Ok(None),
    }
}

/// pgid of the process a pidfd refers to (see [`identity_of_pidfd`]).
pub fn stat_of_pidfd(pid: Pid, pidfd: &OwnedFd) -> Result<Option<Stat>, InfoError> {
    match stat_for(pid, Some(pidfd))? {
        StatRead::Consistent(st, _) => Ok(Some(st)),
        StatRead::Reused | StatRead::Gone => Ok(None),
    }
}

/// The pidfd's inode, only where it identifies the process: on pidfs. Before
/// 6.9 every pidfd is an anon inode and they all share one number.
fn pidfs_inode(fd: &OwnedFd) -> Option<u64> {
    static PIDFS: OnceLock<bool> = OnceLock::new();
    let ino = sys::inode_of(fd.as_fd()).ok()?;
    let has_pidfs = *PIDFS.get_or_init(|| {
        // Two pidfds for two different processes (ourselves and our parent)
        // share an inode number only on anon-inode kernels.
        let other = sys::pidfd_open(Pid::current())
            .ok()
            .and_then(|a| sys::inode_of(a.as_fd()).ok());
        let parent = Pid::from_raw(std::os::unix::process::parent_id() as i32)
            .ok()
            .and_then(|p| sys::pidfd_open(p).ok())
            .and_then(|b| sys::inode_of(b.as_fd()).ok());
        matches!((other, parent), (Some(a), Some(b)) if a != b)
    });
    has_pidfs.then_some(ino)
}

pub fn process_info(pid: Pid) -> Result<Option<ProcessInfo>, InfoError> {
    Ok(stat_and_identity(pid)?.map(|(st, identity)| ProcessInfo {
        pid: st.pid,
        ppid: st.ppid,
        pgid: st.pgid,
        state: st.state,
        identity,
        name: st.name,
    }))
}

pub fn identity_of(pid: Pid) -> Result<Option<Identity>, InfoError> {
    Ok(stat_and_identity(pid)?.map(|(_, id)| id))
}

/// Running, and still the process `identity` was taken from.
pub fn is_running_as(pid: Pid, identity: &str) -> Result<bool, InfoError> {
    let Some(wanted) = Identity::decode(identity) else {
        return Ok(false);
    };
    if wanted.boot != boot_id() {
        return Ok(false);
    }
    match stat_and_identity(pid)? {
        Some((st, current)) => Ok(st.state.is_running() && current.same_process(&wanted)),
        None => Ok(false),
    }
}
