//! macOS: filesystems by name, a holder on its way out (`PROC_FLAG_INEXIT`),
//! and the interrupt's flavour, SIGURG and a socket (see `interrupt.rs`).

use std::ffi::{c_int, CStr};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use super::interrupt::{Flavour, SIGURG_SOCKET};
use super::macos_fs::fs_kind_by_name;
use super::os::{cvt, FsKind};

// ---- filesystems ------------------------------------------------------------

fn kind(st: &libc::statfs) -> FsKind {
    fs_kind_by_name(&crate::sys::c_field(&st.f_fstypename))
}

pub(super) fn fs_kind_of_fd(fd: BorrowedFd<'_>) -> io::Result<FsKind> {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: a valid fd and a statfs buffer we own.
    cvt(unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstatfs succeeded, so the buffer is initialised.
    Ok(kind(&unsafe { st.assume_init() }))
}

pub(super) fn fs_kind_of_path(path: &CStr) -> io::Result<FsKind> {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: a NUL-terminated path and a statfs buffer we own.
    cvt(unsafe { libc::statfs(path.as_ptr(), st.as_mut_ptr()) })?;
    // SAFETY: statfs succeeded, so the buffer is initialised.
    Ok(kind(&unsafe { st.assume_init() }))
}

// ---- a holder on its way out ------------------------------------------------------

/// `PROC_FLAG_INEXIT` (`<sys/proc_info.h>`; libc does not export it): XNU's
/// `fill_procbsdinfo` sets it from `P_LEXIT`, which `exit1` sets before
/// `proc_exit` closes the process's descriptors.
const PROC_FLAG_INEXIT: u32 = 4;

/// Whether the process with this pid and start time (microseconds, as in
/// its identity) is exiting: it may have dropped the lock already while it
/// still looks alive. False when it cannot be read or is another process.
pub(super) fn exiting(pid: i32, start_time: u64) -> bool {
    let mut info = std::mem::MaybeUninit::<libc::proc_bsdinfo>::zeroed();
    let size = std::mem::size_of::<libc::proc_bsdinfo>() as c_int;
    // SAFETY: the buffer is ours and `size` bytes long.
    let n = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTBSDINFO,
            0,
            info.as_mut_ptr().cast(),
            size,
        )
    };
    if n != size {
        return false;
    }
    // SAFETY: the kernel filled all `size` bytes.
    let info = unsafe { info.assume_init() };
    let started = info
        .pbi_start_tvsec
        .saturating_mul(1_000_000)
        .saturating_add(info.pbi_start_tvusec);
    started == start_time && info.pbi_flags & PROC_FLAG_INEXIT != 0
}

// ---- the interrupt ------------------------------------------------------------

/// No real-time signals, no `O_PATH`: SIGURG and a socket.
pub(super) fn flavour() -> &'static Flavour {
    &SIGURG_SOCKET
}

/// Every flavour that runs here, for tests.
#[cfg(test)]
pub(super) fn test_flavours() -> Vec<&'static Flavour> {
    vec![&SIGURG_SOCKET]
}

pub(super) fn errno_location() -> *mut c_int {
    // SAFETY: returns this thread's errno address; cannot fail.
    unsafe { libc::__error() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inert descriptor's promise on macOS: flock(2) refuses a socket
    /// ("ENOTSUP: the referenced descriptor is not of the correct type").
    #[test]
    fn flock_on_the_inert_socket_fails_at_once() {
        let fd = SIGURG_SOCKET.inert().unwrap();
        // SAFETY: a valid fd.
        let ret = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(ret, -1);
        assert_eq!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::ENOTSUP)
        );
    }

    #[test]
    fn this_process_is_not_exiting() {
        let me = crate::proc_info::identity_of(crate::pid::Pid::current())
            .unwrap()
            .unwrap();
        assert!(!exiting(std::process::id() as i32, me.start_time));
    }
}
