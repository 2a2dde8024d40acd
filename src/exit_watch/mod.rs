//! Observing a child's exit without reaping it, then sweeping its group,
//! then reaping it — in that order, and never through `waitpid(-1)`.
//!
//! The order is the point. While the leader is an unreaped zombie its pid is
//! still taken, so no new process can get that pid, nor a process group
//! with that id: `killpg(pgid, SIGKILL)` can only reach the members of the
//! group we created. After the reap, the same call could reach a stranger.
//! So: see the exit (`waitid(WEXITED | WNOWAIT)`), sweep, reap
//! (`waitid(P_PID, pid, WEXITED)`), then tell JS.
//!
//! Only ever by pid: Node's libuv reaps its own children by pid too, and a
//! `waitpid(-1)` or a SIGCHLD handler here would steal their statuses.
//!
//! Back-ends, chosen per child:
//! - `pidfd` (`linux`): the pidfd turns readable on exit; a tokio task on
//!   procward's own runtime thread waits for it with `AsyncFd`. Under Node
//!   the binding layer (`js_loop`) also polls the pidfd on the JS thread's
//!   libuv loop, which then usually settles first; this task, started with
//!   [`watch_beside_loop`], stands by so that a blocked loop never delays
//!   the reap. `Watched::settle` runs once, whoever calls it.
//! - `fallback`: a small thread blocks in `waitid(P_PID, pid, WEXITED |
//!   WNOWAIT)`. Used when no pidfd could be had (ENOSYS before Linux 5.3,
//!   EMFILE), when registering it failed, or when `PROCWARD_EXIT_WATCH=fallback`
//!   is set at load (the test suite runs through it that way).
//! - macOS: kqueue `EVFILT_PROC`/`NOTE_EXIT` (`macos`), written on this
//!   seam but not compiled here (see README).
//!
//! The watcher owns everything it needs (`Arc<Watched>`), so a JS handle
//! that is dropped, collected or `unref()`ed never leaves a zombie.

#[cfg(target_os = "linux")]
mod fallback;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "macos")]
mod macos;

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use tokio::sync::watch;

use crate::pid::{Pid, Signal};
use crate::sys::{self, WaitStatus};

/// How a child ended, as JS will see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
    /// Someone else reaped it first (a `waitpid(-1)` elsewhere in the
    /// process): the status is lost.
    Unknown,
}

impl From<WaitStatus> for ExitStatus {
    fn from(w: WaitStatus) -> ExitStatus {
        match w {
            WaitStatus::Exited(c) => ExitStatus::Code(c),
            WaitStatus::Signaled(s) => ExitStatus::Signal(s),
            WaitStatus::StillAlive => ExitStatus::Unknown,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Running,
    Reaped(ExitStatus),
}

pub type OnExit = Box<dyn FnOnce(ExitStatus) + Send>;

/// One supervised child, shared by its watcher, its JS handle and any stop.
pub struct Watched {
    pid: Pid,
    pgid: Option<Pid>,
    sweep_group: bool,
    /// Held while signalling and while reaping, so a signal can never be
    /// sent to the pid after it was released to the kernel.
    state: Mutex<State>,
    reaped: watch::Sender<Option<ExitStatus>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// pidfd polled by the JS thread's own event loop (`js_loop`).
    PidfdLoop,
    /// pidfd awaited by a task on procward's own runtime thread.
    PidfdTokio,
    /// A thread blocked in waitid.
    Fallback,
}

fn forced() -> Option<&'static str> {
    static FORCED: OnceLock<Option<String>> = OnceLock::new();
    FORCED
        .get_or_init(|| std::env::var("PROCWARD_EXIT_WATCH").ok())
        .as_deref()
}

/// `PROCWARD_EXIT_WATCH=fallback` forces the waiter-thread back-end (read once).
pub fn forced_fallback() -> bool {
    forced() == Some("fallback")
}

/// `PROCWARD_EXIT_WATCH=tokio` keeps pidfds off the JS loop (read once).
pub fn forced_tokio() -> bool {
    forced() == Some("tokio")
}

impl Watched {
    pub fn pid(&self) -> Pid {
        self.pid
    }

    pub fn pgid(&self) -> Option<Pid> {
        self.pgid
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn exit_status(&self) -> Option<ExitStatus> {
        match *self.lock() {
            State::Running => None,
            State::Reaped(s) => Some(s),
        }
    }

    pub fn subscribe(&self) -> watch::Receiver<Option<ExitStatus>> {
        self.reaped.subscribe()
    }

    /// Exited, reaped or not. For an unreaped child a WNOHANG|WNOWAIT peek
    /// tells; it leaves the zombie in place for the watcher.
    pub fn has_exited(&self) -> bool {
        let state = self.lock();
        match *state {
            State::Reaped(_) => true,
            State::Running => !matches!(
                sys::waitid_pid(self.pid, libc::WEXITED | libc::WNOWAIT | libc::WNOHANG),
                Ok(WaitStatus::StillAlive)
            ),
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
        let sent = |res: std::io::Result<()>| match res {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
            Err(e) => Err(e),
        };
        let state = self.lock();
        if *state != State::Running {
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

    /// Signals the child alone, but not once it has exited (a zombie
    /// included), as `SupervisedProcess.kill` promises.
    pub fn signal_if_running(&self, sig: Signal) -> std::io::Result<bool> {
        if self.has_exited() {
            return Ok(false);
        }
        self.signal(sig, false)
    }

    /// The exit was seen (`seen` is the WNOWAIT status, or None when the
    /// child was reaped behind our back): sweep, reap, publish.
    fn settle(&self, seen: Option<WaitStatus>) -> ExitStatus {
        let status = {
            let mut state = self.lock();
            if let State::Reaped(status) = *state {
                return status;
            }
            let status = match seen {
                Some(seen) => {
                    if self.sweep_group {
                        if let Some(pgid) = self.pgid {
                            // The leader is a zombie we have not reaped: the
                            // pgid is still ours. ESRCH = nobody else left.
                            let _ = sys::killpg(pgid, Signal::KILL);
                        }
                    }
                    match sys::waitid_pid(self.pid, libc::WEXITED) {
                        Ok(WaitStatus::StillAlive) | Err(_) => ExitStatus::from(seen),
                        Ok(w) => ExitStatus::from(w),
                    }
                }
                // Reaped by someone else: the pid may already be recycled,
                // so the group is not ours to sweep any more.
                None => ExitStatus::Unknown,
            };
            *state = State::Reaped(status);
            status
        };
        self.reaped.send_replace(Some(status));
        status
    }

    fn finish(&self, seen: Option<WaitStatus>, on_exit: OnExit) {
        on_exit(self.settle(seen));
    }

    /// For a driver that watches the pidfd itself (the JS thread's event
    /// loop, see `js_loop`): call when the pidfd turns readable. `Some` once
    /// the child has been swept and reaped; `None` if it has not exited.
    pub fn try_settle(&self) -> Option<ExitStatus> {
        match sys::waitid_pid(self.pid, libc::WEXITED | libc::WNOWAIT | libc::WNOHANG) {
            Ok(WaitStatus::StillAlive) => None,
            Ok(w) => Some(self.settle(Some(w))),
            Err(_) => Some(self.settle(None)),
        }
    }
}

/// A new child's shared state, before any back-end watches it.
pub fn register(pid: Pid, pgid: Option<Pid>, sweep_group: bool) -> Arc<Watched> {
    let (tx, _) = watch::channel(None);
    Arc::new(Watched {
        pid,
        pgid,
        sweep_group,
        state: Mutex::new(State::Running),
        reaped: tx,
    })
}

/// The native reaper beside the JS loop (see `js_loop`): settles the child
/// itself only if the loop has not done so within `defer` of the exit — at
/// once when the loop is free, a millisecond later when it is blocked.
pub fn watch_beside_loop(
    watched: &Arc<Watched>,
    pidfd: Option<OwnedFd>,
    defer: std::time::Duration,
) -> std::io::Result<()> {
    match pidfd {
        Some(fd) => linux::start(watched.clone(), fd, Box::new(|_| {}), Some(defer)),
        None => fallback::start(watched.clone(), Box::new(|_| {})),
    }
}

/// Starts watching a freshly spawned child on a back-end of this module.
/// `on_exit` runs (on a runtime or waiter thread) after the reap.
pub fn watch(
    watched: &Arc<Watched>,
    pidfd: Option<OwnedFd>,
    on_exit: OnExit,
) -> std::io::Result<Backend> {
    match pidfd {
        Some(fd) if !forced_fallback() => {
            linux::start(watched.clone(), fd, on_exit, None)?;
            Ok(Backend::PidfdTokio)
        }
        _ => {
            fallback::start(watched.clone(), on_exit)?;
            Ok(Backend::Fallback)
        }
    }
}
