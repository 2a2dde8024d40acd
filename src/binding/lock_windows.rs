//! The lock's napi surface on Windows: the same names as `lock.rs`
//! (`lockTry`, `lockWait`, `lockRead`, `lockHolderRunning`, `NativeLock`)
//! over `LockFileEx` (`crate::lock`, `lock/windows.rs`). `mode` and
//! `allowNetworkFs` are accepted and have no effect there.

use std::path::Path;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{Either, Function};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Result, Status};
use napi_derive::napi;

use super::windows::win_err;
use crate::errors::{coded, json_str, system_err};
use crate::lock::{self, Acquired, Cancel, LockError, LockFile, Try, WaitEnd, Waiter};
use crate::pid::Pid;
use crate::proc_info::InfoError;

fn refused(errno: i32, syscall: &str, reason: &str) -> napi::Error {
    system_err(errno, syscall, &format!(",\"reason\":{}", json_str(reason)))
}

fn lock_err(e: LockError) -> napi::Error {
    match e {
        LockError::Os { err, op } => win_err(&err, op),
        LockError::Directory => refused(libc::EISDIR, "open", "a directory, not a lock file"),
        LockError::NotRegular => refused(libc::EINVAL, "open", "not a regular file"),
        LockError::Symlink => refused(
            libc::ELOOP,
            "open",
            "a symbolic link or other reparse point; lock the file itself",
        ),
        LockError::HardLinked { links } => refused(
            libc::EPERM,
            "open",
            &format!(
                "the file has {links} hard links: the holder record would \
                 overwrite the file its other names stand for"
            ),
        ),
        LockError::Foreign => refused(
            libc::EINVAL,
            "read",
            "the file holds data that is not a procward lock record; a lock \
             file must be empty or hold a record, since acquiring overwrites \
             it and releasing empties it (lock a separate file beside your data)",
        ),
    }
}

fn check_mode(mode: u32) -> Result<()> {
    if mode > 0o777 || mode & 0o600 != 0o600 {
        return Err(coded(
            "ERR_OUT_OF_RANGE",
            format!("mode must be in 0..=0o777 with owner read and write (0o600), got {mode:#o}"),
        ));
    }
    Ok(())
}

fn open(path: &str, mode: u32) -> Result<LockFile> {
    check_mode(mode)?;
    LockFile::open(Path::new(path)).map_err(lock_err)
}

fn guard<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[napi]
pub struct NativeLock {
    held: Arc<Mutex<Option<Acquired>>>,
    waiter: Mutex<Option<Waiter>>,
}

#[napi]
impl NativeLock {
    #[napi(getter)]
    pub fn previous(&self) -> String {
        guard(&self.held)
            .as_ref()
            .map(|a| String::from_utf8_lossy(&a.previous).into_owned())
            .unwrap_or_default()
    }

    #[napi(getter)]
    pub fn record(&self) -> String {
        guard(&self.held)
            .as_ref()
            .map(|a| a.record.clone())
            .unwrap_or_default()
    }

    #[napi]
    pub fn cancel(&self) -> bool {
        match guard(&self.waiter).as_ref() {
            Some(w) => w.cancel() == Cancel::Cancelled,
            None => false,
        }
    }

    #[napi]
    pub fn join(&self) {
        if let Some(w) = guard(&self.waiter).as_mut() {
            w.join();
        }
    }

    #[napi]
    pub fn release(&self) {
        if let Some(a) = guard(&self.held).as_mut() {
            a.lock.release();
        }
    }
}

#[napi]
pub fn lock_try(
    path: String,
    mode: u32,
    _allow_network_fs: bool,
    purpose: Option<String>,
) -> Result<Either<NativeLock, &'static str>> {
    let file = open(&path, mode)?;
    Ok(
        match lock::try_acquire(file, purpose.as_deref()).map_err(lock_err)? {
            Try::Acquired(a) => Either::A(NativeLock {
                held: Arc::new(Mutex::new(Some(a))),
                waiter: Mutex::new(None),
            }),
            Try::Held => Either::B("held"),
        },
    )
}

#[napi(object)]
pub struct NativeWaitEnd {
    pub outcome: String,
    pub error: Option<String>,
}

type WaitCallback = ThreadsafeFunction<NativeWaitEnd, (), NativeWaitEnd, Status, false>;

#[napi]
pub fn lock_wait(
    path: String,
    mode: u32,
    _allow_network_fs: bool,
    purpose: Option<String>,
    on_done: Function<NativeWaitEnd, ()>,
) -> Result<NativeLock> {
    let file = open(&path, mode)?;
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
                error: Some(lock_err(e).reason),
            },
        };
        callback.call(end, ThreadsafeFunctionCallMode::NonBlocking);
    });
    let waiter = lock::wait(file, purpose, done).map_err(|e| win_err(&e, "CreateThread"))?;
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

#[napi]
pub fn lock_read(path: String) -> Result<NativeLockInfo> {
    Ok(match lock::read(Path::new(&path)).map_err(lock_err)? {
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

#[napi]
pub fn lock_holder_running(pid: f64, identity: String) -> Result<bool> {
    let pid = Pid::from_f64(pid).map_err(|e| coded("ERR_OUT_OF_RANGE", e))?;
    lock::holder_running(pid, &identity).map_err(|e| match e {
        InfoError::Hidden => coded("EACCES", "the process exists but cannot be opened"),
        InfoError::Io(e) => win_err(&e, "OpenProcess"),
    })
}
