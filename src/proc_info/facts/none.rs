//! Where there is no `/proc` (macOS, Windows): no fact of this module can
//! be told, and each call says so ("cannot tell": `None`, or nothing
//! found). The callers above do without, as they do on Linux when `/proc`
//! is unreadable.

use std::io;
use std::path::Path;

use super::{Marked, OwnStatus};
use crate::pid::Pid;
use crate::proc_info::stat::{Stat, Terminal};

/// No `/proc` here.
pub const PROCFS: bool = false;

pub fn stat(_pid: Pid) -> io::Result<Option<(Stat, Terminal)>> {
    Ok(None)
}

pub fn own_status() -> io::Result<Option<OwnStatus>> {
    Ok(None)
}

/// No threads to look at here: none is known to be runnable.
pub fn other_threads_runnable() -> io::Result<bool> {
    Ok(false)
}

pub fn comm(_pid: Pid) -> io::Result<Option<String>> {
    Ok(None)
}

pub fn owner(_pid: Pid) -> io::Result<Option<u32>> {
    Ok(None)
}

pub fn argv(_pid: Pid) -> io::Result<Option<Vec<String>>> {
    Ok(None)
}

pub fn cgroup_text(_pid: Pid) -> io::Result<Option<String>> {
    Ok(None)
}

pub fn mountinfo() -> io::Result<Option<String>> {
    Ok(None)
}

pub fn inode(_path: &Path) -> io::Result<Option<u64>> {
    Ok(None)
}

/// No way to open a terminal anew here: the caller writes its own fd.
pub fn open_own_terminal(_fd: i32) -> io::Result<Option<i32>> {
    Ok(None)
}

pub fn listening_inodes(_port: u16) -> Option<Vec<u64>> {
    None
}

pub fn child_listens(_pid: Pid, _pgid: Option<i32>, _port: u16) -> Option<bool> {
    None
}

pub fn child_accepted(_pid: Pid, _pgid: Option<i32>, _port: u16, _peer: u16) -> Option<bool> {
    None
}

pub fn marked_processes(_entry: &[u8]) -> io::Result<Vec<Marked>> {
    Ok(Vec::new())
}
