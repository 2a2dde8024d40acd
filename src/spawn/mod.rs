//! Starting a child: the same [`Command`] and [`SpawnError`] on every OS.
//!
//! `unix`: resolving the program and preparing stdio on the calling thread,
//! then `clone` (Linux) or `fork` (macOS) and `exec` on a thread that lives
//! as long as the process. `windows`: `CreateProcessW`, the child born in a
//! Job object. What an OS cannot do (a `'pipe'`, credentials or a readiness
//! fd on Windows) is refused with [`SpawnError::Unsupported`] before any
//! process exists.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as imp;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as imp;

pub use imp::{pipe_into_raw, spawn, Child, IntoCgroup, Pipe};

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;

use crate::pid::Signal;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stdio {
    Ignore,
    Inherit,
    /// A pipe whose other end the parent keeps (Unix only).
    Pipe,
    File {
        path: PathBuf,
        append: bool,
    },
}

/// The child's environment.
#[derive(Clone, Debug)]
pub enum Environment {
    /// This process's environment as it is at the spawn, passed through
    /// exactly (Linux: its `environ` entries copied straight into the
    /// child's C strings, with no owned pairs in between).
    Inherit,
    /// Exactly these, in order. Bytes, not strings: UTF-8 or not.
    /// Shared: a runtime's process environment, converted once, is handed
    /// to every spawn without a copy.
    Set(std::sync::Arc<[(OsString, OsString)]>),
}

#[derive(Clone, Debug)]
pub struct Command {
    pub program: String,
    pub args: Vec<String>,
    /// The complete environment of the child.
    pub env: Environment,
    pub cwd: Option<PathBuf>,
    pub stdio: [Stdio; 3],
    /// A process group of its own (Windows: a console process group, so
    /// that CTRL_BREAK_EVENT can reach it alone).
    pub process_group: bool,
    /// Unix: the signal the child gets when this process dies. Windows: any
    /// signal means the Job object kills the tree when this process dies.
    pub death_signal: Option<Signal>,
    /// A readiness pipe (s6's `notification-fd`): its write end becomes this
    /// fd number (>= 3) in the child, its read end is the fourth pipe (Unix
    /// only).
    pub notify_fd: Option<i32>,
    /// Credentials the child switches to before exec (Unix only).
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// The child's file mode creation mask, set before exec (Linux only:
    /// macOS's posix_spawn has no umask action, Windows no umask).
    pub umask: Option<u32>,
    /// The child's argv[0] (Windows: the first word of its command line);
    /// `program` when None. The program run is always the one `program`
    /// resolves to.
    pub argv0: Option<String>,
    /// A session of its own (`setsid`) rather than a process group: the
    /// cgroup guardian, which a terminal's Ctrl-C must not reach (Unix).
    pub new_session: bool,
    /// Born ignoring SIGTERM, SIGINT and SIGHUP (an ignored disposition
    /// survives `execve`): the cgroup guardian, which a unit's stop sends
    /// SIGTERM the moment it starts, before a shell could run its first
    /// `trap` (Linux).
    pub ignore_stop_signals: bool,
    /// Package-internal (`procward run` in a terminal): the child's group
    /// becomes the foreground of the terminal on its stdin, if that is our
    /// controlling terminal and our group is its foreground now (Linux;
    /// elsewhere not asked for, and without effect).
    pub take_terminal: bool,
    /// The cgroup the child is born in (Linux).
    pub cgroup: Option<IntoCgroup>,
    /// Listening sockets handed over as systemd does (`sd_listen_fds(3)`):
    /// fds 3, 4, … in order, with `LISTEN_FDS`, `LISTEN_FDNAMES` and
    /// `LISTEN_PID` (the child's own pid, written by the child before exec)
    /// in its environment (Linux).
    pub listen: Option<Listen>,
}

/// The sockets of [`Command::listen`]. The fds are the caller's, open for
/// the length of the spawn call; the child gets copies.
#[derive(Clone, Debug, Default)]
pub struct Listen {
    pub fds: Vec<i32>,
    /// One per fd, without `:`; joined by `:` into `LISTEN_FDNAMES`.
    pub names: Vec<String>,
    /// Clear `O_NONBLOCK` on them in the child, as systemd hands them out.
    /// The flag lives on the open file description, which every holder of
    /// the socket shares: set it only when no other process is serving on
    /// these sockets (an overlapping daemon's non-blocking accept loop would
    /// otherwise block).
    pub blocking: bool,
}

/// What the caller was doing when a spawn failed, for the error's wording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// Finding or executing the program (Node's `spawn <command> <CODE>`).
    Spawn,
    /// Entering the working directory.
    Chdir,
    /// A step of the child between its creation and the exec (setuid,
    /// setgid, setpgid, ...).
    Setup,
}

impl At {
    pub fn as_str(self) -> &'static str {
        match self {
            At::Spawn => "spawn",
            At::Chdir => "chdir",
            At::Setup => "setup",
        }
    }
}

#[derive(Debug)]
pub enum SpawnError {
    /// Bad input that never reached the OS (NUL in a string, `=` in a key).
    Invalid(String),
    /// An option this OS has no means for; the text names it and the OS.
    Unsupported(String),
    /// A system call failed: `syscall`, while doing what `at` says.
    Os {
        err: io::Error,
        at: At,
        syscall: &'static str,
    },
    /// The caller's `Stdio::File` for the child's fd `fd` could not be
    /// opened; `reason`, when set, says why better than the errno does.
    File {
        fd: usize,
        err: io::Error,
        reason: Option<&'static str>,
    },
}
