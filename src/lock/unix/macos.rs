//! macOS: filesystems by name, a holder on its way out (`PROC_FLAG_INEXIT`),
//! and the interrupt's flavour, SIGURG and a socket (see `interrupt.rs`).

use std::ffi::{c_int, CStr};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use super::interrupt::{Flavour, SIGURG_SOCKET};
use super::macos_fs::fs_kind_by_name;
use super::os::FsKind;
use crate::sys::cvt;

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
}
