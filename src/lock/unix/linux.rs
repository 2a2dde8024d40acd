//! Linux: what a filesystem's magic number says, a holder on its way out, and the
//! interrupt's flavour: a real-time signal and an `O_PATH` descriptor, or
//! (`PROCWARD_LOCK_INTERRUPT=sigurg`) macOS's SIGURG and socket, so that
//! macOS's flavour runs somewhere (see `interrupt.rs`).

use std::ffi::{c_int, CStr};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

use super::interrupt::{disposition, install, Flavour, SIGURG_SOCKET};
use super::os::FsKind;
use crate::sys::cvt;

// ---- filesystems ------------------------------------------------------------

pub(super) fn fs_kind_of_fd(fd: BorrowedFd<'_>) -> io::Result<FsKind> {
    fs_magic_of_fd(fd).map(fs_kind)
}

pub(super) fn fs_kind_of_path(path: &CStr) -> io::Result<FsKind> {
    fs_magic_of_path(path).map(fs_kind)
}

fn fs_kind(magic: u32) -> FsKind {
    if let Some(fs) = pseudo_fs_name(magic) {
        return FsKind::Pseudo(fs);
    }
    match network_fs_name(magic) {
        Some(fs) => FsKind::Network(fs),
        None => FsKind::Local,
    }
}

/// The filesystem's magic number (`statfs.f_type`).
fn fs_magic_of_fd(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: a valid fd and a statfs buffer we own.
    cvt(unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstatfs succeeded, so the buffer is initialised.
    let st = unsafe { st.assume_init() };
    // f_type is a signed word on glibc; the magics are 32-bit patterns.
    Ok(st.f_type as u32)
}

fn fs_magic_of_path(path: &CStr) -> io::Result<u32> {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: a NUL-terminated path and a statfs buffer we own.
    cvt(unsafe { libc::statfs(path.as_ptr(), st.as_mut_ptr()) })?;
    // SAFETY: statfs succeeded, so the buffer is initialised.
    let st = unsafe { st.assume_init() };
    Ok(st.f_type as u32)
}

/// Network filesystems, where `flock` is emulated (NFS since 2.6.12 maps it
/// to a whole-file POSIX/NLM lock, CIFS to a byte-range lock, 9p and AFS ask
/// the server) and a network partition can leave two holders each believing
/// it holds the lock.
pub(super) fn network_fs_name(magic: u32) -> Option<&'static str> {
    match magic {
        0x0000_6969 => Some("nfs"),
        0x0000_517b => Some("smb"),
        0xff53_4d42 => Some("cifs"),
        0xfe53_4d42 => Some("smb2"),
        0x5346_414f => Some("afs"),
        0x6b41_4653 => Some("kafs"),
        0x0102_1997 => Some("9p"),
        _ => None,
    }
}

/// Kernel pseudo-filesystems: their "regular files" are kernel interfaces
/// (`/proc/sys/kernel/hostname`, cgroup controls, sysfs attributes), where
/// writing a record would change the system, not a file.
pub(super) fn pseudo_fs_name(magic: u32) -> Option<&'static str> {
    match magic {
        0x0000_9fa0 => Some("proc"),
        0x6265_6572 => Some("sysfs"),
        0x0027_e0eb => Some("cgroup"),
        0x6367_7270 => Some("cgroup2"),
        0x6462_6720 => Some("debugfs"),
        0x7472_6163 => Some("tracefs"),
        0x7363_6673 => Some("securityfs"),
        0x6265_6570 => Some("configfs"),
        0xcafe_4a11 => Some("bpf"),
        0x6165_676c => Some("pstore"),
        0xde5e_81e4 => Some("efivarfs"),
        0xf97c_ff8c => Some("selinuxfs"),
        0x4341_5d53 => Some("smackfs"),
        0x4249_4e4d => Some("binfmt_misc"),
        0x6573_5543 => Some("fusectl"),
        0x6759_6969 => Some("rpc_pipefs"),
        0x6e73_6673 => Some("nsfs"),
        _ => None,
    }
}

// ---- the interrupt ------------------------------------------------------------

/// The interrupt's flavour for this process, chosen once:
/// `PROCWARD_LOCK_INTERRUPT=sigurg` picks macOS's (SIGURG and a socket),
/// anything else (or nothing) Linux's own.
pub(super) fn flavour() -> &'static Flavour {
    static CHOSEN: OnceLock<&'static Flavour> = OnceLock::new();
    CHOSEN.get_or_init(|| match std::env::var_os("PROCWARD_LOCK_INTERRUPT") {
        Some(v) if v == "sigurg" => &SIGURG_SOCKET,
        _ => &RT_SIGNAL_O_PATH,
    })
}

/// The highest real-time signal nobody has a handler for, and an `O_PATH`
/// descriptor (`flock` on it fails at once with `EBADF`: it is opened for
/// neither reading nor writing).
pub(super) static RT_SIGNAL_O_PATH: Flavour = Flavour::new(claim_rt_signal, o_path_root, "open");

/// Real-time signals are left alone by Node, libuv and V8; their default
/// action (terminate) is replaced by our handler, which does nothing unless
/// it interrupts a cancelled waiter. The two lowest are glibc's own (NPTL).
fn claim_rt_signal() -> Option<c_int> {
    (libc::SIGRTMIN() + 2..=libc::SIGRTMAX())
        .rev()
        .find(|&sig| {
            disposition(sig).is_some_and(|d| d.sa_sigaction == libc::SIG_DFL) && install(sig)
        })
}

fn o_path_root() -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated path and plain flags.
    let raw = cvt(unsafe {
        libc::open(
            c"/".as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY,
        )
    })?;
    // SAFETY: open just returned this fd, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Every flavour that runs here, for tests.
#[cfg(test)]
pub(super) fn test_flavours() -> Vec<&'static Flavour> {
    vec![&RT_SIGNAL_O_PATH, &SIGURG_SOCKET]
}

pub(super) fn errno_location() -> *mut c_int {
    // SAFETY: returns this thread's errno address; cannot fail.
    unsafe { libc::__errno_location() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filesystems_by_magic() {
        for (magic, kind) in [
            (0x6969, FsKind::Network("nfs")),
            (0xff53_4d42, FsKind::Network("cifs")),
            (0xfe53_4d42, FsKind::Network("smb2")),
            (0x9fa0, FsKind::Pseudo("proc")),
            (0x6265_6572, FsKind::Pseudo("sysfs")),
            (0x6367_7270, FsKind::Pseudo("cgroup2")),
            (0xef53, FsKind::Local),      // ext4
            (0x0102_1994, FsKind::Local), // tmpfs
        ] {
            assert_eq!(fs_kind(magic), kind, "{magic:#x}");
        }
    }

    #[test]
    fn flock_on_an_o_path_fd_fails_at_once() {
        // The cancellation trick depends on it.
        let fd = o_path_root().unwrap();
        // SAFETY: a valid fd.
        let ret = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(ret, -1);
        assert_eq!(io::Error::last_os_error().raw_os_error(), Some(libc::EBADF));
    }

    /// The SIGURG flavour's inert fd, on Linux: flock locks the socket's own
    /// inode, at once; nobody else can ever contend for it.
    #[test]
    fn flock_on_the_inert_socket_returns_at_once() {
        let a = SIGURG_SOCKET.inert().unwrap();
        let b = SIGURG_SOCKET.inert().unwrap();
        for fd in [&a, &b] {
            // SAFETY: a valid fd.
            let ret = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            assert_eq!(ret, 0, "{}", io::Error::last_os_error());
        }
    }

    #[test]
    fn kernel_pseudo_files_are_refused() {
        use super::super::{LockFile, OpenError};
        use std::path::Path;

        let open_err = |path: &str| match LockFile::open(Path::new(path), 0o600, false) {
            Ok(_) => panic!("{path} was opened"),
            Err(e) => e,
        };
        // Only opened, never locked or written: before the check, root could
        // open it for writing.
        if crate::sys::euid() == 0 {
            let e = open_err("/proc/sys/kernel/hostname");
            assert!(matches!(e, OpenError::PseudoFs { fs: "proc" }), "{e:?}");
        }
        // A file that would be created on one.
        let e = open_err("/proc/self/procward-test.lock");
        assert!(matches!(e, OpenError::PseudoFs { fs: "proc" }), "{e:?}");
    }
}
