//! The macOS wrappers: the same names and meanings as Linux's where both
//! have the call (the shared ones are in `unix`). Each wrapper holds one
//! `unsafe` call; callers never see a raw pointer.
//!
//! Where macOS differs from Linux:
//! - No pidfd. `pidfd_open` and `pidfd_send_signal` fail with ENOSYS, as on
//!   a Linux kernel before 5.3, and every caller already takes its
//!   documented path for that (a bare-pid stop polls; `spawn` hands back no
//!   pidfd). The fd that tells of an exit here is a kqueue with an
//!   `EVFILT_PROC`/`NOTE_EXIT` filter ([`kqueue_for_exit`]).
//! - `waitid(2)` differs in two ways, so [`waitid_pid`] keeps it for what it
//!   does right (peeking with `WNOWAIT`) and reaps with `waitpid(2)`:
//!   it reports a *stopped* child to `WEXITED | WNOWAIT` (`si_code`
//!   `CLD_STOPPED`, reported on macOS 15 and 26), and for a child killed by a
//!   signal its `si_status` does not hold the signal number. wait(2) on
//!   macOS documents `WNOWAIT` and `WEXITED` for waitid without saying either.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::unix::{cvt, waitid_info, WaitStatus};
use crate::pid::{Pid, Signal};

fn enosys() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSYS)
}

/// No pidfds on macOS: ENOSYS, as from a Linux kernel without pidfd_open.
pub fn pidfd_open(_pid: Pid) -> io::Result<OwnedFd> {
    Err(enosys())
}

/// No pidfds on macOS (see [`pidfd_open`]).
pub fn pidfd_send_signal(_pidfd: BorrowedFd<'_>, _sig: Signal) -> io::Result<()> {
    Err(enosys())
}

/// A monotonic clock reading (ns). The Linux identity seed pins a child's
/// start tick between two such readings; macOS has no such seed (see
/// `proc_info::macos::start_tick_between`), so any monotonic clock serves.
pub fn boottime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: fills the timespec we own; a failure leaves zero, which only
    // makes the (unused) seed absent.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// `waitid(P_PID, pid, flags)` as Linux does it: with `WNOWAIT` the child
/// stays a zombie (its pid, and the pgid it leads, stay ours); without it
/// the child is reaped. Blocks unless `WNOHANG` is given.
pub fn waitid_pid(pid: Pid, flags: libc::c_int) -> io::Result<WaitStatus> {
    let nohang = flags & libc::WNOHANG != 0;
    if flags & libc::WNOWAIT == 0 {
        return reap(pid, nohang);
    }
    let mut backoff = Duration::from_millis(1);
    loop {
        let seen = peek(pid)?;
        if nohang || seen != WaitStatus::StillAlive {
            return Ok(seen);
        }
        // Blocking peek. macOS's waitid would return at once for a stopped
        // child, so the wait is a kqueue NOTE_EXIT instead, then a peek.
        match kqueue_for_exit(pid) {
            Ok(Some(kq)) => {
                // NOTE_EXIT only fires after registration: an exit just
                // before it is seen by this peek instead.
                if peek(pid)? == WaitStatus::StillAlive {
                    wait_kqueue(&kq)?;
                }
            }
            // ESRCH: the process is past the point where it can be watched
            // (exiting or already a zombie); it is waitable within moments.
            Ok(None) => std::thread::yield_now(),
            // No kqueue to be had (EMFILE...): this is a waiter thread of
            // its own, so poll, backing off to 50 ms.
            Err(_) => {
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_millis(50));
            }
        }
    }
}

/// `waitid(WEXITED | WNOWAIT | WNOHANG)`: has the child exited? Leaves it
/// unreaped. The status is only a hint (see the module docs); the reap's is
/// the one reported.
fn peek(pid: Pid) -> io::Result<WaitStatus> {
    let flags = libc::WEXITED | libc::WNOWAIT | libc::WNOHANG;
    let info = waitid_info(libc::P_PID, pid.as_raw() as libc::id_t, flags)?;
    Ok(peeked(info.si_pid, info.si_code, info.si_status))
}

/// What a `WEXITED | WNOWAIT | WNOHANG` waitid answer means on macOS.
fn peeked(si_pid: libc::pid_t, si_code: libc::c_int, si_status: libc::c_int) -> WaitStatus {
    if si_pid == 0 {
        return WaitStatus::StillAlive;
    }
    match si_code {
        libc::CLD_EXITED => WaitStatus::Exited(si_status),
        libc::CLD_KILLED | libc::CLD_DUMPED => WaitStatus::Signaled(si_status),
        // CLD_STOPPED, CLD_CONTINUED, CLD_TRAPPED: not an exit, whatever
        // WEXITED asked for.
        _ => WaitStatus::StillAlive,
    }
}

/// A `waitpid` status (never a stop: no WUNTRACED was asked for).
fn reaped(status: libc::c_int) -> WaitStatus {
    if libc::WIFEXITED(status) {
        WaitStatus::Exited(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        WaitStatus::Signaled(libc::WTERMSIG(status))
    } else {
        WaitStatus::StillAlive
    }
}

/// `waitpid(pid, WNOHANG?)`: reaps the child; never reports a stop (no
/// WUNTRACED). Only ever a positive pid: never another child's status.
fn reap(pid: Pid, nohang: bool) -> io::Result<WaitStatus> {
    let mut status: libc::c_int = 0;
    let flags = if nohang { libc::WNOHANG } else { 0 };
    loop {
        // SAFETY: status is ours; pid is positive.
        let ret = unsafe { libc::waitpid(pid.as_raw(), &mut status, flags) };
        if ret > 0 {
            break;
        }
        if ret == 0 {
            return Ok(WaitStatus::StillAlive);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(reaped(status))
}

/// A kqueue that turns readable when `pid` exits (`EVFILT_PROC`,
/// `NOTE_EXIT`, one shot). `Ok(None)`: the process cannot be watched any
/// more: it has exited (a zombie included) or is exiting. It does not hold
/// the pid: unlike a pidfd it pins nothing, it only reports.
///
/// kqueue(2): "NOTE_EXIT: The process has exited." Whether it is waitable
/// Waits on our child by pid: macOS has no pidfds, so `pidfd` is always
/// None here (the signature is Linux's, where the wait goes through it).
pub fn waitid_child(
    pid: Pid,
    _pidfd: Option<BorrowedFd<'_>>,
    flags: libc::c_int,
) -> io::Result<WaitStatus> {
    waitid_pid(pid, flags)
}

/// at that instant is not said, so callers peek and wait again if not.
pub fn kqueue_for_exit(pid: Pid) -> io::Result<Option<OwnedFd>> {
    // SAFETY: kqueue takes no arguments and returns a new fd or -1.
    let kq = cvt(unsafe { libc::kqueue() })?;
    // SAFETY: the fd was just created for us and nothing else owns it.
    let kq = unsafe { OwnedFd::from_raw_fd(kq) };
    // kqueue(2): a kqueue is not inherited across fork; close-on-exec keeps
    // it out of anything exec'd by another thread meanwhile too.
    // SAFETY: fcntl on an fd we own.
    cvt(unsafe { libc::fcntl(kq.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) })?;
    let change = libc::kevent {
        ident: pid.as_raw() as libc::uintptr_t,
        filter: libc::EVFILT_PROC,
        flags: libc::EV_ADD | libc::EV_ONESHOT,
        fflags: libc::NOTE_EXIT,
        data: 0,
        udata: std::ptr::null_mut(),
    };
    // SAFETY: registers one change from a kevent we own, asks for no events.
    let ret = unsafe {
        libc::kevent(
            kq.as_raw_fd(),
            &change,
            1,
            std::ptr::null_mut(),
            0,
            std::ptr::null(),
        )
    };
    match cvt(ret) {
        Ok(_) => Ok(Some(kq)),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Blocks until the kqueue has an event (for [`kqueue_for_exit`]: the exit).
pub fn wait_kqueue(kq: &OwnedFd) -> io::Result<()> {
    // SAFETY: an all-zero kevent is a valid buffer for the kernel to fill.
    let mut event: libc::kevent = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: no changes, room for one event, no timeout (block).
        let ret = unsafe {
            libc::kevent(
                kq.as_raw_fd(),
                std::ptr::null(),
                0,
                &mut event,
                1,
                std::ptr::null(),
            )
        };
        match cvt(ret) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// `dst` becomes a close-on-exec copy of `src`. macOS has no dup3: dup2 then
/// F_SETFD, with a window in between in which a child forked by another
/// thread inherits the copy (posix_spawn children there close every fd not
/// named: `POSIX_SPAWN_CLOEXEC_DEFAULT`, so procward's own are safe).
/// Async-signal-safe: two system calls, no allocation.
pub fn dup_cloexec_onto(src: RawFd, dst: RawFd) {
    // SAFETY: plain integers; dup2 is async-signal-safe.
    unsafe { libc::dup2(src, dst) };
    // SAFETY: fcntl is async-signal-safe; dst is the caller's.
    unsafe { libc::fcntl(dst, libc::F_SETFD, libc::FD_CLOEXEC) };
}

// Pure decoding only: these run on a Mac (`cargo test` there); here they are
// compiled and linted for both Apple targets by scripts/cross-build.sh.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_child_has_not_exited() {
        // macOS answers WEXITED | WNOWAIT with a stop (CLD_STOPPED).
        assert_eq!(
            peeked(42, libc::CLD_STOPPED, libc::SIGSTOP),
            WaitStatus::StillAlive
        );
        assert_eq!(peeked(42, libc::CLD_CONTINUED, 0), WaitStatus::StillAlive);
        assert_eq!(peeked(0, 0, 0), WaitStatus::StillAlive);
        assert_eq!(peeked(42, libc::CLD_EXITED, 3), WaitStatus::Exited(3));
        assert!(matches!(
            peeked(42, libc::CLD_KILLED, 0),
            WaitStatus::Signaled(_)
        ));
    }

    #[test]
    fn waitpid_statuses() {
        // <sys/wait.h>: exit code in bits 8..16, a signal in the low 7 bits.
        assert_eq!(reaped(3 << 8), WaitStatus::Exited(3));
        assert_eq!(reaped(libc::SIGKILL), WaitStatus::Signaled(libc::SIGKILL));
        assert_eq!(
            reaped(libc::SIGSEGV | 0x80),
            WaitStatus::Signaled(libc::SIGSEGV)
        );
    }
}
