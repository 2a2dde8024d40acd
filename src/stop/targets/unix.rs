//! The things a stop can act on.
//!
//! - [`ChildTarget`]: a child we spawned. Signals go through its `Watched`
//!   (under the lock that also guards the reap, so never to a recycled pid);
//!   the exit it waits for is the reap, so `exited`/`killed` means the pid is
//!   gone from the process table.
//! - [`PidfdTarget`]: a bare pid (an orphan from a dead predecessor, say).
//!   A pidfd is opened once and pins *that* process: signals go through
//!   `pidfd_send_signal`, which fails with ESRCH rather than reach a process
//!   that later got the same pid, and the exit (a zombie counts) is awaited
//!   on the same pidfd.
//! - [`PollTarget`]: a bare pid where no pidfd can be had (kernel < 5.3,
//!   EMFILE, or the forced fallback). `kill()` after an identity check, and a
//!   backing-off liveness poll (1 ms doubling to 50 ms). The race this leaves:
//!   between the check and the `kill`, the process may exit, be reaped and
//!   its pid handed to a newcomer, which then gets the signal. The window is
//!   one syscall wide and needs a full pid wrap inside it.
//!
//! With `group`, every target signals the group the leader led when the stop
//! began, and the leader by pid (or pidfd) too whenever it has left that
//! group: see [`signal_group`].

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{run_opened, Open, PidStop};
use crate::exit_watch::{self, ExitStatus, Watched};
use crate::pid::{Pid, Signal};
use crate::proc_info::{self, Identity};
use crate::stop::{Escalation, StopPlan, StopTarget};
use crate::sys;

pub struct ChildTarget {
    watched: Arc<Watched>,
    group: bool,
    reaped: watch::Receiver<Option<ExitStatus>>,
}

impl ChildTarget {
    pub fn new(watched: Arc<Watched>, group: bool) -> ChildTarget {
        let reaped = watched.subscribe();
        ChildTarget {
            watched,
            group,
            reaped,
        }
    }
}

impl StopTarget for ChildTarget {
    fn has_exited(&mut self) -> bool {
        self.watched.has_exited()
    }

    fn killed_by_sigkill(&self) -> Option<bool> {
        match self.watched.exit_status()? {
            ExitStatus::Signal(sig) => Some(sig == Signal::KILL.as_raw()),
            ExitStatus::Code(_) => Some(false),
            ExitStatus::Unknown => None,
        }
    }

    fn send(&mut self, sig: Signal) -> io::Result<bool> {
        // A contained child's SIGKILL step is its cgroup's `cgroup.kill`.
        if sig == Signal::KILL {
            return self.watched.kill_all(self.group);
        }
        self.watched.signal(sig, self.group)
    }

    fn wait_exit(&mut self, deadline: Instant) -> impl std::future::Future<Output = bool> + Send {
        let mut rx = self.reaped.clone();
        async move {
            matches!(
                tokio::time::timeout_at(deadline, rx.wait_for(|s| s.is_some())).await,
                Ok(Ok(_))
            )
        }
    }
}

pub struct PidfdTarget {
    pidfd: Arc<AsyncFd<OwnedFd>>,
    /// Some(pid) when the whole group is to be signalled: the target leads
    /// its own group (checked at open).
    group: Option<Pid>,
}

/// A signal's result: sent, or not because the target is gone (ESRCH).
fn sent(res: io::Result<()>) -> io::Result<bool> {
    match res {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `group: true` for a bare pid: signals the group `leader` led at open
/// (its pgid is its pid), and the leader itself through `to_leader` if it
/// has left that group since (`setpgid`), which `killpg` would miss, or fail
/// on with ESRCH once the group is empty. The group the leader moved to is
/// never signalled.
///
/// The caller has just seen the leader alive, so its pid — the pgid — was
/// not free to be recycled; the window until `killpg` is the one documented
/// for [`PollTarget`]. A leader still in its group gets one copy (two could
/// run a handler twice); one that changes groups between `getpgid` and
/// `killpg` may miss a SIGTERM that way, never a SIGKILL, which always goes
/// to it directly too.
fn signal_group(
    leader: Pid,
    sig: Signal,
    to_leader: impl FnOnce() -> io::Result<()>,
) -> io::Result<bool> {
    let in_group =
        sig != Signal::KILL && matches!(sys::getpgid(leader), Ok(g) if g == leader.as_raw());
    let to_group = sent(sys::killpg(leader, sig))?;
    let to_leader = !in_group && sent(to_leader())?;
    Ok(to_group || to_leader)
}

fn einval(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_owned())
}

fn group_leader_check(pid: Pid, pgid: i32) -> io::Result<()> {
    if pid.as_raw() == 1 {
        // killpg(1) is kill(-1): every process we may signal.
        return Err(einval("refusing to signal the group of pid 1 (init)"));
    }
    if pgid != pid.as_raw() {
        return Err(einval(
            "group: true needs a process that leads its own process group",
        ));
    }
    // SAFETY: getpgrp takes no arguments and cannot fail.
    let own = unsafe { libc::getpgrp() };
    if pgid == own {
        return Err(einval("refusing to signal our own process group"));
    }
    Ok(())
}

fn identity_matches(current: &Identity, wanted: Option<&str>) -> bool {
    wanted.is_none_or(|w| Identity::decode(w).is_some_and(|w| current.same_process(&w)))
}

fn info_to_io(e: proc_info::InfoError) -> io::Error {
    match e {
        proc_info::InfoError::Hidden => io::Error::from_raw_os_error(libc::EACCES),
        proc_info::InfoError::Io(e) => e,
    }
}

impl PidfdTarget {
    /// Must run inside the runtime (registers the pidfd with its reactor).
    pub fn open(pid: Pid, identity: Option<&str>, group: bool) -> io::Result<Open<PidfdTarget>> {
        let pidfd = match sys::pidfd_open(pid) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(Open::Gone),
            Err(e) => return Err(e),
        };
        // Checked after opening: the pidfd pins the process, so the answer
        // cannot go stale before we signal through it.
        if identity.is_some() || group {
            let Some((stat, current)) =
                proc_info::stat_and_identity_of_pidfd(pid, &pidfd).map_err(info_to_io)?
            else {
                return Ok(Open::Gone);
            };
            if !identity_matches(&current, identity) {
                // A zombie on the pid is gone, whoever it was.
                let alive = !sys::is_readable_now(pidfd.as_fd()).unwrap_or(true);
                return Ok(if alive { Open::Reused } else { Open::Gone });
            }
            if group {
                group_leader_check(pid, stat.pgid)?;
            }
        }
        // SAFETY: the OwnedFd moves into the AsyncFd and stays open (same fd)
        // until the AsyncFd is dropped.
        let afd = unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(Open::Target(PidfdTarget {
            pidfd: Arc::new(afd),
            group: group.then_some(pid),
        }))
    }
}

impl StopTarget for PidfdTarget {
    fn has_exited(&mut self) -> bool {
        sys::is_readable_now(self.pidfd.get_ref().as_fd()).unwrap_or(true)
    }

    fn send(&mut self, sig: Signal) -> io::Result<bool> {
        if self.has_exited() {
            return Ok(false);
        }
        let pidfd = self.pidfd.get_ref().as_fd();
        match self.group {
            Some(leader) => signal_group(leader, sig, || sys::pidfd_send_signal(pidfd, sig)),
            None => sent(sys::pidfd_send_signal(pidfd, sig)),
        }
    }

    fn wait_exit(&mut self, deadline: Instant) -> impl std::future::Future<Output = bool> + Send {
        let afd = self.pidfd.clone();
        async move {
            matches!(
                tokio::time::timeout_at(deadline, afd.readable()).await,
                Ok(Ok(_))
            )
        }
    }
}

pub struct PollTarget {
    pid: Pid,
    identity: Option<String>,
    group: bool,
}

impl PollTarget {
    pub fn open(pid: Pid, identity: Option<&str>, group: bool) -> io::Result<Open<PollTarget>> {
        let t = PollTarget {
            pid,
            identity: identity.map(str::to_owned),
            group,
        };
        if !t.running()? {
            // Not the process `identity` names; but is some process there?
            let reused = identity.is_some() && proc_info::is_running(pid)?;
            return Ok(if reused { Open::Reused } else { Open::Gone });
        }
        if group {
            let info = proc_info::process_info(pid).map_err(info_to_io)?;
            match info {
                Some(i) => group_leader_check(pid, i.pgid)?,
                None => return Ok(Open::Gone),
            }
        }
        Ok(Open::Target(t))
    }

    fn running(&self) -> io::Result<bool> {
        match &self.identity {
            None => proc_info::is_running(self.pid),
            Some(id) => proc_info::is_running_as(self.pid, id).map_err(info_to_io),
        }
    }
}

impl StopTarget for PollTarget {
    fn has_exited(&mut self) -> bool {
        !self.running().unwrap_or(false)
    }

    fn send(&mut self, sig: Signal) -> io::Result<bool> {
        if !self.running()? {
            return Ok(false);
        }
        let pid = self.pid;
        if self.group {
            signal_group(pid, sig, || sys::kill(pid, sig))
        } else {
            sent(sys::kill(pid, sig))
        }
    }

    fn wait_exit(&mut self, deadline: Instant) -> impl std::future::Future<Output = bool> + Send {
        let pid = self.pid;
        let identity = self.identity.clone();
        async move { crate::wait::poll_until_exit(pid, identity.as_deref(), Some(deadline)).await }
    }
}

/// Stops a bare pid: through a pidfd where one can be had, else polling.
pub async fn stop_pid(
    pid: Pid,
    identity: Option<&str>,
    group: bool,
    plan: &StopPlan,
    escalation: &Escalation,
) -> io::Result<PidStop> {
    let pidfd_target = if exit_watch::forced_fallback() {
        None
    } else {
        match PidfdTarget::open(pid, identity, group) {
            Ok(t) => Some(t),
            // No pidfd to be had (old kernel, EMFILE): poll instead.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOSYS) | Some(libc::EMFILE) | Some(libc::ENFILE)
                ) =>
            {
                None
            }
            Err(e) => return Err(e),
        }
    };
    match pidfd_target {
        Some(opened) => run_opened(opened, plan, escalation).await,
        None => run_opened(PollTarget::open(pid, identity, group)?, plan, escalation).await,
    }
}
