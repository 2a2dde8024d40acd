//! cgroup v2 on Linux: finding a parent we may use, creating a child's
//! cgroup, killing it (`cgroup.kill`, Linux 5.14), waiting event-driven for
//! it to empty (poll on `cgroup.events`, which the kernel notifies when
//! `populated` changes), removing it, and reading its usage.
//!
//! Discovery. Our cgroup is the `0::` line of `/proc/self/cgroup`, and the
//! v2 hierarchy is the `cgroup2` mount in `/proc/self/mountinfo` (a hybrid
//! system mounts it at `/sys/fs/cgroup/unified`, a pure v2 one at
//! `/sys/fs/cgroup`). The default parent is a `procward` cgroup *below*
//! ours: our children must stay inside the subtree that our own manager
//! kills (`systemctl stop` signals, or `cgroup.kill`s, every process of the
//! unit's cgroup, and a cgroup beside the unit's is outside it). The "no
//! internal processes" rule forbids a cgroup that holds processes to hand
//! controllers to its children, so where our cgroup is delegated to us we
//! follow systemd's layout for delegated services: at the first contained
//! spawn this process (only this one, once) moves into a leaf of its own,
//! `<own>/supervisor`, and the children's cgroups go beside it, under
//! `<own>/procward`, where memory and pids can then be enabled. Where it is
//! not (root in a unit that did not ask for `Delegate=`: everything is
//! writable to root, but the manager owns the tree), we are not moved and
//! the children still go below our cgroup, with no controllers (usage null
//! for memory and pids). At the root of the mount (a container with its own
//! cgroup namespace, or the host's root) it is `<root>/procward`, as
//! processes in the root do not stop controllers below it. A child's own
//! cgroup is a fresh leaf: a process may always enter it.
//!
//! Permission. Moving a process between cgroups needs write access to
//! `cgroup.procs` of the common ancestor of both, and creating needs write
//! access to the parent directory: what systemd's delegation (`Delegate=`,
//! a user's `user@.service`) grants. Both are checked with the effective
//! ids (`faccessat(AT_EACCESS)`), which also sees a read-only mount.
//!
//! Identity. A cgroup is recorded by path and id (its directory's inode,
//! the kernel's cgroup id): a path can be removed and made again.
//!
//! The parts: `discovery` (where the hierarchy is, which parent we may
//! use, delegation and the move into our own leaf), `handle` (one child's
//! cgroup: made, killed, read, removed), `wait` (waiting event-driven for
//! it to empty, and the removal once it does), `takeover` (killing a
//! cgroup a dead supervisor recorded). The fd and path calls they share are
//! here.

mod discovery;
mod handle;
mod takeover;
mod wait;

pub use discovery::support;
pub use handle::{contain, Cgroup};
pub use takeover::kill_recorded;
pub use wait::{remove_when_empty, wait_empty, wait_empty_blocking};

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

pub(super) use crate::sys::cvt;

pub(super) fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

pub(super) fn is_cgroup2(p: &Path) -> io::Result<bool> {
    let c = cpath(p)?;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: statfs fills the buffer we own from a NUL-terminated path.
    cvt(unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) })?;
    // SAFETY: statfs succeeded, so the buffer is initialised.
    let st = unsafe { st.assume_init() };
    // f_type is i64 with glibc and u64 (or 32 bits) elsewhere.
    #[allow(clippy::unnecessary_cast)]
    let t = st.f_type as i64;
    Ok(t == CGROUP2_SUPER_MAGIC)
}

pub(super) fn open_at(
    dir: BorrowedFd<'_>,
    name: &std::ffi::CStr,
    flags: libc::c_int,
) -> io::Result<OwnedFd> {
    // SAFETY: openat with a NUL-terminated name relative to a dir fd we hold.
    let fd = cvt(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC) })?;
    // SAFETY: the kernel just gave us this fd.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Opens the directory `path` read-only: how a cgroup is held and walked.
pub(super) fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let c = cpath(path)?;
    // SAFETY: open of a NUL-terminated path we own.
    let fd = cvt(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: the kernel just gave us this fd.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
