//! Linux: what `/proc` says of a process: its stat line, read fresh, and,
//! once its main thread has ended, whether another thread runs on
//! ([`thread_state`]). The pidfd cache and identity are `linux.rs`'s.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;

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
/// The bytes of `/proc/<pid>/task` the first look reads: `.`, `..` and a
/// dozen or so threads (a record of a thread id is 24 to 32 bytes).
const FIRST_LOOK_BUF: usize = 512;

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
///
/// Before any pass, a first look at the few threads listed first
/// ([`first_threads`]): one of them running proves the process runs, as in
/// a pass, whatever the number of its threads. A full listing costs the
/// kernel an entry for every thread (measured here: 0.2 ms a check at 350
/// threads, 0.6 ms at 1250), and is left to a process none of whose first
/// threads runs: one on its way out, mostly.
pub fn thread_state(pid: Pid, leader: &Stat) -> io::Result<ProcState> {
    if !leader_ended(leader) {
        return Ok(leader.state);
    }
    // The usual answer for a live process, from its first threads alone.
    // None of them running proves nothing of the rest: the full passes.
    if let Some(tids) = first_threads(pid)? {
        if let Threads::Running(state) = read_threads(pid, &tids, &mut Vec::new())? {
            return Ok(state);
        }
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

/// Whether the stat line `line` of a process shows its leader running: not
/// exiting, not exited. Then [`thread_state`] is the leader's own and the
/// process runs, whatever its other threads do: the repeated liveness check
/// needs no more than this. False for anything else (and for a line that
/// does not parse): the full judgement decides.
pub fn leader_runs(line: &[u8]) -> bool {
    match stat::parse_state_flags(line) {
        Ok((state, flags)) => flags & PF_EXITING == 0 && state.is_running(),
        Err(_) => false,
    }
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

/// The first thread ids `/proc/<pid>/task` lists (its leader first, then
/// its threads from the oldest on): one `getdents64` of [`FIRST_LOOK_BUF`]
/// bytes. `None` if it is gone. The directory is closed before the lines
/// are read, so a check needs one free fd at a time, as with a full listing.
fn first_threads(pid: Pid) -> io::Result<Option<Vec<i32>>> {
    let dir = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY) // O_CLOEXEC: std sets it always
        .open(format!("/proc/{}/task", pid.as_raw()))
    {
        Ok(dir) => dir,
        Err(e) if is_gone(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut buf = [0u8; FIRST_LOOK_BUF];
    match sys::getdents64(dir.as_fd(), &mut buf) {
        Ok(n) => Ok(Some(dirent_ids(&buf[..n.min(buf.len())]))),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The numeric names, in order, of the `linux_dirent64` records in `buf`
/// (`d_ino` u64, `d_off` i64, `d_reclen` u16, `d_type` u8, then the name,
/// NUL-terminated, padded to `d_reclen`). `.`, `..` and any other name
/// that is no number are left out; a record that overruns `buf` ends it.
fn dirent_ids(buf: &[u8]) -> Vec<i32> {
    const NAME: usize = 19;
    let mut ids = Vec::new();
    let mut rest = buf;
    while rest.len() > NAME {
        let reclen = usize::from(u16::from_ne_bytes([rest[16], rest[17]]));
        if reclen <= NAME || reclen > rest.len() {
            break;
        }
        let name = &rest[NAME..reclen];
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        if let Some(id) = std::str::from_utf8(name).ok().and_then(|s| s.parse().ok()) {
            ids.push(id);
        }
        rest = &rest[reclen..];
    }
    ids
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One `linux_dirent64` record as the kernel writes it: the name and
    /// its NUL padded to a multiple of 8.
    fn record(name: &str) -> Vec<u8> {
        let reclen = (19 + name.len() + 1).div_ceil(8) * 8;
        let mut rec = vec![0u8; reclen];
        rec[..8].copy_from_slice(&7u64.to_ne_bytes()); // d_ino
        rec[8..16].copy_from_slice(&1i64.to_ne_bytes()); // d_off
        rec[16..18].copy_from_slice(&(reclen as u16).to_ne_bytes());
        rec[18] = libc::DT_DIR;
        rec[19..19 + name.len()].copy_from_slice(name.as_bytes());
        rec
    }

    fn records(names: &[&str]) -> Vec<u8> {
        names.iter().flat_map(|name| record(name)).collect()
    }

    #[test]
    fn dirent_ids_reads_the_numeric_names_in_order() {
        let buf = records(&[".", "..", "4242", "4243", "1", "4194304"]);
        assert_eq!(dirent_ids(&buf), [4242, 4243, 1, 4194304]);
        assert_eq!(dirent_ids(&records(&[".", ".."])), Vec::<i32>::new());
        assert_eq!(dirent_ids(&[]), Vec::<i32>::new());
    }

    #[test]
    fn dirent_ids_leaves_out_names_that_are_no_thread_id() {
        let buf = records(&["12", "stat", "13x", "", "99999999999", "14"]);
        assert_eq!(dirent_ids(&buf), [12, 14]);
    }

    #[test]
    fn dirent_ids_stops_at_a_record_that_overruns_or_cannot_be() {
        let mut buf = records(&["5", "6", "7"]);
        // Cut inside the last record: the first two only.
        buf.truncate(buf.len() - 3);
        assert_eq!(dirent_ids(&buf), [5, 6]);
        // A record claiming more than is left, or no room for a name.
        for bad in [0u16, 19, 4096] {
            let mut buf = records(&["5", "6", "7"]);
            let second = record("5").len();
            buf[second + 16..second + 18].copy_from_slice(&bad.to_ne_bytes());
            assert_eq!(dirent_ids(&buf), [5], "d_reclen {bad}");
        }
    }

    #[test]
    fn dirent_ids_takes_a_name_that_fills_its_record_without_a_nul() {
        let mut buf = record("1234567890");
        let reclen = buf.len();
        buf[19..reclen].fill(b'9');
        buf.extend(record("8"));
        assert_eq!(dirent_ids(&buf), [8], "{} nines is no i32", reclen - 19);
        let mut buf = vec![0u8; 24];
        buf[16..18].copy_from_slice(&24u16.to_ne_bytes());
        buf[19..24].copy_from_slice(b"31337");
        assert_eq!(dirent_ids(&buf), [31337]);
    }

    /// The first look on this very process: its leader runs, so its first
    /// ids are this process's own, the leader's first.
    #[test]
    fn first_threads_lists_this_process_leader_first() {
        let me = Pid::from_raw(std::process::id() as i32).unwrap();
        let tids = first_threads(me).unwrap().unwrap();
        assert_eq!(tids.first(), Some(&me.as_raw()));
        let all = list_threads(me).unwrap().unwrap();
        // The other tests run on threads of this process, which come and go
        // between the two looks: one missing from the second has ended.
        assert!(
            tids.iter()
                .all(|&tid| all.binary_search(&tid).is_ok() || !thread_there(me, tid)),
            "{tids:?} in {all:?}"
        );
    }
}
