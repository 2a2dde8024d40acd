//! The pidfds liveness keeps (Linux): a small cache of other processes'
//! pidfds, so a supervisor or a lock polling the same pid pays one `pread`.
//! Liveness, info and identity read `/proc/<pid>/stat`, whose fd is kept in
//! the same slot, beside the pidfd of the same process: such an fd stays
//! bound to the process it was opened for, and once that process is gone
//! reading it fails with ESRCH even if the pid has been reused, so a stale fd
//! can never show a newcomer's state.
//!
//! The cache does not keep the fds of a process that is gone: a slot whose
//! pidfd reports an exit is dropped when it is next looked at, a miss first
//! drops all such slots (one `poll` over the cached pidfds, at most every
//! 100 ms), and the exit watch drops the slot of a child it reaps
//! ([`forget`]) at once. Without a pidfd (kernel < 5.3, EMFILE, a thread id)
//! nothing is cached. Every fd leaves the cache to be closed outside its
//! lock.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::procfs::{leader_runs, read_stat, STAT_BUF};
use crate::pid::Pid;
use crate::sys;

/// Slots in the cache (least recently used out first). Bounded so the addon
/// never holds more than this many pidfds; Node raises its own fd limit to
/// the hard limit at start-up.
const CACHE_SLOTS: usize = 64;

/// Slots that keep a stat fd beside their pidfd, at most: the most recently
/// used ones. Liveness keeps one for every process it checks, and the waits
/// beyond their budget (half the fd table) check theirs every few ms: a
/// stat fd in every slot would leave a small table (`ulimit -n 256`) no fd
/// for the application. A process checked again and again stays among them.
pub(super) const STAT_SLOTS: usize = 16;

/// A cached process. The pidfd refers to one process for its whole life:
/// while `poll` says it has not exited, that process is alive and still
/// holds the pid, so a repeated check is one `poll` (no /proc read). Once it
/// reports an exit, the pid may be someone else's: the slot is dropped and
/// the pid looked up afresh.
struct Slot {
    pid: i32,
    pidfd: OwnedFd,
    /// pidfs inode (see [`super::Identity`]), read on the first identity check.
    inode: Option<Option<u64>>,
    /// A `/proc/<pid>` file of the same process, opened while the pidfd said
    /// "alive" before and after: its stat (on the first info read), or its
    /// statm once liveness alone has asked twice in a row (see [`Kept`]).
    stat: Option<Kept>,
    /// Whether the slot's last use was a repeated liveness check.
    checked: bool,
}

/// The one file a slot keeps open (one, so the cache's fds stay bounded).
enum Kept {
    /// `/proc/<pid>/stat`: state and flags, and what an info read wants.
    Stat(OwnedFd),
    /// `/proc/<pid>/statm`: the size of the leader's memory map, and
    /// nothing else, so the kernel formats seven numbers rather than
    /// fifty-two (1.6 µs a `pread` here against 4; `kill(0)` 0.8). A size
    /// above 0 means the leader still has its map: it has not reached
    /// `exit_mm` in `do_exit`, a few steps after `PF_EXITING` is set with
    /// nothing between that can sleep, so it runs exactly as the stat
    /// line's state and flags would say, but for those microseconds. 0: a
    /// zombie, a leader past `exit_mm` (its other threads may run on: the
    /// caller looks at them) or a kernel thread; the caller judges afresh.
    Statm(OwnedFd),
}

static CACHE: Mutex<Vec<Slot>> = Mutex::new(Vec::new());

/// When the cache was last swept of exited processes (CLOCK_BOOTTIME ns).
static SWEPT_AT: AtomicU64 = AtomicU64::new(0);
const SWEEP_EVERY_NS: u64 = 100_000_000;

fn cache() -> MutexGuard<'static, Vec<Slot>> {
    CACHE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Drops the cached fds of `pid`: its process (our child) has just been
/// reaped, and nothing should keep an fd of it.
pub fn forget(pid: Pid) {
    // Usually one slot; two only if two threads cached the pid at once.
    let mut gone = Vec::new();
    {
        let mut cache = cache();
        while let Some(idx) = cache.iter().position(|s| s.pid == pid.as_raw()) {
            gone.push(cache.remove(idx));
        }
    }
    // Closed outside the lock.
    drop(gone);
}

pub(super) enum PidfdCheck {
    /// Alive, with its pidfs inode when the kernel has pidfs.
    Alive(Option<u64>),
    /// No such process, or it has exited (a zombie).
    NotRunning,
    /// No pidfd could be had (kernel < 5.3, a thread id, EMFILE): ask /proc.
    Unavailable,
}

/// `want_inode`: also report the pidfs inode (an fstat, done once per slot).
pub(super) fn pidfd_check(pid: Pid, want_inode: bool) -> PidfdCheck {
    let stale = {
        let mut cache = cache();
        match cache.iter().position(|s| s.pid == pid.as_raw()) {
            Some(idx) => match sys::is_readable_now(cache[idx].pidfd.as_fd()) {
                Ok(false) => {
                    // Least recently used first: a hit moves to the back.
                    let mut slot = cache.remove(idx);
                    let inode = if want_inode {
                        *slot
                            .inode
                            .get_or_insert_with(|| sys::pidfs_inode(slot.pidfd.as_fd()))
                    } else {
                        None
                    };
                    cache.push(slot);
                    return PidfdCheck::Alive(inode);
                }
                _ => Some(cache.remove(idx)),
            },
            None => None,
        }
    };
    drop(stale);
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
    let inode = want_inode.then(|| sys::pidfs_inode(fd.as_fd()));
    let (dead, evicted) = {
        let mut cache = cache();
        // A miss is when the cache grows: first let go of every process
        // that has exited since it was cached (at most every SWEEP_EVERY:
        // a poll over all slots would double the cost of a miss).
        let now = sys::boottime_ns();
        let due = now.saturating_sub(SWEPT_AT.load(Ordering::Relaxed)) >= SWEEP_EVERY_NS;
        let dead = if due {
            SWEPT_AT.store(now, Ordering::Relaxed);
            sweep(&mut cache)
        } else {
            Vec::new()
        };
        let evicted = (cache.len() >= CACHE_SLOTS).then(|| cache.remove(0));
        cache.push(Slot {
            pid: pid.as_raw(),
            pidfd: fd,
            inode,
            stat: None,
            checked: false,
        });
        (dead, evicted)
    };
    // Closed outside the lock.
    drop((dead, evicted));
    PidfdCheck::Alive(inode.flatten())
}

/// Removes the slots whose process has exited; returns them to be dropped
/// outside the lock. One `poll` over all cached pidfds.
fn sweep(cache: &mut Vec<Slot>) -> Vec<Slot> {
    if cache.is_empty() {
        return Vec::new();
    }
    let dead = {
        let fds: Vec<BorrowedFd<'_>> = cache.iter().map(|s| s.pidfd.as_fd()).collect();
        match sys::readable_now_each(&fds) {
            Ok(dead) => dead,
            Err(_) => return Vec::new(),
        }
    };
    let mut out = Vec::new();
    for idx in (0..cache.len()).rev() {
        if dead[idx] {
            out.push(cache.remove(idx));
        }
    }
    out
}

/// The repeated check: whether the file `pid`'s slot keeps shows its
/// process's leader running. One `pread` and no `poll`: a kept fd reads
/// only the process it was opened for, and fails with ESRCH once that is
/// reaped, so a leader shown running is of a live process that holds the
/// pid now, the slot's pidfd's own (see [`read_stat_cached`]). The second
/// check in a row through a stat fd swaps it for a statm fd, the cheaper
/// read (see [`Kept::Statm`]). With `want_inode`, its pidfs inode too (an
/// fstat, once per slot). `None`: no slot or no kept fd, the process
/// reaped, or its leader ended or ending; the caller judges afresh.
pub(super) fn kept_stat_runs(pid: Pid, want_inode: bool) -> Option<Option<u64>> {
    let (inode, upgrade) = {
        let mut cache = cache();
        let idx = cache.iter().position(|s| s.pid == pid.as_raw())?;
        let slot = &mut cache[idx];
        let kept = slot.stat.as_ref()?;
        let runs = match kept {
            Kept::Statm(fd) => {
                let mut buf = [0u8; 32];
                let n = sys::pread0(fd.as_fd(), &mut buf).ok()?;
                has_memory_map(&buf[..n])
            }
            Kept::Stat(fd) => {
                let mut buf = [0u8; STAT_BUF];
                let n = sys::pread0(fd.as_fd(), &mut buf).ok()?;
                leader_runs(&buf[..n.min(STAT_BUF)])
            }
        };
        if !runs {
            slot.checked = false;
            return None;
        }
        let upgrade = slot.checked && matches!(kept, Kept::Stat(_));
        slot.checked = true;
        let inode = if want_inode {
            *slot
                .inode
                .get_or_insert_with(|| sys::pidfs_inode(slot.pidfd.as_fd()))
        } else {
            None
        };
        // Least recently used first: a hit moves to the back.
        if idx + 1 != cache.len() {
            let slot = cache.remove(idx);
            cache.push(slot);
        }
        (inode, upgrade)
    };
    if upgrade {
        keep_statm(pid);
    }
    Some(inode)
}

/// Whether a statm line's first number (the map's size in pages) is above 0.
fn has_memory_map(line: &[u8]) -> bool {
    matches!(line.first(), Some(b'1'..=b'9'))
}

/// Swaps the stat fd of `pid`'s slot for a statm fd of the same process:
/// opened outside the cache's lock, kept only if the slot still holds its
/// stat fd and its pidfd still says "alive" (so the file is of that
/// process, not of one that took the pid meanwhile). Any failure leaves
/// the stat fd in place.
fn keep_statm(pid: Pid) {
    let Ok(file) = std::fs::File::open(format!("/proc/{}/statm", pid.as_raw())) else {
        return;
    };
    let spare = {
        let mut cache = cache();
        match cache.iter_mut().find(|s| s.pid == pid.as_raw()) {
            Some(slot)
                if matches!(slot.stat, Some(Kept::Stat(_)))
                    && matches!(sys::is_readable_now(slot.pidfd.as_fd()), Ok(false)) =>
            {
                slot.stat.replace(Kept::Statm(OwnedFd::from(file)))
            }
            _ => Some(Kept::Statm(OwnedFd::from(file))),
        }
    };
    // Closed outside the lock.
    drop(spare);
}

/// Reads the stat line through the stat fd of `pid`'s cache slot, opening
/// and keeping one there if it has none. A stat fd kept for a process that
/// has since gone (the slot was replaced in between) reads ESRCH, never a
/// newcomer's line; it is dropped and the line read afresh. A fresh fd is
/// kept only if the slot's pidfd still says "alive" after it was opened: a
/// live process holds its pid, so the fd is of that process, never of one
/// that took the pid between the pidfd's last answer and the open.
pub(super) fn read_stat_cached(pid: Pid, buf: &mut [u8; STAT_BUF]) -> io::Result<Option<usize>> {
    let stale = {
        let mut cache = cache();
        let slot = cache.iter_mut().find(|s| s.pid == pid.as_raw());
        match slot {
            Some(slot) => {
                slot.checked = false;
                match slot.stat.take() {
                    Some(Kept::Stat(fd)) => match sys::pread0(fd.as_fd(), buf) {
                        Ok(n) if n > 0 => {
                            slot.stat = Some(Kept::Stat(fd));
                            return Ok(Some(n));
                        }
                        _ => Some(Kept::Stat(fd)),
                    },
                    // A statm fd reads no stat line: replaced below by a
                    // stat fd, for the info reads that want one.
                    other => other,
                }
            }
            None => None,
        }
    };
    drop(stale);
    let Some((n, file)) = read_stat(pid, buf)? else {
        return Ok(None);
    };
    let spare = {
        let mut cache = cache();
        match cache.iter().position(|s| s.pid == pid.as_raw()) {
            Some(idx)
                if cache[idx].stat.is_none()
                    && matches!(sys::is_readable_now(cache[idx].pidfd.as_fd()), Ok(false)) =>
            {
                cache[idx].stat = Some(Kept::Stat(OwnedFd::from(file)));
                // Over the bound: the least recently used slot's goes.
                let kept = cache.iter().filter(|s| s.stat.is_some()).count();
                let lru = cache.iter_mut().find(|s| s.stat.is_some());
                (kept > STAT_SLOTS)
                    .then(|| lru.and_then(|s| s.stat.take()))
                    .flatten()
            }
            _ => Some(Kept::Stat(OwnedFd::from(file))),
        }
    };
    // Closed outside the lock.
    drop(spare);
    Ok(Some(n))
}

/// Whether `pid` has a slot.
#[cfg(test)]
pub(super) fn holds(pid: Pid) -> bool {
    cache().iter().any(|s| s.pid == pid.as_raw())
}

/// How many slots keep a stat fd.
#[cfg(test)]
pub(super) fn kept_stats() -> usize {
    cache().iter().filter(|s| s.stat.is_some()).count()
}

/// Which file `pid`'s slot keeps: "stat", "statm", or none.
#[cfg(test)]
pub(super) fn kept_kind(pid: Pid) -> Option<&'static str> {
    cache()
        .iter()
        .find(|s| s.pid == pid.as_raw())
        .and_then(|s| s.stat.as_ref())
        .map(|k| match k {
            Kept::Stat(_) => "stat",
            Kept::Statm(_) => "statm",
        })
}

/// Makes the next miss sweep, however recent the last sweep.
#[cfg(test)]
pub(super) fn sweep_on_next_miss() {
    SWEPT_AT.store(0, Ordering::Relaxed);
}
