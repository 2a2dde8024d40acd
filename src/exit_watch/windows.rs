//! Exit watching on Windows: a registered wait on the process handle, then
//! the sweep (`TerminateJobObject`), then the exit is settled and delivered.
//!
//! The process handle plays the pidfd: held, the pid cannot be reused, and
//! it is signalled when the process exits. `RegisterWaitForSingleObject`
//! hands it to the system thread pool's waiter (one waiter thread watches
//! up to 63 handles), which runs our callback once on exit: no thread of
//! ours blocks, nothing polls. The callback sweeps the job — every
//! descendant, however it was started — while we still hold the leader's
//! handle, then settles: records the status, wakes `stop()` waiters, and
//! calls the delivery (a threadsafe function to the JS thread).
//!
//! There is nothing to reap on Windows: the "reap" is the settle, and the
//! handle is closed when the last `Arc<Watched>` goes (the JS handle and,
//! until it has run, the callback's).
//!
//! The status: the exit code, or `Signal(n)` when procward terminated the
//! process (stop's SIGKILL step, or `kill(n)`) — as Node's `child_process`
//! reports a child it killed on Windows.

use std::ffi::c_void;
use std::io;
use std::os::windows::io::OwnedHandle;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;
use tokio::time::Instant;
use windows_sys::Win32::Foundation::{HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Threading::{
    RegisterWaitForSingleObject, UnregisterWaitEx, INFINITE, WT_EXECUTEONLYONCE,
};

use super::{Backend, Containment, ExitStatus, OnExit, StartError, Started};
use crate::cgroup::{self, Cgroup, CgroupError, Usage};
use crate::pid::{Pid, Signal};
use crate::proc_info::{self, Identity, InfoError};
use crate::spawn::{self, Command};
use crate::sys;

/// What a failed [`watch`] was doing, for the error JS gets.
pub const WATCH_CALL: &str = "RegisterWaitForSingleObject";

/// Starts `cmd` in a Job object of its own, not yet watched (see
/// [`watch`]). `sweep_group`: the job (the whole tree) is terminated when
/// the child exits. Containment in a cgroup is refused: the Job object is
/// the containment here, and the error says so.
pub fn start(
    cmd: Command,
    sweep_group: bool,
    containment: Option<Containment>,
) -> Result<Started, StartError> {
    if containment.is_some() {
        let why = cgroup::support().reason.unwrap_or_default();
        return Err(StartError::Cgroup(CgroupError::Unavailable(why)));
    }
    let child = spawn::spawn(&cmd, false)?;
    let identity = match proc_info::identity_of_handle(&child.process) {
        Ok(id) => id,
        Err(e) => {
            let _ = sys::terminate_job(&child.job);
            return Err(StartError::Supervise(e, "GetProcessTimes"));
        }
    };
    let pgid = cmd.process_group.then_some(child.pid);
    let watched = Arc::new(Watched {
        pid: child.pid,
        pgid,
        process: child.process,
        job: child.job,
        sweep: sweep_group,
        identity,
        inner: Mutex::new(Inner {
            status: None,
            terminated_by: None,
        }),
        settled: watch::Sender::new(false),
        wait: Mutex::new(None),
    });
    Ok(Started {
        watched,
        pipes: [None, None, None, None],
    })
}

struct Inner {
    status: Option<ExitStatus>,
    /// The signal procward terminated it with, if it did.
    terminated_by: Option<Signal>,
}

/// A child and its job, watched until its exit is settled.
pub struct Watched {
    /// First, so it is unregistered before the handles below close.
    wait: Mutex<Option<RegisteredWait>>,
    pid: Pid,
    pgid: Option<Pid>,
    process: OwnedHandle,
    job: OwnedHandle,
    sweep: bool,
    identity: Identity,
    inner: Mutex<Inner>,
    settled: watch::Sender<bool>,
}

impl Watched {
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The console process group it leads (CREATE_NEW_PROCESS_GROUP), if any.
    pub fn pgid(&self) -> Option<Pid> {
        self.pgid
    }

    /// Read from the process handle at spawn: always known.
    pub fn identity(&self) -> Result<Identity, InfoError> {
        Ok(self.identity.clone())
    }

    /// No cgroups on Windows (the Job object contains the tree instead).
    pub fn cgroup(&self) -> Option<&Cgroup> {
        None
    }

    pub fn cgroup_record(&self) -> Option<(std::path::PathBuf, u64)> {
        None
    }

    /// Unknown here.
    pub fn usage(&self) -> Option<Usage> {
        None
    }

    /// `kill(sig)` as `child_process` does it on Windows: SIGBREAK is a
    /// CTRL_BREAK_EVENT where it can reach the child (see `can_break`);
    /// SIGTERM, SIGKILL, SIGINT and SIGQUIT terminate the child alone; any
    /// other signal cannot be delivered (`Unsupported`, ENOSYS for JS).
    /// false once it has exited.
    pub fn signal_if_running(&self, sig: Signal) -> io::Result<bool> {
        match sig {
            Signal::BREAK if self.can_break() => self.ctrl_break(),
            _ if matches!(sig.as_raw(), 2 | 3 | 9 | 15) => self.terminate(sig),
            _ if self.is_settled() => Ok(false),
            _ => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "{} cannot be delivered on Windows (SIGTERM, SIGKILL, SIGINT and SIGQUIT terminate; SIGBREAK needs a shared console)",
                    sig.name().unwrap_or("this signal")
                ),
            )),
        }
    }

    /// Takes the tree down again when no watcher could be started for it.
    pub fn abandon(&self) {
        let _ = self.terminate_job();
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.lock().status
    }

    pub fn is_settled(&self) -> bool {
        self.lock().status.is_some()
    }

    /// The exit is visible before the callback has settled it (the handle
    /// is signalled first): such a child no longer takes signals.
    fn has_exited(&self) -> bool {
        self.is_settled() || sys::has_exited(&self.process).unwrap_or(true)
    }

    /// Terminates the child alone (`kill()`, like child_process on
    /// Windows). false once it has exited.
    pub fn terminate(&self, sig: Signal) -> io::Result<bool> {
        let mut inner = self.lock();
        if inner.status.is_some() || sys::has_exited(&self.process)? {
            return Ok(false);
        }
        // Under the state lock: the settle, which reads `terminated_by`,
        // waits for it.
        if let Err(e) = sys::terminate_process(&self.process) {
            // It exited on its own in between (TerminateProcess then fails).
            return if sys::has_exited(&self.process)? {
                Ok(false)
            } else {
                Err(e)
            };
        }
        inner.terminated_by.get_or_insert(sig);
        Ok(true)
    }

    /// Terminates the whole job (stop's SIGKILL step for a group stop).
    pub fn terminate_job(&self) -> io::Result<bool> {
        let mut inner = self.lock();
        if inner.status.is_some() || sys::has_exited(&self.process)? {
            return Ok(false);
        }
        sys::terminate_job(&self.job)?;
        inner.terminated_by.get_or_insert(Signal::KILL);
        Ok(true)
    }

    /// CTRL_BREAK_EVENT to the child's console group: only when it leads one
    /// and shares our console (otherwise the event reaches nobody, or, for
    /// group 0, everyone). false when that is not possible.
    pub fn can_break(&self) -> bool {
        self.pgid.is_some() && sys::shares_console(self.pid.as_raw() as u32)
    }

    pub fn ctrl_break(&self) -> io::Result<bool> {
        if self.has_exited() {
            return Ok(false);
        }
        sys::ctrl_break(self.pid.as_raw() as u32)?;
        Ok(true)
    }

    /// True once settled; false at `deadline` (at once if it has passed).
    pub async fn wait_settled(&self, deadline: Instant) -> bool {
        let mut rx = self.settled.subscribe();
        let settled = tokio::time::timeout_at(deadline, rx.wait_for(|s| *s)).await;
        matches!(settled, Ok(Ok(_)))
    }

    /// The callback's work: sweep, record, wake. Runs once.
    fn settle(&self) -> Option<ExitStatus> {
        let mut inner = self.lock();
        if inner.status.is_some() {
            return None;
        }
        if self.sweep {
            // The leader's handle is still ours, so its pid is not reused;
            // the job names exactly the tree we started.
            let _ = sys::terminate_job(&self.job);
        } else {
            // Left running on purpose: they must not die later when the
            // job's handle closes (a garbage-collected JS handle).
            let _ = sys::keep_on_close(&self.job);
        }
        let status = match inner.terminated_by {
            Some(sig) => ExitStatus::Signal(sig.as_raw()),
            None => ExitStatus::Code(sys::exit_code(&self.process).map_or(-1, |c| c as i32)),
        };
        inner.status = Some(status);
        drop(inner);
        self.settled.send_replace(true);
        Some(status)
    }
}

/// What the thread pool's callback gets: the work, taken once, and whether
/// the callback has run.
struct Ctx {
    fired: AtomicBool,
    f: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

/// A registered wait and its callback's context, both released on drop.
///
/// Two ways to unregister. `Drain`: wait for a callback in flight, then free
/// the context whether or not it ever ran (bare-pid waits, which can be
/// cancelled before the exit). `Fired`: do not wait — the drop may run
/// inside the callback itself (a child's `Watched` can be dropped there,
/// with the last reference its work held), where waiting would deadlock;
/// such a wait is only dropped after its callback ran, since that work holds
/// the owner alive until then, and a context whose callback never ran is
/// left allocated rather than freed under a callback that might still come.
struct RegisteredWait {
    wait: HANDLE,
    ctx: *const Ctx,
    drain: bool,
}

// SAFETY: a wait handle is a plain kernel object reference, usable from any
// thread, and `Ctx` is Sync.
unsafe impl Send for RegisteredWait {}

impl Drop for RegisteredWait {
    fn drop(&mut self) {
        let completion = if self.drain {
            INVALID_HANDLE_VALUE
        } else {
            ptr::null_mut()
        };
        // SAFETY: a wait handle from RegisterWaitForSingleObject,
        // unregistered once. With INVALID_HANDLE_VALUE this returns after
        // any callback in flight has finished (never called from one: see
        // the type's docs); with null it returns at once.
        unsafe { UnregisterWaitEx(self.wait, completion) };
        // SAFETY: `ctx` came from Box::into_raw in `on_signalled`.
        let fired = unsafe { &*self.ctx }.fired.load(Ordering::Acquire);
        if self.drain || fired {
            // SAFETY: no callback runs any more (drained, or it ran and, in
            // the `Fired` case, touches the context no further once its work
            // is taken); freed once, here.
            drop(unsafe { Box::from_raw(self.ctx.cast_mut()) });
        }
    }
}

/// Runs `f` once, on a thread-pool thread, when `object` is signalled.
fn on_signalled(
    object: &OwnedHandle,
    drain: bool,
    f: Box<dyn FnOnce() + Send>,
) -> io::Result<RegisteredWait> {
    unsafe extern "system" fn callback(ctx: *mut c_void, _timed_out: bool) {
        // SAFETY: `ctx` is the context of this wait, freed only after the
        // wait is unregistered and this callback done (see RegisteredWait).
        let ctx = unsafe { &*ctx.cast::<Ctx>() };
        let f = ctx.f.lock().unwrap_or_else(|e| e.into_inner()).take();
        ctx.fired.store(true, Ordering::Release);
        // Nothing of the context is touched after this: running `f` may
        // drop the owner of the wait, which frees it.
        if let Some(f) = f {
            f();
        }
    }
    let ctx = Box::into_raw(Box::new(Ctx {
        fired: AtomicBool::new(false),
        f: Mutex::new(Some(f)),
    }));
    let mut wait: HANDLE = ptr::null_mut();
    // SAFETY: a valid waitable handle that outlives the wait (the owner
    // keeps both, the wait dropped first), a callback that only borrows
    // `ctx`; WT_EXECUTEONLYONCE with an infinite timeout runs it at most once.
    let ok = unsafe {
        RegisterWaitForSingleObject(
            &mut wait,
            sys::raw(object),
            Some(callback),
            ctx.cast(),
            INFINITE,
            WT_EXECUTEONLYONCE,
        )
    };
    if ok == 0 {
        let err = io::Error::last_os_error();
        // SAFETY: not registered, so no callback has it.
        drop(unsafe { Box::from_raw(ctx) });
        return Err(err);
    }
    Ok(RegisteredWait { wait, ctx, drain })
}

/// Watches the child: on exit, sweep and settle, then `deliver` the status.
pub fn watch(watched: &Arc<Watched>, deliver: OnExit) -> io::Result<Backend> {
    let w = watched.clone();
    let wait = on_signalled(
        &watched.process,
        false,
        Box::new(move || {
            if let Some(status) = w.settle() {
                deliver(status);
            }
        }),
    )?;
    *watched.wait.lock().unwrap_or_else(|e| e.into_inner()) = Some(wait);
    Ok(Backend::Job)
}

/// A wait for any process handle (a bare pid's, for stop and waitForExit):
/// `exited` turns true when it is signalled. Dropping it unregisters the wait.
pub struct HandleWait {
    /// First, so it is unregistered before the handle closes.
    _wait: RegisteredWait,
    handle: Arc<OwnedHandle>,
    exited: watch::Receiver<bool>,
}

impl HandleWait {
    pub fn new(handle: OwnedHandle) -> io::Result<HandleWait> {
        let handle = Arc::new(handle);
        let (tx, rx) = watch::channel(false);
        let wait = on_signalled(
            &handle,
            true,
            Box::new(move || {
                tx.send_replace(true);
            }),
        )?;
        Ok(HandleWait {
            handle,
            exited: rx,
            _wait: wait,
        })
    }

    pub fn handle(&self) -> &OwnedHandle {
        &self.handle
    }

    pub fn has_exited(&self) -> bool {
        *self.exited.borrow() || sys::has_exited(&self.handle).unwrap_or(true)
    }

    /// Until the exit; false at `deadline`.
    pub async fn until(&mut self, deadline: Instant) -> bool {
        let exited = tokio::time::timeout_at(deadline, self.exited.wait_for(|s| *s)).await;
        matches!(exited, Ok(Ok(_)))
    }

    /// Until the exit, however long.
    pub async fn exited(&mut self) {
        let _ = self.exited.wait_for(|s| *s).await;
    }
}
