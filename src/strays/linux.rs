//! Linux: the scan reads `/proc/<pid>/stat` of every process (never `ps`);
//! each member is then pinned with a pidfd, judged again through it (the
//! pid may have changed hands since the scan), and SIGKILLed through it.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::{classify, GroupRecord, Verdict};
use crate::pid::{Pid, Signal};
use crate::proc_info;
use crate::sys;

/// What a sweep did.
#[derive(Debug, Default)]
pub struct Swept {
    pub killed: Vec<i32>,
    pub suspects: Vec<i32>,
}

fn clock_ms(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 * 1000.0 + ts.tv_nsec as f64 / 1e6
}

/// Wall-clock milliseconds since the epoch → milliseconds of CLOCK_BOOTTIME
/// (the clock /proc start times count in), as the two clocks relate now.
pub fn boot_clock_ms(epoch_ms: f64) -> f64 {
    epoch_ms - (clock_ms(libc::CLOCK_REALTIME) - clock_ms(libc::CLOCK_BOOTTIME))
}

fn tick_ms() -> f64 {
    // SAFETY: sysconf takes an integer and cannot fail for _SC_CLK_TCK.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1000.0 / if hz > 0 { hz as f64 } else { 100.0 }
}

/// SIGKILLs the proven members of the recorded group and waits (at most
/// `kill_timeout`) for them to exit; reports the suspects. Refuses to touch
/// this process's own group or session group: a record naming either is not
/// a daemon's group of ours (every member is then a suspect).
pub async fn sweep(rec: &GroupRecord, kill_timeout: Duration) -> io::Result<Swept> {
    let boot = proc_info::current_boot()?;
    let tick = tick_ms();
    let me = Pid::current().as_raw();
    // SAFETY: getpgrp takes no arguments and cannot fail.
    let own_group = unsafe { libc::getpgrp() };
    let protected = rec.pgid == own_group || rec.pgid == rec.session;
    let mut out = Swept::default();
    let mut dying: Vec<AsyncFd<OwnedFd>> = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Some(pid) = entry
            .ok()
            .and_then(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&p| p != me)
            .and_then(|p| Pid::from_raw(p).ok())
        else {
            continue;
        };
        let Ok(Some(st)) = proc_info::stat_of(pid) else {
            continue;
        };
        match classify(&st, rec, boot, tick) {
            Verdict::Unrelated => continue,
            Verdict::Suspect => {
                out.suspects.push(pid.as_raw());
                continue;
            }
            Verdict::Member if protected => {
                out.suspects.push(pid.as_raw());
                continue;
            }
            Verdict::Member => {}
        }
        match kill_member(pid, rec, boot, tick)? {
            Kill::Sent(fd) => {
                out.killed.push(pid.as_raw());
                dying.push(fd);
            }
            Kill::Denied => out.suspects.push(pid.as_raw()),
            Kill::NotMember => {}
        }
    }
    let all_gone = async {
        for fd in &dying {
            if let Ok(guard) = fd.readable().await {
                drop(guard);
            }
        }
    };
    let _ = tokio::time::timeout(kill_timeout, all_gone).await;
    Ok(out)
}

enum Kill {
    /// SIGKILL sent; the pidfd, to await the exit.
    Sent(AsyncFd<OwnedFd>),
    /// A member we may not signal (another user's): reported as a suspect.
    Denied,
    /// Gone since the scan, or the pid now holds someone else.
    NotMember,
}

/// Pins `pid`, judges it again through the pin, and SIGKILLs it if it is
/// still a member.
fn kill_member(pid: Pid, rec: &GroupRecord, boot: &str, tick: f64) -> io::Result<Kill> {
    let pidfd = match sys::pidfd_open(pid) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(Kill::NotMember),
        Err(e) => return Err(e),
    };
    let Ok(Some((st, _))) = proc_info::stat_and_identity_of_pidfd(pid, &pidfd) else {
        return Ok(Kill::NotMember);
    };
    if classify(&st, rec, boot, tick) != Verdict::Member {
        return Ok(Kill::NotMember);
    }
    match sys::pidfd_send_signal(pidfd.as_fd(), Signal::KILL) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(Kill::NotMember),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => return Ok(Kill::Denied),
        Err(e) => return Err(e),
    }
    // SAFETY: the OwnedFd moves into the AsyncFd and stays open (same fd)
    // until the AsyncFd is dropped.
    let afd = unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }
        .map_err(|e| e.into_parts().1)?;
    Ok(Kill::Sent(afd))
}
