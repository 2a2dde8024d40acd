//! Linux: which TCP sockets listen on a port, and whether a process (or
//! its group) holds one: the supervisor's ready check, which must not take
//! a stale daemon's listener for its new child's.
//!
//! The listeners are asked of the kernel through sock_diag (`listeners`:
//! microseconds); `/proc/net/tcp{,6}` walks every bucket of the TCP hash
//! tables (about 12 ms of CPU a read on a large machine) and is the
//! fallback where netlink is refused (a seccomp profile, an old kernel).
//! The first refusal decides it for the life of the process. Who holds a
//! socket is read from the holder's fds (`/proc/<pid>/fd`, whose links
//! name a socket as `socket:[inode]`).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use super::parse;
use super::scan::group_members;
use crate::listeners;
use crate::pid::Pid;
use crate::proc_info::procfs::is_gone;

/// sock_diag was refused once: `/proc/net/tcp{,6}` from then on.
static SOCK_DIAG_REFUSED: AtomicBool = AtomicBool::new(false);

/// The inodes of the TCP sockets listening on `port` in our network
/// namespace, IPv4 and IPv6; `None` where that cannot be told (netlink
/// refused and neither table readable).
pub fn listening_inodes(port: u16) -> Option<Vec<u64>> {
    if !SOCK_DIAG_REFUSED.load(Ordering::Relaxed) {
        match listeners::listening_inodes(port) {
            Ok(inodes) => return Some(inodes),
            Err(_) => SOCK_DIAG_REFUSED.store(true, Ordering::Relaxed),
        }
    }
    let mut readable = false;
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = std::fs::read(table) {
            readable = true;
            inodes.extend(parse::tcp_listeners(&text, port));
        }
    }
    readable.then_some(inodes)
}

/// Does `pid` hold one of `inodes` open? `None` when its fds cannot be
/// read (another user's process); `Some(false)` once it has gone.
fn holds_socket(pid: Pid, inodes: &HashSet<u64>) -> Option<bool> {
    let fds = match std::fs::read_dir(format!("/proc/{}/fd", pid.as_raw())) {
        Ok(fds) => fds,
        Err(e) => return is_gone(&e).then_some(false),
    };
    // An fd closed since the listing, or unreadable: not the socket.
    let held = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_str()?;
            target
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .any(|inode: u64| inodes.contains(&inode));
    Some(held)
}

/// Is the listener on `port` the child's: does `pid`, or a member of its
/// process group `pgid`, hold the listening socket? `None` where it cannot
/// be told: no listener seen in our network namespace, or fds we may not
/// read and no holder among those we may.
pub fn child_listens(pid: Pid, pgid: Option<i32>, port: u16) -> Option<bool> {
    let inodes: HashSet<u64> = listening_inodes(port)?.into_iter().collect();
    group_holds(pid, pgid, &inodes)
}

/// Was our connection from local port `peer` to `port` accepted by `pid`
/// or a member of its group `pgid`? A reload's ready check on a held
/// socket: the old daemon, serving on the same socket, may answer it.
/// `None` where it cannot be told (netlink refused: `/proc/net/tcp` is not
/// read for this, or fds we may not read).
pub fn child_accepted(pid: Pid, pgid: Option<i32>, port: u16, peer: u16) -> Option<bool> {
    let inodes: HashSet<u64> = listeners::accepted_inodes(port, peer)
        .ok()?
        .into_iter()
        .collect();
    group_holds(pid, pgid, &inodes)
}

fn group_holds(pid: Pid, pgid: Option<i32>, inodes: &HashSet<u64>) -> Option<bool> {
    if inodes.is_empty() {
        return None;
    }
    let mut unknown = false;
    match holds_socket(pid, inodes) {
        Some(true) => return Some(true),
        Some(false) => {}
        None => unknown = true,
    }
    let members = pgid.map(group_members).unwrap_or_default();
    for member in members.into_iter().filter(|&m| m != pid) {
        match holds_socket(member, inodes) {
            Some(true) => return Some(true),
            Some(false) => {}
            None => unknown = true,
        }
    }
    if unknown {
        None
    } else {
        Some(false)
    }
}
