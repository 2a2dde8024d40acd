//! Building a child: resolving the program, preparing stdio, and creating
//! the process on a dedicated spawner thread.
//!
//! Which thread creates the child: `PR_SET_PDEATHSIG` fires when the
//! *thread* that created the child exits, not the process (Go's `Pdeathsig`
//! users learned this the hard way). The JS main thread lives as long as the
//! process, so it creates its children itself, with every signal blocked
//! around the clone. A child created from a Node worker thread would be
//! killed when that worker ends, so workers hand the clone to a spawner
//! thread that lives as long as the process: for every child the death
//! signal means exactly "the supervisor process is gone".
//!
//! Everything that can fail for the caller's reasons (bad path, missing cwd,
//! unopenable stdio file) is checked or opened on the calling thread first;
//! the spawner thread only runs `clone`. None of it may wait on another
//! process: stdio files are opened non-blocking (a FIFO without a peer would
//! otherwise hold the JS thread in `open` until one comes).

#[cfg(target_os = "linux")]
mod clone3;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as imp;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as imp;
#[cfg(target_os = "macos")]
use macos::on_main_thread;

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use super::{At, Command, Environment, SpawnError, Stdio};
use crate::pid::{Pid, Signal};

/// Where a contained child starts: its cgroup's directory (for `clone3`'s
/// `CLONE_INTO_CGROUP`, or its `cgroup.procs`, which the pre-exec child
/// writes itself into where clone3 cannot). The caller keeps the directory
/// open until `spawn` returns.
#[derive(Clone, Debug)]
pub struct IntoCgroup {
    pub dir: RawFd,
}

/// Where a spawn failed, for the error's `syscall` and message. The steps
/// between clone and exec are reported by the Linux child alone (macOS's
/// `posix_spawn` does them itself, and says only whether it worked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub enum Stage {
    Resolve = 1,
    Cwd,
    Stdio,
    Clone,
    Setpgid,
    Prctl,
    Dup2,
    Chdir,
    Execve,
    Spawner,
    Setgid,
    Setuid,
    /// Entering the child's cgroup (`cgroup.procs`, or `clone3`).
    Cgroup,
    Setsid,
    /// Refused where the child cannot be given a umask (macOS).
    Umask,
}

impl Stage {
    #[cfg(target_os = "linux")]
    fn from_i32(v: i32) -> Stage {
        match v {
            1 => Stage::Resolve,
            2 => Stage::Cwd,
            3 => Stage::Stdio,
            4 => Stage::Clone,
            5 => Stage::Setpgid,
            6 => Stage::Prctl,
            7 => Stage::Dup2,
            8 => Stage::Chdir,
            9 => Stage::Execve,
            11 => Stage::Setgid,
            12 => Stage::Setuid,
            13 => Stage::Cgroup,
            14 => Stage::Setsid,
            15 => Stage::Umask,
            _ => Stage::Spawner,
        }
    }

    /// What the caller was doing when this stage failed.
    fn at(self) -> At {
        match self {
            Stage::Cwd | Stage::Chdir => At::Chdir,
            Stage::Setpgid
            | Stage::Prctl
            | Stage::Dup2
            | Stage::Setgid
            | Stage::Setuid
            | Stage::Cgroup
            | Stage::Setsid
            | Stage::Umask => At::Setup,
            Stage::Resolve | Stage::Stdio | Stage::Clone | Stage::Execve | Stage::Spawner => {
                At::Spawn
            }
        }
    }

    /// The system call that failed, as far as there is one.
    pub fn syscall(self) -> &'static str {
        match self {
            Stage::Resolve => "spawn",
            Stage::Cwd => "chdir",
            Stage::Stdio => "open",
            Stage::Clone => "clone",
            Stage::Setpgid => "setpgid",
            Stage::Prctl => "prctl",
            Stage::Dup2 => "dup2",
            Stage::Chdir => "chdir",
            Stage::Execve => "execve",
            Stage::Spawner => "spawn",
            Stage::Setgid => "setgid",
            Stage::Setuid => "setuid",
            Stage::Cgroup => "cgroup.procs",
            Stage::Setsid => "setsid",
            Stage::Umask => "umask",
        }
    }
}

impl SpawnError {
    fn os(err: io::Error, stage: Stage) -> SpawnError {
        SpawnError::Os {
            err,
            at: stage.at(),
            syscall: stage.syscall(),
        }
    }
}

/// The parent's end of a `'pipe'` stdio or of the readiness pipe.
pub type Pipe = OwnedFd;

/// The fd number JS takes a pipe end as (it owns it from then on).
pub fn pipe_into_raw(p: Pipe) -> i32 {
    p.into_raw_fd()
}

/// A started child. `pidfd` is present when the exit watch can use one.
pub struct Child {
    pub pid: Pid,
    pub pidfd: Option<OwnedFd>,
    /// The parent's ends of `'pipe'` stdio, by fd number 0..3.
    pub pipes: [Option<OwnedFd>; 3],
    /// The read end of the `notify_fd` pipe.
    pub notify: Option<OwnedFd>,
}

/// Everything the spawner thread needs, owned, so it can cross threads.
pub struct Prepared {
    path: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: Option<CString>,
    child_stdio: [ChildFd; 3],
    process_group: bool,
    death_signal: Option<Signal>,
    /// (write end, fd number in the child).
    notify: Option<(OwnedFd, i32)>,
    uid: Option<u32>,
    gid: Option<u32>,
    umask: Option<u32>,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    new_session: bool,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    ignore_stop_signals: bool,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    cgroup: Option<IntoCgroup>,
    /// This process (`getpid`, once per spawn): the child's death-signal
    /// check compares its parent with it, and the main-thread check too.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    parent_pid: Pid,
}

fn cstring(s: &str, what: &str) -> Result<CString, SpawnError> {
    CString::new(s).map_err(|_| SpawnError::Invalid(format!("{what} must not contain NUL bytes")))
}

fn is_executable_file(path: &Path) -> Option<bool> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return Some(false);
    }
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: access takes a NUL-terminated path we own.
    Some(unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0)
}

/// glibc's `execvp` searches this when the environment has no PATH.
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// PATH lookup as libuv's child does it on Linux, but in the parent: libuv
/// calls `chdir(cwd)` and then `execvp`, so a relative PATH entry (or an empty
/// one, the working directory) and a command containing `/` are relative to
/// the *child's* cwd, and the PATH is the first `PATH=` entry of the child's
/// environment, as its `getenv` sees it.
///
/// The returned path is what the child passes to `execve` after its own
/// `chdir`, so it stays relative where libuv's would; only the existence
/// checks here join it to `cwd` (itself relative to our cwd when relative).
/// A command without `/` that is found nowhere is ENOENT before any process
/// exists; one found only without execute permission is EACCES.
fn resolve(program: &str, envp: &[CString], cwd: Option<&Path>) -> Result<PathBuf, SpawnError> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    let path_var = envp
        .iter()
        .find_map(|e| e.as_bytes().strip_prefix(b"PATH="))
        .unwrap_or(DEFAULT_PATH);
    let mut saw_unexecutable = false;
    for dir in path_var.split(|&b| b == b':') {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        let candidate = PathBuf::from(std::ffi::OsStr::from_bytes(dir)).join(program);
        let seen_from_here = match cwd {
            Some(cwd) if candidate.is_relative() => cwd.join(&candidate),
            _ => candidate.clone(),
        };
        match is_executable_file(&seen_from_here) {
            Some(true) => return Ok(candidate),
            Some(false) => saw_unexecutable = true,
            None => {}
        }
    }
    let errno = if saw_unexecutable {
        libc::EACCES
    } else {
        libc::ENOENT
    };
    Err(SpawnError::os(
        io::Error::from_raw_os_error(errno),
        Stage::Resolve,
    ))
}

/// Moves an fd to number 3 or above, so that dup2 onto 0..2 in the child
/// cannot overwrite another source (possible when the parent's own stdio is
/// closed and `open` hands out 0..2).
fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, SpawnError> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC duplicates a valid fd to the lowest free >= 3.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(SpawnError::os(io::Error::last_os_error(), Stage::Stdio));
    }
    // SAFETY: the fd was just created for us.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// What the child's fd 0, 1 or 2 becomes.
pub enum ChildFd {
    /// The parent's own fd of that number.
    Inherit,
    /// Opened for this child; closed in the parent right after the spawn.
    Owned(OwnedFd),
    /// Process-wide and kept open ('ignore': the shared /dev/null).
    Shared(RawFd),
}

impl ChildFd {
    fn raw(&self) -> RawFd {
        match self {
            ChildFd::Inherit => -1,
            ChildFd::Owned(fd) => fd.as_raw_fd(),
            ChildFd::Shared(fd) => *fd,
        }
    }
}

/// One /dev/null (read-write, close-on-exec) for every 'ignore', opened on
/// first use: saves an open and a close per stdio slot per spawn.
fn dev_null() -> Result<RawFd, SpawnError> {
    static DEV_NULL: OnceLock<OwnedFd> = OnceLock::new();
    if let Some(fd) = DEV_NULL.get() {
        return Ok(fd.as_raw_fd());
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|e| SpawnError::os(e, Stage::Stdio))?;
    let fd = above_stdio(f.into())?;
    Ok(DEV_NULL.get_or_init(|| fd).as_raw_fd())
}

/// Opens what the child's fd `n` will be. Returns (child end, parent end).
/// Every fd is opened close-on-exec, so a pipe end never leaks into another
/// child spawned meanwhile (by us or by `child_process`).
fn open_stdio(n: usize, spec: &Stdio) -> Result<(ChildFd, Option<OwnedFd>), SpawnError> {
    let stdio_err = |e: io::Error| SpawnError::os(e, Stage::Stdio);
    match spec {
        Stdio::Inherit => Ok((ChildFd::Inherit, None)),
        Stdio::Ignore => Ok((ChildFd::Shared(dev_null()?), None)),
        Stdio::Pipe => {
            let (r, w) = io::pipe().map_err(stdio_err)?;
            let (r, w): (OwnedFd, OwnedFd) = (r.into(), w.into());
            if n == 0 {
                Ok((ChildFd::Owned(above_stdio(r)?), Some(w)))
            } else {
                Ok((ChildFd::Owned(above_stdio(w)?), Some(r)))
            }
        }
        Stdio::File { path, append } => {
            let fd = open_file(n, path, *append).map_err(|(err, reason)| SpawnError::File {
                fd: n,
                err,
                reason,
            })?;
            Ok((ChildFd::Owned(above_stdio(fd)?), None))
        }
    }
}

/// Opens a caller's file for the child's fd `n` (0 reads, 1 and 2 write)
/// without ever waiting: `O_NONBLOCK` makes `open` return at once where it
/// would sleep. That is a FIFO without a peer (a reader end then opens
/// anyway; a writer end fails ENXIO), a serial line waiting for carrier, or
/// a file under a lease that the truncation would break (EAGAIN instead of
/// waiting out the lease holder). `O_NOCTTY`: a terminal opened here must
/// not become the controlling terminal of this process.
///
/// The flag is cleared again once open: the child gets the blocking fd a
/// shell's redirection gives it, whatever the file type.
fn open_file(
    n: usize,
    path: &Path,
    append: bool,
) -> Result<OwnedFd, (io::Error, Option<&'static str>)> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut opts = std::fs::OpenOptions::new();
    opts.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    if n == 0 {
        opts.read(true);
    } else if append {
        opts.append(true).create(true);
    } else {
        opts.write(true).create(true).truncate(true);
    }
    let file = match opts.open(path) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            // ENXIO from open means one of a few things: say which.
            let reason = match std::fs::metadata(path).map(|m| m.file_type()) {
                Ok(t) if t.is_fifo() => Some("no process has the FIFO open for reading"),
                Ok(t) if t.is_socket() => Some("a socket cannot be opened as a file"),
                _ => None,
            };
            return Err((e, reason));
        }
        Err(e) => return Err((e, None)),
    };
    let meta = file.metadata().map_err(|e| (e, None))?;
    if meta.is_dir() {
        // Reading opens a directory fine, but the child could only fail on it.
        return Err((io::Error::from_raw_os_error(libc::EISDIR), None));
    }
    let fd = OwnedFd::from(file);
    // SAFETY: F_GETFL on an fd we own.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err((io::Error::last_os_error(), None));
    }
    // SAFETY: F_SETFL on an fd we own, with flags read from it.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err((io::Error::last_os_error(), None));
    }
    Ok(fd)
}

/// Clears `O_NONBLOCK` on fd `fd` (one of the child's 0..2), as libuv does
/// for every `child_process` child. The flag lives on the open file
/// description, which an inherited stdio shares with Node: Node keeps its
/// own pipes and sockets non-blocking, and a program handed such a stdout
/// (`seq`, `cat`, most of C) fails with EAGAIN on the first full pipe
/// instead of waiting for its reader. Clearing it changes Node's copy too,
/// exactly as `child_process.spawn` does; libuv copes with a blocking fd.
///
/// Async-signal-safe (two `fcntl`s, no allocation): the Linux child calls it
/// between `clone` and `execve`. A closed fd (EBADF) is left alone.
pub(super) fn make_blocking(fd: RawFd) {
    // SAFETY: F_GETFL on an fd number only reads the description's flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags >= 0 && flags & libc::O_NONBLOCK != 0 {
        // SAFETY: F_SETFL with the flags just read, less O_NONBLOCK.
        unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) };
    }
}

/// `key=value` C strings of `vars`, in order; a key must be non-empty and
/// without `=`, and nothing may hold a NUL byte.
fn envp_of(vars: &[(OsString, OsString)]) -> Result<Vec<CString>, SpawnError> {
    let mut envp = Vec::with_capacity(vars.len());
    for (k, v) in vars {
        let (k, v) = (k.as_bytes(), v.as_bytes());
        if k.is_empty() || k.contains(&b'=') {
            return Err(SpawnError::Invalid(format!(
                "env key {:?} must be non-empty and must not contain '='",
                String::from_utf8_lossy(k)
            )));
        }
        let entry = [k, b"=", v].concat();
        envp.push(
            CString::new(entry)
                .map_err(|_| SpawnError::Invalid("env must not contain NUL bytes".into()))?,
        );
    }
    Ok(envp)
}

/// This process's environment as it is now: each `environ` entry copied
/// into a C string as it is (one allocation an entry, where owned pairs
/// and then `key=value` strings took three), as libuv passes `environ` to
/// a child without `env`.
///
/// Read as `std::env::vars_os` reads it: std's lock around that read only
/// orders it against std's own `set_var` in this library (there is none);
/// Node's `process.env` writes are made on the JS thread, which is the one
/// spawning here, or by a worker under `SHARE_ENV`, which neither guards.
#[cfg(target_os = "linux")]
fn inherited_envp() -> Result<Vec<CString>, SpawnError> {
    extern "C" {
        static environ: *const *const libc::c_char;
    }
    // SAFETY: reads the pointer's value; `environ` is NULL or a
    // NULL-terminated array of NUL-terminated strings (see above for who
    // may change it meanwhile).
    let base = unsafe { environ };
    let mut envp = Vec::new();
    if base.is_null() {
        return Ok(envp);
    }
    loop {
        // SAFETY: `base` is NULL-terminated and every index before this one
        // held an entry, so `base + envp.len()` is within the array.
        let entry = unsafe { *base.add(envp.len()) };
        if entry.is_null() {
            return Ok(envp);
        }
        // SAFETY: each entry is a NUL-terminated string, copied at once.
        envp.push(unsafe { std::ffi::CStr::from_ptr(entry) }.to_owned());
    }
}

/// Elsewhere (macOS: `environ` is not for a library to link against) through std.
#[cfg(not(target_os = "linux"))]
fn inherited_envp() -> Result<Vec<CString>, SpawnError> {
    envp_of(&std::env::vars_os().collect::<Vec<_>>())
}

/// The parent's ends: stdio pipes and the notify pipe's read end.
type ParentEnds = ([Option<OwnedFd>; 3], Option<OwnedFd>);

fn prepare(cmd: &Command) -> Result<(Prepared, ParentEnds), SpawnError> {
    if cmd.program.is_empty() {
        return Err(SpawnError::Invalid(
            "command must be a non-empty string".into(),
        ));
    }
    let mut argv = vec![match &cmd.argv0 {
        Some(a) => cstring(a, "argv0")?,
        None => cstring(&cmd.program, "command")?,
    }];
    for a in &cmd.args {
        argv.push(cstring(a, "args")?);
    }
    let envp = match &cmd.env {
        Environment::Set(vars) => envp_of(vars)?,
        Environment::Inherit => inherited_envp()?,
    };
    let cwd = match &cmd.cwd {
        Some(dir) => {
            let meta = std::fs::metadata(dir).map_err(|e| SpawnError::os(e, Stage::Cwd))?;
            if !meta.is_dir() {
                return Err(SpawnError::os(
                    io::Error::from_raw_os_error(libc::ENOTDIR),
                    Stage::Cwd,
                ));
            }
            Some(
                CString::new(dir.as_os_str().as_bytes())
                    .map_err(|_| SpawnError::Invalid("cwd must not contain NUL bytes".into()))?,
            )
        }
        None => None,
    };
    let path = resolve(&cmd.program, &envp, cmd.cwd.as_deref())?;
    let path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SpawnError::Invalid("command must not contain NUL bytes".into()))?;
    let mut child_stdio: [ChildFd; 3] = [ChildFd::Inherit, ChildFd::Inherit, ChildFd::Inherit];
    let mut pipes: [Option<OwnedFd>; 3] = [None, None, None];
    for n in 0..3 {
        let (child, parent) = open_stdio(n, &cmd.stdio[n])?;
        child_stdio[n] = child;
        pipes[n] = parent;
    }
    let (notify, notify_read) = match cmd.notify_fd {
        None => (None, None),
        Some(target) if target < 3 => {
            return Err(SpawnError::Invalid(format!(
                "notifyFd must be 3 or above (0..2 are stdio), got {target}"
            )))
        }
        Some(target) => {
            let (r, w) = io::pipe().map_err(|e| SpawnError::os(e, Stage::Stdio))?;
            (Some((above_stdio(w.into())?, target)), Some(r.into()))
        }
    };
    Ok((
        Prepared {
            path,
            argv,
            envp,
            cwd,
            child_stdio,
            process_group: cmd.process_group,
            death_signal: cmd.death_signal,
            notify,
            uid: cmd.uid,
            gid: cmd.gid,
            umask: cmd.umask,
            new_session: cmd.new_session,
            ignore_stop_signals: cmd.ignore_stop_signals,
            cgroup: cmd.cgroup.clone(),
            parent_pid: Pid::current(),
        },
        (pipes, notify_read),
    ))
}

type Job = Box<dyn FnOnce(&mut [u8]) + Send>;

/// Hands `job` to the long-lived thread that creates every child (see the
/// module docs), starting that thread on first use. It blocks all signals
/// for its whole life: the child starts with this mask, so no handler of
/// ours can run in it before it resets dispositions. A failure to start it
/// (EAGAIN at a thread limit) is reported with its errno and not remembered:
/// the next spawn tries again.
fn send_to_spawner(job: Job) -> Result<(), SpawnError> {
    static SPAWNER: Mutex<Option<mpsc::Sender<Job>>> = Mutex::new(None);
    let mut slot = SPAWNER.lock().unwrap_or_else(|e| e.into_inner());
    let tx = match slot.as_ref() {
        Some(tx) => tx,
        None => {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("procward-spawner".into())
                .spawn(move || {
                    block_all_signals();
                    let mut stack = vec![0u8; imp::CHILD_STACK];
                    for job in rx {
                        job(&mut stack);
                    }
                })
                .map_err(|e| SpawnError::os(e, Stage::Spawner))?;
            slot.insert(tx)
        }
    };
    tx.send(job)
        .map_err(|_| SpawnError::os(io::Error::other("spawner thread is gone"), Stage::Spawner))
}

fn block_all_signals() {
    // SAFETY: a zeroed sigset is valid storage for sigfillset.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: fills the set we own.
    unsafe { libc::sigfillset(&mut all) };
    // SAFETY: changes only this thread's mask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &all, std::ptr::null_mut()) };
}

/// Starts `cmd`. Synchronous: when this returns Ok the child has exec'd,
/// and when it returns Err no process and no fd is left behind.
pub fn spawn(cmd: &Command, want_pidfd: bool) -> Result<Child, SpawnError> {
    let (prep, (pipes, notify)) = prepare(cmd)?;
    crate::spawn_trace::mark(crate::spawn_trace::PREPARED);
    #[cfg(target_os = "linux")]
    let main = on_main_thread(prep.parent_pid);
    #[cfg(target_os = "macos")]
    let main = on_main_thread();
    let raw = if main {
        // The main thread lives as long as the process, so it may create
        // the child itself: no hop to the spawner thread and back.
        MAIN_STACK.with(|stack| {
            let mut stack = stack.borrow_mut();
            let _blocked = SignalsBlocked::new();
            clone_with_retry(&prep, want_pidfd, &mut stack)
        })
    } else {
        on_spawner_thread(prep, want_pidfd)?
    }?;
    crate::spawn_trace::mark(crate::spawn_trace::SPAWNED);
    Ok(Child {
        pid: raw.pid,
        pidfd: raw.pidfd,
        pipes,
        notify,
    })
}

thread_local! {
    static MAIN_STACK: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; imp::CHILD_STACK]);
}

/// Whether this thread is the main thread of process `pid` (this one):
/// its thread id is the pid. The thread id is asked once per thread and
/// process (a fork gives the forking thread a new id, and the process a new
/// pid, so a cached answer is never used across a fork).
#[cfg(target_os = "linux")]
fn on_main_thread(pid: Pid) -> bool {
    use std::cell::Cell;
    thread_local! {
        /// (pid it was asked in, thread id).
        static TID: Cell<(i32, libc::c_long)> = const { Cell::new((0, 0)) };
    }
    let pid = pid.as_raw();
    TID.with(|cached| {
        let (asked_in, tid) = cached.get();
        let tid = if asked_in == pid {
            tid
        } else {
            // SAFETY: gettid takes no arguments and cannot fail.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) };
            cached.set((pid, tid));
            tid
        };
        tid == libc::c_long::from(pid)
    })
}

/// Blocks every signal on this thread until dropped, so that none of the
/// handlers installed here can run in the child before it resets them.
struct SignalsBlocked(libc::sigset_t);

impl SignalsBlocked {
    fn new() -> SignalsBlocked {
        // SAFETY: zeroed sigsets are valid storage for the calls below.
        let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: fills the set we own.
        unsafe { libc::sigfillset(&mut all) };
        // SAFETY: changes only this thread's mask and saves the old one.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old) };
        SignalsBlocked(old)
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// Set once a kernel has rejected CLONE_PIDFD (before 5.2): not asked again.
static NO_CLONE_PIDFD: AtomicBool = AtomicBool::new(false);

fn clone_with_retry(
    prep: &Prepared,
    want_pidfd: bool,
    stack: &mut [u8],
) -> Result<imp::RawChild, SpawnError> {
    let want_pidfd = want_pidfd && !NO_CLONE_PIDFD.load(Ordering::Relaxed);
    let res = imp::clone_exec(prep, want_pidfd, stack);
    let retry = match &res {
        // Kernels before 5.2 reject CLONE_PIDFD with EINVAL (remembered), and
        // a full fd table fails it with EMFILE/ENFILE; the caller then
        // watches the exit without a pidfd (fallback back-end).
        Err(SpawnError::Os { err, syscall, .. })
            if want_pidfd && *syscall == Stage::Clone.syscall() =>
        {
            match err.raw_os_error() {
                Some(libc::EINVAL) => {
                    NO_CLONE_PIDFD.store(true, Ordering::Relaxed);
                    true
                }
                Some(libc::EMFILE) | Some(libc::ENFILE) => true,
                _ => false,
            }
        }
        _ => false,
    };
    if retry {
        imp::clone_exec(prep, false, stack)
    } else {
        res
    }
}

fn on_spawner_thread(
    prep: Prepared,
    want_pidfd: bool,
) -> Result<Result<imp::RawChild, SpawnError>, SpawnError> {
    let (tx, rx) = mpsc::sync_channel(1);
    let job: Job = Box::new(move |stack: &mut [u8]| {
        let res = clone_with_retry(&prep, want_pidfd, stack);
        // The child's ends are closed here, on this side of the clone.
        drop(prep);
        let _ = tx.send(res);
    });
    send_to_spawner(job)?;
    rx.recv()
        .map_err(|_| SpawnError::os(io::Error::other("spawner thread is gone"), Stage::Spawner))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Vec<(OsString, OsString)> {
        vec![("PATH".into(), "/usr/bin:/bin".into())]
    }

    /// `vars` as the child's C strings.
    fn envp(vars: Vec<(OsString, OsString)>) -> Vec<CString> {
        envp_of(&vars).unwrap()
    }

    /// `program args…` leading a group of its own, stdio ignored, nothing
    /// else asked for.
    fn command(program: &str, args: Vec<String>) -> Command {
        Command {
            program: program.into(),
            args,
            env: Environment::Set(env()),
            cwd: None,
            stdio: [Stdio::Ignore, Stdio::Ignore, Stdio::Ignore],
            process_group: true,
            death_signal: None,
            notify_fd: None,
            uid: None,
            gid: None,
            umask: None,
            argv0: None,
            new_session: false,
            ignore_stop_signals: false,
            cgroup: None,
        }
    }

    #[test]
    fn resolves_through_path() {
        let p = resolve("sh", &envp(env()), None).unwrap();
        assert!(p.ends_with("sh"));
        assert!(p.is_absolute());
    }

    #[test]
    fn missing_command_is_enoent_before_any_process() {
        match resolve("procward-no-such-command", &envp(env()), None) {
            Err(SpawnError::Os { err, at, syscall }) => {
                assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
                assert_eq!((at, syscall), (At::Spawn, Stage::Resolve.syscall()));
            }
            other => panic!("{other:?}"),
        }
    }

    /// A scratch directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!("procward-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        fn executable(&self, rel: &str) -> PathBuf {
            use std::os::unix::fs::PermissionsExt;
            let path = self.0.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            path
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn path_env(path: &str) -> Vec<(OsString, OsString)> {
        vec![("PATH".into(), path.into())]
    }

    #[test]
    fn relative_path_entries_stay_relative_to_the_childs_cwd() {
        let s = Scratch::new("resolve");
        s.executable("work/bin/tool");
        // The child runs `bin/tool` after its chdir to .../work; the check
        // here found it at .../work/bin/tool.
        let work = s.0.join("work");
        let p = resolve("tool", &envp(path_env("bin:/usr/bin")), Some(&work)).unwrap();
        assert_eq!(p, PathBuf::from("bin/tool"));
        // An empty entry is the child's cwd.
        s.executable("work/tool2");
        let p = resolve("tool2", &envp(path_env("/usr/bin:")), Some(&work)).unwrap();
        assert_eq!(p, PathBuf::from("./tool2"));
        // Not there from the child's cwd: not found, wherever we are.
        assert!(resolve("tool", &envp(path_env("bin")), Some(&s.0)).is_err());
        // Absolute entries are absolute whatever the cwd.
        let p = resolve("sh", &envp(path_env("/bin")), Some(&work)).unwrap();
        assert_eq!(p, PathBuf::from("/bin/sh"));
    }

    #[test]
    fn the_first_path_wins_and_a_missing_one_is_glibcs_default() {
        let mut env = path_env("/nonexistent");
        env.push(("PATH".into(), "/usr/bin:/bin".into()));
        assert!(resolve("sh", &envp(env), None).is_err());
        let p = resolve("sh", &[], None).unwrap();
        assert_eq!(p, PathBuf::from("/bin/sh"));
    }

    #[test]
    fn a_fifo_opens_without_waiting_and_the_fd_is_blocking() {
        let s = Scratch::new("fifo");
        let fifo = s.0.join("f");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo takes a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer: a reader end opens anyway, and is blocking for the child.
        let fd = open_file(0, &fifo, false).unwrap();
        // SAFETY: F_GETFL on an fd we own.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        assert_eq!(flags & libc::O_NONBLOCK, 0);
        drop(fd);
        // No reader: a writer end is ENXIO, explained.
        let (err, reason) = open_file(1, &fifo, false).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENXIO));
        assert_eq!(reason, Some("no process has the FIFO open for reading"));
        // A directory is no stdin.
        let (err, _) = open_file(0, &s.0, false).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EISDIR));
    }

    #[test]
    fn an_inherited_environment_is_this_processs_as_it_is() {
        let c = Command {
            env: Environment::Inherit,
            ..command("sh", vec![])
        };
        let (prepared, _) = prepare(&c).unwrap();
        let expected: Vec<Vec<u8>> = std::env::vars_os()
            .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
            .collect();
        let got: Vec<Vec<u8>> = prepared
            .envp
            .iter()
            .map(|e| e.as_bytes().to_vec())
            .collect();
        assert_eq!(got, expected);
        // The PATH lookup reads the same entries.
        assert!(prepared.path.as_bytes().ends_with(b"/sh"));
    }

    #[test]
    fn rejects_nul_and_bad_env_keys() {
        let base = command("true", vec![]);
        let mut c = base.clone();
        c.args.push("a\0b".into());
        assert!(matches!(prepare(&c), Err(SpawnError::Invalid(_))));
        let mut c = base.clone();
        c.env = Environment::Set(vec![("A=B".into(), "x".into())]);
        assert!(matches!(prepare(&c), Err(SpawnError::Invalid(_))));
        let mut c = base.clone();
        c.program = String::new();
        assert!(matches!(prepare(&c), Err(SpawnError::Invalid(_))));
    }

    #[test]
    fn spawns_and_reports_exec_failure() {
        let base = Command {
            death_signal: Some(Signal::KILL),
            ..command("/bin/sh", vec!["-c".into(), "exit 7".into()])
        };
        let child = spawn(&base, true).unwrap();
        let status = crate::sys::waitid_pid(child.pid, libc::WEXITED).unwrap();
        assert_eq!(status, crate::sys::WaitStatus::Exited(7));

        let mut c = base.clone();
        c.program = "/nonexistent/procward".into();
        match spawn(&c, true) {
            Err(SpawnError::Os { err, at, syscall }) => {
                assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
                assert_eq!((at, syscall), (At::Spawn, Stage::Execve.syscall()));
            }
            Err(e) => panic!("{e:?}"),
            Ok(_) => panic!("spawned a missing program"),
        }
    }

    /// The child's umask is the one asked for (the exit status carries
    /// it), and ours is left as it was: the child has fs attributes of its
    /// own (no CLONE_FS).
    #[cfg(target_os = "linux")]
    #[test]
    fn umask_is_the_childs_alone() {
        // Read, not set: the other tests' threads share the mask.
        let ours = || {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let line = status.lines().find(|l| l.starts_with("Umask:")).unwrap();
            line["Umask:".len()..].trim().to_string()
        };
        let before = ours();
        for mask in [0o077, 0o002, 0] {
            let cmd = Command {
                umask: Some(mask),
                ..command("/bin/sh", vec!["-c".into(), "exit $(( $(umask) ))".into()])
            };
            let child = spawn(&cmd, true).unwrap();
            let status = crate::sys::waitid_pid(child.pid, libc::WEXITED).unwrap();
            assert_eq!(status, crate::sys::WaitStatus::Exited(mask as i32));
        }
        assert_eq!(ours(), before);
    }

    /// `ignore_stop_signals`: SIGTERM, SIGINT and SIGHUP are ignored from
    /// the exec on (the guardian must survive a unit's stop sent before its
    /// shell reaches `trap`); without it, none is (Node's SIGPIPE neither).
    #[cfg(target_os = "linux")]
    #[test]
    fn stop_signals_ignored_from_the_exec_on() {
        let ignored = |pid: Pid| {
            let status = std::fs::read_to_string(format!("/proc/{}/status", pid.as_raw())).unwrap();
            let line = status.lines().find(|l| l.starts_with("SigIgn:")).unwrap();
            u64::from_str_radix(line["SigIgn:".len()..].trim(), 16).unwrap()
        };
        let bit = |sig: i32| 1u64 << (sig - 1);
        let stop = bit(libc::SIGTERM) | bit(libc::SIGINT) | bit(libc::SIGHUP);
        for immune in [true, false] {
            let cmd = Command {
                ignore_stop_signals: immune,
                ..command("/bin/sh", vec!["-c".into(), "exec sleep 5".into()])
            };
            let child = spawn(&cmd, true).unwrap();
            // Signalled the instant the spawn returns: the shell has run
            // nothing of its script yet.
            crate::sys::kill(child.pid, Signal::TERM).unwrap();
            crate::sys::kill(child.pid, Signal::from_raw(libc::SIGHUP).unwrap()).unwrap();
            let mask = if immune {
                Some(ignored(child.pid))
            } else {
                None
            };
            if immune {
                crate::sys::kill(child.pid, Signal::KILL).unwrap();
            }
            let status = crate::sys::waitid_pid(child.pid, libc::WEXITED).unwrap();
            match mask {
                Some(mask) => {
                    assert_eq!(mask & stop, stop, "SigIgn {mask:x}");
                    assert_eq!(mask & bit(libc::SIGPIPE), 0, "SigIgn {mask:x}");
                    assert_eq!(status, crate::sys::WaitStatus::Signaled(libc::SIGKILL));
                }
                None => assert_eq!(status, crate::sys::WaitStatus::Signaled(libc::SIGTERM)),
            }
        }
    }

    #[test]
    fn notify_fd_is_the_only_extra_fd_in_the_child() {
        use std::io::Read;
        for target in [3, 5, 200] {
            // Ready (dash takes one digit in `>&N`), then a program that
            // holds exactly what it inherited.
            let script = format!("echo ready >/proc/self/fd/{target}; exec sleep 10");
            let cmd = Command {
                notify_fd: Some(target),
                ..command("/bin/sh", vec!["-c".into(), script])
            };
            let child = spawn(&cmd, false).unwrap();
            let mut notify = std::fs::File::from(child.notify.unwrap());
            let mut buf = [0u8; 6];
            notify.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, b"ready\n");
            // Once sleep sleeps, its fd table is what it inherited: its comm
            // changes at the exec, but the dynamic loader then still opens
            // libc.so.6 for an instant.
            let dir = format!("/proc/{}", child.pid.as_raw());
            let fds_now = || {
                let mut fds: Vec<i32> = std::fs::read_dir(format!("{dir}/fd"))
                    .unwrap()
                    .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
                    .collect();
                fds.sort();
                fds
            };
            let sleeping = || {
                let stat = std::fs::read_to_string(format!("{dir}/stat")).unwrap();
                std::fs::read_to_string(format!("{dir}/comm")).unwrap() == "sleep\n"
                    && stat[stat.rfind(')').unwrap() + 2..].starts_with('S')
            };
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            let fds = loop {
                let fds = fds_now();
                if sleeping() && fds == fds_now() || std::time::Instant::now() > deadline {
                    break fds;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            };
            let what: Vec<String> = fds
                .iter()
                .map(|fd| {
                    std::fs::read_link(format!("{dir}/fd/{fd}"))
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                })
                .collect();
            crate::sys::kill(child.pid, Signal::KILL).unwrap();
            crate::sys::waitid_pid(child.pid, libc::WEXITED).unwrap();
            assert_eq!(fds, [0, 1, 2, target], "target {target}: {what:?}");
        }
        let mut bad = Command {
            notify_fd: Some(2),
            ..command("true", vec![])
        };
        assert!(matches!(spawn(&bad, false), Err(SpawnError::Invalid(_))));
        bad.notify_fd = None;
        let child = spawn(&bad, false).unwrap();
        assert!(child.notify.is_none());
        crate::sys::waitid_pid(child.pid, libc::WEXITED).unwrap();
    }
}
