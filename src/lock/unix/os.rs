//! The lock's system calls where Linux and macOS agree (POSIX): the open
//! (`O_NOFOLLOW | O_CLOEXEC`, checked by `lstat` before and `fstat`/`fstatfs`
//! after), `flock(2)`, and the record's `pread`/`pwrite`/`ftruncate`. What
//! differs comes from the OS part (`imp`: `linux.rs`, `macos.rs`): what
//! kind of filesystem a file is on, and whether a holder is on its way out;
//! the interruptible wait is `interrupt.rs`.

use std::ffi::{c_int, CString};
use std::fs::File;
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::imp;
use super::OpenError;
use crate::sys::{cvt, euid};

pub(super) use super::interrupt::{
    prepare as prepare_wait, spawn_quiet, Blocked, InterruptHandle, Interruptible,
};

/// What a lock file's filesystem is, as far as the lock cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FsKind {
    Local,
    /// Where `flock` is emulated over the network (see `OpenError::NetworkFs`).
    Network(&'static str),
    /// Where files are kernel interfaces (see `OpenError::PseudoFs`).
    Pseudo(&'static str),
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn is_root() -> bool {
    euid() == 0
}

// ---- file checks ------------------------------------------------------------

/// `lstat`, or None when the path does not exist.
fn lstat(path: &CString) -> io::Result<Option<libc::stat>> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: a NUL-terminated path and a stat buffer we own.
    match cvt(unsafe { libc::lstat(path.as_ptr(), st.as_mut_ptr()) }) {
        // SAFETY: lstat succeeded, so the buffer is initialised.
        Ok(_) => Ok(Some(unsafe { st.assume_init() })),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: a valid fd and a stat buffer we own.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstat succeeded, so the buffer is initialised.
    Ok(unsafe { st.assume_init() })
}

fn file_type(st: &libc::stat) -> libc::mode_t {
    st.st_mode & libc::S_IFMT
}

fn check_kind(st: &libc::stat) -> Result<(), OpenError> {
    match file_type(st) {
        libc::S_IFREG => Ok(()),
        libc::S_IFLNK => Err(OpenError::Os {
            err: io::Error::from_raw_os_error(libc::ELOOP),
            op: "open",
        }),
        libc::S_IFDIR => Err(OpenError::NotRegular { directory: true }),
        _ => Err(OpenError::NotRegular { directory: false }),
    }
}

fn check_owner(st: &libc::stat) -> Result<(), OpenError> {
    if st.st_uid != euid() && !is_root() {
        return Err(OpenError::OtherOwner { uid: st.st_uid });
    }
    Ok(())
}

/// Another name for the same file would let a lock on one path write its
/// record into whatever the other name stands for (a hard link to a data
/// file); as root the owner check does not stop it.
fn check_links(st: &libc::stat) -> Result<(), OpenError> {
    if st.st_nlink > 1 {
        // nlink_t is u64 on x86_64 Linux, u32 on aarch64 Linux, u16 on macOS.
        #[allow(clippy::useless_conversion)]
        let links = u64::from(st.st_nlink);
        return Err(OpenError::HardLinked { links });
    }
    Ok(())
}

fn check_fs(kind: FsKind, allow_network_fs: bool) -> Result<(), OpenError> {
    match kind {
        FsKind::Pseudo(fs) => Err(OpenError::PseudoFs { fs }),
        FsKind::Network(fs) if !allow_network_fs => Err(OpenError::NetworkFs { fs }),
        _ => Ok(()),
    }
}

fn os(op: &'static str) -> impl Fn(io::Error) -> OpenError {
    move |err| OpenError::Os { err, op }
}

/// Opens (creating if missing, with `mode` before the umask) the lock file at
/// `path` for reading and writing.
///
/// Refused: a symlink (`ELOOP`; `O_NOFOLLOW` on the last component, so its
/// target is never touched or created), anything but a regular file, a file
/// owned by another uid unless we are root, and a network filesystem unless
/// allowed. The checks run on `lstat` before the open, so a FIFO or a device
/// is never opened (an open can block or have side effects there), and again
/// on the open fd, which is what counts if the path changed in between.
/// `O_NONBLOCK` is the backstop for that window: opening a FIFO then cannot
/// block; it has no effect on a regular file.
pub(super) fn open_for_lock(
    path: &Path,
    mode: u32,
    allow_network_fs: bool,
) -> Result<OwnedFd, OpenError> {
    let c = c_path(path).map_err(os("open"))?;
    match lstat(&c).map_err(os("lstat"))? {
        Some(st) => {
            check_kind(&st)?;
            check_owner(&st)?;
            check_links(&st)?;
            // Before the open: opening some kernel files has effects of its
            // own. The last component is not a symlink (lstat said so), so
            // this is the file's own filesystem; a swap in between is caught
            // on the open fd below.
            let kind = imp::fs_kind_of_path(&c).map_err(os("statfs"))?;
            check_fs(kind, allow_network_fs)?;
        }
        None => {
            // About to create it: refuse before leaving a file on a network
            // filesystem. The parent's filesystem is the new file's.
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let parent = c_path(parent).map_err(os("statfs"))?;
            match imp::fs_kind_of_path(&parent) {
                Ok(kind) => check_fs(kind, allow_network_fs)?,
                // A missing directory is reported by the open below, as open(2) would.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) => {
                    return Err(OpenError::Os {
                        err: e,
                        op: "statfs",
                    })
                }
            }
        }
    }
    let flags = libc::O_RDWR
        | libc::O_CREAT
        | libc::O_NOFOLLOW
        | libc::O_CLOEXEC
        | libc::O_NONBLOCK
        | libc::O_NOCTTY;
    // SAFETY: a NUL-terminated path; flags and mode are plain integers.
    let raw =
        cvt(unsafe { libc::open(c.as_ptr(), flags, mode as libc::c_uint) }).map_err(os("open"))?;
    // SAFETY: open just returned this fd, and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let st = fstat(fd.as_fd()).map_err(os("fstat"))?;
    check_kind(&st)?;
    check_owner(&st)?;
    check_links(&st)?;
    let kind = imp::fs_kind_of_fd(fd.as_fd()).map_err(os("fstatfs"))?;
    check_fs(kind, allow_network_fs)?;
    Ok(fd)
}

/// Opens an existing lock file read-only, for `readLock`. `Ok(None)`: no such
/// file. Symlinks and non-regular files are refused as for a lock; other
/// owners and network filesystems are fine, reading takes nothing.
pub(super) fn open_for_read(path: &Path) -> Result<Option<OwnedFd>, OpenError> {
    let c = c_path(path).map_err(os("open"))?;
    match lstat(&c).map_err(os("lstat"))? {
        Some(st) => check_kind(&st)?,
        None => return Ok(None),
    }
    let flags =
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;
    // SAFETY: a NUL-terminated path and plain flags.
    let raw = match cvt(unsafe { libc::open(c.as_ptr(), flags) }) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(OpenError::Os { err: e, op: "open" }),
    };
    // SAFETY: open just returned this fd, and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let st = fstat(fd.as_fd()).map_err(os("fstat"))?;
    check_kind(&st)?;
    Ok(Some(fd))
}

/// Whether `path` still names the file open on `fd`: not removed (no link
/// left) and not replaced (a rename over it, an editor's atomic save). A lock
/// on a file the path no longer names excludes nobody: the next acquirer
/// opens, and if need be creates, what the path names now.
pub(super) fn still_named(fd: BorrowedFd<'_>, path: &Path) -> Result<bool, OpenError> {
    let open = fstat(fd).map_err(os("fstat"))?;
    if open.st_nlink == 0 {
        return Ok(false);
    }
    let c = c_path(path).map_err(os("lstat"))?;
    Ok(match lstat(&c).map_err(os("lstat"))? {
        Some(now) => now.st_dev == open.st_dev && now.st_ino == open.st_ino,
        None => false,
    })
}

/// A file as the kernel tells it apart: its device and inode.
pub(super) type FileId = (u64, u64);

// dev_t is u64 on Linux, i32 on macOS; ino_t is u64 on both.
#[allow(clippy::unnecessary_cast)]
fn id_of(st: &libc::stat) -> FileId {
    (st.st_dev as u64, st.st_ino as u64)
}

/// The file open on `fd`.
pub(super) fn file_id(fd: BorrowedFd<'_>) -> io::Result<FileId> {
    fstat(fd).map(|st| id_of(&st))
}

/// The file `path` names now (a symlink itself, not its target). None:
/// nothing there, the path or a directory on it being gone (`ENOENT`), or
/// a directory on it no longer one (`ENOTDIR`).
pub(super) fn id_at(path: &Path) -> io::Result<Option<FileId>> {
    match lstat(&c_path(path)?) {
        Ok(st) => Ok(st.map(|st| id_of(&st))),
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Ok(None),
        Err(e) => Err(e),
    }
}

// ---- flock --------------------------------------------------------------------

fn flock(fd: BorrowedFd<'_>, op: c_int) -> io::Result<()> {
    loop {
        // SAFETY: a valid fd and a plain operation.
        match cvt(unsafe { libc::flock(fd.as_raw_fd(), op) }) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// `flock(LOCK_EX | LOCK_NB)`: true when taken, false when another open file
/// description holds a lock on the file.
pub(super) fn try_lock_exclusive(fd: BorrowedFd<'_>) -> io::Result<bool> {
    match flock(fd, libc::LOCK_EX | libc::LOCK_NB) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The probe of last resort: can a shared lock be had right now? It fails
/// only against an exclusive holder; when it succeeds it is dropped at once.
pub(super) fn probe_shared(fd: BorrowedFd<'_>) -> io::Result<bool> {
    match flock(fd, libc::LOCK_SH | libc::LOCK_NB) {
        Ok(()) => {
            flock(fd, libc::LOCK_UN)?;
            Ok(true)
        }
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

pub(super) fn unlock(fd: BorrowedFd<'_>) -> io::Result<()> {
    flock(fd, libc::LOCK_UN)
}

pub(super) fn truncate(fd: BorrowedFd<'_>, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    loop {
        // SAFETY: a valid fd and a length.
        match cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), len) }) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// `fd` as a `File`, for std's positioned reads and writes (`pread`,
/// `pwrite`, retried on EINTR). Never closed through it: the caller keeps it
/// within the borrow of `fd`.
fn positioned(fd: BorrowedFd<'_>) -> ManuallyDrop<File> {
    // SAFETY: `fd` is open for the borrow, and a ManuallyDrop never closes it.
    ManuallyDrop::new(unsafe { File::from_raw_fd(fd.as_raw_fd()) })
}

/// Reads from offset 0 until `buf` is full or the file ends.
pub(super) fn read_at_start(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    let file = positioned(fd);
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Writes all of `data` from offset 0.
pub(super) fn write_at_start(fd: BorrowedFd<'_>, data: &[u8]) -> io::Result<()> {
    positioned(fd).write_all_at(data, 0).map_err(|e| {
        // A pwrite that wrote nothing and named no error.
        if e.kind() == io::ErrorKind::WriteZero {
            io::Error::from_raw_os_error(libc::EIO)
        } else {
            e
        }
    })
}

pub(super) fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is ours and its length is passed.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
