//! macOS: the child is created by `posix_spawn(2)`, which on macOS is a
//! system call of its own (not fork + exec in user space): the new process
//! runs none of our code, so none of our signal handlers or locks can
//! reach it, and an exec failure comes back as posix_spawn's return value
//! with no child left behind.
//!
//! What Linux's `child_main` does by hand, posix_spawn does by attribute:
//! - `POSIX_SPAWN_SETPGROUP` with pgroup 0: the child leads a new process
//!   group (`processGroup`);
//! - `POSIX_SPAWN_SETSIGDEF` over every signal: default dispositions (Node
//!   ignores SIGPIPE and SIGXFSZ; a daemon must not inherit that);
//! - `POSIX_SPAWN_SETSIGMASK` with an empty set: nothing blocked;
//! - `POSIX_SPAWN_CLOEXEC_DEFAULT` (an Apple extension): every fd not named
//!   by a file action is closed, the close_range of Linux.
//!   posix_spawnattr_setflags(3): "all file descriptors ... are treated as
//!   though FD_CLOEXEC had been set, except those that are the target of
//!   posix_spawn_file_actions_adddup2(3) or
//!   posix_spawn_file_actions_addinherit_np(3)". So stdio that is inherited
//!   is named with `addinherit_np`, the rest with `adddup2`;
//! - `posix_spawn_file_actions_addchdir_np` (macOS 10.15, the oldest that
//!   Node 20 supports) for `cwd`.
//!
//! Not on macOS: `PR_SET_PDEATHSIG` (prctl(2) is Linux-only, and nothing in
//! posix_spawn stands in for it). `parentDeathSignal` is accepted and has no
//! effect: a child outlives a supervisor that dies without stopping it (by
//! SIGKILL, say). A later supervisor finds it by its recorded pid +
//! identity and stops it (`stopSupervisedProcess(pid, { identity })`).
//!
//! No pidfd either: the exit is watched through a kqueue by pid
//! (`exit_watch::macos`), which is safe for our own child because its pid
//! stays ours until we reap it.

use std::ffi::{c_char, c_int, CString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd};

use super::common::Prepared;
use super::stage::Stage;
use crate::pid::Pid;
use crate::spawn::SpawnError;

/// posix_spawn needs no stack of ours.
pub const CHILD_STACK: usize = 0;

pub struct RawChild {
    pub pid: Pid,
    /// Always None: no pidfds on macOS.
    pub pidfd: Option<OwnedFd>,
}

extern "C" {
    // <spawn.h>, macOS 10.7 and later; not in the libc crate.
    fn posix_spawn_file_actions_addinherit_np(
        actions: *mut libc::posix_spawn_file_actions_t,
        filedes: c_int,
    ) -> c_int;
}

/// Is this the process's main thread? (The spawn module hands children
/// created from other threads to its spawner thread, as on Linux; harmless
/// here, where no death signal ties a child to the thread that made it.)
pub fn on_main_thread() -> bool {
    // SAFETY: takes no arguments and cannot fail.
    unsafe { libc::pthread_main_np() != 0 }
}

fn check(ret: c_int) -> Result<(), SpawnError> {
    if ret == 0 {
        Ok(())
    } else {
        Err(SpawnError::os(
            io::Error::from_raw_os_error(ret),
            Stage::Clone,
        ))
    }
}

/// A posix_spawn attribute or file-actions object: initialised by its
/// `init`, destroyed once by its `destroy` when dropped.
struct SpawnObject<T>(T, unsafe extern "C" fn(*mut T) -> c_int);

type Attr = SpawnObject<libc::posix_spawnattr_t>;
type Actions = SpawnObject<libc::posix_spawn_file_actions_t>;

impl<T> SpawnObject<T> {
    /// # Safety
    /// `init` and `destroy` are the C library's pair for a `T`.
    unsafe fn new(
        init: unsafe extern "C" fn(*mut T) -> c_int,
        destroy: unsafe extern "C" fn(*mut T) -> c_int,
    ) -> Result<SpawnObject<T>, SpawnError> {
        let mut obj = MaybeUninit::<T>::uninit();
        // SAFETY: initialises the object we own (the caller named `init`).
        check(unsafe { init(obj.as_mut_ptr()) })?;
        // SAFETY: `init` succeeded.
        Ok(SpawnObject(unsafe { obj.assume_init() }, destroy))
    }
}

impl<T> Drop for SpawnObject<T> {
    fn drop(&mut self) {
        // SAFETY: destroys the object initialised in `new`, once.
        unsafe { (self.1)(&mut self.0) };
    }
}

fn null_terminated(strings: &[CString]) -> Vec<*mut c_char> {
    // posix_spawn takes `char *const[]`; it does not write through them.
    strings
        .iter()
        .map(|s| s.as_ptr().cast_mut())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect()
}

fn attributes(prep: &Prepared) -> Result<Attr, SpawnError> {
    // SAFETY: the attribute object's own init and destroy.
    let mut attr = unsafe { Attr::new(libc::posix_spawnattr_init, libc::posix_spawnattr_destroy) }?;
    let mut flags = libc::POSIX_SPAWN_SETSIGDEF
        | libc::POSIX_SPAWN_SETSIGMASK
        | libc::POSIX_SPAWN_CLOEXEC_DEFAULT;
    if prep.process_group {
        flags |= libc::POSIX_SPAWN_SETPGROUP;
        // SAFETY: sets a field of the attribute object we own; 0 = a new
        // group whose id is the child's pid.
        check(unsafe { libc::posix_spawnattr_setpgroup(&mut attr.0, 0) })?;
    }
    // SAFETY: a zeroed sigset is valid storage for the calls below.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: fills the set we own.
    unsafe { libc::sigfillset(&mut all) };
    // SIGKILL and SIGSTOP have no disposition to reset.
    // SAFETY: edits the set we own.
    unsafe { libc::sigdelset(&mut all, libc::SIGKILL) };
    // SAFETY: as above.
    unsafe { libc::sigdelset(&mut all, libc::SIGSTOP) };
    // SAFETY: copies the set into the attribute object we own.
    check(unsafe { libc::posix_spawnattr_setsigdefault(&mut attr.0, &all) })?;
    // SAFETY: a zeroed sigset is valid storage for sigemptyset.
    let mut none: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: initialises the set we own.
    unsafe { libc::sigemptyset(&mut none) };
    // SAFETY: copies the set into the attribute object we own.
    check(unsafe { libc::posix_spawnattr_setsigmask(&mut attr.0, &none) })?;
    // SAFETY: sets the flags of the attribute object we own.
    check(unsafe { libc::posix_spawnattr_setflags(&mut attr.0, flags as libc::c_short) })?;
    Ok(attr)
}

fn is_open(fd: c_int) -> bool {
    // SAFETY: F_GETFD on an fd number only reads our fd table.
    unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
}

fn file_actions(prep: &Prepared) -> Result<Actions, SpawnError> {
    // SAFETY: the file-actions object's own init and destroy.
    let mut actions = unsafe {
        Actions::new(
            libc::posix_spawn_file_actions_init,
            libc::posix_spawn_file_actions_destroy,
        )
    }?;
    for (target, spec) in prep.child_stdio.iter().enumerate() {
        let target = target as c_int;
        let src = spec.raw();
        // posix_spawn runs nothing of ours in the child: clear the flag on
        // the shared description here, as libuv's posix_spawn path does.
        super::stdio::make_blocking(if src >= 0 { src } else { target });
        if src >= 0 {
            // Every source fd is 3 or above (`above_stdio`), never a target.
            // SAFETY: records a dup2 in the object we own.
            check(unsafe { libc::posix_spawn_file_actions_adddup2(&mut actions.0, src, target) })?;
        } else if is_open(target) {
            // SAFETY: records an inherit in the object we own.
            check(unsafe { posix_spawn_file_actions_addinherit_np(&mut actions.0, target) })?;
        }
        // else: our own fd `target` is closed, and the child's stays closed
        // (an inherit of a closed fd would fail the whole spawn with EBADF,
        // where Linux simply passes the closed slot on).
    }
    // The readiness pipe's write end at its fd number. After stdio: file
    // actions run in order, and a stdio source may sit on that number.
    if let Some((fd, target)) = &prep.notify {
        let src = fd.as_raw_fd();
        if src == *target {
            // SAFETY: records an inherit in the object we own.
            check(unsafe { posix_spawn_file_actions_addinherit_np(&mut actions.0, src) })?;
        } else {
            // SAFETY: records a dup2 in the object we own.
            check(unsafe { libc::posix_spawn_file_actions_adddup2(&mut actions.0, src, *target) })?;
        }
    }
    if let Some(cwd) = &prep.cwd {
        // SAFETY: copies the NUL-terminated path into the object we own.
        check(unsafe { libc::posix_spawn_file_actions_addchdir_np(&mut actions.0, cwd.as_ptr()) })?;
    }
    Ok(actions)
}

/// Creates the child (named after the Linux seam it fills). `want_pidfd` and
/// `stack` have no meaning here.
pub fn clone_exec(
    prep: &Prepared,
    _want_pidfd: bool,
    _stack: &mut [u8],
) -> Result<RawChild, SpawnError> {
    // parentDeathSignal: nothing on macOS stands in for it (module docs).
    let _ = prep.death_signal;
    // posix_spawn(2) has no credential switch; a set-id helper between us
    // and the program would be a fork by another name. Refused, never
    // silently ignored: the child would run as us.
    if prep.gid.is_some() {
        return Err(SpawnError::os(
            io::Error::from_raw_os_error(libc::ENOTSUP),
            Stage::Setgid,
        ));
    }
    if prep.uid.is_some() {
        return Err(SpawnError::os(
            io::Error::from_raw_os_error(libc::ENOTSUP),
            Stage::Setuid,
        ));
    }
    // Nor has it a umask action (posix_spawn_file_actions has none, and
    // changing ours around the call would race every other thread's
    // open). Refused for the same reason.
    if prep.umask.is_some() {
        return Err(SpawnError::os(
            io::Error::from_raw_os_error(libc::ENOTSUP),
            Stage::Umask,
        ));
    }
    // Held sockets need `LISTEN_PID` to name the child, which only the
    // child can know before its exec: posix_spawn runs none of our code.
    if !prep.listen.is_empty() {
        return Err(SpawnError::Unsupported(
            "listen (held sockets) is not supported on macOS: LISTEN_PID must be set by the child before exec, and posix_spawn runs no code of ours".into(),
        ));
    }
    let attr = attributes(prep)?;
    let actions = file_actions(prep)?;
    let argv = null_terminated(&prep.argv);
    let envp = null_terminated(&prep.envp);
    let mut pid: libc::pid_t = 0;
    // SAFETY: path, argv and envp are NUL-terminated (arrays of)
    // NUL-terminated strings that outlive the call; attr and actions were
    // initialised above; pid is ours to fill.
    let ret = unsafe {
        libc::posix_spawn(
            &mut pid,
            prep.path.as_ptr(),
            &actions.0,
            &attr.0,
            argv.as_ptr(),
            envp.as_ptr(),
        )
    };
    if ret != 0 {
        // The exec's errno (or a file action's, e.g. a cwd removed since
        // `prepare` checked it): no child exists.
        return Err(SpawnError::os(
            io::Error::from_raw_os_error(ret),
            Stage::Execve,
        ));
    }
    let pid = Pid::from_raw(pid)
        .map_err(|_| SpawnError::os(io::Error::from_raw_os_error(libc::EINVAL), Stage::Clone))?;
    Ok(RawChild { pid, pidfd: None })
}
