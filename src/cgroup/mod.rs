//! Containment: a child born inside a cgroup of its own, so that nothing it
//! starts can escape (`setsid`, `setpgid`, a double fork, a daemon that
//! drops privileges and with them `PR_SET_PDEATHSIG`). Linux cgroup v2 only
//! (`linux`, with the parsers in `parse`; the death-time killer, the
//! guardian, is a supervised child: `exit_watch`); elsewhere `support()`
//! says why not (`unsupported`).
//!
//! Life of a contained child (see `exit_watch` for the exit side): its
//! cgroup is made under the parent, the guardian is told the parent, the
//! child enters the cgroup before it execs, and when the leader exits the
//! group sweep is followed by `cgroup.kill`, an event-driven wait for
//! `populated 0` (bounded), the removal, and only then the reap.

pub mod parse;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as imp;
#[cfg(not(target_os = "linux"))]
mod unsupported;
#[cfg(not(target_os = "linux"))]
use unsupported as imp;

pub use imp::{
    contain, kill_recorded, remove_when_empty, support, wait_empty, wait_empty_blocking, Cgroup,
};

use std::path::PathBuf;

/// What `cgroupSupport()` answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Support {
    pub available: bool,
    /// The default parent (whether or not it exists yet).
    pub parent: Option<PathBuf>,
    /// Why not, when not available.
    pub reason: Option<String>,
}

impl Support {
    pub fn yes(parent: PathBuf) -> Support {
        Support {
            available: true,
            parent: Some(parent),
            reason: None,
        }
    }

    pub fn no(parent: Option<PathBuf>, reason: impl Into<String>) -> Support {
        Support {
            available: false,
            parent,
            reason: Some(reason.into()),
        }
    }
}

/// A cgroup's resource usage; None where the controller is not enabled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu_usec: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub pids: Option<u64>,
}

#[derive(Debug)]
pub enum CgroupError {
    /// cgroup v2 cannot be used here (the reason says why).
    Unavailable(String),
    /// The caller's `parent` is not a usable cgroup directory.
    BadParent(String),
    /// A step on a cgroup failed (syscall, path).
    Io(std::io::Error, &'static str, PathBuf),
}

impl std::fmt::Display for CgroupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CgroupError::Unavailable(r) | CgroupError::BadParent(r) => f.write_str(r),
            CgroupError::Io(e, what, path) => write!(
                f,
                "{what} {}: {}",
                path.display(),
                crate::errors::io_text(e)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_step_reads_like_node() {
        let e = CgroupError::Io(
            std::io::Error::from_raw_os_error(libc::EMFILE),
            "open",
            PathBuf::from("/sys/fs/cgroup/x"),
        );
        assert_eq!(
            e.to_string(),
            "open /sys/fs/cgroup/x: EMFILE: too many open files"
        );
    }
}
