//! The child's stdio, opened on the calling thread before any process
//! exists: the shared /dev/null, pipes, the caller's files (never waiting
//! in `open`), the parent's own fds inherited; and, child side, the
//! blocking mode a program expects of them.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::OnceLock;

use super::super::{SpawnError, Stdio};
use super::stage::Stage;

/// Moves an fd to number 3 or above, so that dup2 onto 0..2 in the child
/// cannot overwrite another source (possible when the parent's own stdio is
/// closed and `open` hands out 0..2).
pub(super) fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, SpawnError> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC duplicates a valid fd to the lowest free >= 3.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(SpawnError::os(io::Error::last_os_error(), Stage::Stdio));
    }
    // SAFETY: the fd was just created for us.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// What the child's fd 0, 1 or 2 becomes.
pub enum ChildFd {
    /// The parent's own fd of that number.
    Inherit,
    /// Opened for this child; closed in the parent right after the spawn.
    Owned(OwnedFd),
    /// Process-wide and kept open ('ignore': the shared /dev/null).
    Shared(RawFd),
}

impl ChildFd {
    pub(super) fn raw(&self) -> RawFd {
        match self {
            ChildFd::Inherit => -1,
            ChildFd::Owned(fd) => fd.as_raw_fd(),
            ChildFd::Shared(fd) => *fd,
        }
    }
}

/// One /dev/null (read-write, close-on-exec) for every 'ignore', opened on
/// first use: saves an open and a close per stdio slot per spawn.
fn dev_null() -> Result<RawFd, SpawnError> {
    static DEV_NULL: OnceLock<OwnedFd> = OnceLock::new();
    if let Some(fd) = DEV_NULL.get() {
        return Ok(fd.as_raw_fd());
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|e| SpawnError::os(e, Stage::Stdio))?;
    let fd = above_stdio(f.into())?;
    Ok(DEV_NULL.get_or_init(|| fd).as_raw_fd())
}

/// Opens what the child's fd `n` will be. Returns (child end, parent end).
/// Every fd is opened close-on-exec, so a pipe end never leaks into another
/// child spawned meanwhile (by us or by `child_process`).
pub(super) fn open_stdio(n: usize, spec: &Stdio) -> Result<(ChildFd, Option<OwnedFd>), SpawnError> {
    let stdio_err = |e: io::Error| SpawnError::os(e, Stage::Stdio);
    match spec {
        Stdio::Inherit => Ok((ChildFd::Inherit, None)),
        Stdio::Ignore => Ok((ChildFd::Shared(dev_null()?), None)),
        Stdio::Pipe => {
            let (r, w) = io::pipe().map_err(stdio_err)?;
            let (r, w): (OwnedFd, OwnedFd) = (r.into(), w.into());
            if n == 0 {
                Ok((ChildFd::Owned(above_stdio(r)?), Some(w)))
            } else {
                Ok((ChildFd::Owned(above_stdio(w)?), Some(r)))
            }
        }
        Stdio::File { path, append } => {
            let fd = open_file(n, path, *append).map_err(|(err, reason)| SpawnError::File {
                fd: n,
                err,
                reason,
            })?;
            Ok((ChildFd::Owned(above_stdio(fd)?), None))
        }
    }
}

/// Opens a caller's file for the child's fd `n` (0 reads, 1 and 2 write)
/// without ever waiting: `O_NONBLOCK` makes `open` return at once where it
/// would sleep. That is a FIFO without a peer (a reader end then opens
/// anyway; a writer end fails ENXIO), a serial line waiting for carrier, or
/// a file under a lease that the truncation would break (EAGAIN instead of
/// waiting out the lease holder). `O_NOCTTY`: a terminal opened here must
/// not become the controlling terminal of this process.
///
/// The flag is cleared again once open: the child gets the blocking fd a
/// shell's redirection gives it, whatever the file type.
fn open_file(
    n: usize,
    path: &Path,
    append: bool,
) -> Result<OwnedFd, (io::Error, Option<&'static str>)> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut opts = std::fs::OpenOptions::new();
    opts.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    if n == 0 {
        opts.read(true);
    } else if append {
        opts.append(true).create(true);
    } else {
        opts.write(true).create(true).truncate(true);
    }
    let file = match opts.open(path) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            // ENXIO from open means one of a few things: say which.
            let reason = match std::fs::metadata(path).map(|m| m.file_type()) {
                Ok(t) if t.is_fifo() => Some("no process has the FIFO open for reading"),
                Ok(t) if t.is_socket() => Some("a socket cannot be opened as a file"),
                _ => None,
            };
            return Err((e, reason));
        }
        Err(e) => return Err((e, None)),
    };
    let meta = file.metadata().map_err(|e| (e, None))?;
    if meta.is_dir() {
        // Reading opens a directory fine, but the child could only fail on it.
        return Err((io::Error::from_raw_os_error(libc::EISDIR), None));
    }
    let fd = OwnedFd::from(file);
    // SAFETY: F_GETFL on an fd we own.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err((io::Error::last_os_error(), None));
    }
    // SAFETY: F_SETFL on an fd we own, with flags read from it.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err((io::Error::last_os_error(), None));
    }
    Ok(fd)
}

/// Clears `O_NONBLOCK` on fd `fd` (one of the child's 0..2), as libuv does
/// for every `child_process` child. The flag lives on the open file
/// description, which an inherited stdio shares with Node: Node keeps its
/// own pipes and sockets non-blocking, and a program handed such a stdout
/// (`seq`, `cat`, most of C) fails with EAGAIN on the first full pipe
/// instead of waiting for its reader. Clearing it changes Node's copy too,
/// exactly as `child_process.spawn` does; libuv copes with a blocking fd.
///
/// Async-signal-safe (two `fcntl`s, no allocation): the Linux child calls it
/// between `clone` and `execve`. A closed fd (EBADF) is left alone.
pub(super) fn make_blocking(fd: RawFd) {
    // SAFETY: F_GETFL on an fd number only reads the description's flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags >= 0 && flags & libc::O_NONBLOCK != 0 {
        // SAFETY: F_SETFL with the flags just read, less O_NONBLOCK.
        unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) };
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    #[test]
    fn a_fifo_opens_without_waiting_and_the_fd_is_blocking() {
        let dir = std::env::temp_dir().join(format!("procward-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("f");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo takes a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer: a reader end opens anyway, and is blocking for the child.
        let fd = open_file(0, &fifo, false).unwrap();
        // SAFETY: F_GETFL on an fd we own.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        assert_eq!(flags & libc::O_NONBLOCK, 0);
        drop(fd);
        // No reader: a writer end is ENXIO, explained.
        let (err, reason) = open_file(1, &fifo, false).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENXIO));
        assert_eq!(reason, Some("no process has the FIFO open for reading"));
        // A directory is no stdin.
        let (err, _) = open_file(0, &dir, false).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EISDIR));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
