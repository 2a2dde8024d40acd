//! Linux: the open (`O_NOFOLLOW | O_CLOEXEC`, checked by `fstat`/`fstatfs`),
//! `flock(2)`, and a blocking `flock(LOCK_EX)` that another thread can
//! interrupt.
//!
//! # Interrupting a blocked `flock`
//!
//! A blocked `flock(LOCK_EX)` ends only when the lock is granted or a signal
//! arrives: closing the fd from another thread does not wake it (the call
//! holds its own reference to the file). So each waiting thread registers
//! itself in a static slot table, and the canceller sends it a real-time
//! signal with `pthread_kill`; the handler (installed once, without
//! `SA_RESTART`) makes the call return `EINTR`. The waiting thread keeps every
//! signal blocked except during the call itself, so nothing else is
//! delivered to it.
//!
//! The classic race — the signal lands after the thread checked "cancelled?"
//! but before it entered `flock`, so the call blocks anyway — is closed by
//! the handler itself: for a cancelled slot it `dup2`s an `O_PATH` descriptor
//! over the lock fd. Whatever the thread was doing, that settles it:
//! - not yet in `flock`: the call meets an `O_PATH` fd and fails at once
//!   with `EBADF`;
//! - blocked in `flock`: `EINTR`, and the lock was never granted;
//! - `flock` had just succeeded: the handler unlocks it (`LOCK_UN`; a close
//!   alone would not do while a child forked but not yet exec'd holds a
//!   copy of the descriptor), then swaps the descriptor out.
//!
//! The handler reads only atomics and makes only plain system calls
//! (`gettid`, `flock`, `dup2`); it never follows a pointer that a signal carried, so a
//! stray signal from elsewhere can at most interrupt a waiter, which then
//! simply waits again.

use std::ffi::{c_int, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;
use std::thread::JoinHandle;

use super::OpenError;

fn cvt(ret: c_int) -> io::Result<c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
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

fn fs_magic_of_path(path: &CString) -> io::Result<u32> {
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
        return Err(OpenError::HardLinked { links: st.st_nlink });
    }
    Ok(())
}

fn check_fs(magic: u32, allow_network_fs: bool) -> Result<(), OpenError> {
    if let Some(fs) = pseudo_fs_name(magic) {
        return Err(OpenError::PseudoFs { fs });
    }
    match network_fs_name(magic) {
        Some(fs) if !allow_network_fs => Err(OpenError::NetworkFs { fs }),
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
            let magic = fs_magic_of_path(&c).map_err(os("statfs"))?;
            check_fs(magic, allow_network_fs)?;
        }
        None => {
            // About to create it: refuse before leaving a file on a network
            // filesystem. The parent's filesystem is the new file's.
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let parent = c_path(parent).map_err(os("statfs"))?;
            match fs_magic_of_path(&parent) {
                Ok(magic) => check_fs(magic, allow_network_fs)?,
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
    let magic = fs_magic_of_fd(fd.as_fd()).map_err(os("fstatfs"))?;
    check_fs(magic, allow_network_fs)?;
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

/// Reads from offset 0 until `buf` is full or the file ends.
pub(super) fn read_at_start(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: `rest` is a valid, writable slice of the given length.
        let n = unsafe {
            libc::pread(
                fd.as_raw_fd(),
                rest.as_mut_ptr().cast(),
                rest.len(),
                done as libc::off_t,
            )
        };
        match n {
            0 => break,
            n if n > 0 => done += n as usize,
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(done)
}

/// Writes all of `data` from offset 0.
pub(super) fn write_at_start(fd: BorrowedFd<'_>, data: &[u8]) -> io::Result<()> {
    let mut done = 0;
    while done < data.len() {
        let rest = &data[done..];
        // SAFETY: `rest` is a valid slice of the given length.
        let n = unsafe {
            libc::pwrite(
                fd.as_raw_fd(),
                rest.as_ptr().cast(),
                rest.len(),
                done as libc::off_t,
            )
        };
        match n {
            n if n > 0 => done += n as usize,
            0 => return Err(io::Error::from_raw_os_error(libc::EIO)),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
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

// ---- a holder on its way out ------------------------------------------------------

/// `PF_EXITING` (include/linux/sched.h): set in `do_exit` by `exit_signals`,
/// before `exit_files` closes the process's descriptors.
const PF_EXITING: u64 = 0x4;

/// Whether the process with this pid and start time is exiting. A holder
/// killed by a signal loses its lock when its files close in `do_exit`,
/// microseconds before it is a zombie and before a pidfd reports its exit;
/// in between, only this flag (field 9 of `/proc/<pid>/stat`) tells.
/// False when the stat cannot be read or belongs to another process.
pub(super) fn exiting(pid: i32, start_time: u64) -> bool {
    let Ok(stat) = std::fs::read(format!("/proc/{pid}/stat")) else {
        return false;
    };
    parse_exiting(&stat, start_time)
}

fn parse_exiting(stat: &[u8], start_time: u64) -> bool {
    // Fields after the name's last ')': index 0 is field 3 (state).
    let Some(close) = stat.iter().rposition(|&b| b == b')') else {
        return false;
    };
    let Ok(rest) = std::str::from_utf8(&stat[close + 1..]) else {
        return false;
    };
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let flags = fields.get(9 - 3).and_then(|f| f.parse::<u64>().ok());
    let started = fields.get(22 - 3).and_then(|f| f.parse::<u64>().ok());
    match (flags, started) {
        (Some(flags), Some(started)) => started == start_time && flags & PF_EXITING != 0,
        _ => false,
    }
}

// ---- an interruptible blocking flock ------------------------------------------

/// How many threads may wait for a lock at once in one process. Each is a
/// thread blocked in the kernel; beyond this many, a wait fails with EAGAIN.
const SLOTS: usize = 1024;

struct Slot {
    /// Owned by a waiting thread (claim flag, set before the fields below).
    claimed: AtomicBool,
    /// The owner's thread id, published last: the handler matches on it.
    tid: AtomicI32,
    fd: AtomicI32,
    spare: AtomicI32,
    cancelled: AtomicBool,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            claimed: AtomicBool::new(false),
            tid: AtomicI32::new(0),
            fd: AtomicI32::new(-1),
            spare: AtomicI32::new(-1),
            cancelled: AtomicBool::new(false),
        }
    }
}

static SLOT_TABLE: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];

fn gettid() -> i32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

extern "C" fn on_interrupt(_sig: c_int) {
    // SAFETY: this thread's errno; saved and restored so the interrupted code
    // never sees ours.
    let saved = unsafe { *libc::__errno_location() };
    let tid = gettid();
    for slot in &SLOT_TABLE {
        if slot.tid.load(Ordering::Acquire) == tid {
            if slot.cancelled.load(Ordering::SeqCst) {
                let fd = slot.fd.load(Ordering::Acquire);
                // Unlock first, in case flock had just been granted: a close
                // is not enough while a child forked but not yet exec'd holds
                // a copy of the descriptor.
                // SAFETY: the fd belongs to this slot's thread (this thread)
                // and stays open while the slot is claimed; flock is a plain
                // system call, safe in a handler.
                unsafe { libc::flock(fd, libc::LOCK_UN) };
                // SAFETY: as above, and the spare too; dup2 is
                // async-signal-safe.
                unsafe { libc::dup2(slot.spare.load(Ordering::Acquire), fd) };
            }
            break;
        }
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

fn handler_address() -> usize {
    on_interrupt as extern "C" fn(c_int) as usize
}

/// The current disposition of `sig` (`sa_sigaction`: a handler address,
/// `SIG_DFL` or `SIG_IGN`), or None if it cannot be read.
fn disposition(sig: c_int) -> Option<usize> {
    let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: reading the current action into a buffer we own.
    if unsafe { libc::sigaction(sig, std::ptr::null(), old.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: sigaction succeeded, so the buffer is initialised.
    Some(unsafe { old.assume_init() }.sa_sigaction)
}

fn install(sig: c_int) -> bool {
    let act = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: a zeroed sigaction is a valid starting point.
    let mut act = unsafe { act.assume_init() };
    act.sa_sigaction = handler_address();
    // No SA_RESTART: the blocked flock must return EINTR.
    act.sa_flags = 0;
    // SAFETY: fills the mask we own.
    unsafe { libc::sigfillset(&mut act.sa_mask) };
    // SAFETY: installs a handler that only touches atomics and calls
    // async-signal-safe functions.
    unsafe { libc::sigaction(sig, &act, std::ptr::null_mut()) == 0 }
}

/// The signal that interrupts waiters: the highest real-time signal nobody
/// has a handler for, claimed once per process. Real-time signals are left
/// alone by Node, libuv and V8; their default action (terminate) is replaced
/// by our no-op-unless-cancelled handler.
fn interrupt_signal() -> Result<c_int, OpenError> {
    static SIG: OnceLock<Option<c_int>> = OnceLock::new();
    SIG.get_or_init(|| {
        (libc::SIGRTMIN() + 2..=libc::SIGRTMAX())
            .rev()
            .find(|&sig| disposition(sig) == Some(libc::SIG_DFL) && install(sig))
    })
    .ok_or(OpenError::NoSignal)
}

fn empty_set() -> libc::sigset_t {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::zeroed();
    // SAFETY: initialises the set we own.
    unsafe { libc::sigemptyset(set.as_mut_ptr()) };
    // SAFETY: initialised just above.
    unsafe { set.assume_init() }
}

fn one_signal(sig: c_int) -> libc::sigset_t {
    let mut set = empty_set();
    // SAFETY: adds a valid signal number to the set we own.
    unsafe { libc::sigaddset(&mut set, sig) };
    set
}

fn set_mask(how: c_int, set: &libc::sigset_t, old: Option<&mut libc::sigset_t>) {
    let old = old.map_or(std::ptr::null_mut(), |o| o as *mut _);
    // SAFETY: valid set pointers; pthread_sigmask cannot fail with a valid `how`.
    unsafe { libc::pthread_sigmask(how, set, old) };
}

/// Spawns a thread with every signal blocked, so that no process-directed
/// signal is ever delivered to it (the waiter unblocks only its own).
pub(super) fn spawn_quiet<F>(name: &str, stack: usize, f: F) -> io::Result<JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    let mut all = std::mem::MaybeUninit::<libc::sigset_t>::zeroed();
    // SAFETY: fills the set we own.
    unsafe { libc::sigfillset(all.as_mut_ptr()) };
    // SAFETY: initialised just above.
    let all = unsafe { all.assume_init() };
    let mut old = empty_set();
    // The new thread inherits the mask in force at creation.
    set_mask(libc::SIG_BLOCK, &all, Some(&mut old));
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .stack_size(stack)
        .spawn(f);
    set_mask(libc::SIG_SETMASK, &old, None);
    spawned
}

/// A waiting thread's registration (see the module docs). Created and
/// dropped on that thread.
pub(super) struct Interruptible {
    slot: &'static Slot,
    sig: c_int,
    _spare: OwnedFd,
}

/// Lets another thread interrupt a registered waiter. Only valid while the
/// waiter is registered and alive: the caller guarantees it (the lock
/// module sends it only under the mutex that the waiter must take before it
/// unregisters).
#[derive(Clone, Copy)]
pub(super) struct InterruptHandle {
    slot: &'static Slot,
    thread: libc::pthread_t,
    sig: c_int,
}

/// How a blocking lock ended without the lock.
#[derive(Debug)]
pub(super) enum Blocked {
    Interrupted,
    Os(io::Error),
}

impl Interruptible {
    /// Registers the calling thread, whose signals are all blocked, as a
    /// waiter on `fd`.
    pub fn register(fd: BorrowedFd<'_>) -> Result<Interruptible, OpenError> {
        let sig = interrupt_signal()?;
        let root = c"/";
        // SAFETY: a NUL-terminated path and plain flags.
        let raw = cvt(unsafe {
            libc::open(
                root.as_ptr(),
                libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY,
            )
        })
        .map_err(os("open"))?;
        // SAFETY: open just returned this fd, and nothing else owns it.
        let spare = unsafe { OwnedFd::from_raw_fd(raw) };
        let slot = SLOT_TABLE
            .iter()
            .find(|s| {
                s.claimed
                    .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            })
            .ok_or(OpenError::TooManyWaiters { max: SLOTS })?;
        slot.fd.store(fd.as_raw_fd(), Ordering::Release);
        slot.spare.store(spare.as_raw_fd(), Ordering::Release);
        slot.cancelled.store(false, Ordering::SeqCst);
        slot.tid.store(gettid(), Ordering::Release);
        Ok(Interruptible {
            slot,
            sig,
            _spare: spare,
        })
    }

    pub fn handle(&self) -> InterruptHandle {
        InterruptHandle {
            slot: self.slot,
            // SAFETY: pthread_self cannot fail.
            thread: unsafe { libc::pthread_self() },
            sig: self.sig,
        }
    }

    /// `flock(fd, LOCK_EX)`, blocking until granted or interrupted. `fd` is
    /// the one given to `register`. Returns with the signal blocked again.
    pub fn lock_exclusive(&self, fd: BorrowedFd<'_>) -> Result<(), Blocked> {
        self.lock_exclusive_after(fd, || {})
    }

    /// The same, running `between` after the last "cancelled?" check and
    /// before the call: tests widen the race window with it.
    fn lock_exclusive_after(&self, fd: BorrowedFd<'_>, between: impl Fn()) -> Result<(), Blocked> {
        let set = one_signal(self.sig);
        loop {
            set_mask(libc::SIG_UNBLOCK, &set, None);
            if self.slot.cancelled.load(Ordering::SeqCst) {
                set_mask(libc::SIG_BLOCK, &set, None);
                return Err(Blocked::Interrupted);
            }
            between();
            // SAFETY: `fd` is a valid fd number (possibly replaced by the
            // O_PATH spare, see the module docs).
            let ret = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX) };
            let err = io::Error::last_os_error();
            set_mask(libc::SIG_BLOCK, &set, None);
            if ret == 0 {
                return Ok(());
            }
            if self.slot.cancelled.load(Ordering::SeqCst) {
                return Err(Blocked::Interrupted);
            }
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(Blocked::Os(err));
            }
        }
    }
}

impl Drop for Interruptible {
    fn drop(&mut self) {
        // The signal is blocked here (lock_exclusive returns so), so the
        // handler cannot run on this thread while the slot is taken apart; a
        // signal still pending dies with the thread.
        self.slot.tid.store(0, Ordering::Release);
        self.slot.fd.store(-1, Ordering::Release);
        self.slot.spare.store(-1, Ordering::Release);
        self.slot.cancelled.store(false, Ordering::SeqCst);
        self.slot.claimed.store(false, Ordering::Release);
    }
}

impl InterruptHandle {
    pub fn interrupt(&self) {
        self.slot.cancelled.store(true, Ordering::SeqCst);
        // Someone may have replaced our handler since we claimed the signal
        // (another addon, an LD_PRELOAD library, SIG_IGN): the signal would
        // then be ignored, or restart the flock, and the wait would last
        // until the holder lets go. Put ours back first. (A replacement
        // between this check and the kill is not covered: the claim is
        // cooperative, like every signal handler's.)
        if disposition(self.sig) != Some(handler_address()) {
            install(self.sig);
        }
        // SAFETY: the thread is alive (see the type's docs); an error
        // (ESRCH) would mean it is not, and then there is nothing to wake.
        unsafe { libc::pthread_kill(self.thread, self.sig) };
    }
}

// The handle is sent to the cancelling thread; pthread_t is an integer here.
// SAFETY: no thread-affine state: a static slot reference, an id, a number.
unsafe impl Send for InterruptHandle {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exiting_flag() {
        let line = |flags: u64| {
            format!(
                "4242 (a) b) R 1 4242 1 0 -1 {flags} 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0 1 1 1\n"
            )
        };
        assert!(parse_exiting(line(0x40_4044).as_bytes(), 987654));
        assert!(!parse_exiting(line(0x40_4040).as_bytes(), 987654));
        // Another process on the pid: not the holder's flags.
        assert!(!parse_exiting(line(0x40_4044).as_bytes(), 987655));
        assert!(!parse_exiting(b"garbage", 1));
        // This process is not exiting.
        let me = std::fs::read_to_string("/proc/self/stat").unwrap();
        let start: u64 = me[me.rfind(')').unwrap() + 1..]
            .split_ascii_whitespace()
            .nth(19)
            .unwrap()
            .parse()
            .unwrap();
        assert!(!exiting(std::process::id() as i32, start));
    }

    #[test]
    fn network_filesystems() {
        assert_eq!(network_fs_name(0x6969), Some("nfs"));
        assert_eq!(network_fs_name(0xff53_4d42), Some("cifs"));
        assert_eq!(network_fs_name(0xfe53_4d42), Some("smb2"));
        assert_eq!(network_fs_name(0xef53), None); // ext4
        assert_eq!(network_fs_name(0x0102_1994), None); // tmpfs
        assert!(check_fs(0x6969, false).is_err());
        assert!(check_fs(0x6969, true).is_ok());
    }

    /// The race the handler's dup2 exists for: the interrupt lands after
    /// the waiter's last check, before it enters flock. Without the dup2 the
    /// signal would be spent and flock would block for good.
    #[test]
    fn an_interrupt_before_the_call_is_not_lost() {
        use std::sync::{mpsc, Arc, Barrier};
        use std::time::Duration;

        let path =
            std::env::temp_dir().join(format!("procward-lock-{}-window", std::process::id()));
        let holder = open_for_lock(&path, 0o600, false).unwrap();
        assert!(try_lock_exclusive(holder.as_fd()).unwrap());
        let fd = open_for_lock(&path, 0o600, false).unwrap();
        let in_window = Arc::new(Barrier::new(2));
        let theirs = in_window.clone();
        let (handle_tx, handle_rx) = mpsc::channel();
        let (end_tx, end_rx) = mpsc::channel();
        let thread = spawn_quiet("window", 256 * 1024, move || {
            let intr = Interruptible::register(fd.as_fd()).unwrap();
            handle_tx.send(intr.handle()).unwrap();
            let end = intr.lock_exclusive_after(fd.as_fd(), || {
                theirs.wait();
                std::thread::sleep(Duration::from_millis(30));
            });
            let _ = end_tx.send(end);
            // Keeps the thread (and its registration) alive until the end is read.
            drop(intr);
        })
        .unwrap();
        let handle = handle_rx.recv().unwrap();
        in_window.wait();
        handle.interrupt();
        let end = end_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the interrupt was lost");
        assert!(matches!(end, Err(Blocked::Interrupted)), "{end:?}");
        thread.join().unwrap();
        drop(holder);
        let _ = std::fs::remove_file(&path);
    }

    /// Something replaced our handler after we claimed the signal (here:
    /// SIG_IGN; an LD_PRELOAD library or another addon can do the same).
    /// Without a check at cancel time the interrupt is lost and the waiter
    /// blocks until the holder lets go.
    #[test]
    fn an_interrupt_survives_a_replaced_handler() {
        use std::sync::mpsc;
        use std::time::Duration;

        let path = std::env::temp_dir().join(format!(
            "procward-lock-{}-foreign-handler",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        let holder = open_for_lock(&path, 0o600, false).unwrap();
        assert!(try_lock_exclusive(holder.as_fd()).unwrap());
        let fd = open_for_lock(&path, 0o600, false).unwrap();
        let (handle_tx, handle_rx) = mpsc::channel();
        let (end_tx, end_rx) = mpsc::channel();
        let thread = spawn_quiet("foreign", 256 * 1024, move || {
            let intr = Interruptible::register(fd.as_fd()).unwrap();
            handle_tx.send(intr.handle()).unwrap();
            let end = intr.lock_exclusive(fd.as_fd());
            let _ = end_tx.send(end);
            drop(intr);
        })
        .unwrap();
        let handle = handle_rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let sig = interrupt_signal().unwrap();
        // SAFETY: SIG_IGN for a real-time signal we claimed; only our own
        // waiters use it.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
        handle.interrupt();
        let end = end_rx.recv_timeout(Duration::from_secs(5));
        drop(holder);
        let end = end.expect("the interrupt was lost to the foreign disposition");
        assert!(matches!(end, Err(Blocked::Interrupted)), "{end:?}");
        thread.join().unwrap();
        assert_eq!(disposition(sig), Some(handler_address()));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn flock_on_an_o_path_fd_fails_at_once() {
        // The cancellation trick depends on it.
        // SAFETY: a NUL-terminated path and plain flags.
        let raw = unsafe { libc::open(c"/".as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        assert!(raw >= 0);
        // SAFETY: just opened, ours.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: a valid fd.
        let ret = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(ret, -1);
        assert_eq!(io::Error::last_os_error().raw_os_error(), Some(libc::EBADF));
    }
}
