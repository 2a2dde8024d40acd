//! Linux: `/proc/<pid>/stat` for state and start time (read by
//! `procfs.rs`, which also judges a process by its threads), pidfs for the
//! exact identity.
//!
//! Liveness asks a pidfd (see [`is_running`]), kept with the stat fd of the
//! same process in a small cache (`pidfd_cache`), so a supervisor or a lock
//! polling the same pid pays one `poll`.
//!
//! Thread ids share the pid space, and `/proc/<tid>` answers for a thread
//! that is not its process's leader, but such a number names no process:
//! liveness says false and info says none (see [`thread_of`]).
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
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::OnceLock;

use super::pidfd_cache::{kept_stat_runs, pidfd_check, read_stat_cached, PidfdCheck};
use super::procfs::{is_gone, parse_stat, read_stat, thread_state, STAT_BUF};
use super::stat::Stat;
use super::{Identity, IdentitySeed, InfoError, ProcState, ProcessInfo, ThreadOf};
use crate::pid::Pid;
use crate::sys;

pub use super::pidfd_cache::forget;
pub use super::unsupported::identity_of_handle;

/// The call whose failure a liveness or info error names.
pub const INFO_CALL: &str = "read /proc";

/// Why a process that exists cannot be seen ([`InfoError::Hidden`]).
pub const HIDDEN_REASON: &str =
    "the process exists but /proc (hidepid) does not show it to this user";

/// This boot's id, read once. A failure to read it for want of an fd
/// (EMFILE) is not remembered: it would stamp every later identity with a
/// placeholder.
fn boot_id() -> io::Result<&'static str> {
    static BOOT: OnceLock<String> = OnceLock::new();
    if let Some(boot) = BOOT.get() {
        return Ok(boot);
    }
    let boot = match std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        Ok(s) => s.trim().replace('-', ""),
        // No such file (an odd /proc): a fixed stand-in, for good.
        Err(e) if e.kind() == io::ErrorKind::NotFound => "noboot".to_owned(),
        Err(e) => return Err(e),
    };
    Ok(BOOT.get_or_init(|| boot))
}

/// Is `pid` a process (a thread-group leader), as opposed to a thread id?
/// Only asked where no pidfd could be opened: a pidfd exists only for a
/// process, so one that opened settles it.
fn is_process(pid: Pid) -> bool {
    match sys::thread_probe(pid, pid) {
        Ok(()) => true,
        Err(e) => e.raw_os_error() == Some(libc::EPERM),
    }
}

/// Liveness for a pid that /proc does not show: absent, or hidden by hidepid.
fn is_running_unlisted(pid: Pid) -> io::Result<bool> {
    match sys::pidfd_open(pid) {
        Ok(fd) => Ok(!sys::is_readable_now(fd.as_fd())?),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
        // tgkill(pid, pid, 0) rather than kill(pid, 0): the same existence
        // and permission check, but false for a thread id.
        Err(_) => match sys::thread_probe(pid, pid) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
            Err(e) => Err(e),
        },
    }
}

/// Exists and has not begun to exit. Through a pidfd where possible: it is
/// not subject to hidepid. The stat read is for the moment a pidfd cannot
/// see: a process being killed closes its files (and drops its locks) in
/// `do_exit` before it is a zombie and before its pidfd reports an exit;
/// only `PF_EXITING` on every thread tells in between (see
/// [`thread_state`]). A repeated check of a process whose leader runs is one
/// `pread` of the stat fd its cache slot keeps ([`kept_stat_runs`]): that
/// line alone settles it, and the fd can describe no other process.
pub fn is_running(pid: Pid) -> io::Result<bool> {
    if kept_stat_runs(pid, false).is_some() {
        return Ok(true);
    }
    match pidfd_check(pid, false) {
        PidfdCheck::Alive(_) => Ok(!stopped_since_alive(pid)?),
        PidfdCheck::NotRunning => Ok(false),
        PidfdCheck::Unavailable => is_running_by_stat(pid),
    }
}

/// For a process its pidfd shows alive: has it stopped running since? It
/// has begun to exit on every thread, or its last thread ended between the
/// pidfd's answer and the stat read (the leader, long a zombie, is then
/// alone: a zombie, not running). The stat through the slot's kept fd, or
/// read afresh and kept there for the next check (the cache is bounded: at
/// most two fds a slot). Its line unreadable or unparsable: running, as the
/// pidfd said. Its leader ended and its threads unreadable: the error.
fn stopped_since_alive(pid: Pid) -> io::Result<bool> {
    let mut buf = [0u8; STAT_BUF];
    let n = match read_stat_cached(pid, &mut buf) {
        Ok(Some(n)) => n,
        // No line: hidden (hidepid), or the process was reaped since the
        // pidfd said alive; or no fd to read it (EMFILE). Its pidfd, asked
        // again, tells whether it has exited.
        _ => return Ok(matches!(pidfd_check(pid, false), PidfdCheck::NotRunning)),
    };
    let Ok(leader) = parse_stat(&buf[..n]) else {
        return Ok(false); // unparsable: running, as the pidfd said
    };
    // Its leader has ended, and its threads cannot be read (EMFILE): an
    // error. "Running" here could follow a "stopped" of a moment ago.
    Ok(!thread_state(pid, &leader)?.is_running())
}

fn is_running_by_stat(pid: Pid) -> io::Result<bool> {
    let mut buf = [0u8; STAT_BUF];
    match read_stat(pid, &mut buf)? {
        Some((n, _)) => Ok(match parse_stat(&buf[..n]) {
            // Threads that cannot be read (EMFILE) are an error, not an exit.
            Ok(st) => thread_state(pid, &st)?.is_running() && is_process(pid),
            Err(_) => false,
        }),
        None => is_running_unlisted(pid),
    }
}

/// Whether the process with this pid and start time has stopped running
/// since it was last seen running: it has begun to exit on every thread
/// (see [`thread_state`]: the moment its locks may be gone while it is
/// neither a zombie nor reported by a pidfd), is a zombie, or is gone (its
/// stat line is gone and its pidfd says so, or the pid now names another
/// process). The caller has just judged it running; a process can be
/// reaped, and its pid reused, between that and this read, and neither
/// may make it running again. False (still running) only when its line
/// shows it so, or when no line shows at all (hidden by hidepid) or its
/// threads cannot be read (EMFILE) but a pidfd calls the pid alive.
pub fn stopped_running(pid: Pid, start_time: u64) -> bool {
    let mut buf = [0u8; STAT_BUF];
    match read_stat(pid, &mut buf) {
        Ok(Some((n, _))) => match parse_stat(&buf[..n]) {
            Ok(st) if st.start_time == start_time => match thread_state(pid, &st) {
                Ok(state) => !state.is_running(),
                // Its threads unreadable (EMFILE): its pidfd tells, if one can be had.
                Err(_) => matches!(pidfd_check(pid, false), PidfdCheck::NotRunning),
            },
            // Another process holds the pid now: ours is gone.
            Ok(_) => true,
            Err(_) => false,
        },
        // No line: reaped since it was judged, or hidden; its pidfd tells which.
        Ok(None) => matches!(pidfd_check(pid, false), PidfdCheck::NotRunning),
        Err(_) => false,
    }
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
    let Some(n) = read_stat_cached(pid, &mut buf).map_err(InfoError::Io)? else {
        return Ok(None);
    };
    let mut st = parse_stat(&buf[..n]).map_err(InfoError::Io)?;
    st.state = thread_state(pid, &st).map_err(InfoError::Io)?;
    if st.state == ProcState::Zombie || !matches!(pidfd_check(pid, false), PidfdCheck::Alive(_)) {
        return Ok(None);
    }
    let identity = identity_from(st.start_time, Some(inode)).map_err(InfoError::Io)?;
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
        Some((n, _)) => n,
        None => {
            return if is_running_unlisted(pid).map_err(InfoError::Io)? {
                Err(InfoError::Hidden)
            } else {
                Ok(StatRead::Gone)
            };
        }
    };
    // An open pidfd proves a process; without one, the pid may be a thread
    // id, whose /proc entry describes a thread, not a process.
    if pidfd.is_none() && !is_process(pid) {
        return Ok(StatRead::Gone);
    }
    let mut st = parse_stat(&buf[..n]).map_err(InfoError::Io)?;
    let leader_state = st.state;
    st.state = thread_state(pid, &st).map_err(InfoError::Io)?;
    let inode = match pidfd {
        Some(fd) => {
            let exited = sys::is_readable_now(fd.as_fd()).unwrap_or(false);
            if exited && leader_state.is_running() {
                return Ok(StatRead::Reused);
            }
            // A zombie leader alone, yet the pidfd (read after the stat) says
            // the process has not exited: its last threads are going.
            if !exited && st.state == ProcState::Zombie {
                st.state = ProcState::Exiting;
            }
            pidfd_inode(fd.as_fd())
        }
        None => None,
    };
    let identity = identity_from(st.start_time, inode).map_err(InfoError::Io)?;
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

/// The pidfd's inode, only where it identifies the process: on pidfs (6.9+).
/// Before that every pidfd is an anon inode and they all share one number.
pub fn pidfd_inode(fd: impl AsFd) -> Option<u64> {
    sys::pidfs_inode(fd.as_fd())
}

/// The clock tick `/proc/<pid>/stat` shows as the start time of a process
/// created between two `CLOCK_BOOTTIME` readings, when both fall in the same
/// tick; `None` when they straddle a tick boundary. The kernel stamps a new
/// process (`start_boottime`, in copy_process) from the same clock, inside
/// the clone call, and shows it divided down to USER_HZ ticks, so readings
/// taken before and after the spawn pin the tick without reading /proc.
pub fn start_tick_between(before_ns: u64, after_ns: u64) -> Option<u64> {
    static NS_PER_TICK: OnceLock<Option<u64>> = OnceLock::new();
    let per_tick = (*NS_PER_TICK.get_or_init(|| ns_per_tick(sys::clock_ticks_per_sec())))?;
    tick_between(before_ns, after_ns, per_tick)
}

/// Nanoseconds per USER_HZ tick, where the kernel converts by plain
/// division (it does whenever USER_HZ divides 10^9, as 100 does).
fn ns_per_tick(hz: u64) -> Option<u64> {
    (hz > 0 && 1_000_000_000 % hz == 0).then(|| 1_000_000_000 / hz)
}

fn tick_between(before_ns: u64, after_ns: u64, per_tick: u64) -> Option<u64> {
    let (a, b) = (before_ns / per_tick, after_ns / per_tick);
    (a == b && before_ns <= after_ns).then_some(a)
}

/// The identity of our own child, completing what `seed` lacks. The caller
/// holds the child unreaped (a zombie counts), so the pid is still that
/// child's: no reuse check is needed, and a child that has already exited
/// gets its own identity too. `pidfd`: a pidfd of the child, if one is at
/// hand (for the pidfs inode); otherwise one is opened for a moment.
pub fn child_identity(
    pid: Pid,
    seed: &IdentitySeed,
    pidfd: Option<BorrowedFd<'_>>,
) -> Result<Identity, InfoError> {
    let start_time = match seed.start_time {
        Some(t) => t,
        None => {
            let mut buf = [0u8; STAT_BUF];
            match read_stat(pid, &mut buf).map_err(InfoError::Io)? {
                Some((n, _)) => parse_stat(&buf[..n]).map_err(InfoError::Io)?.start_time,
                // Our own unreaped child is absent only if /proc hides it
                // (hidepid, a child running as another user).
                None => return Err(InfoError::Hidden),
            }
        }
    };
    let inode = match (seed.inode, pidfd) {
        (Some(inode), _) => inode,
        (None, Some(fd)) => pidfd_inode(fd),
        (None, None) => match sys::pidfd_open(pid) {
            Ok(fd) => pidfd_inode(fd.as_fd()),
            // No pidfds on this kernel, so no pidfs either.
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => None,
            Err(e) => return Err(InfoError::Io(e)),
        },
    };
    identity_from(start_time, inode).map_err(InfoError::Io)
}

/// Reads what identities need once per process (the boot id) ahead of
/// time, so that a later identity needs no spare fd for it. Best effort:
/// without an fd now, it is read on first use instead.
pub fn prepare_identity() {
    let _ = boot_id();
}

/// The identity of this boot's process that started at `start_time` (clock
/// ticks) with pidfs inode `inode`.
pub fn identity_from(start_time: u64, inode: Option<u64>) -> io::Result<Identity> {
    Ok(Identity {
        boot: boot_id()?.to_owned(),
        start_time,
        inode,
    })
}

/// Whether `pid` is a thread id rather than a process id. One `tgkill(…,
/// 0)` each: nothing is sent.
pub fn thread_of(pid: Pid) -> ThreadOf {
    if sys::thread_probe(Pid::current(), pid).is_ok() {
        return ThreadOf::Us;
    }
    // A task with this id exists (kill(pid, 0) succeeds for any thread id)
    // but leads no thread group.
    let exists = match sys::probe(pid) {
        Ok(()) => true,
        Err(e) => e.raw_os_error() == Some(libc::EPERM),
    };
    if exists && !is_process(pid) {
        ThreadOf::Other
    } else {
        ThreadOf::NotAThread
    }
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

/// Not through the cache.
pub fn identity_of(pid: Pid) -> Result<Option<Identity>, InfoError> {
    Ok(stat_and_identity(pid, false)?.map(|(_, id)| id))
}

/// Running, and still the process `identity` was taken from.
pub fn is_running_as(pid: Pid, identity: &str) -> Result<bool, InfoError> {
    let Some(wanted) = Identity::decode(identity) else {
        return Ok(false);
    };
    if wanted.boot != boot_id().map_err(InfoError::Io)? {
        return Ok(false);
    }
    // With pidfs, the inode alone names the process for this boot: an alive
    // pidfd with the same inode is the same process, no /proc read needed.
    if let Some(wanted_ino) = wanted.inode {
        if let Some(Some(ino)) = kept_stat_runs(pid, true) {
            return Ok(ino == wanted_ino);
        }
        match pidfd_check(pid, true) {
            PidfdCheck::Alive(Some(ino)) => {
                return Ok(ino == wanted_ino && !stopped_since_alive(pid).map_err(InfoError::Io)?);
            }
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
pub fn current_boot() -> io::Result<&'static str> {
    boot_id()
}

#[cfg(test)]
mod tests {
    use super::super::pidfd_cache;
    use super::*;
    use std::process::{Child, Command};

    fn sleeper() -> (Child, Pid) {
        let child = Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let pid = Pid::from_raw(child.id() as i32).expect("pid");
        (child, pid)
    }

    fn cached(pid: Pid) -> bool {
        pidfd_cache::holds(pid)
    }

    #[test]
    fn a_tick_is_pinned_only_when_both_readings_fall_in_it() {
        let t = 10_000_000;
        assert_eq!(tick_between(5 * t, 5 * t, t), Some(5));
        assert_eq!(tick_between(5 * t, 6 * t - 1, t), Some(5));
        assert_eq!(tick_between(6 * t - 1, 6 * t, t), None);
        assert_eq!(tick_between(6 * t, 5 * t, t), None);
        assert_eq!(ns_per_tick(100), Some(10_000_000));
        assert_eq!(ns_per_tick(1000), Some(1_000_000));
        // The kernel converts otherwise for these; no guess is made.
        assert_eq!(ns_per_tick(1024), None);
        assert_eq!(ns_per_tick(0), None);
    }

    #[test]
    fn the_pinned_tick_is_the_start_time_proc_shows() {
        let mut pinned = 0;
        for _ in 0..40 {
            let before = sys::boottime_ns();
            let (mut child, pid) = sleeper();
            let tick = start_tick_between(before, sys::boottime_ns());
            let shown = child_identity(pid, &IdentitySeed::default(), None)
                .expect("identity")
                .start_time;
            if let Some(tick) = tick {
                assert_eq!(tick, shown);
                pinned += 1;
            }
            child.kill().ok();
            child.wait().ok();
        }
        assert!(pinned > 0, "no spawn fell within one tick");
    }

    #[test]
    fn a_child_identity_matches_process_info_and_a_zombie_keeps_it() {
        let (mut child, pid) = sleeper();
        let info = process_info(pid).expect("info").expect("present").identity;
        let seed = IdentitySeed::default();
        assert_eq!(child_identity(pid, &seed, None).expect("identity"), info);
        child.kill().ok();
        // A zombie, not yet reaped: its identity is still its own.
        let pidfd = sys::pidfd_open(pid).expect("pidfd");
        while !sys::is_readable_now(pidfd.as_fd()).expect("poll") {}
        assert_eq!(child_identity(pid, &seed, None).expect("identity"), info);
        child.wait().ok();
    }

    #[test]
    fn stopped_running_holds_for_a_zombie_a_reaped_process_and_a_reused_pid() {
        let me = process_info(Pid::current())
            .expect("info")
            .expect("present");
        let start = me.identity.start_time;
        assert!(!stopped_running(Pid::current(), start));
        // Another start time on this pid: the process it names is gone.
        assert!(stopped_running(Pid::current(), start + 1));
        let (mut child, pid) = sleeper();
        let start = child_identity(pid, &IdentitySeed::default(), None)
            .expect("identity")
            .start_time;
        assert!(!stopped_running(pid, start));
        child.kill().ok();
        let pidfd = sys::pidfd_open(pid).expect("pidfd");
        while !sys::is_readable_now(pidfd.as_fd()).expect("poll") {}
        // A zombie, not yet reaped.
        assert!(stopped_running(pid, start));
        child.wait().ok();
        // Reaped: no line, and its pidfd says so.
        assert!(stopped_running(pid, start));
    }

    #[test]
    fn thread_ids_are_ours_or_no_process() {
        assert_eq!(thread_of(Pid::current()), ThreadOf::Us);
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid takes no arguments and cannot fail.
            tx.send(unsafe { libc::gettid() }).ok();
            stop_rx.recv().ok();
        });
        let tid = Pid::from_raw(rx.recv().expect("tid")).expect("pid");
        assert_eq!(thread_of(tid), ThreadOf::Us);
        assert!(!is_running(tid).expect("liveness"));
        assert!(process_info(tid).expect("info").is_none());
        assert!(!is_running_by_stat(tid).expect("liveness"));
        stop_tx.send(()).ok();
        t.join().ok();
        let (mut child, pid) = sleeper();
        assert_eq!(thread_of(pid), ThreadOf::NotAThread);
        child.kill().ok();
        child.wait().ok();
    }

    /// The repeated check is a `pread` of the stat fd the first one kept;
    /// that fd reads ESRCH once its process is reaped (so it can never show
    /// a process that takes the pid after), and a zombie's line is judged
    /// in full: not running.
    #[test]
    fn a_repeated_check_reads_the_kept_stat_fd_which_never_outlives_its_process() {
        let (mut child, pid) = sleeper();
        assert!(pidfd_cache::kept_stat_runs(pid, false).is_none());
        assert!(is_running(pid).expect("liveness"));
        assert_eq!(pidfd_cache::kept_stat_runs(pid, false), Some(None));
        assert!(is_running(pid).expect("liveness"));
        let stat = File::open(format!("/proc/{}/stat", pid.as_raw())).expect("stat");
        child.kill().ok();
        let pidfd = sys::pidfd_open(pid).expect("pidfd");
        while !sys::is_readable_now(pidfd.as_fd()).expect("poll") {}
        assert!(pidfd_cache::kept_stat_runs(pid, false).is_none());
        assert!(!is_running(pid).expect("liveness"));
        child.wait().ok();
        let mut buf = [0u8; STAT_BUF];
        let err = sys::pread0(stat.as_fd(), &mut buf).expect_err("a reaped process's line");
        assert_eq!(err.raw_os_error(), Some(libc::ESRCH));
        assert!(!is_running(pid).expect("liveness"));
        assert!(pidfd_cache::kept_stat_runs(pid, false).is_none());
    }

    /// Three checks in a row swap the kept stat fd for a statm fd (the
    /// cheaper read); an info read swaps it back. Killed, the zombie's
    /// statm shows no memory map: the check judges afresh, not running;
    /// reaped, the statm fd reads ESRCH like the stat fd.
    #[test]
    fn a_run_of_checks_reads_statm_which_a_zombie_empties() {
        let (mut child, pid) = sleeper();
        for _ in 0..4 {
            assert!(is_running(pid).expect("liveness"));
        }
        assert_eq!(pidfd_cache::kept_kind(pid), Some("statm"));
        assert!(process_info(pid).expect("info").is_some());
        assert_eq!(pidfd_cache::kept_kind(pid), Some("stat"));
        for _ in 0..3 {
            assert!(is_running(pid).expect("liveness"));
        }
        assert_eq!(pidfd_cache::kept_kind(pid), Some("statm"));
        let statm = File::open(format!("/proc/{}/statm", pid.as_raw())).expect("statm");
        child.kill().ok();
        let pidfd = sys::pidfd_open(pid).expect("pidfd");
        while !sys::is_readable_now(pidfd.as_fd()).expect("poll") {}
        let mut buf = [0u8; 64];
        let n = sys::pread0(statm.as_fd(), &mut buf).expect("a zombie's statm");
        assert!(buf[..n].starts_with(b"0 "), "{:?}", &buf[..n]);
        assert!(pidfd_cache::kept_stat_runs(pid, false).is_none());
        assert!(!is_running(pid).expect("liveness"));
        child.wait().ok();
        let err = sys::pread0(statm.as_fd(), &mut buf).expect_err("a reaped process's statm");
        assert_eq!(err.raw_os_error(), Some(libc::ESRCH));
        assert!(!is_running(pid).expect("liveness"));
    }

    /// A kernel thread has no memory map of its own: its statm is all 0,
    /// and the check through it judges afresh (running).
    #[test]
    fn a_kernel_thread_runs_though_its_statm_is_empty() {
        let kthreadd = Pid::from_raw(2).expect("pid");
        let Ok(line) = std::fs::read_to_string("/proc/2/statm") else {
            return; // another pid namespace: no kthreadd to see
        };
        if !std::fs::read_to_string("/proc/2/stat").is_ok_and(|s| s.contains("(kthreadd)")) {
            return;
        }
        assert!(line.starts_with("0 "), "{line}");
        for _ in 0..5 {
            assert!(is_running(kthreadd).expect("liveness"));
        }
    }

    /// However many processes are checked, a bounded few slots keep a stat
    /// fd (the waits beyond their budget poll liveness in a small fd table),
    /// and those are the most recently checked.
    #[test]
    fn few_slots_keep_a_stat_fd_the_latest_checked() {
        let sleepers: Vec<(Child, Pid)> = (0..24).map(|_| sleeper()).collect();
        for (_, pid) in &sleepers {
            assert!(is_running(*pid).expect("liveness"));
        }
        // Other tests' checks share the cache: the bound holds for all.
        assert!(pidfd_cache::kept_stats() <= pidfd_cache::STAT_SLOTS);
        let (_, last) = sleepers.last().expect("one");
        assert!(pidfd_cache::kept_stat_runs(*last, false).is_some());
        for (mut child, _) in sleepers {
            child.kill().ok();
            child.wait().ok();
        }
    }

    /// Reaped behind the cache's back while its stat fd is kept: the kept
    /// fd reads ESRCH and the check starts afresh.
    #[test]
    fn a_kept_stat_fd_of_a_reaped_process_is_no_answer() {
        let (mut child, pid) = sleeper();
        assert!(is_running(pid).expect("liveness"));
        assert!(is_running(pid).expect("liveness"));
        assert!(cached(pid));
        child.kill().ok();
        child.wait().ok();
        assert!(pidfd_cache::kept_stat_runs(pid, false).is_none());
        assert!(!is_running(pid).expect("liveness"));
        assert!(!cached(pid));
    }

    #[test]
    fn the_cache_lets_go_of_processes_that_are_gone() {
        let (mut a, pid_a) = sleeper();
        let (b, pid_b) = sleeper();
        assert!(process_info(pid_a).expect("info").is_some());
        assert!(is_running(pid_b).expect("liveness"));
        assert!(cached(pid_a) && cached(pid_b));
        // Reaped behind the cache's back: the next miss sweeps it out
        // (once a sweep is due).
        a.kill().ok();
        a.wait().ok();
        pidfd_cache::sweep_on_next_miss();
        let (c, pid_c) = sleeper();
        assert!(is_running(pid_c).expect("liveness"));
        assert!(!cached(pid_a));
        // A reap that the exit watch reports drops the slot at once.
        forget(pid_b);
        assert!(!cached(pid_b));
        for mut child in [b, c] {
            child.kill().ok();
            child.wait().ok();
        }
    }
}
