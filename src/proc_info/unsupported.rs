//! The parts of the `proc_info` contract an OS does not have, so that every
//! OS exports the same names (`mod.rs` has one list). Each OS file takes the
//! gaps it has from here by name; none of these is reached on an OS that
//! takes it (its callers are cfg'd to the OSes that have the real one):
//! - no pidfd (macOS, Windows): the `*pidfd*` calls and the start-tick seed;
//! - no `/proc` stat line and no boot id (macOS, Windows);
//! - no process handle (Linux, macOS): [`identity_of_handle`];
//! - no identity by pid, no child identity (Windows: a handle is needed).
// Each OS takes only its own gaps: the rest is unused there.
#![allow(dead_code)]

use std::io;

use super::stat::Stat;
use super::{Identity, IdentitySeed, InfoError};
use crate::pid::Pid;

/// The error of a call this OS does not have: ENOSYS where there is errno.
fn unsupported() -> io::Error {
    if cfg!(unix) {
        io::Error::from_raw_os_error(libc::ENOSYS)
    } else {
        io::ErrorKind::Unsupported.into()
    }
}

/// No boot id here (the boot, where an identity carries one, is read by
/// the OS's own identity calls).
pub fn current_boot() -> io::Result<&'static str> {
    Err(unsupported())
}

/// No lock holder is judged by pid here (Windows' lock is not a pid
/// record's): never reached.
pub fn stopped_running(_pid: Pid, _start_time: u64) -> bool {
    false
}

/// No `/proc` stat line here.
pub fn stat_of(_pid: Pid) -> io::Result<Option<Stat>> {
    Err(unsupported())
}

/// No pidfds here, and no stat line: never reached (`sys::pidfd_open` is
/// ENOSYS on macOS, so no caller holds a pidfd).
pub fn stat_and_identity_of_pidfd<F>(
    _pid: Pid,
    _pidfd: &F,
) -> Result<Option<(Stat, Identity)>, InfoError> {
    Err(InfoError::Io(unsupported()))
}

/// No cheap start-time seed here: the start time comes from the OS's own
/// identity call.
pub fn start_tick_between(_before_ns: u64, _after_ns: u64) -> Option<u64> {
    None
}

/// No pidfds here, so never called with one; no inode to report.
pub fn pidfd_inode<F>(_fd: F) -> Option<u64> {
    None
}

/// Nothing is cached here.
pub fn forget(_pid: Pid) {}

/// No process handles here (Windows alone identifies a process by one).
pub fn identity_of_handle<H>(_h: &H) -> io::Result<Identity> {
    Err(unsupported())
}

/// No identity by pid alone here (Windows: [`identity_of_handle`]).
pub fn identity_of(_pid: Pid) -> Result<Option<Identity>, InfoError> {
    Err(InfoError::Io(unsupported()))
}

/// As [`identity_of`].
pub fn identity_of_pidfd<F>(_pid: Pid, _pidfd: &F) -> Result<Option<Identity>, InfoError> {
    Err(InfoError::Io(unsupported()))
}

/// As [`identity_of`].
pub fn identity_from(_start_time: u64, _inode: Option<u64>) -> io::Result<Identity> {
    Err(unsupported())
}

/// As [`identity_of`] (Windows' children are identified by their handle).
pub fn child_identity<F>(
    _pid: Pid,
    _seed: &IdentitySeed,
    _pidfd: Option<F>,
) -> Result<Identity, InfoError> {
    Err(InfoError::Io(unsupported()))
}

/// Nothing to read ahead here.
pub fn prepare_identity() {}
