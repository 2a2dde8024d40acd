//! The wrappers Linux and macOS share: the POSIX calls whose meaning is the
//! same on both. Each holds one `unsafe` call.
//!
//! Every function that signals takes a [`Pid`], which is always positive, so
//! nothing here can be asked to signal a group by accident. Signalling a
//! group is a separate, explicit call ([`killpg`]).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::pid::{Pid, Signal};

/// A C call's result: -1 means failure, with the reason in `errno`. The
/// crate's one such check: every module that makes a C call of its own
/// uses this one (`crate::sys::cvt`).
pub(crate) fn cvt<T: PartialEq + From<i8>>(ret: T) -> io::Result<T> {
    if ret == T::from(-1) {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `geteuid()`: the uid our permissions are checked as.
pub fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// The soft `RLIMIT_NOFILE`: None when it is unlimited or cannot be read.
pub fn nofile_soft_limit() -> Option<libc::rlim_t> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we own.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } == 0;
    (ok && rl.rlim_cur != libc::RLIM_INFINITY).then_some(rl.rlim_cur)
}

/// A C string kept in a fixed-size field (`utsname.release`,
/// `statfs.f_fstypename`, `proc_bsdinfo.pbi_comm`): its bytes up to the first
/// NUL, or the whole field if it has none.
// c_char is i8 on x86_64, u8 on aarch64 (where the cast is a no-op).
#[allow(clippy::unnecessary_cast)]
pub fn c_field(field: &[libc::c_char]) -> Vec<u8> {
    field
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect()
}

/// The errno of an error bound for JS (its `code` is the errno's name), if
/// it has one.
pub fn errno_of(err: &io::Error) -> Option<i32> {
    err.raw_os_error()
}

/// Whether `fd` is readable now (a pidfd: the process has exited; a
/// kqueue: an event is pending).
pub fn is_readable_now(fd: BorrowedFd<'_>) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd, zero timeout.
        let ret = unsafe { libc::poll(&mut pfd, 1, 0) };
        if ret >= 0 {
            return Ok(ret > 0 && pfd.revents & (libc::POLLIN | libc::POLLHUP) != 0);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// `kill(pid, 0)`: Ok when the pid exists and we may signal it; EPERM when it
/// exists but we may not; ESRCH when there is no such pid. A zombie exists.
pub fn probe(pid: Pid) -> io::Result<()> {
    // SAFETY: plain syscall; pid is positive, so only this pid is addressed.
    cvt(unsafe { libc::kill(pid.as_raw(), 0) }).map(drop)
}

pub fn kill(pid: Pid, sig: Signal) -> io::Result<()> {
    // SAFETY: plain syscall; pid is positive, so only this pid is addressed.
    cvt(unsafe { libc::kill(pid.as_raw(), sig.as_raw()) }).map(drop)
}

/// `killpg(pgid, sig)`. Only ever called with the pgid of a group whose leader
/// is our own unreaped child (so the id cannot have been recycled), or after a
/// pidfd check documented at the call site.
pub fn killpg(pgid: Pid, sig: Signal) -> io::Result<()> {
    // killpg(1, ..) is kill(-1, ..) in the C library: every process we may
    // signal. Group 1 is init's, never one we stop.
    if pgid.as_raw() == 1 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: plain syscall; pgid is positive (a Pid), so pgid 0 ("our own
    // group") cannot be named, and pgid 1 (every process) was refused above.
    cvt(unsafe { libc::killpg(pgid.as_raw(), sig.as_raw()) }).map(drop)
}

/// `getpgid(pid)`: the process group `pid` is in now (a zombie's too, until
/// it is reaped). A process may leave the group it led (`setpgid`), so the
/// group a stop signals and the group its leader is in can differ.
pub fn getpgid(pid: Pid) -> io::Result<i32> {
    // SAFETY: plain syscall; pid is positive, so only this pid is asked about.
    cvt(unsafe { libc::getpgid(pid.as_raw()) })
}

/// Gives the terminal on our fd 0 back to our own process group when group
/// `from` is its foreground now: a child that took it (spawn's
/// `take_terminal`) has exited, and the shell that started us, and our own
/// next child, need it from us again. Ok(false) when `from` does not hold
/// it (someone moved it on since, or fd 0 is no terminal of ours). We are
/// outside the foreground here, so `tcsetpgrp` would send SIGTTOU to our
/// whole group, stopping it: the signal is blocked on this thread for the
/// call, which the kernel counts as ignoring it (and then sends nothing).
pub fn reclaim_terminal(from: Pid) -> io::Result<bool> {
    // SAFETY: ioctl(TIOCGPGRP) on fd 0; reads the foreground group.
    if unsafe { libc::tcgetpgrp(0) } != from.as_raw() {
        return Ok(false);
    }
    // SAFETY: a zeroed sigset is valid storage for sigemptyset.
    let mut ttou: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: initialises the set we own.
    unsafe { libc::sigemptyset(&mut ttou) };
    // SAFETY: edits the set we own.
    unsafe { libc::sigaddset(&mut ttou, libc::SIGTTOU) };
    // SAFETY: a zeroed sigset is valid storage for the old mask.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: changes only this thread's mask; the old one is written to `old`.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &ttou, &mut old) };
    // SAFETY: plain syscall on ourselves.
    let ours = unsafe { libc::getpgrp() };
    // SAFETY: ioctl(TIOCSPGRP) on fd 0 with our own group.
    let given = cvt(unsafe { libc::tcsetpgrp(0, ours) });
    // SAFETY: puts back this thread's mask as it was.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    given.map(|_| true)
}

/// `waitid(idtype, id, flags)`, retried on EINTR. The siginfo starts
/// zeroed: with WNOHANG and nothing to report the kernel leaves it untouched,
/// and `si_pid == 0` is how "still alive" is told apart.
pub(super) fn waitid_info(
    idtype: libc::idtype_t,
    id: libc::id_t,
    flags: libc::c_int,
) -> io::Result<libc::siginfo_t> {
    let mut info = std::mem::MaybeUninit::<libc::siginfo_t>::zeroed();
    loop {
        // SAFETY: the siginfo buffer is ours and large enough.
        let ret = unsafe { libc::waitid(idtype, id, info.as_mut_ptr(), flags) };
        if ret == 0 {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    // SAFETY: zeroed and possibly filled by the kernel: initialised either way.
    Ok(unsafe { info.assume_init() })
}

/// How a child ended, as `waitid` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitStatus {
    Exited(i32),
    Signaled(i32),
    /// Not exited yet (only with WNOHANG).
    StillAlive,
}
