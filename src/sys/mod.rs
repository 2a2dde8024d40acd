//! Safe wrappers over the system calls that are not one module's own
//! mechanism: those several core modules make (pidfds, `waitid`, `kill` and
//! `killpg`, `poll`, clocks, an fd's inode and file system, Windows process
//! handles and Job objects), and a few that keep raw memory out of a
//! module's logic (the reaper's `epoll`, macOS's kqueue exit wait,
//! `proc_info`'s `getdents64` of a process's first threads, the unix
//! datagram sockets with credentials of `notify`, in `linux/socket.rs`).
//! One file per OS (`linux`, `macos`, `windows`; what Linux and macOS
//! share in `unix`), chosen here, once: the core modules
//! use `crate::sys` and name only the calls their own OS part makes. Each
//! `unsafe` block holds one call under its `// SAFETY:` comment; callers
//! never see a raw pointer. The crate's one `cvt` (a C call's -1 into an
//! `io::Error`) is here, for every module that makes a call of its own.
//!
//! Not every call is here (`grep unsafe` over `src/`: about a fifth of
//! the blocks are), and most `libc::` names elsewhere are no call at all
//! but the errno values, signal numbers and flags a module means. A module
//! whose mechanism *is* its calls keeps them, fenced, beside what they need:
//! - the spawn paths (`spawn/unix/common.rs`: the stdio fds' flags and the
//!   PATH's `access`; `spawn/unix.rs`: the creating thread's signal mask;
//!   `spawn/unix/{linux,macos,clone3}.rs`, `spawn/windows.rs`): between
//!   `clone` and `exec` the child may only make async-signal-safe calls on
//!   memory prepared before, so they are written in place, next to that
//!   preparation;
//! - the lock's own calls (`lock/unix/os.rs`: the checked open, `flock`,
//!   the record's reads and writes; `lock/unix/{linux,macos}.rs`: `statfs`;
//!   `lock/unix/interrupt.rs`: the signal that interrupts a blocked `flock`;
//!   `lock/windows.rs`: `LockFileEx` and its overlapped wait);
//! - the cgroup's (`cgroup/linux.rs` and `cgroup/linux/{handle,wait,
//!   discovery}.rs`: `openat`, `unlinkat`, `statfs`, `poll` on
//!   `cgroup.events`, `getxattr`, `uname`), the subreaper's
//!   (`orphans/linux.rs`: `prctl`, `waitpid` of its own orphans), and the
//!   Windows exit wait (`exit_watch/windows.rs`: a registered wait and its
//!   callback);
//! - the libuv and napi boundary (`exit_watch/unix/js_loop.rs` and the
//!   libuv calls in `exit_watch/unix/js_loop/uv.rs`; `binding/js_loop.rs`,
//!   `binding/errors.rs`, `binding/lock.rs`);
//! - tokio's `AsyncFd` registration of an fd (`wait/unix.rs`,
//!   `stop/targets/unix.rs`, `strays/linux.rs`, `notify/linux.rs`,
//!   `cgroup/linux/wait.rs`, `exit_watch/unix/macos.rs`), and single calls
//!   that take no pointer (`getpgrp`, `gettid`, `sysconf`, `clock_gettime`,
//!   `fcntl`, `strerror`) beside their one use;
//! - `listeners.rs` (a netlink `sock_diag` dump) and `proc_info/macos.rs`
//!   (`proc_pidinfo`, `sysctl`).

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::*;

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
pub use macos::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;
