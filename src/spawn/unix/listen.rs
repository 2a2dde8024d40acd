//! The listening sockets of `Command::listen`, prepared for the child as
//! systemd prepares a socket unit's (`sd_listen_fds(3)`): the environment's
//! `LISTEN_FDS` and `LISTEN_FDNAMES` (its `LISTEN_PID` is the child's to
//! write, see `linux::child_main`), and copies of the fds numbered above
//! everything the child puts in place before it moves them to 3, 4, …

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

use super::super::{Listen, SpawnError};

/// The variables of the `sd_listen_fds(3)` protocol: whatever the
/// environment had of them (our own, when a socket unit started us) is
/// replaced; `LISTEN_PID` is added by the child itself.
const LISTEN_VARS: [&[u8]; 3] = [b"LISTEN_PID=", b"LISTEN_FDS=", b"LISTEN_FDNAMES="];

/// Most sockets one child may be handed (systemd's own limit on a socket
/// unit's fds is far below this; it bounds the child's fd numbers).
const MAX_LISTEN: usize = 1024;

pub(super) fn listen_env(envp: &mut Vec<CString>, listen: &Listen) -> Result<(), SpawnError> {
    if listen.fds.is_empty() || listen.fds.len() > MAX_LISTEN {
        return Err(SpawnError::Invalid(format!(
            "listen must name 1 to {MAX_LISTEN} sockets, got {}",
            listen.fds.len()
        )));
    }
    if listen.names.len() != listen.fds.len() {
        return Err(SpawnError::Invalid(
            "listen needs one name per socket".into(),
        ));
    }
    if let Some(bad) = listen.names.iter().find(|n| n.contains(':')) {
        return Err(SpawnError::Invalid(format!(
            "a listen name must not contain ':' (it separates LISTEN_FDNAMES), got {bad:?}"
        )));
    }
    envp.retain(|e| !LISTEN_VARS.iter().any(|v| e.as_bytes().starts_with(v)));
    envp.push(entry(format!("LISTEN_FDS={}", listen.fds.len()))?);
    envp.push(entry(format!("LISTEN_FDNAMES={}", listen.names.join(":")))?);
    Ok(())
}

/// An environment entry as a C string.
fn entry(text: String) -> Result<CString, SpawnError> {
    CString::new(text)
        .map_err(|_| SpawnError::Invalid("listen names must not contain NUL bytes".into()))
}

/// Copies the sockets above every number the child fills before it moves
/// them (stdio sources may sit anywhere from 3 up; the listen targets are
/// 3..3+n, the notify target above them), close-on-exec until the child's
/// dup2 puts them in place. The inner error is a copy that failed (a
/// closed fd), for the caller to word as its spawn stage.
pub(super) fn copy_listen(
    listen: &Listen,
    notify_fd: Option<i32>,
) -> Result<io::Result<Vec<OwnedFd>>, SpawnError> {
    let end = 3 + listen.fds.len() as i32;
    if let Some(target) = notify_fd.filter(|t| *t < end) {
        return Err(SpawnError::Invalid(format!(
            "notifyFd {target} is one of the listening sockets' fds (3..{}): choose {end} or above",
            end - 1
        )));
    }
    let base = notify_fd.map_or(end, |t| t.max(end - 1) + 1);
    let mut out = Vec::with_capacity(listen.fds.len());
    for &fd in &listen.fds {
        // SAFETY: F_DUPFD_CLOEXEC on a plain fd number; a closed one fails
        // EBADF and creates nothing.
        let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, base) };
        if new < 0 {
            return Ok(Err(io::Error::last_os_error()));
        }
        // SAFETY: the fd was just created for us.
        out.push(unsafe { OwnedFd::from_raw_fd(new) });
    }
    Ok(Ok(out))
}
