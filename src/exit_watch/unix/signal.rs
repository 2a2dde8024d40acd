//! Signalling a supervised child: never once it is reaped, so a signal can
//! never reach a pid the kernel has handed on. Every send happens under the
//! state lock, which the reap also needs: while it is held, an unreaped
//! child's pid (and pgid) are still ours.
//!
//! With `group`, the process group we created gets the signal, and the
//! leader by pid as well once it has left that group. A contained child's
//! escalation kills its whole cgroup first (`kill_all`).

use super::{Inner, State, Watched};
use crate::cgroup;
use crate::pid::Signal;
#[cfg(target_os = "linux")]
use crate::proc_info;
use crate::sys::{self, WaitStatus};
use std::os::fd::AsFd;

impl Watched {
    /// Exited, reaped or not. For an unreaped child its pidfd tells, or
    /// else a WNOHANG|WNOWAIT peek; both leave the zombie for the watcher.
    /// The pidfd first: a traced child's zombie is the tracer's to see
    /// first, so the peek finds nothing, yet it has exited and a signal
    /// would only reach a zombie (and a stop report a kill it never did).
    pub fn has_exited(&self) -> bool {
        let inner = self.lock();
        match inner.state {
            State::Reaped(_) => true,
            State::Running => {
                let pidfd = inner.pidfd.as_ref().map(|fd| fd.as_fd());
                if let Some(fd) = pidfd {
                    if sys::is_readable_now(fd).unwrap_or(false) {
                        return true;
                    }
                }
                let peek = sys::waitid_pid(self.pid, libc::WEXITED | libc::WNOWAIT | libc::WNOHANG);
                if !matches!(peek, Ok(WaitStatus::StillAlive)) {
                    return true;
                }
                // No pidfd of ours (the fallback back-end): the process table
                // tells a traced zombie. The pid is still ours (unreaped, and
                // reaping needs this lock), so what it says is the child's.
                #[cfg(target_os = "linux")]
                if pidfd.is_none() {
                    return matches!(proc_info::is_running(self.pid), Ok(false));
                }
                false
            }
        }
    }

    /// Signals the child (or its group) unless it has already exited.
    /// `Ok(false)`: nothing sent, because it is gone.
    ///
    /// With `group`, the group we created gets it, and so does the child by
    /// pid if it has left that group (`setpgid`, into this process's own
    /// group, say): `killpg` alone would miss it, or fail with ESRCH once
    /// the group is empty while the child runs on. The group it moved to is
    /// never signalled; it is not ours.
    pub fn signal(&self, sig: Signal, group: bool) -> std::io::Result<bool> {
        let inner = self.lock();
        self.signal_locked(&inner, sig, group)
    }

    /// [`Watched::signal`] with the state lock held by the caller.
    fn signal_locked(&self, inner: &Inner, sig: Signal, group: bool) -> std::io::Result<bool> {
        let sent = |res: std::io::Result<()>| match res {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
            Err(e) => Err(e),
        };
        if inner.state != State::Running {
            return Ok(false);
        }
        // The pid is still ours (unreaped, and reaping needs this lock), so
        // neither kill nor killpg can reach a recycled id, and the pgid (the
        // child's pid) cannot name a stranger's group.
        let Some(pgid) = self.pgid.filter(|_| group) else {
            return sent(sys::kill(self.pid, sig));
        };
        // A leader still in its group gets one copy, through killpg (two
        // could run a handler twice). The child may change groups between
        // getpgid and killpg and miss a SIGTERM that way; a SIGKILL goes to
        // it by pid regardless, so the escalation never misses.
        let in_group =
            sig != Signal::KILL && matches!(sys::getpgid(self.pid), Ok(g) if g == pgid.as_raw());
        let to_group = sent(sys::killpg(pgid, sig))?;
        let to_leader = !in_group && sent(sys::kill(self.pid, sig))?;
        Ok(to_group || to_leader)
    }

    /// The escalation's SIGKILL for a contained child: the whole cgroup at
    /// once (a member that left the group included), then the group and the
    /// leader as for any child. Ok(false): nothing was left to kill.
    ///
    /// All under the state lock: the leader dies of the cgroup.kill at
    /// once, and were the lock released in between, the native watcher
    /// could drain and reap it before the signals, which would then find
    /// nothing and make the stop report `exited` for a kill of ours.
    pub fn kill_all(&self, group: bool) -> std::io::Result<bool> {
        let inner = self.lock();
        let killed = match &self.contained {
            Some(c) if inner.state == State::Running && !inner.draining => {
                // ENOENT/ENODEV: removed already; the signals below still go.
                c.cgroup.kill().is_ok()
            }
            _ => false,
        };
        Ok(self.signal_locked(&inner, Signal::KILL, group)? || killed)
    }

    /// Signals the child alone, but not once it has exited (a zombie
    /// included), as `SupervisedProcess.kill` promises.
    pub fn signal_if_running(&self, sig: Signal) -> std::io::Result<bool> {
        if self.has_exited() {
            return Ok(false);
        }
        self.signal(sig, false)
    }

    /// Takes the child down again when no watcher could be started for it,
    /// so that nothing is left behind: killed (group and cgroup), reaped,
    /// its cgroup removed once empty.
    pub fn abandon(&self) {
        let _ = self.kill_all(true);
        let _ = sys::waitid_pid(self.pid, libc::WEXITED);
        if let Some(cg) = self.contained_cgroup() {
            cgroup::remove_when_empty(cg);
        }
    }
}
