//! The service manager's notify protocol (`sd_notify(3)`): newline-separated
//! `KEY=VALUE` assignments in one datagram on a unix socket.
//!
//! - Out: a [`Sender`] speaks it to the manager that started us (the socket
//!   `NOTIFY_SOCKET` names): `READY=1`, `STATUS=...`, `STOPPING=1`,
//!   `WATCHDOG=1`. The manager knows us by the credentials the kernel
//!   attaches, so we send from our own process and never forge them.
//! - In: a [`Receiver`] is a manager of our own for one child: a socket the
//!   child finds in its `NOTIFY_SOCKET`, whose messages are judged by their
//!   sender's kernel-attached credentials (`SCM_CREDENTIALS`) against the
//!   child, the processes descending from it and its cgroup ([`Peers`]) the
//!   moment they are read, while the sender is most likely still there to be
//!   looked at. Its process group is no test: any process of our session may
//!   join it (`setpgid`). Credentials are the kernel's word, except for a
//!   sender with `CAP_SYS_ADMIN` (root), which may attach any pid it likes.
//!
//! The same types on every OS; only Linux has the credentials (and the
//! managers) this needs, so elsewhere every constructor is `Unsupported`.
//! Nothing here blocks: sends use `MSG_DONTWAIT` (a full queue drops the
//! message, as `sd_notify` would have blocked instead), and receiving is a
//! task on procward's runtime that wakes on the socket's readiness.

use std::path::PathBuf;

use crate::pid::Pid;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::{Receiver, Sender, SUPPORTED};

#[cfg(not(target_os = "linux"))]
mod other;
#[cfg(not(target_os = "linux"))]
pub use other::{Receiver, Sender, SUPPORTED};

/// `sun_path`'s size less one: a path needs its NUL, an abstract name its
/// leading NUL.
pub const ADDRESS_MAX: usize = 107;

/// The biggest message read: systemd's own limit (`NOTIFY_BUFFER_MAX`,
/// `PIPE_BUF`). A longer datagram is refused whole, never cut and half-read.
pub const MESSAGE_MAX: usize = 4096;

/// What `NOTIFY_SOCKET` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    /// A socket file.
    Path(PathBuf),
    /// A name in the abstract namespace (written `@name`; no file, scoped
    /// to the network namespace).
    Abstract(Vec<u8>),
}

/// Why a `NOTIFY_SOCKET` value names no socket we can send to.
#[derive(Debug, PartialEq, Eq)]
pub enum AddressError {
    Empty,
    /// `vsock:...` and anything not `/path` or `@name`.
    Unsupported,
    TooLong,
    /// A NUL byte (it would end a path early).
    Nul,
}

impl std::fmt::Display for AddressError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AddressError::Empty => write!(f, "it is empty"),
            AddressError::Unsupported => {
                write!(f, "only an absolute path or @name (abstract) is supported")
            }
            AddressError::TooLong => write!(f, "it is longer than {ADDRESS_MAX} bytes"),
            AddressError::Nul => write!(f, "it contains a NUL byte"),
        }
    }
}

impl Address {
    /// A `NOTIFY_SOCKET` value: `/absolute/path` or `@abstract-name`, as
    /// systemd writes it (a relative path is refused: our working directory
    /// is not the manager's).
    pub fn parse(value: &[u8]) -> Result<Address, AddressError> {
        if value.is_empty() {
            return Err(AddressError::Empty);
        }
        if value.contains(&0) {
            return Err(AddressError::Nul);
        }
        let addr = match value[0] {
            b'/' => Address::Path(path_of(value)),
            b'@' if value.len() > 1 => Address::Abstract(value[1..].to_vec()),
            _ => return Err(AddressError::Unsupported),
        };
        // A path's NUL and an abstract name's leading NUL both take a byte.
        if value.len() > ADDRESS_MAX {
            return Err(AddressError::TooLong);
        }
        Ok(addr)
    }
}

#[cfg(unix)]
fn path_of(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
}

#[cfg(not(unix))]
fn path_of(bytes: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
}

/// What became of a message sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    Sent,
    /// The manager's queue is full: the message was dropped, not waited for.
    Full,
}

/// Who may speak for a child on its own notify socket: the child itself,
/// every process descending from it (its parent chain at receipt passes
/// through the child), and with a cgroup of its own every process in it (or
/// below it).
#[derive(Clone, Debug)]
pub struct Peers {
    pub child: Pid,
    /// The child's cgroup, as a file-system path.
    pub cgroup: Option<PathBuf>,
}

/// How a message's sender was judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No peers were given (a stand-in for a manager, which takes anyone).
    Unchecked,
    Child,
    /// A process whose parent chain leads to the child.
    Descendant,
    Cgroup,
    /// None of the peers, gone before it could be looked at, or without
    /// credentials.
    Refused,
}

impl Verdict {
    pub fn trusted(self) -> bool {
        self != Verdict::Refused
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Unchecked => "unchecked",
            Verdict::Child => "child",
            Verdict::Descendant => "descendant",
            Verdict::Cgroup => "cgroup",
            Verdict::Refused => "refused",
        }
    }
}

/// One datagram read: its sender's credentials (pid 0: none came with it),
/// its text (lossy UTF-8) and the verdict on its sender.
#[derive(Clone, Debug)]
pub struct Message {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
    pub text: String,
    pub verdict: Verdict,
    /// Longer than [`MESSAGE_MAX`]: its text is dropped, and it is refused.
    pub oversized: bool,
    /// It carried file descriptors (`FDSTORE=1` and the like), which were
    /// closed unread: we keep no one's fds.
    pub had_fds: bool,
}

/// Called (from procward's runtime thread) when the queue of messages read
/// goes from empty to not empty: the JS side then drains it.
pub type Wake = Box<dyn Fn() + Send + Sync>;

/// How many read messages may wait for the JS side before the receiver
/// stops reading: then the kernel's queue fills and the sender waits, as it
/// would for a slow manager; memory stays bounded whatever a child sends.
pub const QUEUE_MAX: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            Address::parse(b"/run/systemd/notify"),
            Ok(Address::Path("/run/systemd/notify".into()))
        );
        assert_eq!(
            Address::parse(b"@procward/x"),
            Ok(Address::Abstract(b"procward/x".to_vec()))
        );
        assert_eq!(Address::parse(b""), Err(AddressError::Empty));
        assert_eq!(Address::parse(b"@"), Err(AddressError::Unsupported));
        assert_eq!(Address::parse(b"run/x"), Err(AddressError::Unsupported));
        assert_eq!(
            Address::parse(b"vsock:2:999"),
            Err(AddressError::Unsupported)
        );
        assert_eq!(Address::parse(b"/a\0b"), Err(AddressError::Nul));
        let long = [b"/".as_slice(), &[b'a'; ADDRESS_MAX]].concat();
        assert_eq!(Address::parse(&long), Err(AddressError::TooLong));
        let fits = [b"@".as_slice(), &[b'a'; ADDRESS_MAX - 1]].concat();
        assert!(Address::parse(&fits).is_ok());
    }
}
