//! The Linux wrappers: pidfds, `waitid`, clocks, `/proc`-adjacent fd
//! checks, `getdents64` (the POSIX calls shared with macOS are in `unix`). Each wrapper
//! holds exactly one `unsafe` call; callers never see a raw pointer.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use super::unix::{cvt, waitid_info, WaitStatus};
use crate::pid::{Pid, Signal};

mod socket;
pub use socket::*;

/// `pidfd_open(2)` (Linux 5.3). The fd refers to this very process for as
/// long as it is open, whatever later happens to the pid number. It turns
/// readable once the process has exited (a zombie counts).
pub fn pidfd_open(pid: Pid) -> io::Result<OwnedFd> {
    // Probed once: a kernel without pidfd_open (before 5.3) is not asked again.
    static NO_PIDFD: AtomicBool = AtomicBool::new(false);
    if NO_PIDFD.load(Ordering::Relaxed) {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    }
    // SAFETY: pidfd_open takes two integers and returns a new fd or -1.
    let fd =
        cvt(unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) }).inspect_err(|e| {
            if e.raw_os_error() == Some(libc::ENOSYS) {
                NO_PIDFD.store(true, Ordering::Relaxed);
            }
        })?;
    // SAFETY: the kernel just returned this fd to us, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `pidfd_send_signal(2)` (Linux 5.1): signals exactly the process the pidfd
/// refers to, or fails with ESRCH once it has been reaped.
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: Signal) -> io::Result<()> {
    // SAFETY: a valid fd, a signal number, a null siginfo (the kernel fills in
    // the same info as kill(2)) and zero flags.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig.as_raw(),
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    })
    .map(drop)
}

/// The inode number of an fd. For a pidfd on a kernel with pidfs (6.9+) this
/// is unique for the life of the boot: it is never handed to a later process.
pub fn inode_of(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: fstat fills the stat buffer we own.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) } as libc::c_long)?;
    // SAFETY: fstat succeeded, so the buffer is initialised.
    let st = unsafe { st.assume_init() };
    Ok(st.st_ino)
}

/// `waitid(P_PID, pid, flags)`. With `WNOWAIT` the child stays a zombie, so
/// its pid (and the pgid it leads) stays ours.
pub fn waitid_pid(pid: Pid, flags: libc::c_int) -> io::Result<WaitStatus> {
    waitid_raw(libc::P_PID, pid.as_raw() as libc::id_t, flags)
}

/// `waitid` for our child `pid`, through `pidfd` when there is one:
/// `waitid(P_PIDFD)` (Linux 5.4) waits for the process the pidfd refers to,
/// never for a later process that got the same pid number, so a wait that
/// comes late (after someone else reaped the child and the pid was handed
/// on) fails with ECHILD instead of reporting — or reaping — the newcomer.
/// Without a pidfd, or on a kernel without P_PIDFD, by pid.
pub fn waitid_child(
    pid: Pid,
    pidfd: Option<BorrowedFd<'_>>,
    flags: libc::c_int,
) -> io::Result<WaitStatus> {
    // Probed once: a kernel without P_PIDFD (5.3) answers EINVAL.
    static NO_P_PIDFD: AtomicBool = AtomicBool::new(false);
    if let Some(fd) = pidfd.filter(|_| !NO_P_PIDFD.load(Ordering::Relaxed)) {
        match waitid_raw(libc::P_PIDFD, fd.as_raw_fd() as libc::id_t, flags) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                NO_P_PIDFD.store(true, Ordering::Relaxed);
            }
            res => return res,
        }
    }
    waitid_pid(pid, flags)
}

fn waitid_raw(
    idtype: libc::idtype_t,
    id: libc::id_t,
    flags: libc::c_int,
) -> io::Result<WaitStatus> {
    let info = waitid_info(idtype, id, flags)?;
    // SAFETY: reading the si_pid union member of a SIGCHLD siginfo.
    let si_pid = unsafe { info.si_pid() };
    // SAFETY: as above, si_status.
    let si_status = unsafe { info.si_status() };
    if si_pid == 0 {
        return Ok(WaitStatus::StillAlive);
    }
    Ok(match info.si_code {
        libc::CLD_EXITED => WaitStatus::Exited(si_status),
        _ => WaitStatus::Signaled(si_status),
    })
}

/// `tgkill(tgid, tid, 0)`: sends nothing; Ok (or EPERM) when `tid` is a
/// thread of the thread group `tgid`, ESRCH otherwise. `tgkill(pid, pid)`
/// thus tells a process (a thread-group leader) from a non-leader thread,
/// whose id shares the pid space but names no process.
pub fn thread_probe(tgid: Pid, tid: Pid) -> io::Result<()> {
    // SAFETY: tgkill with signal 0 only checks existence and permission.
    cvt(unsafe { libc::syscall(libc::SYS_tgkill, tgid.as_raw(), tid.as_raw(), 0) }).map(drop)
}

/// `getdents64(2)`: as many `linux_dirent64` records of the directory open
/// on `fd` as fit in `buf`, from where the last call stopped; 0 at its
/// end. A small buffer reads only the first entries: for `/proc/<pid>/task`
/// the kernel then sets up only those threads' entries, where a full
/// listing sets up one for every thread.
pub fn getdents64(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: a valid fd and a writable buffer of the given length, which
    // the kernel fills with at most that many bytes.
    let n = cvt(unsafe {
        libc::syscall(
            libc::SYS_getdents64,
            fd.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    })?;
    Ok(n as usize)
}

/// `CLOCK_BOOTTIME` in nanoseconds: the clock a process's start time in
/// `/proc/<pid>/stat` is taken from (in this time namespace).
pub fn boottime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: fills the timespec we own; CLOCK_BOOTTIME exists since 2.6.39,
    // so this cannot fail (and a zero reading would only fail a comparison).
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `sysconf(_SC_CLK_TCK)`: the unit of times in `/proc/<pid>/stat` (USER_HZ).
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: a plain query.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    hz.max(0) as u64
}

/// The inode of a pidfd where it names the process: on pidfs (Linux 6.9+),
/// unique for the life of the boot, never handed to a later process.
/// `None` before pidfs, where every pidfd is an anon inode and all share
/// one number. Whether pidfs is there is asked of the fd itself (fstatfs,
/// so the answer needs no spare fd) and kept once known: the kernel does
/// not change under us.
pub fn pidfs_inode(fd: BorrowedFd<'_>) -> Option<u64> {
    static PIDFS: OnceLock<bool> = OnceLock::new();
    let has_pidfs = match PIDFS.get() {
        Some(&known) => known,
        None => {
            let found = is_on_pidfs(fd).ok()?;
            *PIDFS.get_or_init(|| found)
        }
    };
    if !has_pidfs {
        return None;
    }
    inode_of(fd).ok()
}

/// Whether `fd` lives on pidfs (Linux 6.9+), where a pidfd's inode number
/// names its process for the life of the boot.
fn is_on_pidfs(fd: BorrowedFd<'_>) -> io::Result<bool> {
    const PIDFS_MAGIC: i64 = 0x5049_4446;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: fstatfs fills the buffer we own.
    cvt(unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) } as libc::c_long)?;
    // SAFETY: fstatfs succeeded, so the buffer is initialised.
    let st = unsafe { st.assume_init() };
    // f_type is i64 with glibc and u64 with musl (or 32 bits elsewhere).
    #[allow(clippy::unnecessary_cast)]
    let f_type = st.f_type as i64;
    Ok(f_type == PIDFS_MAGIC)
}

/// Which of `fds` are readable now, or in error (for pidfds: which
/// processes have exited), in one `poll`.
pub fn readable_now_each(fds: &[BorrowedFd<'_>]) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: a valid array of pollfds of the given length, zero timeout.
        let ret = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 0) };
        if ret >= 0 {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(pfds.iter().map(|p| p.revents != 0).collect())
}

/// pread at offset 0, retrying EINTR.
pub fn pread0(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: buf is a valid, writable slice of the given length.
        let ret = unsafe { libc::pread(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if ret >= 0 {
            return Ok(ret as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// `pidfd_send_signal(pidfd, 0)`: whether the process a pidfd refers to is
/// still in the process table (running, or a zombie not yet reaped). EPERM
/// also proves it is there: the kernel found it before checking permission.
pub fn pidfd_unreaped(pidfd: BorrowedFd<'_>) -> io::Result<bool> {
    // SAFETY: a valid fd, signal 0 (existence check only), a null siginfo
    // and zero flags.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    match cvt(ret) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `struct pidfd_info` of `linux/pidfd.h` as of Linux 6.15, up to and
/// including `exit_code`: `PIDFD_INFO_SIZE_VER0` (64) bytes. Later kernels
/// append fields; the ioctl is extensible, so a caller passing this size
/// gets this prefix.
#[repr(C)]
#[derive(Default)]
#[allow(dead_code)] // the kernel's layout: every field is written, few are read
struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    pid: u32,
    tgid: u32,
    ppid: u32,
    ruid: u32,
    rgid: u32,
    euid: u32,
    egid: u32,
    suid: u32,
    sgid: u32,
    fsuid: u32,
    fsgid: u32,
    /// `spare0` before 6.15.
    exit_code: i32,
}

const _: () = assert!(std::mem::size_of::<PidfdInfo>() == 64);

const PIDFD_INFO_EXIT: u64 = 1 << 3;
/// `_IOWR(PIDFS_IOCTL_MAGIC = 0xFF, 11, struct pidfd_info)`. The request
/// type is the C library's (`unsigned long` in glibc, `int` in musl): the
/// same 32 bits either way, hence the bit-preserving cast.
const PIDFD_GET_INFO: libc::Ioctl =
    ((3u32 << 30) | ((std::mem::size_of::<PidfdInfo>() as u32) << 16) | (0xFF << 8) | 11)
        as libc::Ioctl;

/// The wait status (as `waitpid` encodes it) of the reaped process a pidfd
/// refers to, through `ioctl(PIDFD_GET_INFO)` with `PIDFD_INFO_EXIT` (Linux
/// 6.15). `None` while it is running or an unreaped zombie (the kernel
/// records the status when the parent reaps it), and on kernels without
/// `PIDFD_GET_INFO` (ENOTTY, before 6.13) or without `PIDFD_INFO_EXIT` in
/// its answer (6.13, 6.14).
pub fn pidfd_exit_status(pidfd: BorrowedFd<'_>) -> Option<i32> {
    let mut info = PidfdInfo {
        mask: PIDFD_INFO_EXIT,
        ..PidfdInfo::default()
    };
    // SAFETY: the ioctl writes at most size_of::<PidfdInfo>() bytes (encoded
    // in the request number) into the struct we own.
    let ret = unsafe { libc::ioctl(pidfd.as_raw_fd(), PIDFD_GET_INFO, &mut info) };
    (ret == 0 && info.mask & PIDFD_INFO_EXIT != 0).then_some(info.exit_code)
}

/// `dup3(src, dst, O_CLOEXEC)`: `dst` becomes a copy of `src` that is
/// close-on-exec from its first instant (dup2 clears the flag, and a child
/// forked by another thread before an fcntl could put it back would inherit
/// it). Async-signal-safe: one system call, no allocation.
pub fn dup_cloexec_onto(src: RawFd, dst: RawFd) {
    // SAFETY: plain integers; a failure leaves dst as it was, which callers
    // (a signal handler) can do nothing about.
    unsafe { libc::dup3(src, dst, libc::O_CLOEXEC) };
}

/// `epoll_create1(EPOLL_CLOEXEC)`.
pub fn epoll_create() -> io::Result<OwnedFd> {
    // SAFETY: one flag; returns a new fd or -1.
    let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    // SAFETY: the kernel just returned this fd to us, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds `fd` to `epoll` for one readable event (`EPOLLONESHOT`: after it,
/// the fd stays registered but silent, however long it stays readable),
/// reported with `key`.
pub fn epoll_add_once(epoll: BorrowedFd<'_>, fd: BorrowedFd<'_>, key: u64) -> io::Result<()> {
    epoll_once(epoll, fd, key, libc::EPOLL_CTL_ADD)
}

/// Arms `fd`'s one-shot registration in `epoll` again (`EPOLL_CTL_MOD`):
/// one more readable event, reported with `key`.
pub fn epoll_rearm_once(epoll: BorrowedFd<'_>, fd: BorrowedFd<'_>, key: u64) -> io::Result<()> {
    epoll_once(epoll, fd, key, libc::EPOLL_CTL_MOD)
}

fn epoll_once(
    epoll: BorrowedFd<'_>,
    fd: BorrowedFd<'_>,
    key: u64,
    op: libc::c_int,
) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: (libc::EPOLLIN | libc::EPOLLONESHOT) as u32,
        u64: key,
    };
    // SAFETY: two valid fds and an event we own.
    cvt(unsafe { libc::epoll_ctl(epoll.as_raw_fd(), op, fd.as_raw_fd(), &mut ev) }).map(drop)
}

/// `epoll_wait`: the keys of the ready fds, written into `keys` (as many as
/// it holds), after at most `timeout_ms` (-1: no limit). EINTR: none.
pub fn epoll_wait(epoll: BorrowedFd<'_>, keys: &mut [u64], timeout_ms: i32) -> io::Result<usize> {
    const MAX: usize = 256;
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; MAX];
    let max = keys.len().min(MAX);
    // SAFETY: a buffer of `max` events we own.
    let ret = unsafe {
        libc::epoll_wait(
            epoll.as_raw_fd(),
            events.as_mut_ptr(),
            max as libc::c_int,
            timeout_ms,
        )
    };
    match cvt(ret) {
        Ok(n) => {
            let n = n as usize;
            for (key, ev) in keys.iter_mut().zip(&events[..n]) {
                *key = ev.u64;
            }
            Ok(n)
        }
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
        Err(e) => Err(e),
    }
}
