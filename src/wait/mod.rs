//! `waitForExit`: an exit event for a process that is not our child.
//!
//! It is not ours, so it is never reaped here (its parent does that): no
//! `waitid`, ever. On macOS a kqueue `NOTE_EXIT` tells of the exit
//! (`macos.rs`). On Linux the exit is seen through a pidfd, which turns readable
//! once the process has exited — a zombie counts — and pins the process, so
//! a pid recycled meanwhile is never mistaken for it. Where no pidfd can be
//! had (kernel < 5.3, a full fd table, the forced fallback), liveness is
//! polled with the same backing-off schedule as a bare-pid stop (1 ms
//! doubling to 50 ms); that path cannot see an exit status.
//!
//! Cancelling (an aborted signal in JS) drops the wait's future, and with it
//! the pidfd and its reactor registration: nothing is left behind.
//!
//! The wait itself ([`wait_for_exit`]) is the same on every OS; each OS part
//! opens the process and reads what it can through what holds it, Linux's
//! and macOS's through the one descriptor `unix.rs` registers and budgets.

#[cfg(unix)]
mod budget;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as imp;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as imp;
#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix::Held;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows::{self as imp, Held};

pub use imp::OPEN_CALL;

use std::io;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::exit_watch::ExitStatus;
use crate::pid::Pid;
use crate::proc_info::{self, Identity, InfoError};

/// How a wait ended (cancelled waits end with `None` instead).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exited {
    /// The pid was held by a different process than `identity` named: that
    /// one had exited before the wait began.
    pub pid_reused: bool,
    /// The status, where the kernel gives one (see `linux.rs`).
    pub exit: Option<ExitStatus>,
}

impl Exited {
    pub const GONE: Exited = Exited {
        pid_reused: false,
        exit: None,
    };
    pub const REUSED: Exited = Exited {
        pid_reused: true,
        exit: None,
    };
}

/// What opening a process for a wait found.
pub enum Opened<H> {
    /// The process, held (a pidfd or handle pins it; a kqueue watches it).
    Held(H),
    /// It had exited already, or was never a process.
    Ended(Exited),
    /// Nothing to hold it by (the fd budget or table is full, the kernel
    /// has no pidfds, the fallback is forced): poll instead.
    Poll,
}

/// Must run inside a tokio runtime (what holds the process joins its
/// reactor).
pub async fn wait_for_exit(
    pid: Pid,
    identity: Option<&str>,
    mut cancel: watch::Receiver<bool>,
) -> io::Result<Option<Exited>> {
    let mut held = match Held::open(pid)? {
        Opened::Held(held) => held,
        Opened::Ended(exited) => return Ok(Some(exited)),
        Opened::Poll => return poll_wait(pid, identity, cancel).await,
    };
    if let Some(wanted) = identity {
        // Only now that the process is held does the answer hold.
        if let Some(done) = judge_holder(held.holder(pid), wanted)? {
            return Ok(Some(done));
        }
    }
    tokio::select! {
        exited = held.exited() => exited?,
        _ = cancel.wait_for(|c| *c) => return Ok(None),
    }
    Ok(Some(Exited {
        pid_reused: false,
        exit: held.status(pid),
    }))
}

/// Decodes a status in `waitpid`'s encoding.
pub fn decode_wait_status(status: i32) -> ExitStatus {
    match status & 0x7f {
        0 => ExitStatus::Code((status >> 8) & 0xff),
        sig => ExitStatus::Signal(sig),
    }
}

fn info_to_io(e: InfoError) -> io::Error {
    match e {
        InfoError::Hidden => io::Error::from_raw_os_error(libc::EACCES),
        InfoError::Io(e) => e,
    }
}

fn running(pid: Pid, identity: Option<&str>) -> io::Result<bool> {
    match identity {
        None => proc_info::is_running(pid),
        Some(id) => proc_info::is_running_as(pid, id).map_err(info_to_io),
    }
}

/// Is `current` the process `wanted` names? A string that is no identity
/// names no process (the binding refuses one before it gets here).
pub fn same_process(current: &Identity, wanted: &str) -> bool {
    Identity::decode(wanted).is_some_and(|w| current.same_process(&w))
}

/// What the process holding the pid now (`found`, read once the wait holds
/// a pidfd/kqueue/handle on it) says about the one asked for: `Some` ends
/// the wait at once (gone, or its pid reused), `None` lets it go on.
pub fn judge_holder(
    found: Result<Option<Identity>, InfoError>,
    wanted: &str,
) -> io::Result<Option<Exited>> {
    match found.map_err(info_to_io)? {
        Some(current) if !same_process(&current, wanted) => Ok(Some(Exited::REUSED)),
        Some(_) => Ok(None),
        // Exited (and reaped) meanwhile; its pid may be anyone's now.
        None => Ok(Some(Exited::GONE)),
    }
}

/// Polls liveness until `pid` (as `identity`, when given) no longer runs:
/// 1 ms, doubling to 50 ms between checks. False when `deadline` passes
/// first. A check that fails counts as "not running".
pub async fn poll_until_exit(pid: Pid, identity: Option<&str>, deadline: Option<Instant>) -> bool {
    let mut delay = Duration::from_millis(1);
    loop {
        if !running(pid, identity).unwrap_or(false) {
            return true;
        }
        let mut sleep = delay;
        if let Some(deadline) = deadline {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            sleep = sleep.min(deadline - now);
        }
        tokio::time::sleep(sleep).await;
        delay = (delay * 2).min(Duration::from_millis(50));
    }
}

/// The wait without a pidfd: the identity is checked once up front (to
/// tell a reused pid apart), then liveness is polled. No exit status.
pub async fn poll_wait(
    pid: Pid,
    identity: Option<&str>,
    mut cancel: watch::Receiver<bool>,
) -> io::Result<Option<Exited>> {
    if let Some(wanted) = identity {
        // Whoever holds the pid now, running or a zombie, is not the process
        // asked about: that one is gone, and its pid was reused.
        if let Some(info) = proc_info::process_info(pid).map_err(info_to_io)? {
            if !same_process(&info.identity, wanted) {
                return Ok(Some(Exited::REUSED));
            }
        }
    }
    if !running(pid, identity)? {
        return Ok(Some(Exited::GONE));
    }
    tokio::select! {
        _ = poll_until_exit(pid, identity, None) => Ok(Some(Exited::GONE)),
        _ = cancel.wait_for(|c| *c) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_statuses_decode_as_waitpid_does() {
        assert_eq!(decode_wait_status(0), ExitStatus::Code(0));
        assert_eq!(decode_wait_status(7 << 8), ExitStatus::Code(7));
        assert_eq!(decode_wait_status(255 << 8), ExitStatus::Code(255));
        assert_eq!(decode_wait_status(9), ExitStatus::Signal(9));
        // Killed by SIGSEGV with a core dump: the 0x80 bit is not the signal.
        assert_eq!(decode_wait_status(0x80 | 11), ExitStatus::Signal(11));
    }
}
