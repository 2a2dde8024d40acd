//! Thin, safe wrappers over the system calls procward makes, one file per
//! OS (`linux`, `macos`, `windows`; what Linux and macOS share in `unix`;
//! Linux's unix datagram sockets with credentials, for `notify`, in
//! `linux/socket.rs`). Each `unsafe` block holds one call under its
//! `// SAFETY:` comment; callers never see a raw pointer. The crate's one
//! `cvt` (a C call's -1 into an `io::Error`) is here, for every module that
//! makes a call of its own. The OS is chosen here, once: the core modules
//! use `crate::sys` and name only the calls their own OS part makes.
//!
//! Not every `unsafe` is here (`grep unsafe` over `src/`; about a quarter
//! of the blocks are). The rest stays where what it needs is:
//! - the spawn paths (`spawn/unix.rs`, `spawn/unix/{linux,macos,clone3}.rs`,
//!   `spawn/windows.rs`): between `clone` and `exec` the child may only make
//!   async-signal-safe calls on memory prepared before, so they are written
//!   in place, next to that preparation;
//! - the lock's own calls (`lock/unix/os.rs`: the checked open, `flock`,
//!   the record's reads and writes; `lock/unix/{linux,macos}.rs`: `statfs`;
//!   `lock/unix/interrupt.rs`: the signal that interrupts a blocked `flock`;
//!   `lock/windows.rs`: `LockFileEx` and its overlapped wait);
//! - the cgroup handle (`cgroup/linux.rs`: `openat`, `unlinkat`, `statfs`)
//!   and the Windows exit wait (`exit_watch/windows.rs`: a registered wait
//!   and its callback);
//! - the napi and libuv boundary (`binding/js_loop.rs`, the libuv calls in
//!   `binding/js_loop/uv.rs`, `binding/errors.rs`, `binding/lock.rs`);
//! - tokio's `AsyncFd` registration of an fd (`wait/unix.rs`,
//!   `stop/targets/unix.rs`, `strays/linux.rs`, `notify/linux.rs`,
//!   `exit_watch/unix/macos.rs`), and single calls that take no pointer
//!   (`getpgrp`, `gettid`, `sysconf`, `clock_gettime`, `fcntl`,
//!   `strerror`) beside their one use;
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
