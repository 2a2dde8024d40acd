//! A supervised child from its spawn to its settled exit: the child is
//! started ([`start`]), its exit watched without `waitpid(-1)`, its group
//! swept, its status delivered once.
//!
//! The same types and functions on every OS; the mechanism is each OS's own
//! (`unix`: pidfd/kqueue, `waitid`, the sweep before the reap; `windows`: a
//! registered wait on the process handle, the Job object swept). What JS
//! needs of a child — its pid, identity, exit, signals, cgroup — is asked of
//! [`Watched`] the same way everywhere; where an OS has no such thing, the
//! answer says so (no cgroup: `None`; a signal Windows cannot deliver: an
//! `Unsupported` error).

#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as imp;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as imp;

pub use imp::{start, watch, Watched, WATCH_CALL};
#[cfg(not(target_os = "linux"))]
pub mod js_loop_none;
#[cfg(not(target_os = "linux"))]
pub use js_loop_none as js_loop;
#[cfg(target_os = "linux")]
pub use unix::js_loop;
#[cfg(unix)]
pub use unix::{register, register_contained};
#[cfg(windows)]
pub use windows::HandleWait;

use std::ffi::c_void;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::cgroup::{Cgroup, CgroupError};
use crate::spawn::{Pipe, SpawnError};

/// How a child ended, as JS will see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
    /// Someone else reaped it first (a `waitpid(-1)` elsewhere in the
    /// process): the status is lost. Never on Windows.
    Unknown,
}

/// A contained child's cgroup, and how long its exit may wait for the
/// cgroup to empty (the spawn's `killTimeoutMs`).
pub struct Contained {
    pub cgroup: Arc<Cgroup>,
    pub bound: Duration,
}

pub type OnExit = Box<dyn FnOnce(ExitStatus) + Send>;

pub type Wake = Box<dyn FnOnce() + Send>;

/// Who hears a child's exit on the JS thread's loop ([`js_loop`]): the
/// binding's `'exit'` callback, with what it holds of JS. Called on that
/// thread only. Dropped, whether called or not, it lets go of JS there.
pub trait LoopListener {
    /// The loop watches: `hook(arg)` must run, on this thread, if this
    /// listener's JS environment is torn down first (a worker that ends);
    /// it stops the watch and drops the listener uncalled. Until [`exit`]:
    /// that removes it.
    ///
    /// [`exit`]: LoopListener::exit
    fn on_teardown(&mut self, hook: unsafe extern "C" fn(*mut c_void), arg: *mut c_void);

    /// `hook(arg)` must run, on this thread, when this listener's JS
    /// environment is torn down (the loop's hub, made for this listener's
    /// child, lets go of the loop then). Never removed.
    fn on_env_teardown(&mut self, hook: unsafe extern "C" fn(*mut c_void), arg: *mut c_void);

    /// The child is settled and the loop's handles are closing: deliver
    /// its exit. The last call.
    fn exit(self: Box<Self>, status: ExitStatus);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// pidfd polled by the JS thread's own event loop ([`js_loop`]).
    PidfdLoop,
    /// pidfd watched off the JS loop, by procward's reaper thread (a task on
    /// procward's tokio runtime once, hence the name JS sees).
    PidfdTokio,
    /// A thread blocked in waitid.
    Fallback,
    /// macOS: a kqueue (`EVFILT_PROC`/`NOTE_EXIT`) awaited on procward's runtime.
    Kqueue,
    /// Windows: a registered wait on the process handle, the job swept after it.
    Job,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::PidfdLoop => "pidfd",
            Backend::PidfdTokio => "pidfd-tokio",
            Backend::Fallback => "fallback",
            Backend::Kqueue => "kqueue",
            Backend::Job => "job",
        }
    }
}

/// A request for containment: a cgroup of the child's own, under `parent`
/// (or the default), guarded (killed when this process dies) or not, whose
/// exit may wait `bound` for the cgroup to empty.
pub struct Containment {
    pub parent: Option<std::path::PathBuf>,
    pub guarded: bool,
    pub bound: Duration,
}

/// A child just started, not yet watched: hand it to [`watch`] (or first
/// to [`js_loop`], which starts the reaper beside itself).
pub struct Started {
    pub watched: Arc<Watched>,
    /// The parent's pipe ends: stdio 0..3, then the readiness pipe.
    pub pipes: [Option<Pipe>; 4],
}

/// Why [`start`] failed; nothing is left running.
#[derive(Debug)]
pub enum StartError {
    Spawn(SpawnError),
    /// The child's cgroup could not be entered.
    Cgroup(CgroupError),
    /// The child started but could not be supervised (`syscall` failed):
    /// it was killed again.
    Supervise(std::io::Error, &'static str),
}

impl From<SpawnError> for StartError {
    fn from(e: SpawnError) -> StartError {
        StartError::Spawn(e)
    }
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
