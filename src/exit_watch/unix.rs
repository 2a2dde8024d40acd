//! Observing a child's exit without reaping it, then sweeping its group,
//! then reaping it — in that order, and never through `waitpid(-1)`.
//!
//! The order is the point. While the leader is an unreaped zombie its pid is
//! still taken, so no new process can get that pid, nor a process group
//! with that id: `killpg(pgid, SIGKILL)` can only reach the members of the
//! group we created. After the reap, the same call could reach a stranger.
//! So: see the exit (`waitid(WEXITED | WNOWAIT)`), sweep, reap
//! (`waitid(WEXITED | WNOHANG)`: the zombie was seen, so it never blocks),
//! then tell JS.
//!
//! Only ever by pidfd or pid: Node's libuv reaps its own children by pid
//! too, and a `waitpid(-1)` or a SIGCHLD handler here would steal their
//! statuses. Where a back-end holds a pidfd, every wait goes through it
//! (`waitid(P_PIDFD)`, Linux 5.4): it names the process, not the number, so
//! a wait that comes after someone else reaped the child and the pid went to
//! a newcomer (another child of this process, say) fails with ECHILD instead
//! of seeing, or reaping, the newcomer. Every driver also looks at the state
//! first: a child settled by another driver is delivered, never waited for
//! again.
//!
//! A traced child. A tracer (`PTRACE_SEIZE` from another process) is told of
//! the exit first, and until it detaches or waits, the zombie is invisible
//! to our `waitid` although the pidfd is readable. Nothing can reap it then.
//! The reaper's one-shot registration has fired and stays silent; it hands
//! the child to a waiter thread, blocked in `waitid` until the tracer lets
//! go (the kernel wakes the real parent's waiters then). The JS loop, whose
//! poll is level-triggered, stops polling and waits to be woken by that
//! settle (`js_loop`): no driver spins, and `'exit'` comes once, right after
//! the reap.
//!
//! Back-ends, chosen per child:
//! - `pidfd` (`linux`, `reaper`): the pidfd turns readable on exit; one
//!   reaper thread, one epoll, watches the pidfds of all children (a task
//!   or thread per child cost more fds and wake-ups than the reap itself).
//!   Under Node the binding layer (`js_loop`) also polls the pidfd on the
//!   JS thread's libuv loop, which then usually settles first; the reaper,
//!   told with [`watch_beside_loop`], gives the loop a grace and then reaps
//!   itself, so that a blocked loop never delays the reap.
//!   `Watched::settle` runs once, whoever calls it.
//! - `fallback`: a small thread blocks in `waitid(P_PID, pid, WEXITED |
//!   WNOWAIT)`. Used when no pidfd could be had (ENOSYS before Linux 5.3,
//!   EMFILE), when the reaper could not take it (no epoll, no thread), for
//!   a traced zombie, or when `PROCWARD_EXIT_WATCH=fallback` is set at load
//!   (the test suite runs through it that way).
//! - `kqueue` (`macos`): kqueue `EVFILT_PROC`/`NOTE_EXIT` on procward's
//!   runtime; `fallback` there too. Each OS module provides `watch` and
//!   `watch_beside_loop` (in `linux` and `macos`).
//!
//! A contained child (`cgroup`, see `crate::cgroup`): after the sweep its
//! cgroup is killed (`cgroup.kill`), and the reap waits until the cgroup is
//! empty (`populated 0` in `cgroup.events`, polled, never a timer loop) and
//! removed, at most the spawn's `killTimeoutMs`; past that the reap goes
//! ahead and a watcher removes the cgroup once it empties. The leader stays
//! an unreaped zombie meanwhile, so its pid and pgid stay ours. Usually the
//! cgroup is empty the moment it is killed (the leader alone, or members
//! that died with it): then the JS loop does all of it itself, as for any
//! child (`drain_here`). A wait, when there is one, happens outside the
//! state lock (`kill()`, `stop()` and the identity stay answerable), on
//! procward's runtime (`settle_async`, `finish_drain`) or a waiter thread
//! (`settle_blocking`), never on the JS thread, which parks until the
//! settle.
//!
//! The watcher owns everything it needs (`Arc<Watched>`), so a JS handle
//! that is dropped, collected or `unref()`ed never leaves a zombie.
//!
//! One fd per child: its pidfd, owned by `Watched` (so every wait, the JS
//! loop's poll and the reaper's epoll name the same process), and closed
//! once the child is settled and nothing polls it any more (`release`).
//!
//! Identity. `Watched` also keeps the child's identity, because it must be
//! the child's own even when read after the reap, and only an unreaped child
//! can be asked. What spawn learns for free (the start tick pinned by clock
//! readings around the clone, the pidfs inode from the pidfd) is the seed;
//! the rest is read from `/proc/<pid>/stat` under the state lock while the
//! child is unreaped: on the first read of the identity, or in `settle` just
//! before the reap. A zombie still shows its start time there.

mod fallback;
#[cfg(target_os = "linux")]
mod guardian;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod reaper;
#[cfg(target_os = "linux")]
use linux::contain;
#[cfg(target_os = "linux")]
pub use linux::{watch, watch_beside_loop};
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos::contain;
#[cfg(target_os = "macos")]
pub use macos::{watch, watch_beside_loop};

use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use tokio::sync::watch;

use super::{
    forced_fallback, Contained, Containment, ExitStatus, OnExit, StartError, Started, Wake,
};
use crate::cgroup::{self, Cgroup, CgroupError, Usage};
use crate::pid::{Pid, Signal};
use crate::proc_info::{self, Identity, IdentitySeed, InfoError};
use crate::spawn::{self, Command};
use crate::sys::{self, WaitStatus};

/// What a failed [`watch`] was doing, for the error JS gets.
pub const WATCH_CALL: &str = "spawn watcher";

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

/// What is known of the child's identity (see the module docs).
enum Ident {
    Known(Identity),
    /// Still to be completed from /proc, while the child is unreaped.
    Seed(IdentitySeed),
    /// It could not be read before the reap (errno: EMFILE, say).
    Lost(i32),
}

struct Inner {
    state: State,
    identity: Ident,
    /// Run once, after the settle (see [`Watched::on_settle`]).
    on_settle: Vec<Wake>,
    /// A contained child's exit was seen and its cgroup killed; one driver
    /// now waits for the cgroup to empty, the others wait for its settle.
    draining: bool,
    /// The cgroup's usage read just before it was removed.
    final_usage: Option<Usage>,
    /// The child's pidfd (Linux), its only one: every wait goes through it,
    /// the JS loop polls it, the reaper's epoll holds it. Closed once
    /// settled and no longer polled (see [`Watched::release`]).
    pidfd: Option<OwnedFd>,
    /// The JS loop polls `pidfd` (the binding's `js_loop`).
    loop_polls: bool,
    /// The reaper's key for this child while its epoll holds `pidfd`.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    reaper_key: Option<u64>,
}

/// One supervised child, shared by its watcher, its JS handle and any stop.
pub struct Watched {
    pid: Pid,
    pgid: Option<Pid>,
    sweep_group: bool,
    /// Held while signalling and while reaping, so a signal can never be
    /// sent to the pid after it was released to the kernel.
    inner: Mutex<Inner>,
    reaped: watch::Sender<Option<ExitStatus>>,
    /// A native watcher (the reaper or a waiter thread) settles this child.
    native: AtomicBool,
    contained: Option<Contained>,
    /// Signalled when the child is settled (for a blocking driver that found
    /// another one draining the cgroup).
    settled: Condvar,
}

/// What the reaper held for a child whose pidfd was just released: its
/// delivery runs, and the hold is dropped, once the state lock is released.
#[derive(Default)]
#[must_use]
struct Released(Option<(Arc<Watched>, Option<OnExit>)>);

impl Released {
    fn deliver(self, status: ExitStatus) {
        if let Some((_hold, Some(on_exit))) = self.0 {
            on_exit(status);
        }
    }
}

/// The first half of a contained child's settle.
enum Drain {
    /// Settled already.
    Done(ExitStatus),
    /// Another driver drains the cgroup; wait for its settle.
    Busy,
    /// Nothing in the cgroup was alive (the leader alone): finish with
    /// [`Watched::settle_drained`] at once.
    Empty,
    /// Killed: wait for the cgroup to empty, at most `Duration`, then
    /// finish with [`Watched::settle_drained`].
    Wait(Arc<Cgroup>, Duration),
}

fn errno_of(err: &InfoError) -> i32 {
    match err {
        InfoError::Hidden => libc::EACCES,
        InfoError::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
    }
}

impl Watched {
    pub fn pid(&self) -> Pid {
        self.pid
    }

    pub fn pgid(&self) -> Option<Pid> {
        self.pgid
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn exit_status(&self) -> Option<ExitStatus> {
        match self.lock().state {
            State::Running => None,
            State::Reaped(s) => Some(s),
        }
    }

    pub fn subscribe(&self) -> watch::Receiver<Option<ExitStatus>> {
        self.reaped.subscribe()
    }

    /// The child's identity: its own, whenever it is read. Errors only when
    /// /proc could not be read while the child was unreaped (EMFILE, or
    /// hidepid for a child running as another user); while it is unreaped, a
    /// later call tries again.
    pub fn identity(&self) -> Result<Identity, InfoError> {
        let mut inner = self.lock();
        match &inner.identity {
            Ident::Known(id) => Ok(id.clone()),
            Ident::Lost(errno) => Err(match *errno {
                libc::EACCES => InfoError::Hidden,
                e => InfoError::Io(std::io::Error::from_raw_os_error(e)),
            }),
            Ident::Seed(seed) => {
                if inner.state != State::Running {
                    // settle completes or loses the seed before it reaps.
                    return Err(InfoError::Io(std::io::Error::from_raw_os_error(
                        libc::ECHILD,
                    )));
                }
                // Unreaped, and reaping needs this lock: the pid is the
                // child's for as long as we read.
                let pidfd = inner.pidfd.as_ref().map(|fd| fd.as_fd());
                let id = proc_info::child_identity(self.pid, seed, pidfd)?;
                inner.identity = Ident::Known(id.clone());
                Ok(id)
            }
        }
    }

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

    /// The child's cgroup while it lives (None once settled, or when not
    /// contained).
    pub fn cgroup(&self) -> Option<&Cgroup> {
        let c = self.contained.as_ref()?;
        (self.lock().state == State::Running).then_some(&*c.cgroup)
    }

    /// The cgroup itself, for as long as this handle lives.
    pub fn contained_cgroup(&self) -> Option<Arc<Cgroup>> {
        self.contained.as_ref().map(|c| c.cgroup.clone())
    }

    /// The cgroup's path and id, for as long as this handle lives (what a
    /// state file records).
    pub fn cgroup_record(&self) -> Option<(std::path::PathBuf, u64)> {
        self.contained
            .as_ref()
            .map(|c| (c.cgroup.path().to_path_buf(), c.cgroup.id()))
    }

    /// Resource usage: live while the child runs, as last read before the
    /// removal after it. None when not contained.
    pub fn usage(&self) -> Option<Usage> {
        let c = self.contained.as_ref()?;
        let inner = self.lock();
        Some(match (&inner.state, inner.final_usage) {
            (State::Reaped(_), Some(u)) => u,
            (State::Reaped(_), None) => Usage::default(),
            (State::Running, _) => c.cgroup.usage(),
        })
    }

    /// The last look at the child before its group and pid are given up,
    /// under the lock while it is an unreaped zombie: its identity is
    /// completed (after the reap the pid is not ours to read), and its
    /// group swept (the pgid is still ours; ESRCH = nobody else left).
    fn last_look(&self, inner: &mut Inner) {
        if let Ident::Seed(seed) = &inner.identity {
            let pidfd = inner.pidfd.as_ref().map(|fd| fd.as_fd());
            inner.identity = match proc_info::child_identity(self.pid, seed, pidfd) {
                Ok(id) => Ident::Known(id),
                Err(e) => Ident::Lost(errno_of(&e)),
            };
        }
        if self.sweep_group {
            if let Some(pgid) = self.pgid {
                let _ = sys::killpg(pgid, Signal::KILL);
            }
        }
    }

    /// Kills a contained child's cgroup after its leader's exit was seen,
    /// and sweeps the group, under the lock (the leader is an unreaped
    /// zombie, so its pgid is still ours). The wait for the cgroup to empty
    /// happens outside the lock: `kill()`, `stop()` and the identity stay
    /// answerable meanwhile.
    fn begin_drain(&self, c: &Contained) -> Drain {
        let mut inner = self.lock();
        if let State::Reaped(status) = inner.state {
            return Drain::Done(status);
        }
        if inner.draining {
            return Drain::Busy;
        }
        self.last_look(&mut inner);
        inner.draining = true;
        // Nothing alive in it (the leader alone: a zombie does not count):
        // nothing to kill or wait for. Gone (removed behind our back) counts
        // as empty too.
        let populated = match c.cgroup.populated() {
            Ok(populated) => populated,
            Err(e) => !matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENODEV)),
        };
        if !populated {
            return Drain::Empty;
        }
        let _ = c.cgroup.kill();
        Drain::Wait(c.cgroup.clone(), c.bound)
    }

    /// Blocks until settled (a blocking driver that found another draining).
    fn wait_settled(&self) -> ExitStatus {
        let mut inner = self.lock();
        loop {
            if let State::Reaped(s) = inner.state {
                return s;
            }
            inner = self.settled.wait(inner).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Settles a child whose exit was seen (`seen`), from a thread that may
    /// block (the fallback waiter). A contained child's cgroup is killed and
    /// waited for (at most its bound) before the reap.
    fn settle_blocking(&self, seen: Option<WaitStatus>) -> ExitStatus {
        let Some(c) = self.contained.as_ref().filter(|_| seen.is_some()) else {
            return self.settle(seen);
        };
        match self.begin_drain(c) {
            Drain::Done(s) => s,
            Drain::Busy => self.wait_settled(),
            Drain::Empty => self.settle_drained(seen, true),
            Drain::Wait(cg, bound) => {
                let empty = cgroup::wait_empty_blocking(&cg, Some(bound));
                self.settle_drained(seen, empty)
            }
        }
    }

    /// The same on procward's runtime: the wait for `populated 0` is an
    /// inotify readiness, never a blocked thread.
    // Only Linux's reaper settles asynchronously (macOS has no cgroup).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    async fn settle_async(&self, seen: Option<WaitStatus>) -> ExitStatus {
        let (Some(c), Some(seen)) = (self.contained.as_ref(), seen) else {
            return self.settle(seen);
        };
        match self.begin_drain(c) {
            Drain::Done(s) => s,
            Drain::Busy => {
                let mut rx = self.subscribe();
                let settled = rx.wait_for(|s| s.is_some()).await.ok().and_then(|s| *s);
                settled
                    .or_else(|| self.exit_status())
                    .unwrap_or(ExitStatus::Unknown)
            }
            Drain::Empty => self.settle_drained(Some(seen), true),
            Drain::Wait(cg, bound) => self.finish_drain(cg, bound, seen).await,
        }
    }

    /// A drain under way (`begin_drain` said wait): the wait for the cgroup
    /// to empty, at most `bound`, then the settle.
    async fn finish_drain(&self, cg: Arc<Cgroup>, bound: Duration, seen: WaitStatus) -> ExitStatus {
        let deadline = tokio::time::Instant::now() + bound;
        let empty = cgroup::wait_empty(&cg, Some(deadline)).await;
        self.settle_drained(Some(seen), empty)
    }

    /// After the drain: read the final usage, remove the cgroup (or leave
    /// that to a watcher of its `populated 0` when a member outlived the
    /// bound), then reap and publish as any child.
    fn settle_drained(&self, seen: Option<WaitStatus>, empty: bool) -> ExitStatus {
        if let Some(c) = &self.contained {
            let usage = c.cgroup.usage();
            self.lock().final_usage = Some(usage);
            if !empty || c.cgroup.remove().is_err() {
                cgroup::remove_when_empty(c.cgroup.clone());
            }
        }
        self.settle(seen)
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

    /// The exit seen or not, without reaping: `waitid(WNOWAIT | WNOHANG)`
    /// through the pidfd when there is one. ECHILD once settled (its pidfd
    /// may be closed, and its pid someone else's).
    fn peek(&self) -> std::io::Result<WaitStatus> {
        let inner = self.lock();
        if inner.state != State::Running {
            return Err(std::io::Error::from_raw_os_error(libc::ECHILD));
        }
        let pidfd = inner.pidfd.as_ref().map(|fd| fd.as_fd());
        let peek = libc::WEXITED | libc::WNOWAIT | libc::WNOHANG;
        sys::waitid_child(self.pid, pidfd, peek)
    }

    /// The exit was seen (`seen` is the WNOWAIT status, or None when the
    /// child was reaped behind our back): complete the identity, sweep,
    /// reap, publish. The reap goes through the pidfd when there is one.
    fn settle(&self, seen: Option<WaitStatus>) -> ExitStatus {
        let (status, wakes, released) = {
            let mut inner = self.lock();
            if let State::Reaped(status) = inner.state {
                return status;
            }
            let status = match seen {
                Some(seen) => {
                    self.last_look(&mut inner);
                    // WNOHANG: the zombie was seen, so this reaps at once;
                    // were it taken meanwhile by someone else, it must not
                    // block on whoever got the pid next.
                    let pidfd = inner.pidfd.as_ref().map(|fd| fd.as_fd());
                    match sys::waitid_child(self.pid, pidfd, libc::WEXITED | libc::WNOHANG) {
                        Ok(WaitStatus::StillAlive) | Err(_) => ExitStatus::from(seen),
                        Ok(w) => ExitStatus::from(w),
                    }
                }
                // Reaped by someone else: the pid may already be recycled,
                // so the group is not ours to sweep any more.
                None => {
                    if let Ident::Seed(_) = inner.identity {
                        inner.identity = Ident::Lost(libc::ECHILD);
                    }
                    // The cgroup is still ours (held by its directory, not
                    // a number): kill what is left, remove it once empty.
                    if let Some(c) = self.contained.as_ref().filter(|_| !inner.draining) {
                        let _ = c.cgroup.kill();
                        cgroup::remove_when_empty(c.cgroup.clone());
                    }
                    ExitStatus::Unknown
                }
            };
            inner.state = State::Reaped(status);
            let released = self.release(&mut inner);
            (status, std::mem::take(&mut inner.on_settle), released)
        };
        self.settled.notify_all();
        // Its cached fds (liveness, info) name a process that is gone.
        proc_info::forget(self.pid);
        self.reaped.send_replace(Some(status));
        for wake in wakes {
            wake();
        }
        released.deliver(status);
        status
    }

    /// Closes the pidfd once the child is settled and the JS loop no longer
    /// polls it (libuv must stop polling an fd before it is closed: its
    /// epoll would hold a stale entry, and a later fd with the same number
    /// could be mistaken for it), taking it out of the reaper's epoll first.
    /// Under the state lock, so no `waitid` on it can be under way.
    fn release(&self, inner: &mut Inner) -> Released {
        if inner.loop_polls || inner.state == State::Running {
            return Released::default();
        }
        let Some(fd) = inner.pidfd.take() else {
            return Released::default();
        };
        #[cfg(target_os = "linux")]
        if let Some(key) = inner.reaper_key.take() {
            let entry = reaper::forget(key, fd.as_fd());
            return Released(entry.map(|e| (e.watched, e.on_exit)));
        }
        drop(fd);
        Released::default()
    }

    fn finish(&self, seen: Option<WaitStatus>, on_exit: OnExit) {
        on_exit(self.settle_blocking(seen));
    }

    /// For a driver that watches the pidfd itself (the JS thread's event
    /// loop, see `js_loop`): call when the pidfd turns readable. `Some` once
    /// the child has been swept and reaped (here or by another driver);
    /// `None` if no exit can be seen: it has not exited, or a tracer holds
    /// the zombie.
    pub fn try_settle(self: &Arc<Self>) -> Option<ExitStatus> {
        if let Some(status) = self.exit_status() {
            return Some(status);
        }
        match self.peek() {
            Ok(WaitStatus::StillAlive) => None,
            Ok(w) => match self.contained.as_ref() {
                Some(c) => self.drain_here(c, w),
                None => Some(self.settle(Some(w))),
            },
            Err(_) => Some(self.settle(None)),
        }
    }

    /// A contained child's settle from the JS thread, which must not wait
    /// for its cgroup to empty. Usually the cgroup is empty once killed (the
    /// leader alone, or members that died with it): then all of it happens
    /// here, with no other thread woken. Otherwise the wait goes to
    /// procward's runtime (or a waiter thread), and `None` tells the caller
    /// to wait for the settle (`on_settle`).
    fn drain_here(self: &Arc<Self>, c: &Contained, seen: WaitStatus) -> Option<ExitStatus> {
        match self.begin_drain(c) {
            Drain::Done(s) => Some(s),
            Drain::Busy => None,
            Drain::Empty => Some(self.settle_drained(Some(seen), true)),
            Drain::Wait(cg, bound) => {
                // Members that die of the kill take a moment: one more look
                // before the wait is handed on.
                if !cg.populated().unwrap_or(true) {
                    return Some(self.settle_drained(Some(seen), true));
                }
                let me = self.clone();
                let handed = match crate::runtime::handle() {
                    Ok(rt) => {
                        rt.spawn(async move { me.finish_drain(cg, bound, seen).await });
                        true
                    }
                    Err(_) => std::thread::Builder::new()
                        .name("procward-drain".into())
                        .spawn(move || {
                            let empty = cgroup::wait_empty_blocking(&cg, Some(bound));
                            me.settle_drained(Some(seen), empty);
                        })
                        .is_ok(),
                };
                if !handed {
                    // No thread for the wait: the drain is given back, and
                    // the reaper takes it up (it retries until it can).
                    self.lock().draining = false;
                }
                None
            }
        }
    }

    /// The JS loop starts polling the pidfd: its raw number, valid until
    /// [`Watched::detach_loop`]. None: no pidfd (or the child is settled).
    pub fn attach_loop(&self) -> Option<RawFd> {
        let mut inner = self.lock();
        let fd = inner.pidfd.as_ref()?.as_raw_fd();
        inner.loop_polls = true;
        Some(fd)
    }

    /// The JS loop has stopped polling the pidfd (`uv_poll_stop`): it may
    /// be closed once the child is settled.
    pub fn detach_loop(&self) {
        let (released, status) = {
            let mut inner = self.lock();
            inner.loop_polls = false;
            (self.release(&mut inner), inner.state)
        };
        if let State::Reaped(status) = status {
            released.deliver(status);
        }
    }

    /// Whether the pidfd says the child has exited (readable), for a loop
    /// that found nothing to reap: a tracer then holds the zombie.
    pub fn pidfd_readable(&self) -> bool {
        let inner = self.lock();
        let pidfd = inner.pidfd.as_ref().map(|fd| fd.as_fd());
        pidfd.is_some_and(|fd| sys::is_readable_now(fd).unwrap_or(false))
    }

    /// Whether the reaper leaves this child's exit to the JS loop for its
    /// grace: the loop polls it and may settle it (a contained one too, when
    /// its cgroup is empty once killed; else the loop hands the wait on).
    /// The reaper wakes at the same moment as the loop; if the loop holds
    /// the state lock (settling, most likely), it looks again after the
    /// grace rather than wait for the lock and make the loop wait next.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    fn loop_first(&self) -> bool {
        match self.inner.try_lock() {
            Ok(inner) => inner.loop_polls,
            Err(TryLockError::WouldBlock) => true,
            Err(TryLockError::Poisoned(e)) => e.into_inner().loop_polls,
        }
    }

    /// Runs `wake` once this child is settled (on the settling thread, after
    /// the status is published). `Err(wake)`: it already is; nothing kept.
    pub fn on_settle(&self, wake: Wake) -> Result<(), Wake> {
        let mut inner = self.lock();
        if inner.state != State::Running {
            return Err(wake);
        }
        inner.on_settle.push(wake);
        Ok(())
    }

    /// Whether a native watcher (not only the JS loop) settles this child.
    pub fn has_native_watcher(&self) -> bool {
        self.native.load(Ordering::Acquire)
    }
}

/// Starts `cmd` as a supervised child, not yet watched (see [`watch`]).
/// `sweep_group`: its process group is killed when it exits. `containment`:
/// it is born in a cgroup of its own, made here first (and removed again if
/// the spawn fails).
///
/// The clock readings around the spawn usually pin the child's start tick,
/// and its pidfd gives the pidfs inode: its identity without a /proc read.
/// Whatever is missing is read later, while the child is still unreaped.
pub fn start(
    mut cmd: Command,
    sweep_group: bool,
    containment: Option<Containment>,
) -> Result<Started, StartError> {
    // The cgroup exists (and the guardian knows its parent) before the
    // child does; the child enters it before it execs.
    let contained = match containment {
        Some(c) => Some(Contained {
            cgroup: contain(c.parent.as_deref(), c.guarded).map_err(StartError::Cgroup)?,
            bound: c.bound,
        }),
        None => None,
    };
    if let Some(c) = &contained {
        match c.cgroup.into_spawn() {
            Ok(into) => cmd.cgroup = Some(into),
            Err(e) => {
                let _ = c.cgroup.remove();
                let path = c.cgroup.path().to_path_buf();
                return Err(StartError::Cgroup(CgroupError::Io(e, "open", path)));
            }
        }
    }
    proc_info::prepare_identity();
    let before = sys::boottime_ns();
    let spawned = spawn::spawn(&cmd, !forced_fallback());
    // Only the spawn needed where the child starts.
    cmd.cgroup = None;
    let child = match spawned {
        Ok(c) => c,
        Err(e) => {
            if let Some(c) = &contained {
                // The child failed before exec and was reaped: it is empty.
                if c.cgroup.remove().is_err() {
                    cgroup::remove_when_empty(c.cgroup.clone());
                }
            }
            return Err(e.into());
        }
    };
    let seed = IdentitySeed {
        start_time: proc_info::start_tick_between(before, sys::boottime_ns()),
        inode: child.pidfd.as_ref().map(proc_info::pidfd_inode),
    };
    let pgid = cmd.process_group.then_some(child.pid);
    let watched = register_contained(child.pid, pgid, sweep_group, seed, contained, child.pidfd);
    let [a, b, c] = child.pipes;
    Ok(Started {
        watched,
        pipes: [a, b, c, child.notify],
    })
}

/// A new child's shared state, before any back-end watches it. `seed`: what
/// spawn already knows of its identity; `pidfd`: the child's, if it has one
/// (kept, and closed, by the `Watched`).
pub fn register(
    pid: Pid,
    pgid: Option<Pid>,
    sweep_group: bool,
    seed: IdentitySeed,
    pidfd: Option<OwnedFd>,
) -> Arc<Watched> {
    register_contained(pid, pgid, sweep_group, seed, None, pidfd)
}

/// [`register`] for a child born in a cgroup of its own.
pub fn register_contained(
    pid: Pid,
    pgid: Option<Pid>,
    sweep_group: bool,
    seed: IdentitySeed,
    contained: Option<Contained>,
    pidfd: Option<OwnedFd>,
) -> Arc<Watched> {
    let (tx, _) = watch::channel(None);
    let known = match seed {
        IdentitySeed {
            start_time: Some(start_time),
            inode: Some(inode),
        } => proc_info::identity_from(start_time, inode).ok(),
        _ => None,
    };
    let identity = known.map_or(Ident::Seed(seed), Ident::Known);
    Arc::new(Watched {
        pid,
        pgid,
        sweep_group,
        inner: Mutex::new(Inner {
            state: State::Running,
            identity,
            on_settle: Vec::new(),
            draining: false,
            final_usage: None,
            pidfd,
            loop_polls: false,
            reaper_key: None,
        }),
        reaped: tx,
        native: AtomicBool::new(false),
        contained,
        settled: Condvar::new(),
    })
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::process::Command;
    use std::sync::atomic::AtomicUsize;

    /// Reaped through `Watched` (the point of these tests), not std's Child.
    #[allow(clippy::zombie_processes)]
    fn spawn(program: &str, args: &[&str]) -> Pid {
        let child = Command::new(program).args(args).spawn().expect("spawn");
        Pid::from_raw(child.id() as i32).expect("pid")
    }

    fn wait_exited(pidfd: &OwnedFd) {
        while !sys::is_readable_now(pidfd.as_fd()).expect("poll") {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn settles_once_keeps_the_identity_and_wakes_each_waiter_once() {
        let pid = spawn("sleep", &["30"]);
        let pidfd = sys::pidfd_open(pid).expect("pidfd");
        let own = Some(sys::pidfd_open(pid).expect("its own pidfd"));
        let w = register(pid, None, false, IdentitySeed::default(), own);
        let identity = w.identity().expect("identity");
        let woken = Arc::new(AtomicUsize::new(0));
        let count = woken.clone();
        let wake: Wake = Box::new(move || {
            count.fetch_add(1, Ordering::SeqCst);
        });
        assert!(w.on_settle(wake).is_ok());
        assert_eq!(w.try_settle(), None);
        sys::kill(pid, Signal::KILL).expect("kill");
        wait_exited(&pidfd);
        let killed = Some(ExitStatus::Signal(libc::SIGKILL));
        assert_eq!(w.try_settle(), killed);
        // Reaped: the pid is no child of ours any more.
        let gone = sys::waitid_pid(pid, libc::WEXITED | libc::WNOHANG);
        assert_eq!(gone.map_err(|e| e.raw_os_error()), Err(Some(libc::ECHILD)));
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        // Another driver finds it settled, and a late waiter is refused.
        assert_eq!(w.try_settle(), killed);
        assert_eq!(w.try_settle(), killed);
        assert!(w.on_settle(Box::new(|| {})).is_err());
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        assert_eq!(w.identity().expect("identity after the reap"), identity);
    }

    #[test]
    fn an_unread_identity_is_read_from_the_zombie_before_the_reap() {
        let before = sys::boottime_ns();
        let pid = spawn("true", &[]);
        let tick = proc_info::start_tick_between(before, sys::boottime_ns());
        let pidfd = sys::pidfd_open(pid).expect("pidfd");
        let own = Some(sys::pidfd_open(pid).expect("its own pidfd"));
        let w = register(pid, None, false, IdentitySeed::default(), own);
        wait_exited(&pidfd);
        assert_eq!(w.try_settle(), Some(ExitStatus::Code(0)));
        let id = w.identity().expect("identity after the reap");
        if let Some(tick) = tick {
            assert_eq!(id.start_time, tick);
        }
        assert_eq!(id.inode, proc_info::pidfd_inode(pidfd.as_fd()));
    }

    #[test]
    fn a_child_reaped_behind_its_back_settles_as_unknown() {
        let pid = spawn("true", &[]);
        let pidfd = sys::pidfd_open(pid).expect("pidfd");
        let own = Some(sys::pidfd_open(pid).expect("its own pidfd"));
        let w = register(pid, None, false, IdentitySeed::default(), own);
        wait_exited(&pidfd);
        sys::waitid_pid(pid, libc::WEXITED).expect("reap");
        // The pidfd wait names the reaped process: ECHILD, whoever has the
        // pid now.
        assert_eq!(w.try_settle(), Some(ExitStatus::Unknown));
        let lost = w.identity().map_err(|e| match e {
            InfoError::Io(e) => e.raw_os_error(),
            InfoError::Hidden => None,
        });
        assert_eq!(lost, Err(Some(libc::ECHILD)));
    }

    fn pidfd_closed(w: &Watched) -> bool {
        w.lock().pidfd.is_none()
    }

    #[test]
    fn the_reaper_settles_each_child_once_and_closes_its_pidfd() {
        let n = 50;
        let (tx, rx) = std::sync::mpsc::channel();
        let mut kids = Vec::new();
        for _ in 0..n {
            let pid = spawn("sleep", &["30"]);
            let own = Some(sys::pidfd_open(pid).expect("its own pidfd"));
            let w = register(pid, None, false, IdentitySeed::default(), own);
            let tx = tx.clone();
            let on_exit: OnExit = Box::new(move |s| tx.send((pid, s)).expect("send"));
            assert_eq!(
                watch(&w, on_exit).expect("watch"),
                super::super::Backend::PidfdTokio
            );
            kids.push(w);
        }
        for w in &kids {
            sys::kill(w.pid(), Signal::KILL).expect("kill");
        }
        let mut seen = std::collections::HashSet::new();
        for _ in 0..n {
            let (pid, status) = rx.recv_timeout(Duration::from_secs(20)).expect("an exit");
            assert_eq!(status, ExitStatus::Signal(libc::SIGKILL));
            assert!(seen.insert(pid), "{pid} delivered twice");
        }
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        for w in &kids {
            assert!(pidfd_closed(w));
            let gone = sys::waitid_pid(w.pid(), libc::WEXITED | libc::WNOHANG);
            assert_eq!(gone.map_err(|e| e.raw_os_error()), Err(Some(libc::ECHILD)));
        }
    }

    #[test]
    fn a_polled_pidfd_outlives_the_settle_until_the_loop_lets_go() {
        let pid = spawn("sleep", &["30"]);
        let own = Some(sys::pidfd_open(pid).expect("its own pidfd"));
        let w = register(pid, None, false, IdentitySeed::default(), own);
        let fd = w.attach_loop().expect("a pidfd to poll");
        // The loop never runs: the reaper settles the child after its grace.
        watch_beside_loop(&w).expect("reaper");
        let mut rx = w.subscribe();
        sys::kill(pid, Signal::KILL).expect("kill");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let settled = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(20), rx.wait_for(|s| s.is_some()))
                .await
                .map(|r| r.map(|s| *s))
        });
        assert_eq!(
            settled.ok().and_then(|r| r.ok()).flatten(),
            Some(ExitStatus::Signal(libc::SIGKILL))
        );
        // Still polled: the fd stays open (libuv would hold a stale entry).
        assert!(!pidfd_closed(&w));
        assert_eq!(w.attach_loop(), Some(fd));
        w.detach_loop();
        assert!(pidfd_closed(&w));
        assert_eq!(w.try_settle(), Some(ExitStatus::Signal(libc::SIGKILL)));
    }
}
