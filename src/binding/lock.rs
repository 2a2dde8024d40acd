//! The lock's napi surface: `lockTry`, `lockWait`, `lockRead`,
//! `lockHolderRunning` and the `NativeLock` handle (with its `watch` for
//! the file going away), over `crate::lock`
//! (`flock` on Unix, `LockFileEx` on Windows, where `mode` and
//! `allowNetworkFs` have no effect). `lib/lock.js` builds `acquireLock`,
//! `tryLock`, `readLock` and `ProcessLock` on them (validation, record
//! parsing, ELOCKED, AbortSignal and timeouts live there).

use std::path::Path;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{Either, Function, ToNapiValue, TypeName, ValidateNapiValue};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Result, Status, ValueType};
use napi_derive::napi;

use super::convert::{info_err, to_pid};
use super::errors::{throw, JsErr, Res};
use crate::lock::{
    self, Acquired, Cancel, Gone, LockFile, OpenError, Try, WaitEnd, Waiter, Watching,
};

/// A refusal of ours, dressed as the errno that says it best, with our own
/// words for it.
fn refused(errno: i32, reason: impl Into<String>) -> JsErr {
    JsErr::refused(errno, "open", reason)
}

fn open_err(e: OpenError) -> JsErr {
    match e {
        OpenError::Os { err, op } => JsErr::os(&err, op),
        OpenError::NotRegular { directory: true } => {
            refused(libc::EISDIR, "a directory, not a lock file")
        }
        OpenError::NotRegular { directory: false } => refused(libc::EINVAL, "not a regular file"),
        OpenError::Symlink => refused(
            libc::ELOOP,
            "a symbolic link or other reparse point; lock the file itself",
        ),
        OpenError::OtherOwner { uid } => refused(
            libc::EPERM,
            format!(
                "the lock file belongs to uid {uid}, not to this process's; \
                 a file another user controls could be held by them forever"
            ),
        ),
        OpenError::NetworkFs { fs } => refused(
            libc::EOPNOTSUPP,
            format!(
                "on a network filesystem ({fs}), where flock is emulated and a \
                 partition can leave two holders; pass allowNetworkFs: true to \
                 lock it anyway"
            ),
        ),
        OpenError::PseudoFs { fs } => refused(
            libc::EINVAL,
            format!(
                "on a kernel pseudo-filesystem ({fs}): its files are kernel \
                 interfaces, not lock files, and the holder record would be \
                 written into one"
            ),
        ),
        OpenError::HardLinked { links } => refused(
            libc::EPERM,
            format!(
                "the file has {links} hard links: the holder record would \
                 overwrite the file its other names stand for"
            ),
        ),
        OpenError::Foreign => JsErr::refused(
            libc::EINVAL,
            lock::READ_CALL,
            "the file holds data that is not a procward lock record; a lock \
             file must be empty or hold a record, since acquiring overwrites \
             it and releasing empties it (lock a separate file beside your data)",
        ),
        OpenError::Replaced => refused(
            libc::EAGAIN,
            "the lock file was removed or replaced 100 times in a row while \
             taking its lock; something keeps replacing it",
        ),
        OpenError::NoSignal => JsErr::refused(
            libc::EAGAIN,
            "sigaction",
            "no real-time signal is free to interrupt lock waits with (every \
             one has a handler); wait: true or a number of ms is unavailable",
        ),
        OpenError::TooManyWaiters { max } => JsErr::refused(
            libc::EAGAIN,
            lock::THREAD_CALL,
            format!("{max} lock waits are already in progress in this process"),
        ),
    }
}

fn check_mode(mode: u32) -> Res<u32> {
    if mode > 0o777 || mode & 0o600 != 0o600 {
        return Err(JsErr::coded(
            "ERR_OUT_OF_RANGE",
            format!("mode must be in 0..=0o777 with owner read and write (0o600), got {mode:#o}"),
        ));
    }
    Ok(mode)
}

fn open(path: &str, mode: u32, allow_network_fs: bool) -> Res<LockFile> {
    LockFile::open(Path::new(path), check_mode(mode)?, allow_network_fs).map_err(open_err)
}

/// The native side of a `ProcessLock`, and of a wait for one.
#[napi]
pub struct NativeLock {
    /// Filled when the lock is ours (at once for `lockTry`, by the waiter
    /// thread for `lockWait`). Dropping the handle releases it: a worker
    /// whose environment ends releases its locks cleanly.
    held: Arc<Mutex<Option<Acquired>>>,
    waiter: Mutex<Option<Waiter>>,
}

fn guard<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[napi]
impl NativeLock {
    /// The record found in the file when the lock was taken ('' if none).
    #[napi(getter)]
    pub fn previous(&self) -> String {
        guard(&self.held)
            .as_ref()
            .map(|a| String::from_utf8_lossy(&a.previous).into_owned())
            .unwrap_or_default()
    }

    /// Our own record, as written.
    #[napi(getter)]
    pub fn record(&self) -> String {
        guard(&self.held)
            .as_ref()
            .map(|a| a.record.clone())
            .unwrap_or_default()
    }

    /// Ends a pending wait. true: it will end 'cancelled' and never take the
    /// lock; false: it has already taken it (or failed), and its end says so.
    #[napi]
    pub fn cancel(&self) -> bool {
        match guard(&self.waiter).as_ref() {
            Some(w) => w.cancel() == Cancel::Cancelled,
            None => false,
        }
    }

    /// After the wait's end arrived: reap its thread (it has nothing left to
    /// do but exit, so this returns at once).
    #[napi]
    pub fn join(&self) {
        if let Some(w) = guard(&self.waiter).as_mut() {
            w.join();
        }
    }

    /// Watches for the path no longer naming the locked file (removed,
    /// renamed away or over, its directory removed). Then `onGone` gets
    /// 'removed' or 'replaced', once, on this thread, without holding the
    /// event loop open; never after `release()`.
    #[napi]
    pub fn watch(&self, on_gone: Function<String, ()>) -> Result<NativeWatch> {
        let callback: GoneCallback = on_gone
            .build_threadsafe_function()
            .weak::<true>()
            .callee_handled::<false>()
            .build()?;
        let on_gone: lock::OnGone = Box::new(move |how: Gone| {
            callback.call(
                how.as_str().to_owned(),
                ThreadsafeFunctionCallMode::NonBlocking,
            );
        });
        let watching = match guard(&self.held).as_mut() {
            Some(a) => a.lock.watch(on_gone),
            None => Watching::Unsupported,
        };
        let (state, how, error) = match watching {
            Watching::Started => ("watching", None, None),
            Watching::Gone(how) => ("gone", Some(how.as_str().to_owned()), None),
            Watching::Failed { err, op } => ("failed", None, Some(ErrorValue(JsErr::os(&err, op)))),
            Watching::Unsupported => ("unsupported", None, None),
        };
        Ok(NativeWatch {
            state: state.to_owned(),
            how,
            error,
        })
    }

    /// Truncates the record and unlocks (ending a watch). Idempotent; never
    /// throws.
    #[napi]
    pub fn release(&self) {
        if let Some(a) = guard(&self.held).as_mut() {
            a.lock.release();
        }
    }
}

/// Takes the lock if it is free now. Otherwise says what kept it out:
/// 'held' (an exclusive holder) or 'shared' (only shared locks, through a
/// short grace: a `readLock` probe, or another program's `LOCK_SH`).
#[napi]
pub fn lock_try(
    env: Env,
    path: String,
    mode: u32,
    allow_network_fs: bool,
    purpose: Option<String>,
) -> Result<Either<NativeLock, &'static str>> {
    let found = throw(
        &env,
        (|| {
            let file = open(&path, mode, allow_network_fs)?;
            lock::try_acquire(file, purpose.as_deref()).map_err(open_err)
        })(),
    )?;
    Ok(match found {
        Try::Acquired(a) => Either::A(NativeLock {
            held: Arc::new(Mutex::new(Some(a))),
            waiter: Mutex::new(None),
        }),
        Try::Held => Either::B("held"),
        Try::SharedOnly => Either::B("shared"),
    })
}

#[napi(object, object_from_js = false)]
pub struct NativeWaitEnd {
    /// 'acquired' | 'cancelled' | 'error'
    pub outcome: String,
    /// What failed, for 'error': the error object itself.
    #[napi(ts_type = "Error")]
    pub error: Option<ErrorValue>,
}

/// A [`JsErr`] that becomes its JS object where napi converts it, on the JS
/// thread (a threadsafe function's argument, here).
pub struct ErrorValue(JsErr);

impl TypeName for ErrorValue {
    fn type_name() -> &'static str {
        "Error"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ValidateNapiValue for ErrorValue {}

impl ToNapiValue for ErrorValue {
    unsafe fn to_napi_value(env: napi::sys::napi_env, val: Self) -> Result<napi::sys::napi_value> {
        let env = Env::from_raw(env);
        let obj = val.0.to_js(&env)?;
        // SAFETY: a value of this env, converted on its thread.
        unsafe { ToNapiValue::to_napi_value(env.raw(), obj) }
    }
}

type WaitCallback = ThreadsafeFunction<NativeWaitEnd, (), NativeWaitEnd, Status, false>;

/// Weak: a watched lock does not keep its process alive.
type GoneCallback = ThreadsafeFunction<String, (), String, Status, false, true>;

#[napi(object, object_from_js = false)]
pub struct NativeWatch {
    /// 'watching' | 'gone' (already: `onGone` will not be called) |
    /// 'failed' | 'unsupported' (Windows)
    pub state: String,
    /// For 'gone': 'removed' | 'replaced'.
    pub how: Option<String>,
    /// For 'failed': what failed (EMFILE, ENOSPC: out of inotify watches).
    #[napi(ts_type = "Error")]
    pub error: Option<ErrorValue>,
}

/// Waits for the lock on a thread of its own; `on_done` gets the end once.
/// The pending callback keeps the event loop alive, as a pending timer would.
#[napi]
pub fn lock_wait(
    env: Env,
    path: String,
    mode: u32,
    allow_network_fs: bool,
    purpose: Option<String>,
    on_done: Function<NativeWaitEnd, ()>,
) -> Result<NativeLock> {
    let file = throw(&env, open(&path, mode, allow_network_fs))?;
    let callback: WaitCallback = on_done
        .build_threadsafe_function()
        .callee_handled::<false>()
        .build()?;
    let held = Arc::new(Mutex::new(None));
    let slot = held.clone();
    let done = Box::new(move |end: WaitEnd| {
        let end = match end {
            WaitEnd::Acquired(a) => {
                *guard(&slot) = Some(a);
                NativeWaitEnd {
                    outcome: "acquired".into(),
                    error: None,
                }
            }
            WaitEnd::Cancelled => NativeWaitEnd {
                outcome: "cancelled".into(),
                error: None,
            },
            WaitEnd::Failed(e) => NativeWaitEnd {
                outcome: "error".into(),
                error: Some(ErrorValue(open_err(e))),
            },
        };
        // If the environment is gone the call fails; the handle's drop (or
        // this closure's, holding the last reference) then releases the lock.
        callback.call(end, ThreadsafeFunctionCallMode::NonBlocking);
    });
    let waiter = throw(
        &env,
        lock::wait(file, purpose, done).map_err(|e| JsErr::os(&e, lock::THREAD_CALL)),
    )?;
    Ok(NativeLock {
        held,
        waiter: Mutex::new(Some(waiter)),
    })
}

#[napi(object)]
pub struct NativeLockInfo {
    pub exists: bool,
    pub held: bool,
    pub record: String,
}

/// Never takes the lock, never blocks, never creates the file.
#[napi]
pub fn lock_read(env: Env, path: String) -> Result<NativeLockInfo> {
    let seen = throw(&env, lock::read(Path::new(&path)).map_err(open_err))?;
    Ok(match seen {
        Some(o) => NativeLockInfo {
            exists: true,
            held: o.held,
            record: String::from_utf8_lossy(&o.record).into_owned(),
        },
        None => NativeLockInfo {
            exists: false,
            held: false,
            record: String::new(),
        },
    })
}

/// Whether the holder a record names runs now: zombie- and reuse-aware, and
/// false for a holder already on its way out (see `lock::holder_running`).
#[napi]
pub fn lock_holder_running(env: Env, pid: f64, identity: String) -> Result<bool> {
    throw(
        &env,
        (|| {
            let pid = to_pid(pid)?;
            lock::holder_running(pid, &identity).map_err(info_err)
        })(),
    )
}
