//! The lock on Windows: `LockFileEx`, exclusive, on one byte at offset
//! 2^63−1 of the lock file.
//!
//! Windows byte-range locks are mandatory: a locked range cannot be read or
//! written through any other handle. Locking a byte far past the end keeps
//! the record's bytes (at the start) readable by `readLock` and by the next
//! holder. The kernel drops the lock when the handle closes — `release()`,
//! or the process's death, however it dies — so a dead holder never keeps
//! it. The handle is never inheritable: a child never holds the lock.
//!
//! The record is the same JSON as on Unix, written in place under the lock
//! and truncated on release; a record left behind is a holder that died.
//!
//! Waiting: a waiter thread of ours issues the lock request overlapped and
//! waits for either its completion or a cancel event; a cancel after the
//! kernel granted the lock releases it (`cancel()` says which happened).
//!
//! Not done on Windows (unlike Unix): replacement of the file while waiting
//! is not followed, `mode` is not applied (the file gets the directory's
//! inherited ACL), and network paths are not refused (SMB byte-range locks
//! are the server's).

use std::ffi::OsStr;
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::OwnedHandle;
use std::path::Path;
use std::ptr;
use std::sync::OnceLock;
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use windows_sys::Win32::Foundation::{
    ERROR_IO_PENDING, ERROR_LOCK_VIOLATION, ERROR_OPERATION_ABORTED, FALSE, GENERIC_READ,
    GENERIC_WRITE, HANDLE, INVALID_HANDLE_VALUE, TRUE, WAIT_OBJECT_0,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FileEndOfFileInfo, GetFileInformationByHandle, LockFileEx, ReadFile,
    SetFileInformationByHandle, UnlockFileEx, WriteFile, BY_HANDLE_FILE_INFORMATION,
    FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_NORMAL, FILE_ATTRIBUTE_REPARSE_POINT,
    FILE_END_OF_FILE_INFO, FILE_FLAG_OPEN_REPARSE_POINT, FILE_FLAG_OVERLAPPED, FILE_SHARE_DELETE,
    FILE_SHARE_READ, FILE_SHARE_WRITE, LOCKFILE_EXCLUSIVE_LOCK, LOCKFILE_FAIL_IMMEDIATELY,
    OPEN_ALWAYS, OPEN_EXISTING,
};
use windows_sys::Win32::System::SystemInformation::{ComputerNameDnsHostname, GetComputerNameExW};
use windows_sys::Win32::System::Threading::{
    CreateEventW, SetEvent, WaitForMultipleObjects, INFINITE,
};
use windows_sys::Win32::System::IO::{CancelIoEx, GetOverlappedResult, OVERLAPPED};

use super::{lock_state, Acquired, Observed, OpenError, Phase, Shared, Try, WaitEnd};
use crate::pid::Pid;
use crate::proc_info::{self, InfoError};
use crate::sys;

/// The locked byte: 2^63−1, the last offset LockFileEx can name.
const LOCK_OFFSET: u64 = i64::MAX as u64;
const RECORD_MAX: u32 = 64 * 1024;
const RECORD_START: &[u8] = b"{\"pid\":";

/// The call that reads a record, for the error a foreign file gets.
pub const READ_CALL: &str = "read";

/// The call that starts a waiter thread, for the error its failure gets.
pub const THREAD_CALL: &str = "CreateThread";

fn os_err(op: &'static str) -> impl Fn(io::Error) -> OpenError {
    move |err| OpenError::Os { err, op }
}

/// A manual-reset event, closed on drop.
pub(super) struct Event(OwnedHandle);

impl Event {
    fn new() -> io::Result<Event> {
        // SAFETY: no attributes, manual reset, not signalled, no name.
        let h = unsafe { CreateEventW(ptr::null(), TRUE, FALSE, ptr::null()) };
        sys::owned(h, ptr::null_mut()).map(Event)
    }

    fn raw(&self) -> HANDLE {
        sys::raw(&self.0)
    }

    fn set(&self) {
        // SAFETY: a valid event handle.
        unsafe { SetEvent(self.raw()) };
    }
}

fn overlapped(offset: u64, event: &Event) -> OVERLAPPED {
    // SAFETY: all-zero is a valid OVERLAPPED; offset and event set below.
    let mut ov: OVERLAPPED = unsafe { std::mem::zeroed() };
    ov.Anonymous.Anonymous.Offset = offset as u32;
    ov.Anonymous.Anonymous.OffsetHigh = (offset >> 32) as u32;
    ov.hEvent = event.raw();
    ov
}

/// An open lock file (an overlapped, non-inheritable handle), not locked yet.
pub struct LockFile {
    h: OwnedHandle,
}

fn wide(p: &Path) -> Vec<u16> {
    OsStr::new(p).encode_wide().chain(Some(0)).collect()
}

fn open_handle(path: &Path, create: bool) -> io::Result<OwnedHandle> {
    let name = wide(path);
    // SAFETY: a NUL-terminated name; no security attributes, so the handle
    // is not inheritable.
    let h = unsafe {
        CreateFileW(
            name.as_ptr(),
            GENERIC_READ | GENERIC_WRITE,
            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
            ptr::null(),
            if create { OPEN_ALWAYS } else { OPEN_EXISTING },
            FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OVERLAPPED | FILE_FLAG_OPEN_REPARSE_POINT,
            ptr::null_mut(),
        )
    };
    sys::owned(h, INVALID_HANDLE_VALUE)
}

fn check(h: &OwnedHandle) -> Result<(), OpenError> {
    // SAFETY: all-zero is a valid out struct.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: a valid handle and out pointer.
    if unsafe { GetFileInformationByHandle(sys::raw(h), &mut info) } == 0 {
        return Err(OpenError::Os {
            err: io::Error::last_os_error(),
            op: "GetFileInformationByHandle",
        });
    }
    if info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
        return Err(OpenError::Symlink);
    }
    if info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY != 0 {
        return Err(OpenError::NotRegular { directory: true });
    }
    if info.nNumberOfLinks > 1 {
        return Err(OpenError::HardLinked {
            links: u64::from(info.nNumberOfLinks),
        });
    }
    Ok(())
}

impl LockFile {
    /// `mode` and `allow_network_fs` have no meaning here (no Unix modes;
    /// `LockFileEx` is the server's own lock on a share).
    pub fn open(path: &Path, _mode: u32, _allow_network_fs: bool) -> Result<LockFile, OpenError> {
        // A directory cannot be opened as a file at all: say what it is.
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if meta.file_type().is_symlink() {
                return Err(OpenError::Symlink);
            }
            if meta.is_dir() {
                return Err(OpenError::NotRegular { directory: true });
            }
            if !meta.is_file() {
                return Err(OpenError::NotRegular { directory: false });
            }
        }
        let h = open_handle(path, true).map_err(os_err("open"))?;
        check(&h)?;
        Ok(LockFile { h })
    }

    fn raw(&self) -> HANDLE {
        sys::raw(&self.h)
    }

    /// Runs an overlapped call and waits for its result.
    fn finish(&self, ok: i32, ov: &OVERLAPPED) -> io::Result<u32> {
        let mut n = 0u32;
        if ok == 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(ERROR_IO_PENDING as i32) {
                return Err(e);
            }
        }
        // SAFETY: the overlapped call above was issued on this handle with `ov`.
        if unsafe { GetOverlappedResult(self.raw(), ov, &mut n, TRUE) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n)
    }

    /// Exclusive, now or never: Ok(false) when another handle holds it.
    fn lock_now(&self) -> io::Result<bool> {
        let event = Event::new()?;
        let ov = overlapped(LOCK_OFFSET, &event);
        // SAFETY: a valid handle, one byte at LOCK_OFFSET, `ov` lives until
        // the result is in.
        let ok = unsafe {
            LockFileEx(
                self.raw(),
                LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY,
                0,
                1,
                0,
                &ov as *const OVERLAPPED as *mut OVERLAPPED,
            )
        };
        match self.finish(ok, &ov) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(ERROR_LOCK_VIOLATION as i32) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn unlock(&self) {
        if let Ok(event) = Event::new() {
            let ov = overlapped(LOCK_OFFSET, &event);
            // SAFETY: a valid handle and the range locked before.
            let ok = unsafe {
                UnlockFileEx(
                    self.raw(),
                    0,
                    1,
                    0,
                    &ov as *const OVERLAPPED as *mut OVERLAPPED,
                )
            };
            let _ = self.finish(ok, &ov);
        }
    }

    fn read_record(&self) -> io::Result<Vec<u8>> {
        let event = Event::new()?;
        let mut buf = vec![0u8; RECORD_MAX as usize];
        let ov = overlapped(0, &event);
        // SAFETY: a buffer of RECORD_MAX bytes; `ov` lives until the result is in.
        let ok = unsafe {
            ReadFile(
                self.raw(),
                buf.as_mut_ptr(),
                RECORD_MAX,
                ptr::null_mut(),
                &ov as *const OVERLAPPED as *mut OVERLAPPED,
            )
        };
        let n = match self.finish(ok, &ov) {
            Ok(n) => n,
            // Reading at the end of the file.
            Err(e) if e.raw_os_error() == Some(38) => 0,
            Err(e) => return Err(e),
        };
        buf.truncate(n as usize);
        Ok(buf)
    }

    fn write_record(&self, data: &[u8]) -> io::Result<()> {
        let event = Event::new()?;
        let ov = overlapped(0, &event);
        // SAFETY: `data` lives until the result is in, as does `ov`.
        let ok = unsafe {
            WriteFile(
                self.raw(),
                data.as_ptr(),
                data.len() as u32,
                ptr::null_mut(),
                &ov as *const OVERLAPPED as *mut OVERLAPPED,
            )
        };
        self.finish(ok, &ov)?;
        self.truncate(data.len() as u64)
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        let info = FILE_END_OF_FILE_INFO {
            EndOfFile: len as i64,
        };
        // SAFETY: a valid handle and a struct of the size given.
        let ok = unsafe {
            SetFileInformationByHandle(
                self.raw(),
                FileEndOfFileInfo,
                (&info as *const FILE_END_OF_FILE_INFO).cast(),
                std::mem::size_of::<FILE_END_OF_FILE_INFO>() as u32,
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// A held lock. Released (record truncated, then unlocked and closed) by
/// `release()` or on drop.
pub struct HeldLock {
    file: Option<LockFile>,
}

impl HeldLock {
    /// Not watched on Windows: there is no inotify, and a directory watch
    /// (`ReadDirectoryChangesW`) would take a handle and a wait per lock.
    /// The signal of such a lock never aborts (docs/lock.md says so).
    pub fn watch(&mut self, _on_gone: super::OnGone) -> super::Watching {
        super::Watching::Unsupported
    }

    pub fn release(&mut self) {
        if let Some(f) = self.file.take() {
            let _ = f.truncate(0);
            f.unlock();
        }
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        self.release();
    }
}

fn ours(content: &[u8]) -> bool {
    content.starts_with(RECORD_START) || RECORD_START.starts_with(content)
}

/// We hold the lock: read the previous record, write ours.
fn take(file: LockFile, purpose: Option<&str>) -> Result<Acquired, OpenError> {
    let previous = match file.read_record() {
        Ok(p) => p,
        Err(err) => {
            file.unlock();
            return Err(OpenError::Os { err, op: "read" });
        }
    };
    if !ours(&previous) {
        file.unlock();
        return Err(OpenError::Foreign);
    }
    let record = record_json(purpose);
    if let Err(err) = file.write_record(record.as_bytes()) {
        let _ = file.truncate(0);
        file.unlock();
        return Err(OpenError::Os { err, op: "write" });
    }
    Ok(Acquired {
        lock: HeldLock { file: Some(file) },
        previous,
        record,
    })
}

pub fn try_acquire(file: LockFile, purpose: Option<&str>) -> Result<Try, OpenError> {
    if !file.lock_now().map_err(os_err("LockFileEx"))? {
        return Ok(Try::Held);
    }
    take(file, purpose).map(Try::Acquired)
}

/// Never creates the file; takes the lock only for the instant of the probe
/// (Windows cannot be asked who holds a range), releasing it at once.
pub fn read(path: &Path) -> Result<Option<Observed>, OpenError> {
    let h = match open_handle(path, false) {
        Ok(h) => h,
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(2) | Some(3) // ERROR_FILE_NOT_FOUND, ERROR_PATH_NOT_FOUND
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(OpenError::Os { err: e, op: "open" }),
    };
    check(&h)?;
    let file = LockFile { h };
    let record = file.read_record().map_err(os_err("read"))?;
    let free = file.lock_now().map_err(os_err("LockFileEx"))?;
    if free {
        file.unlock();
    }
    Ok(Some(Observed {
        held: !free,
        record,
    }))
}

pub fn holder_running(pid: Pid, identity: &str) -> Result<bool, InfoError> {
    proc_info::is_running_as(pid, identity)
}

// ---- waiting ----------------------------------------------------------------

/// The event a cancel sets: the waiter thread waits on it beside its lock
/// request.
pub(super) type Interrupter = Event;

pub(super) fn interrupter() -> io::Result<Interrupter> {
    Event::new()
}

pub(super) fn interrupt(cancel: &Interrupter) {
    cancel.set();
}

pub(super) fn spawn_waiter(f: impl FnOnce() + Send + 'static) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("procward-lock".into())
        .stack_size(64 * 1024)
        .spawn(f)
}

pub(super) fn run_wait(file: LockFile, purpose: Option<&str>, shared: &Shared) -> WaitEnd {
    // The event lives as long as `shared`, which outlives this wait.
    let cancel = lock_state(shared).interrupt.raw();
    let granted = match lock_or_cancel(&file, cancel) {
        Ok(g) => g,
        Err(err) => {
            lock_state(shared).phase = Phase::Done;
            return WaitEnd::Failed(OpenError::Os {
                err,
                op: "LockFileEx",
            });
        }
    };
    let mut st = lock_state(shared);
    if st.phase == Phase::Cancelled {
        if granted {
            file.unlock();
        }
        return WaitEnd::Cancelled;
    }
    st.phase = Phase::Done;
    drop(st);
    match take(file, purpose) {
        Ok(a) => WaitEnd::Acquired(a),
        Err(e) => WaitEnd::Failed(e),
    }
}

/// Blocks until the lock is granted (true) or the `cancel` event fires and
/// the request is withdrawn (false; true if it was granted meanwhile).
fn lock_or_cancel(file: &LockFile, cancel: HANDLE) -> io::Result<bool> {
    let event = Event::new()?;
    let ov = overlapped(LOCK_OFFSET, &event);
    // SAFETY: a valid handle, one byte at LOCK_OFFSET; `ov` and its event
    // live until the request has completed or been cancelled and reaped.
    let ok = unsafe {
        LockFileEx(
            file.raw(),
            LOCKFILE_EXCLUSIVE_LOCK,
            0,
            1,
            0,
            &ov as *const OVERLAPPED as *mut OVERLAPPED,
        )
    };
    if ok != 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(ERROR_IO_PENDING as i32) {
        return Err(e);
    }
    let handles = [event.raw(), cancel];
    // SAFETY: two valid event handles.
    let which = unsafe { WaitForMultipleObjects(2, handles.as_ptr(), FALSE, INFINITE) };
    if which != WAIT_OBJECT_0 {
        // SAFETY: the request above, issued with `ov` on this handle.
        unsafe { CancelIoEx(file.raw(), &ov) };
    }
    let mut n = 0u32;
    // SAFETY: waits for the request (completed or cancelled) to be done with `ov`.
    if unsafe { GetOverlappedResult(file.raw(), &ov, &mut n, TRUE) } != 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(ERROR_OPERATION_ABORTED as i32) {
        return Ok(false);
    }
    Err(e)
}

// ---- the holder record --------------------------------------------------------

fn self_identity() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        sys::open_process(std::process::id(), sys::PROCESS_QUERY_LIMITED_INFORMATION)
            .ok()
            .flatten()
            .and_then(|h| proc_info::identity_of_handle(&h).ok())
            .map(|id| id.encode())
            .unwrap_or_default()
    })
}

/// The DNS host name, as Node's `os.hostname()` gives it on Windows.
fn hostname() -> String {
    let mut buf = vec![0u16; 256];
    let mut len = buf.len() as u32;
    // SAFETY: `len` is the buffer's size in u16s.
    let ok = unsafe { GetComputerNameExW(ComputerNameDnsHostname, buf.as_mut_ptr(), &mut len) };
    if ok == 0 {
        return String::new();
    }
    String::from_utf16_lossy(&buf[..len as usize])
}

fn record_json(purpose: Option<&str>) -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let purpose = purpose.map_or_else(|| "null".to_owned(), crate::errors::json_str);
    format!(
        "{{\"pid\":{},\"identity\":{},\"hostname\":{},\"acquiredAt\":{},\"purpose\":{}}}\n",
        std::process::id(),
        crate::errors::json_str(self_identity()),
        crate::errors::json_str(&hostname()),
        crate::errors::json_str(&iso8601(ms)),
        purpose
    )
}

/// Milliseconds since the epoch as `Date.prototype.toISOString` writes them.
fn iso8601(ms: u128) -> String {
    let secs = (ms / 1000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days → civil date (Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400_123), "2000-02-29T00:00:00.123Z");
    }

    #[test]
    fn records_are_ours() {
        assert!(ours(b""));
        assert!(ours(b"{\"pi"));
        assert!(ours(record_json(Some("x\"y")).as_bytes()));
        assert!(!ours(b"data"));
    }
}
