//! Liveness and identity of any process (not only our children).
//!
//! A zombie is dead here, everywhere: it has exited, it will never run
//! again, and only its parent's `wait` stands between it and oblivion.
//! `kill(pid, 0)` calls it alive; that lie is what this module exists to end.
//!
//! The same names on every OS (one list, below): each OS file has what its
//! OS has and takes the rest from `unsupported`, whose calls are never
//! reached there.

pub mod facts;
pub mod stat;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod pidfd_cache;
#[cfg(target_os = "linux")]
mod procfs;
#[cfg(target_os = "linux")]
use linux as imp;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as imp;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as imp;
mod unsupported;

pub use imp::{
    child_identity, current_boot, forget, identity_from, identity_of, identity_of_handle,
    identity_of_pidfd, is_running, is_running_as, pidfd_inode, prepare_identity, process_info,
    start_tick_between, stat_and_identity_of_pidfd, stat_of, stopped_running, thread_of,
    HIDDEN_REASON, INFO_CALL,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcState {
    Running,
    Sleeping,
    DiskSleep,
    Stopped,
    Zombie,
    /// Linux: every thread of the process is exiting (`PF_EXITING`): the
    /// kernel has begun tearing it down and its files (and locks) are
    /// closing, though it is not a zombie yet and a pidfd does not report
    /// its exit yet. It no longer runs. (A process whose main thread alone
    /// has ended runs on, and has the state of a thread that still runs.)
    Exiting,
    Dead,
    Idle,
    Other,
}

impl ProcState {
    pub fn from_stat_char(c: char) -> ProcState {
        match c {
            'R' => ProcState::Running,
            'S' => ProcState::Sleeping,
            'D' => ProcState::DiskSleep,
            'T' | 't' => ProcState::Stopped,
            'Z' => ProcState::Zombie,
            'X' | 'x' => ProcState::Dead,
            'I' => ProcState::Idle,
            _ => ProcState::Other,
        }
    }

    /// From a BSD `p_stat` value (macOS `proc_bsdinfo.pbi_status`,
    /// `<sys/proc.h>`): SIDL 1, SRUN 2, SSLEEP 3, SSTOP 4, SZOMB 5. Pure, so
    /// it is tested here on Linux too.
    pub fn from_bsd_status(status: u32) -> ProcState {
        match status {
            2 => ProcState::Running,
            3 => ProcState::Sleeping,
            4 => ProcState::Stopped,
            5 => ProcState::Zombie,
            // SIDL (being created) and anything newer.
            _ => ProcState::Other,
        }
    }

    /// Exists and has not begun to exit.
    pub fn is_running(self) -> bool {
        !matches!(
            self,
            ProcState::Zombie | ProcState::Exiting | ProcState::Dead
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProcState::Running => "running",
            ProcState::Sleeping => "sleeping",
            ProcState::DiskSleep => "disk-sleep",
            ProcState::Stopped => "stopped",
            ProcState::Zombie => "zombie",
            ProcState::Exiting => "exiting",
            ProcState::Dead => "dead",
            ProcState::Idle => "idle",
            ProcState::Other => "other",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    pub state: ProcState,
    pub identity: Identity,
    pub name: String,
}

/// Who a process is, as opposed to which pid it has.
///
/// Linux: the boot id (so a pidfile from before a reboot never matches), the
/// start time in clock ticks since boot, and — on kernels with pidfs (6.9+) —
/// the inode number of a pidfd for the process. Start time alone has the
/// resolution of one clock tick (10 ms at USER_HZ=100): two processes that
/// start on the same pid within one tick would share it, which a fast pid
/// wrap (pid_max is 32768 here) or a forced `ns_last_pid` can produce. The
/// pidfs inode is unique for the life of the boot, so with it the identity
/// is exact; without pidfs (or when no pidfd could be opened) the inode part
/// is left empty and matching falls back to boot id + start time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub boot: String,
    pub start_time: u64,
    pub inode: Option<u64>,
}

const IDENTITY_TAG: &str = "p1";

impl Identity {
    pub fn encode(&self) -> String {
        match self.inode {
            Some(ino) => format!("{IDENTITY_TAG}:{}:{}:{ino}", self.boot, self.start_time),
            None => format!("{IDENTITY_TAG}:{}:{}:", self.boot, self.start_time),
        }
    }

    pub fn decode(s: &str) -> Option<Identity> {
        let mut parts = s.split(':');
        if parts.next()? != IDENTITY_TAG {
            return None;
        }
        let boot = parts.next()?;
        if boot.is_empty() {
            return None;
        }
        let start_time = parts.next()?.parse().ok()?;
        let inode = match parts.next()? {
            "" => None,
            ino => Some(ino.parse().ok()?),
        };
        if parts.next().is_some() {
            return None;
        }
        Some(Identity {
            boot: boot.to_owned(),
            start_time,
            inode,
        })
    }

    /// Same process? The inode decides when both sides have one; otherwise
    /// boot id and start time must agree.
    pub fn same_process(&self, other: &Identity) -> bool {
        if self.boot != other.boot || self.start_time != other.start_time {
            return false;
        }
        match (self.inode, other.inode) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
    }
}

/// What is known of a new child's identity without reading `/proc`, taken
/// at spawn (see `spawn_supervised`): the rest is read while the child is
/// still unreaped, by [`child_identity`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdentitySeed {
    /// Start time in clock ticks, when it could be pinned down from the
    /// clock readings around the spawn ([`start_tick_between`]).
    pub start_time: Option<u64>,
    /// The pidfs inode (`Some(None)`: this kernel has none), when a pidfd
    /// was at hand.
    pub inode: Option<Option<u64>>,
}

/// Whether a pid is a thread id rather than a process id (Linux: thread ids
/// share the pid space; `kill(tid)` signals the thread's whole process).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadOf {
    /// A thread of this very process (its main thread included: the pid).
    Us,
    /// A thread of another process that is not that process's leader: the
    /// number names no process.
    Other,
    /// A process id, or nothing at all.
    NotAThread,
}

#[derive(Debug)]
pub enum InfoError {
    /// The process exists, but `/proc` is mounted with `hidepid` and does not
    /// show it to us.
    Hidden,
    Io(std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bsd_status_zombie_is_not_running() {
        assert_eq!(ProcState::from_bsd_status(5), ProcState::Zombie);
        assert!(!ProcState::from_bsd_status(5).is_running());
        for (status, state) in [
            (1, ProcState::Other),
            (2, ProcState::Running),
            (3, ProcState::Sleeping),
            (4, ProcState::Stopped),
            (0, ProcState::Other),
            (99, ProcState::Other),
        ] {
            assert_eq!(ProcState::from_bsd_status(status), state);
            assert!(state.is_running());
        }
    }

    #[test]
    fn identity_round_trips() {
        let a = Identity {
            boot: "0123abcd".into(),
            start_time: 42,
            inode: Some(7),
        };
        assert_eq!(a.encode(), "p1:0123abcd:42:7");
        assert_eq!(Identity::decode(&a.encode()).unwrap(), a);
        let b = Identity {
            inode: None,
            ..a.clone()
        };
        assert_eq!(b.encode(), "p1:0123abcd:42:");
        assert_eq!(Identity::decode(&b.encode()).unwrap(), b);
    }

    #[test]
    fn identity_matching() {
        let a = Identity {
            boot: "b".into(),
            start_time: 42,
            inode: Some(7),
        };
        let same_tick_other_process = Identity {
            inode: Some(8),
            ..a.clone()
        };
        let no_inode = Identity {
            inode: None,
            ..a.clone()
        };
        let later = Identity {
            start_time: 43,
            ..a.clone()
        };
        let other_boot = Identity {
            boot: "c".into(),
            ..a.clone()
        };
        assert!(a.same_process(&a));
        assert!(!a.same_process(&same_tick_other_process));
        assert!(a.same_process(&no_inode));
        assert!(no_inode.same_process(&a));
        assert!(!a.same_process(&later));
        assert!(!a.same_process(&other_boot));
    }

    #[test]
    fn garbage_identities_do_not_decode() {
        for s in [
            "",
            "p1",
            "p1:",
            "p1::1:",
            "p1:b",
            "p1:b:x:",
            "p1:b:1:x",
            "p1:b:1:2:3",
            "p2:b:1:2",
        ] {
            assert!(Identity::decode(s).is_none(), "{s:?}");
        }
    }
}
