//! A file lock whose holder is a process.
//!
//! Held means an exclusive `flock(2)` on an open file description of the
//! file, so the kernel is the judge: it drops the lock when the holder's
//! descriptor closes — on release, on exit by any cause, and on SIGKILL,
//! while the dead holder is still an unreaped zombie (a dying process closes
//! its files before it is a zombie as a whole; Node's main thread may show
//! `Z` a moment earlier, while its other threads still exit). No heartbeat, mtime or timer is involved, so a stalled
//! event loop can never lose a live holder its lock, and a dead holder can
//! never pin it. `flock(1)`, Python's `fcntl.flock` and Go's and Rust's file
//! locks take the same lock.
//!
//! Each acquire opens the file anew (`O_CLOEXEC`, never inherited by a
//! child), so two acquires in one process — two workers, or one thread twice
//! — hold two open file descriptions and exclude each other like two
//! processes.
//!
//! The file is a record, and it stays: procward never removes or renames it
//! (a rename would move the locked inode away from the path). If someone
//! else does, every acquire checks, once it holds the flock, that the path
//! still names the file it locked, and otherwise opens the path again; a
//! holder that asked is told when it happens while it holds the lock
//! (`watch.rs`).
//! The file is ours alone: a non-empty file that is not a record of ours is
//! refused, never overwritten. Right after
//! acquiring, the holder writes its record (JSON) in place; a clean release
//! truncates it before unlocking. A non-empty record found by the next
//! holder is therefore one whose writer died without releasing.
//!
//! Waiting blocks in `flock(LOCK_EX)` on a thread of its own (see
//! `interrupt.rs` for how a wait is interrupted), rather than watching the file:
//! inotify reports a close before the kernel drops the lock in that close
//! (`fsnotify_close` precedes `locks_remove_file` in `__fput`), and never
//! reports an unlock without a close, so a watcher could sleep through a
//! release. A blocked `flock` is woken by the kernel itself, within
//! microseconds of the release.

// The OS layer. Linux and macOS share the POSIX part (`os`: open, checks,
// flock, the record; `interrupt`: the interruptible wait) and differ in
// `imp` (`linux`, `macos`): filesystem kinds, a holder on its way out,
// how a wait is interrupted.
mod interrupt;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as imp;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as imp;
#[cfg(any(target_os = "macos", test))]
mod macos_fs;
mod os;
mod watch;

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{lock_state, Acquired, Observed, OpenError, Phase, Shared, Try, WaitEnd};
use crate::pid::Pid;

/// A record longer than this is not read in full (and so reads as garbage).
pub const RECORD_MAX: usize = 64 * 1024;

/// How long `tryLock` keeps trying while only shared locks stand in its way.
/// A `readLock` probe holds one for two system calls; this covers it and a
/// short preemption between them, and a busy-looking `tryLock` never spins
/// longer. (`acquireLock` waits in the kernel instead; see `lib/lock.js`.)
///
/// 1 ms was measured too short on a loaded machine (a reader preempted
/// between its two calls: 18 spurious "busy" answers in 18 000).
const PROBE_GRACE: Duration = Duration::from_millis(10);

/// How many times an acquire reopens a lock file that was removed or
/// replaced under it before giving up: something is replacing it in a loop.
const REOPEN_MAX: u32 = 100;

/// How every procward record begins. A record torn by a holder killed
/// mid-write begins with a prefix of it (the file was empty, or held an
/// older record, which begins the same way).
const RECORD_START: &[u8] = b"{\"pid\":";

/// Waiter threads block in one system call and write one small record; a
/// signal handler that ours chains to (see `interrupt.rs`) may run on them
/// too, hence more than that needs. Address space only, until touched.
const WAITER_STACK: usize = 256 * 1024;

/// The call that reads a record, for the error a foreign file gets.
pub const READ_CALL: &str = "pread";

/// The call that starts a waiter thread, for the error its failure gets.
pub const THREAD_CALL: &str = "pthread_create";

fn os_err(op: &'static str) -> impl Fn(io::Error) -> OpenError {
    move |err| OpenError::Os { err, op }
}

/// An open, checked lock file, not (yet) locked.
/// It keeps how it was opened, to open the path again when the file was
/// removed or replaced before the lock was taken.
pub struct LockFile {
    fd: OwnedFd,
    path: PathBuf,
    mode: u32,
    allow_network_fs: bool,
}

impl LockFile {
    /// Opens `path`, creating it with `mode` (before the umask) if missing.
    pub fn open(path: &Path, mode: u32, allow_network_fs: bool) -> Result<LockFile, OpenError> {
        let fd = os::open_for_lock(path, mode, allow_network_fs)?;
        Ok(LockFile {
            fd,
            path: path.to_path_buf(),
            mode,
            allow_network_fs,
        })
    }

    /// Opens what the path names now (creating it if it is gone); the old
    /// descriptor, unlocked by the caller, is closed.
    fn reopen(&mut self) -> Result<(), OpenError> {
        self.fd = os::open_for_lock(&self.path, self.mode, self.allow_network_fs)?;
        Ok(())
    }

    /// Called with the flock held: whether the path still names the file we
    /// locked. If it was removed or replaced (a /tmp cleaner, `rm`, an
    /// editor's atomic save, a rename over it) after we opened it, our lock
    /// is on an orphan and excludes nobody who opens the path now.
    fn still_named(&self) -> Result<bool, OpenError> {
        os::still_named(self.fd.as_fd(), &self.path)
    }

    /// Takes the lock if it is free now. When it is not, a `LOCK_SH |
    /// LOCK_NB` probe tells who is in the way: it fails only against an
    /// exclusive holder (busy), and succeeds (and is dropped at once) when
    /// only shared locks are there — a `readLock` probe, which lasts
    /// microseconds, or another program's shared lock. Those are waited out
    /// for `PROBE_GRACE`.
    fn lock_now(&self) -> Result<Now, OpenError> {
        let deadline = Instant::now() + PROBE_GRACE;
        loop {
            if os::try_lock_exclusive(self.fd.as_fd()).map_err(os_err("flock"))? {
                return Ok(Now::Locked);
            }
            if !os::probe_shared(self.fd.as_fd()).map_err(os_err("flock"))? {
                return Ok(Now::HeldExclusive);
            }
            if Instant::now() >= deadline {
                return Ok(Now::HeldShared);
            }
            std::thread::yield_now();
        }
    }
}

enum Now {
    Locked,
    HeldExclusive,
    HeldShared,
}

/// A held lock. Dropping it releases it (see [`HeldLock::release`]); when the
/// process dies instead, the kernel releases it and the record stays.
pub struct HeldLock {
    fd: Option<OwnedFd>,
    /// Made absolute when taken: a later `chdir` must not point the watch
    /// at another file.
    path: PathBuf,
    watch: Option<watch::Watch>,
}

impl HeldLock {
    fn new(fd: OwnedFd, path: &Path) -> HeldLock {
        HeldLock {
            fd: Some(fd),
            path: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
            watch: None,
        }
    }

    /// Watches for the path no longer naming the locked file (see
    /// `watch.rs`); `on_gone` runs once, on procward's runtime thread. A
    /// second call replaces the first watch.
    pub fn watch(&mut self, on_gone: super::OnGone) -> super::Watching {
        self.watch = None;
        let Some(fd) = self.fd.as_ref() else {
            return super::Watching::Unsupported;
        };
        let (watching, handle) = watch::watch(fd.as_fd(), &self.path, on_gone);
        self.watch = handle;
        watching
    }

    /// Truncates the record, then unlocks and closes. Idempotent. The unlock
    /// is explicit, not left to the close: a child forked but not yet
    /// exec'd holds a copy of the descriptor for a moment, and `LOCK_UN`
    /// releases the lock whoever else holds the file open.
    pub fn release(&mut self) {
        // Before the close: a kqueue mark lives on the descriptor itself,
        // and its number may be reused once closed.
        self.watch = None;
        if let Some(fd) = self.fd.take() {
            // A record that cannot be truncated (EIO) is reported by the
            // next holder as reclaimed from us; the unlock matters more.
            let _ = os::truncate(fd.as_fd(), 0);
            let _ = os::unlock(fd.as_fd());
        }
    }

    pub fn is_released(&self) -> bool {
        self.fd.is_none()
    }

    /// Tests: close without truncating, as a dying process would.
    #[cfg(test)]
    fn abandon(mut self) {
        self.watch = None;
        drop(self.fd.take());
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        self.release();
    }
}

/// Takes the lock if it is free (see [`LockFile::lock_now`]).
pub fn try_acquire(mut file: LockFile, purpose: Option<&str>) -> Result<Try, OpenError> {
    for _ in 0..REOPEN_MAX {
        match file.lock_now()? {
            Now::Locked => {
                if file.still_named()? {
                    return Ok(Try::Acquired(take(file, purpose)?));
                }
                let _ = os::unlock(file.fd.as_fd());
                file.reopen()?;
            }
            Now::HeldExclusive => return Ok(Try::Held),
            Now::HeldShared => return Ok(Try::SharedOnly),
        }
    }
    Err(OpenError::Replaced)
}

/// Whether the file may hold our record: empty, or a record of ours (whole,
/// or torn by a holder killed while writing it).
fn ours(content: &[u8]) -> bool {
    content.starts_with(RECORD_START) || RECORD_START.starts_with(content)
}

/// We hold the flock: read the previous record, write ours in place.
fn take(file: LockFile, purpose: Option<&str>) -> Result<Acquired, OpenError> {
    let previous = match read_record(file.fd.as_fd()) {
        Ok(p) => p,
        Err(err) => {
            let _ = os::unlock(file.fd.as_fd());
            return Err(OpenError::Os { err, op: "pread" });
        }
    };
    if !ours(&previous) {
        // Someone's data: not a byte written, not a byte cut.
        let _ = os::unlock(file.fd.as_fd());
        return Err(OpenError::Foreign);
    }
    let mut lock = HeldLock::new(file.fd, &file.path);
    let fd = lock.fd.as_ref().map(AsFd::as_fd).ok_or(OpenError::Os {
        err: io::Error::from_raw_os_error(libc::EBADF),
        op: "flock",
    })?;
    let record = record_json(&Record {
        pid: Pid::current().as_raw(),
        identity: self_identity(),
        hostname: &os::hostname(),
        acquired_at_ms: now_ms(),
        purpose,
    });
    // Written over the old record, then cut to length: a reader never
    // finds the file empty in between. Usually the file was empty (a
    // clean release) and there is nothing to cut.
    let result = os::write_at_start(fd, record.as_bytes())
        .map_err(os_err("pwrite"))
        .and_then(|()| {
            if previous.len() > record.len() {
                os::truncate(fd, record.len() as u64).map_err(os_err("ftruncate"))?;
            }
            Ok(())
        });
    match result {
        Ok(()) => Ok(Acquired {
            lock,
            previous,
            record,
        }),
        Err(e) => {
            // No record, no lock: a holder nobody can identify helps no one.
            lock.release();
            Err(e)
        }
    }
}

/// The record, up to `RECORD_MAX` bytes. A record is a few hundred bytes
/// (or none): read into a small stack buffer first, since zeroing a fresh
/// 64 KiB heap buffer on every acquire cost more than all the system calls.
fn read_record(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    let mut small = [0u8; 4096];
    let n = os::read_at_start(fd, &mut small)?;
    if n < small.len() {
        return Ok(small[..n].to_vec());
    }
    let mut buf = vec![0u8; RECORD_MAX];
    let n = os::read_at_start(fd, &mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

/// This process's identity, as `getProcessInfo(process.pid).identity` gives it.
fn self_identity() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        // Not through the liveness cache: that would keep a pidfd of our own
        // open for good. An identity that cannot be read (no /proc) leaves the
        // field empty: other processes then cannot confirm we run, which
        // affects only what they report, never who holds the lock.
        crate::proc_info::identity_of(Pid::current())
            .ok()
            .flatten()
            .map(|id| id.encode())
            .unwrap_or_default()
    })
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

// ---- the holder record ----------------------------------------------------------

struct Record<'a> {
    pid: i32,
    identity: &'a str,
    hostname: &'a str,
    acquired_at_ms: u128,
    purpose: Option<&'a str>,
}

fn record_json(r: &Record<'_>) -> String {
    let mut out = String::with_capacity(160 + r.purpose.map_or(0, str::len));
    out.push_str("{\"pid\":");
    out.push_str(&r.pid.to_string());
    out.push_str(",\"identity\":");
    json_string(&mut out, r.identity);
    out.push_str(",\"hostname\":");
    json_string(&mut out, r.hostname);
    out.push_str(",\"acquiredAt\":");
    json_string(&mut out, &iso8601(r.acquired_at_ms));
    out.push_str(",\"purpose\":");
    match r.purpose {
        Some(p) => json_string(&mut out, p),
        None => out.push_str("null"),
    }
    out.push_str("}\n");
    out
}

fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Milliseconds since the epoch as `Date.prototype.toISOString` writes them.
fn iso8601(ms: u128) -> String {
    let secs = (ms / 1000) as i64;
    let millis = (ms % 1000) as u32;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

// ---- is the recorded holder running? ----------------------------------------------

/// Running as the process the record names (zombie- and reuse-aware), and
/// not on its way out: a holder killed by a signal releases the lock when
/// its files close, before it is a zombie, and for those microseconds
/// `is_running_as` still sees it running (see `stopped_running`, which
/// also catches a holder reaped, or its pid reused, between the two reads).
pub fn holder_running(pid: Pid, identity: &str) -> Result<bool, crate::proc_info::InfoError> {
    if !crate::proc_info::is_running_as(pid, identity)? {
        return Ok(false);
    }
    let Some(id) = crate::proc_info::Identity::decode(identity) else {
        return Ok(false);
    };
    Ok(!crate::proc_info::stopped_running(pid, id.start_time))
}

// ---- reading without taking ------------------------------------------------------

/// Never takes the lock, never blocks, never creates the file. `None`: no
/// such file (not held).
///
/// Held is decided by a `LOCK_SH | LOCK_NB` probe, released at once: it
/// fails only while a process holds the lock exclusively. An acquirer that
/// meets the probe waits it out (see [`LockFile::lock_now`]).
///
/// Not `/proc/locks`: each read of it takes the kernel's lock-table lock for
/// writing (`percpu_down_write(&file_rwsem)` in `locks_start`), which waits
/// for an RCU grace period when the lock was idle — 6 to 15 ms per read
/// measured here, on the JS thread, while every `flock` caller on the machine
/// waits behind it. It would also need care to be right: it hides locks whose
/// owner is outside our pid namespace, overlayfs and btrfs print other ids
/// than `stat` does, and a table longer than one read is not a snapshot.
pub fn read(path: &Path) -> Result<Option<Observed>, OpenError> {
    let Some(fd) = os::open_for_read(path)? else {
        return Ok(None);
    };
    let held = !os::probe_shared(fd.as_fd()).map_err(os_err("flock"))?;
    let record = read_record(fd.as_fd()).map_err(os_err("pread"))?;
    Ok(Some(Observed { held, record }))
}

// ---- waiting ------------------------------------------------------------------------

/// Set while the waiter thread is registered and may block.
pub(super) type Interrupter = Option<os::InterruptHandle>;

/// None until the waiter thread registers; the signal handling it will
/// register with is made ready now, before the thread starts.
pub(super) fn interrupter() -> io::Result<Interrupter> {
    os::prepare_wait();
    Ok(None)
}

/// The cancel's signal, to a thread registered and blocked in `flock`.
///
/// Cancellation and the grant race, and the state's mutex decides: the
/// thread leaves `Waiting` (to `Done`) under it only after its `flock`
/// returned, and `cancel` leaves it (to `Cancelled`) under it and calls
/// this while still holding it, so the thread is alive and registered when
/// signalled. Whichever comes first wins; a grant that loses is unlocked
/// before `done` reports `Cancelled`.
pub(super) fn interrupt(registered: &Interrupter) {
    if let Some(intr) = registered {
        intr.interrupt();
    }
}

pub(super) fn spawn_waiter(f: impl FnOnce() + Send + 'static) -> io::Result<JoinHandle<()>> {
    os::spawn_quiet("procward-lock", WAITER_STACK, f)
}

enum Granted {
    Won,
    /// On a file the path no longer names: unlocked, to be opened anew.
    Stale,
    Failed(OpenError),
    Cancelled,
}

pub(super) fn run_wait(mut file: LockFile, purpose: Option<&str>, shared: &Shared) -> WaitEnd {
    let mut reopened = 0;
    loop {
        let intr = match os::Interruptible::register(file.fd.as_fd()) {
            Ok(i) => i,
            Err(e) => return finish_failed(shared, e),
        };
        {
            let mut st = lock_state(shared);
            if st.phase == Phase::Cancelled {
                return WaitEnd::Cancelled;
            }
            st.interrupt = Some(intr.handle());
        }
        let blocked = intr.lock_exclusive(file.fd.as_fd());
        // Checked while still cancellable. If a cancel's handler swapped the
        // descriptor out meanwhile, this sees another file ("stale"), and
        // the phase below says cancelled anyway.
        let stale = match blocked {
            Ok(()) => match file.still_named() {
                Ok(true) => Ok(false),
                Ok(false) => {
                    let _ = os::unlock(file.fd.as_fd());
                    Ok(true)
                }
                Err(e) => {
                    let _ = os::unlock(file.fd.as_fd());
                    Err(e)
                }
            },
            Err(_) => Ok(false),
        };
        let granted = {
            let mut st = lock_state(shared);
            st.interrupt = None;
            match (st.phase, blocked, stale) {
                (Phase::Waiting, Ok(()), Ok(false)) => {
                    st.phase = Phase::Done;
                    Granted::Won
                }
                // Still Waiting: a cancel from now on finds no interrupt to
                // send, and the next registration sees it cancelled.
                (Phase::Waiting, Ok(()), Ok(true)) => Granted::Stale,
                (Phase::Waiting, Ok(()), Err(e)) => {
                    st.phase = Phase::Done;
                    Granted::Failed(e)
                }
                (Phase::Waiting, Err(os::Blocked::Os(err)), _) => {
                    st.phase = Phase::Done;
                    Granted::Failed(OpenError::Os { err, op: "flock" })
                }
                // Cancelled (an interrupt implies it): whatever flock said.
                _ => Granted::Cancelled,
            }
        };
        // Unregistered only now, after the phase left Waiting (or the
        // interrupt was withdrawn): no cancel can signal this slot any more.
        drop(intr);
        match granted {
            Granted::Won => {
                return match take(file, purpose) {
                    Ok(acquired) => WaitEnd::Acquired(acquired),
                    Err(e) => WaitEnd::Failed(e),
                }
            }
            Granted::Stale => {
                reopened += 1;
                let reopen = if reopened >= REOPEN_MAX {
                    Err(OpenError::Replaced)
                } else {
                    file.reopen()
                };
                if let Err(e) = reopen {
                    return finish_failed(shared, e);
                }
            }
            Granted::Failed(e) => return WaitEnd::Failed(e),
            Granted::Cancelled => {
                // The kernel may have just granted it. Unlock explicitly (a
                // close alone would leave it held while a child forked but
                // not yet exec'd has a copy of the descriptor); EBADF if the
                // interrupt handler already unlocked and swapped the
                // descriptor out.
                let _ = os::unlock(file.fd.as_fd());
                drop(file);
                return WaitEnd::Cancelled;
            }
        }
    }
}

fn finish_failed(shared: &Shared, e: OpenError) -> WaitEnd {
    let mut st = lock_state(shared);
    if st.phase == Phase::Cancelled {
        return WaitEnd::Cancelled;
    }
    st.phase = Phase::Done;
    WaitEnd::Failed(e)
}

#[cfg(test)]
mod tests;
