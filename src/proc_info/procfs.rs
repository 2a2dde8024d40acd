//! Linux: what `/proc` says of a process: its stat line, read fresh, and,
//! once its main thread has ended, whether another thread runs on
//! ([`thread_state`]). The pidfd cache and identity are `linux.rs`'s.

use std::fs::File;
use std::io::{self, Read};

use super::stat::{self, Stat};
use super::ProcState;
use crate::pid::Pid;
use crate::sys;

/// Enough for any stat line (about 300 bytes; the name is at most 15 bytes).
pub const STAT_BUF: usize = 1024;

pub fn is_gone(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH))
}

/// Reads the stat line of `pid` through a fresh fd, closed again at once.
/// `Ok(None)`: no such entry in /proc (no process, or hidden).
pub fn read_stat(pid: Pid, buf: &mut [u8; STAT_BUF]) -> io::Result<Option<(usize, File)>> {
    let mut file = match File::open(format!("/proc/{}/stat", pid.as_raw())) {
        Ok(f) => f,
        Err(e) if is_gone(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    match file.read(buf) {
        Ok(n) => Ok(Some((n, file))),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `PF_EXITING` (include/linux/sched.h): set in `do_exit` by `exit_signals`,
/// before `exit_files` closes the task's descriptors.
const PF_EXITING: u64 = 0x4;
/// `PF_IO_WORKER`: an io_uring worker (libuv's io_uring, Node's fs calls)
/// listed among the process's threads. It runs the kernel's errands for
/// the process, never its code, and goes with it: it keeps nothing running.
const PF_IO_WORKER: u64 = 0x10;

/// Passes over a process's threads before "none runs" is given up on
/// being proved and believed anyway (a process whose threads all exit
/// settles in one or two).
const THREAD_PASSES: usize = 32;
/// After this many passes, and this long, the passes stop early: a call
/// must not hold the JS thread while a big process's exiting threads are
/// released one by one (a tracer holding them makes that hundreds of ms).
const THREAD_PASSES_TIMED: usize = 4;
const THREAD_BUDGET_NS: u64 = 5_000_000;

/// The state of the process whose leader's stat is `leader`, judged by its
/// threads. The leader's own line is the answer unless the leader has
/// exited or is exiting; then a thread that is neither keeps the process
/// running (a main thread may end on its own while the others work on), and
/// its state is the process's. With none left: `Zombie` if the leader is one
/// and no other thread is listed (the caller's pidfd decides whether the
/// process has exited), `Exiting` otherwise: every thread is on its way out.
///
/// A listing of `/proc/<pid>/task` is no snapshot of a process whose
/// threads come and go: a thread may start the next and end between the
/// listing and the read of its line; the listing ends early, or skips a
/// thread, when one it is passing is released; and a thread that calls
/// `execve` takes the leader's id as the old leader is released. So a
/// listing counts as complete only if every thread in it is still there
/// after the leader's thread count is read, and that count is no more
/// than it lists. "None runs" is believed when a listing whose threads
/// were all on their way out is followed by a complete one that holds
/// none but them, and the leader's line, read between, has still ended
/// (else a thread that exec'd leads it now): at that count, every thread
/// was on its way out. A thread in the second listing but not in a
/// complete first one was started meanwhile, by one that ran: running.
/// Else it passes again, up to [`THREAD_PASSES`] times or
/// [`THREAD_BUDGET_NS`]. A thread seen on its way out stays so: a later
/// pass asks only whether it is still there (`tgkill` with no signal, no
/// fd), and reads the lines of new ones alone. An error other
/// than a vanished entry (EMFILE, ENOMEM) is returned: it tells nothing of
/// the process. The process reaped meanwhile: what the leader's last line
/// says of it, exiting or a zombie.
pub fn thread_state(pid: Pid, leader: &Stat) -> io::Result<ProcState> {
    if !leader_ended(leader) {
        return Ok(leader.state);
    }
    let mut leader = leader.clone();
    let mut others = false;
    let mut before: Option<Listing> = None;
    // Sorted: threads seen on their way out (that never clears) or
    // io_uring workers; neither is read again.
    let mut exiting = Vec::new();
    let start = sys::boottime_ns();
    for pass in 0..THREAD_PASSES {
        if pass >= THREAD_PASSES_TIMED
            && sys::boottime_ns().saturating_sub(start) > THREAD_BUDGET_NS
        {
            break;
        }
        // None: `/proc/<pid>/task` is gone (reaped, or leaders being swapped).
        let read = match list_threads(pid)? {
            Some(tids) => match read_threads(pid, &tids, &mut exiting)? {
                // The usual answer, for a live process: no count needed.
                Threads::Running(state) => return Ok(state),
                Threads::Exiting { all_there } => Some((tids, all_there)),
            },
            None => None,
        };
        let mut buf = [0u8; STAT_BUF];
        let Some((n, _)) = read_stat(pid, &mut buf)? else {
            break; // reaped meanwhile
        };
        let now = parse_stat(&buf[..n])?;
        if now.start_time != leader.start_time {
            break; // reaped, and the pid is another's now
        }
        if !leader_ended(&now) {
            return Ok(now.state); // a thread that exec'd leads it now
        }
        // Complete: each thread still there after the count (asked again
        // now: each is one seen on its way out), and the count no more.
        let listing = read.map(|(tids, all_there)| Listing {
            complete: all_there
                && tids.len() as u64 >= now.num_threads
                && tids
                    .iter()
                    .filter(|&&tid| tid != pid.as_raw())
                    .all(|&tid| thread_there(pid, tid)),
            tids,
        });
        if let Some(listing) = &listing {
            others = listing.tids.iter().any(|&tid| tid != pid.as_raw());
        }
        leader = now;
        if let (Some(first), Some(second)) = (&before, &listing) {
            let none_born = second
                .tids
                .iter()
                .all(|tid| first.tids.binary_search(tid).is_ok());
            if !none_born && first.complete {
                // Not in a complete first listing: started since, by a
                // thread that ran then (it has gone on since).
                return Ok(ProcState::Running);
            }
            if none_born && second.complete && leader.state != ProcState::Dead {
                break;
            }
        }
        before = listing;
    }
    Ok(if leader.state == ProcState::Zombie && !others {
        ProcState::Zombie
    } else {
        ProcState::Exiting
    })
}

/// A listing of a process's threads, each found on its way out.
struct Listing {
    /// Sorted.
    tids: Vec<i32>,
    /// Each was still there after the leader's count, which it reaches.
    complete: bool,
}

/// The leader has exited (a zombie) or is exiting.
fn leader_ended(leader: &Stat) -> bool {
    leader.flags & PF_EXITING != 0 || leader.state == ProcState::Zombie
}

/// The thread ids `/proc/<pid>/task` lists, sorted; `None` if it is gone.
fn list_threads(pid: Pid) -> io::Result<Option<Vec<i32>>> {
    let dir = match std::fs::read_dir(format!("/proc/{}/task", pid.as_raw())) {
        Ok(dir) => dir,
        Err(e) if is_gone(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut tids = Vec::new();
    for task in dir {
        let task = task?;
        if let Some(tid) = task.file_name().to_str().and_then(|name| name.parse().ok()) {
            tids.push(tid);
        }
    }
    tids.sort_unstable();
    Ok(Some(tids))
}

/// What the lines of a process's threads, its leader's aside, say.
enum Threads {
    /// One is neither exiting nor exited (nor an io_uring worker): its state.
    Running(ProcState),
    /// None is; `all_there`: each was still there when asked.
    Exiting { all_there: bool },
}

/// Reads the lines of `tids` not in `exiting` (sorted), and adds those on
/// their way out to it; of those already in it, asks only whether each is
/// still there (not yet released).
fn read_threads(pid: Pid, tids: &[i32], exiting: &mut Vec<i32>) -> io::Result<Threads> {
    let mut all_there = true;
    let mut seen = Vec::new();
    for &tid in tids.iter().filter(|&&tid| tid != pid.as_raw()) {
        if exiting.binary_search(&tid).is_ok() {
            all_there &= thread_there(pid, tid);
            continue;
        }
        let line = match std::fs::read(format!("/proc/{}/task/{tid}/stat", pid.as_raw())) {
            Ok(line) => line,
            Err(e) if is_gone(&e) => {
                all_there = false;
                continue;
            }
            Err(e) => return Err(e),
        };
        match parse_stat(&line) {
            Ok(st) if st.flags & (PF_EXITING | PF_IO_WORKER) == 0 && st.state.is_running() => {
                return Ok(Threads::Running(st.state));
            }
            Ok(_) => seen.push(tid),
            // Unreadable: not known to be on its way out; pass again.
            Err(_) => all_there = false,
        }
    }
    exiting.extend(seen);
    exiting.sort_unstable();
    Ok(Threads::Exiting { all_there })
}

/// Thread `tid` of `pid` has not been released: `tgkill` with no signal
/// finds it (EPERM: it is there, not ours to signal).
fn thread_there(pid: Pid, tid: i32) -> bool {
    let Ok(tid) = Pid::from_raw(tid) else {
        return false;
    };
    match sys::thread_probe(pid, tid) {
        Ok(()) => true,
        Err(e) => e.raw_os_error() == Some(libc::EPERM),
    }
}

pub fn parse_stat(buf: &[u8]) -> io::Result<Stat> {
    stat::parse(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.0))
}
