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
//!   Under Node `js_loop` also polls the pidfd on the JS thread's libuv
//!   loop, which then usually settles first; the reaper,
//!   told with [`watch_beside_loop`], gives the loop a grace and then reaps
//!   itself, so that a blocked loop never delays the reap.
//!   The settle runs once, whoever calls it.
//! - `fallback`: a small thread blocks in `waitid(P_PID, pid, WEXITED |
//!   WNOWAIT)`. Used when no pidfd could be had (ENOSYS before Linux 5.3,
//!   EMFILE), when the reaper could not take it (no epoll, no thread), for
//!   a traced zombie, or when `PROCWARD_EXIT_WATCH=fallback` is set at load
//!   (the test suite runs through it that way).
//! - `kqueue` (`macos`): kqueue `EVFILT_PROC`/`NOTE_EXIT` on procward's
//!   runtime; `fallback` there too. Each OS module provides `watch` (in
//!   `linux` and `macos`); `linux` also `watch_beside_loop`, for `js_loop`.
//!
//! A contained child (`cgroup`, see `crate::cgroup`): after the sweep its
//! cgroup is killed (`cgroup.kill`), and the reap waits until the cgroup is
//! empty (`populated 0` in `cgroup.events`, polled, never a timer loop) and
//! removed, at most the spawn's `killTimeoutMs`; past that the reap goes
//! ahead and a watcher removes the cgroup once it empties. The leader stays
//! an unreaped zombie meanwhile, so its pid and pgid stay ours. Usually the
//! cgroup is empty the moment it is killed (the leader alone, or members
//! that died with it): then whichever driver looks (the JS loop, most
//! often) does all of it itself, as for any child. A wait, when there is
//! one, happens outside the state lock (`kill()`, `stop()` and the identity
//! stay answerable): a waiter thread blocks in it, the JS loop and the
//! reaper hand it to procward's runtime (see `drain`); never on the JS
//! thread, which parks until the settle.
//!
//! The watcher owns everything it needs (`Arc<Watched>`), so a JS handle
//! that is dropped, collected or `unref()`ed never leaves a zombie.
//!
//! One fd per child: its pidfd, owned by `Watched` (so every wait, the JS
//! loop's poll and the reaper's epoll name the same process), and closed
//! once the child is settled and nothing polls it any more (`pidfd`).
//!
//! Identity. `Watched` also keeps the child's identity, because it must be
//! the child's own even when read after the reap, and only an unreaped child
//! can be asked. What spawn learns for free (the start tick pinned by clock
//! readings around the clone, the pidfs inode from the pidfd) is the seed;
//! the rest is read from `/proc/<pid>/stat` under the state lock while the
//! child is unreaped: on the first read of the identity, or in the settle
//! just before the reap. A zombie still shows its start time there.
//!
//! Where things are. This file: [`Watched`], a child's exit state and
//! identity, and the constructors. `settle`: the one settle path every
//! driver takes (peek, then drain or settle; the reap and the publish);
//! `drain`: a contained child's cgroup emptied before the reap; `signal`:
//! signals, never to a reaped pid; `pidfd`: who holds and polls the pidfd,
//! and its release; `start`: the spawn glue; `contain`: a contained
//! spawn's cgroup and its `guardian`. The drivers: `reaper` (with
//! `linux`), `js_loop` (Linux: on the JS thread's libuv loop, beside the
//! reaper), `fallback`, `macos`. The drivers only call `Watched`'s
//! methods; nothing here calls a driver.

mod contain;
mod drain;
mod fallback;
#[cfg(target_os = "linux")]
pub mod js_loop;
#[cfg(target_os = "linux")]
mod linux;
mod pidfd;
#[cfg(target_os = "linux")]
mod reaper;
mod settle;
mod signal;
mod start;
#[cfg(target_os = "linux")]
pub use linux::{watch, watch_beside_loop};
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
pub use macos::watch;
pub use start::start;

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use tokio::sync::watch;

use super::{Contained, ExitStatus, Wake};
use crate::cgroup::{Cgroup, Usage};
use crate::pid::Pid;
use crate::proc_info::{self, Identity, IdentitySeed, InfoError};
use crate::sys::WaitStatus;

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
    /// Threads blocked on `settled` (a blocking driver waiting out another's
    /// drain): the settle wakes them only if there are any, since a condvar's
    /// notify is a futex system call whether or not anyone waits.
    settle_waiters: u32,
    /// The cgroup's usage read just before it was removed.
    final_usage: Option<Usage>,
    /// The child's pidfd (Linux), its only one: every wait goes through it,
    /// the JS loop polls it, the reaper's epoll holds it. Closed once
    /// settled and no longer polled (see `pidfd`).
    pidfd: Option<OwnedFd>,
    /// The JS loop polls `pidfd` (`js_loop`).
    loop_polls: bool,
    /// Who else holds `pidfd` (the reaper's epoll), told before it closes.
    holder: Option<pidfd::Holder>,
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

    /// Completes the identity while the child is an unreaped zombie (after
    /// the reap the pid is not ours to read), under the lock.
    fn complete_identity(&self, inner: &mut Inner) {
        if let Ident::Seed(seed) = &inner.identity {
            let pidfd = inner.pidfd.as_ref().map(|fd| fd.as_fd());
            inner.identity = match proc_info::child_identity(self.pid, seed, pidfd) {
                Ok(id) => Ident::Known(id),
                Err(e) => Ident::Lost(errno_of(&e)),
            };
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

    /// A native watcher now settles this child (said by the driver that
    /// took it). Only Linux's drivers say so (macOS has no JS-loop driver
    /// to tell).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    fn set_native(&self) {
        self.native.store(true, Ordering::Release);
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
            settle_waiters: 0,
            final_usage: None,
            pidfd,
            loop_polls: false,
            holder: None,
        }),
        reaped: tx,
        native: AtomicBool::new(false),
        contained,
        settled: Condvar::new(),
    })
}

#[cfg(all(test, target_os = "linux"))]
mod tests;
