//! What the kernel says of processes beyond their liveness and identity,
//! for the JS side (`lib/os.js`), which asks here instead of deciding the
//! OS again or reading `/proc` itself: a process's stat fields, terminal,
//! name, owner, command line and cgroup line; this process's signal masks
//! and capabilities; who holds a listening socket; the processes whose
//! environment carries a mark.
//!
//! Linux reads `/proc` (`linux`; the scans of the whole table in `scan`,
//! the sockets in `sockets`). Elsewhere there is no `/proc` and every
//! answer is "cannot tell" (`none`): `None`, or an empty list, and
//! [`PROCFS`] is false. The texts are read by `parse` (and the stat line by
//! `proc_info::stat`), pure and tested on every OS.
//!
//! Every call here blocks on file reads (a scan reads a file or more per
//! process, and the marks' scan sleeps between its passes): the binding
//! runs the scans and the long reads off the JS thread.

pub mod parse;

mod memory;
mod peer;
pub use memory::{cgroup_usage, group_usage, TreeUsage};
pub use peer::{peer_cred, PeerCred};

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod scan;
#[cfg(target_os = "linux")]
mod sockets;
#[cfg(target_os = "linux")]
use linux as imp;
#[cfg(not(target_os = "linux"))]
mod none;
#[cfg(not(target_os = "linux"))]
use none as imp;

pub use imp::{
    argv, cgroup_text, child_accepted, child_listens, comm, inode, listening_inodes,
    marked_processes, mountinfo, open_own_terminal, other_threads_runnable, own_status, owner,
    stat, PROCFS,
};
pub use parse::OwnStatus;

use super::Identity;

/// A process whose environment holds the entry looked for, as the scan
/// found it: the identity is the one read on both sides of the second look
/// at its environment (see `scan`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marked {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    pub session: i32,
    pub identity: Identity,
}
