//! Linux: `/proc/<pid>/stat` for state and start time, pidfs for the exact
//! identity.
//!
//! Liveness asks a pidfd (see [`is_running`]) and keeps it in a small cache,
//! so a supervisor or a lock polling the same pid pays one `poll`. Info and
//! identity read `/proc/<pid>/stat`, whose fd is cached the same way: such an
//! fd stays bound to the process it was opened for, and once that process is
//! gone reading it fails with ESRCH even if the pid has been reused, so a
//! stale fd can never show a newcomer's state.
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
/// Slots in each cache (pidfds for liveness, evicting the least recently
/// used; stat fds for info, evicting the oldest). Bounded so the addon never
/// holds more than this many fds of each kind; Node raises its own fd limit
/// to the hard limit at start-up.
const CACHE_SLOTS: usize = 64;

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

/// Cached pidfds for liveness. A pidfd refers to one process for its whole
/// life: while `poll` says it has not exited, that process is alive and
/// still holds the pid, so a repeated check is one `poll` (no /proc read).
/// Once it reports an exit, the pid may be someone else's: the slot is
/// dropped and the pid looked up afresh.
struct PidfdSlot {
    pid: i32,
    fd: OwnedFd,
    /// pidfs inode (see [`Identity`]), read on the first identity check.
    inode: Option<Option<u64>>,
}

static PIDFD_CACHE: Mutex<Vec<PidfdSlot>> = Mutex::new(Vec::new());

enum PidfdCheck {
    /// Alive, with its pidfs inode when the kernel has pidfs.
    Alive(Option<u64>),
    /// No such process, or it has exited (a zombie).
    NotRunning,
    /// No pidfd could be had (kernel < 5.3, a thread id, EMFILE): ask /proc.
    Unavailable,
}

/// `want_inode`: also report the pidfs inode (an fstat, done once per slot).
fn pidfd_check(pid: Pid, want_inode: bool) -> PidfdCheck {
    {
        let mut cache = PIDFD_CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(idx) = cache.iter().position(|s| s.pid == pid.as_raw()) {
            match sys::is_readable_now(cache[idx].fd.as_fd()) {
                Ok(false) => {
                    // Least recently used first: a hit moves to the back.
                    let mut slot = cache.remove(idx);
                    let inode = if want_inode {
                        *slot.inode.get_or_insert_with(|| pidfs_inode(&slot.fd))
                    } else {
                        None
                    };
                    cache.push(slot);
                    return PidfdCheck::Alive(inode);
                }
                _ => {
                    cache.remove(idx);
                }
            }
        }
    }
    let fd = match sys::pidfd_open(pid) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return PidfdCheck::NotRunning,
        Err(_) => return PidfdCheck::Unavailable,
    };
    match sys::is_readable_now(fd.as_fd()) {
        Ok(false) => {}
        Ok(true) => return PidfdCheck::NotRunning,
        Err(_) => return PidfdCheck::Unavailable,
    }
    let inode = want_inode.then(|| pidfs_inode(&fd));
    let evicted = {
        let mut cache = PIDFD_CACHE.lock().unwrap_or_else(|e| e.into_inner());
        let evicted = (cache.len() >= CACHE_SLOTS).then(|| cache.remove(0));
        cache.push(PidfdSlot {
            pid: pid.as_raw(),
            fd,
            inode,
        });
        evicted
    };
    // Closed outside the lock.
    drop(evicted);
    PidfdCheck::Alive(inode.flatten())
}

/// Exists and has not exited. Through a pidfd where possible: it is exact
/// for a multi-threaded process whose leader thread has exited (its
/// `/proc/<pid>/stat` says Z, yet the process runs on), it is not subject to
/// hidepid, and a repeated check costs one poll.
pub fn is_running(pid: Pid) -> io::Result<bool> {
    match pidfd_check(pid, false) {
        PidfdCheck::Alive(_) => Ok(true),
        PidfdCheck::NotRunning => Ok(false),
        PidfdCheck::Unavailable => is_running_by_stat(pid),
    }
}

fn is_running_by_stat(pid: Pid) -> io::Result<bool> {
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
/// `use_cache`: go through the liveness pidfd cache first (and fill it).
fn stat_and_identity(pid: Pid, use_cache: bool) -> Result<Option<(Stat, Identity)>, InfoError> {
    if use_cache {
        if let Some(found) = stat_and_identity_cached(pid)? {
            return Ok(Some(found));
        }
    }
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

/// The same through the liveness cache: a live process holds its pid, so if
/// its cached pidfd says "alive" both before and after the stat read, that
/// stat is this process's. `None`: not decidable this way (not cached alive,
/// no pidfs, or it exited meanwhile); the caller takes the slow path.
fn stat_and_identity_cached(pid: Pid) -> Result<Option<(Stat, Identity)>, InfoError> {
    let PidfdCheck::Alive(Some(inode)) = pidfd_check(pid, true) else {
        return Ok(None);
    };
    let mut buf = [0u8; STAT_BUF];
    let Some(n) = read_stat(pid, &mut buf).map_err(InfoError::Io)? else {
        return Ok(None);
    };
    let st = parse_stat(&buf[..n]).map_err(InfoError::Io)?;
    if !st.state.is_running() || !matches!(pidfd_check(pid, false), PidfdCheck::Alive(_)) {
        return Ok(None);
    }
    let identity = Identity {
        boot: boot_id().to_owned(),
        start_time: st.start_time,
        inode: Some(inode),
    };
    Ok(Some((st, identity)))
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

/// Stat and identity of the process a pidfd refers to, read once (see
/// [`identity_of_pidfd`]).
pub fn stat_and_identity_of_pidfd(
    pid: Pid,
    pidfd: &OwnedFd,
) -> Result<Option<(Stat, Identity)>, InfoError> {
    match stat_for(pid, Some(pidfd))? {
        StatRead::Consistent(st, id) => Ok(Some((st, id))),
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
    Ok(
        stat_and_identity(pid, true)?.map(|(st, identity)| ProcessInfo {
            pid: st.pid,
            ppid: st.ppid,
            pgid: st.pgid,
            state: st.state,
            identity,
            name: st.name,
        }),
    )
}

/// Not through the cache: this serves a freshly spawned child, whose pidfd
/// is not worth a slot.
pub fn identity_of(pid: Pid) -> Result<Option<Identity>, InfoError> {
    Ok(stat_and_identity(pid, false)?.map(|(_, id)| id))
}

/// Running, and still the process `identity` was taken from.
pub fn is_running_as(pid: Pid, identity: &str) -> Result<bool, InfoError> {
    let Some(wanted) = Identity::decode(identity) else {
        return Ok(false);
    };
    if wanted.boot != boot_id() {
        return Ok(false);
    }
    // With pidfs, the inode alone names the process for this boot: an alive
    // pidfd with the same inode is the same process, no /proc read needed.
    if let Some(wanted_ino) = wanted.inode {
        match pidfd_check(pid, true) {
            PidfdCheck::Alive(Some(ino)) => return Ok(ino == wanted_ino),
            PidfdCheck::NotRunning => return Ok(false),
            PidfdCheck::Alive(None) | PidfdCheck::Unavailable => {}
        }
    }
    match stat_and_identity(pid, true)? {
        Some((st, current)) => Ok(st.state.is_running() && current.same_process(&wanted)),
        None => Ok(false),
    }
}

/// The stat line of `pid`, read afresh (not through the cache). `None`: no
/// such entry in /proc. The caller decides whose it is: a pid can change
/// hands between any two reads.
pub fn stat_of(pid: Pid) -> io::Result<Option<Stat>> {
    let mut buf = [0u8; STAT_BUF];
    let n = match File::open(format!("/proc/{}/stat", pid.as_raw()))
        .and_then(|mut f| f.read(&mut buf))
    {
        Ok(n) => n,
        Err(e) if is_gone(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    parse_stat(&buf[..n]).map(Some)
}

/// The boot id as identities carry it.
pub fn current_boot() -> &'static str {
    boot_id()
}
