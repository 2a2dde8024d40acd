//! Linux: scans of the whole process table, one `/proc/<pid>` entry after
//! another. No snapshot: a process may start or end while a scan passes,
//! and a pid may change hands between two reads of it; what each answer is
//! tied to is said where it is made.

use std::io;
use std::time::Duration;

use super::linux::read;
use super::{parse, Marked};
use crate::pid::Pid;
use crate::proc_info::{self, ProcState};

/// Passes over the processes whose environment read empty, and the pause
/// before each: a process in its exec has none for a moment.
const UNSETTLED_PASSES: usize = 5;
const UNSETTLED_PAUSE: Duration = Duration::from_millis(20);

/// The kernel's thread daemon, parent of every kernel thread.
const KTHREADD: i32 = 2;

/// The pids `/proc` lists now.
fn pids() -> io::Result<Vec<Pid>> {
    Ok(std::fs::read_dir("/proc")?
        .filter_map(|entry| {
            let raw = entry.ok()?.file_name().to_str()?.parse::<i32>().ok()?;
            Pid::from_raw(raw).ok()
        })
        .collect())
}

/// The processes in process group `pgid` now; none where `/proc` cannot be
/// listed.
pub(super) fn group_members(pgid: i32) -> Vec<Pid> {
    let Ok(pids) = pids() else {
        return Vec::new();
    };
    pids.into_iter()
        .filter(|&pid| matches!(proc_info::stat_of(pid), Ok(Some(st)) if st.pgid == pgid))
        .collect()
}

/// What one look at a process found.
enum Look {
    Found(Marked),
    /// Not marked, gone, a zombie, or unreadable.
    Not,
    /// Its environment read empty: a process in the middle of its exec (a
    /// spawn returns when the close-on-exec pipe closes, a moment before the
    /// new program's environment is in place): to be looked at again.
    Unsettled,
}

/// The running processes (not zombies) other than this one whose
/// environment, as exec gave it, holds `entry` (`NAME=value`). Those whose
/// environment we may not read are not seen. One whose environment reads
/// empty is looked at again, [`UNSETTLED_PASSES`] times at most,
/// [`UNSETTLED_PAUSE`] apart (sleeping: call it off the JS thread).
pub fn marked_processes(entry: &[u8]) -> io::Result<Vec<Marked>> {
    let me = Pid::current();
    let mut found = Vec::new();
    let mut unsettled: Vec<Pid> = pids()?.into_iter().filter(|&p| p != me).collect();
    for pass in 0..=UNSETTLED_PASSES {
        if unsettled.is_empty() {
            break;
        }
        if pass > 0 {
            std::thread::sleep(UNSETTLED_PAUSE);
        }
        let mut again = Vec::new();
        for pid in unsettled {
            match look(pid, entry) {
                Look::Found(m) => found.push(m),
                Look::Unsettled => again.push(pid),
                Look::Not => {}
            }
        }
        unsettled = again;
    }
    Ok(found)
}

/// `pid`'s environment, or `None` when gone or unreadable.
fn environ(pid: Pid) -> Option<Vec<u8>> {
    read(&format!("/proc/{}/environ", pid.as_raw())).ok()?
}

/// Whether `pid` is marked with `entry`. Its identity is read between two
/// looks at its environment: the same mark on both sides, and the same
/// identity after the second, tie the mark to that process, not to one
/// that took its pid meanwhile.
fn look(pid: Pid, entry: &[u8]) -> Look {
    let Some(env) = environ(pid) else {
        return Look::Not;
    };
    if !env.is_empty() && !parse::environ_holds(&env, entry) {
        return Look::Not;
    }
    let Ok(Some(st)) = proc_info::stat_of(pid) else {
        return Look::Not;
    };
    if matches!(st.state, ProcState::Zombie | ProcState::Dead) {
        return Look::Not;
    }
    if env.is_empty() {
        // A kernel thread has no environment, ever.
        return if pid.as_raw() == KTHREADD || st.ppid == KTHREADD {
            Look::Not
        } else {
            Look::Unsettled
        };
    }
    let Ok(Some(identity)) = proc_info::identity_of(pid) else {
        return Look::Not;
    };
    let Some(again) = environ(pid) else {
        return Look::Not;
    };
    // Empty again: it has exec'd since the first look (`sh -c 'exec ...'`),
    // and its next program's environment is not in place yet.
    if again.is_empty() {
        return Look::Unsettled;
    }
    if !parse::environ_holds(&again, entry)
        || !matches!(proc_info::identity_of(pid), Ok(Some(now)) if now == identity)
    {
        return Look::Not;
    }
    Look::Found(Marked {
        pid: pid.as_raw(),
        ppid: st.ppid,
        pgid: st.pgid,
        session: st.session,
        identity,
    })
}
