//! Creating the child on Linux: `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD)`,
//! the way glibc's own `posix_spawn` does it (`sysdeps/unix/sysv/linux/spawni.c`).
//!
//! Why not `fork`: a fork of Node copies its page tables (hundreds of MB of
//! mappings), and a Rust `pre_exec` closure forces exactly that. With
//! `CLONE_VM | CLONE_VFORK` the child borrows our memory on a stack of its
//! own and the spawning thread sleeps until the child has called `execve`
//! (or exited), so the cost does not grow with the parent's size.
//! `CLONE_PIDFD` hands back a pidfd atomically with the pid: there is no
//! window in which the pid could be anything but our child.
//!
//! The child side ([`child_main`]) shares the parent's memory, so it may only
//! make raw, async-signal-safe calls on data prepared beforehand: no
//! allocation, no locks, no panics. Signals are blocked on the spawning
//! thread for its whole life (see `spawner`), so none of the parent's
//! handlers can run in the child before it resets every disposition to
//! `SIG_DFL` and unblocks them just before `execve`.
//!
//! Exec failures travel back through shared memory (`ChildArgs::err`): the
//! parent is resumed only after the child has exec'd or exited, so when
//! `clone` returns the verdict is already written.

use std::ffi::{c_char, c_int, c_void, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use super::common::Prepared;
use super::stage::Stage;
use crate::pid::Pid;
use crate::spawn::SpawnError;

/// Stack for the child between `clone` and `execve`. The child runs only
/// small frames of straight-line code; 64 KiB is generous.
pub const CHILD_STACK: usize = 64 * 1024;

#[repr(C)]
struct ChildArgs {
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    /// Fd to put at 0, 1, 2; -1 keeps the parent's (inherit).
    stdio: [c_int; 3],
    process_group: bool,
    new_session: bool,
    /// SIGTERM, SIGINT and SIGHUP ignored rather than defaulted.
    ignore_stop_signals: bool,
    /// The foreground of the terminal on fd 0, if our parent's group has it.
    take_terminal: bool,
    /// `cgroup.procs` of the child's cgroup, to write "0" (itself) into;
    /// -1: none, or clone3 already placed it there.
    cgroup_procs: c_int,
    death_signal: c_int,
    /// The notify pipe's write end and its fd number in the child; -1: none.
    notify: [c_int; 2],
    /// Listening sockets to put at 3, 4, … (`listen_count` of them), all
    /// numbered above every target; `listen_blocking`: clear O_NONBLOCK.
    listen: *const c_int,
    listen_count: c_int,
    listen_blocking: bool,
    /// Where the digits of `LISTEN_PID=` go (room for any pid and its NUL),
    /// in an environment entry of the parent's frame; null: no sockets.
    listen_pid: *mut u8,
    /// Whether to switch credentials at all (libuv's UV_PROCESS_SETUID/SETGID).
    set_uid: bool,
    uid: libc::uid_t,
    set_gid: bool,
    gid: libc::gid_t,
    /// The child's umask; -1: keep the parent's.
    umask: c_int,
    parent_pid: libc::pid_t,
    err: AtomicI32,
    stage: AtomicI32,
}

/// Makes our (new) group the foreground of the terminal on fd 0, as tini
/// does for its child, when that terminal is our controlling one and its
/// foreground is `born_in`, the group we were born in: a parent in the
/// background of its terminal must not steal it from the shell's job that
/// has it. `tcgetpgrp` fails (ENOTTY) on anything but our controlling
/// terminal, so a stdin that is a pipe, a file, /dev/null or another
/// terminal is left alone. Every signal is still blocked here, which the
/// kernel counts as ignoring SIGTTOU: the `tcsetpgrp` of a group outside
/// the foreground goes through rather than stopping us (tini ignores
/// SIGTTOU around it for the same reason). A failure is ignored, as tini
/// does: the program then runs without the terminal, as before. The
/// dispositions stay the defaults, as under tini: a job-control shell run
/// here keeps its Ctrl-Z for its own jobs (see docs/cli.md for Ctrl-Z on
/// COMMAND itself). Child side: two ioctls and a syscall, async-signal-safe.
fn take_terminal(born_in: libc::pid_t) {
    // SAFETY: ioctl(TIOCGPGRP) on fd 0; reads the foreground group.
    if unsafe { libc::tcgetpgrp(0) } != born_in {
        return;
    }
    // SAFETY: plain syscall on ourselves.
    let ours = unsafe { libc::getpgrp() };
    // SAFETY: ioctl(TIOCSPGRP) on fd 0 with our own group, in our session.
    unsafe { libc::tcsetpgrp(0, ours) };
}

fn child_fail(args: &ChildArgs, stage: Stage) -> ! {
    // SAFETY: reads this thread's errno; the TLS block is the spawning
    // thread's, which is suspended until we exec or exit.
    let errno = unsafe { *libc::__errno_location() };
    args.err.store(errno.max(1), Ordering::Relaxed);
    args.stage.store(stage as i32, Ordering::Relaxed);
    // SAFETY: _exit is async-signal-safe and never returns.
    unsafe { libc::_exit(127) }
}

extern "C" fn child_main(raw: *mut c_void) -> c_int {
    // SAFETY: `raw` points at the ChildArgs the parent keeps alive until
    // clone returns, which happens only after we exec or exit.
    let args = unsafe { &*(raw as *const ChildArgs) };

    // Default dispositions for every signal: Node ignores SIGPIPE and
    // SIGXFSZ, and its handlers must never run in this shared address space.
    // The raw syscall, because glibc's sigaction refuses its reserved
    // signals (32, 33), and one of them arrives here ignored.
    // An all-zero kernel sigaction: SIG_DFL, no flags, empty mask.
    // With `ignore_stop_signals`, SIGTERM, SIGINT and SIGHUP get SIG_IGN
    // (handler 1) instead: an ignored disposition survives execve, so the
    // program is immune from its first instruction, not from its first
    // `trap`.
    let dfl = [0u64; 4];
    let ign = [libc::SIG_IGN as u64, 0, 0, 0];
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        let stop = matches!(sig, libc::SIGTERM | libc::SIGINT | libc::SIGHUP);
        let action = if stop && args.ignore_stop_signals {
            &ign
        } else {
            &dfl
        };
        // SAFETY: rt_sigaction reads a kernel sigaction from `action` (large
        // enough on every arch) and writes nothing back (null old action).
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                action.as_ptr(),
                std::ptr::null_mut::<c_void>(),
                8usize,
            )
        };
    }

    // Into the cgroup first, before anything of the command can run (it
    // never does before execve anyway). "0" names the writer itself.
    if args.cgroup_procs >= 0 {
        // SAFETY: writes one byte from a static buffer to an fd we inherited.
        if unsafe { libc::write(args.cgroup_procs, b"0".as_ptr().cast(), 1) } != 1 {
            child_fail(args, Stage::Cgroup);
        }
    }

    // The group we were born in (our parent's), before we leave it.
    let born_in = if args.take_terminal {
        // SAFETY: plain syscall on ourselves.
        unsafe { libc::getpgrp() }
    } else {
        0
    };
    if args.new_session {
        // SAFETY: plain syscall on ourselves.
        if unsafe { libc::setsid() } < 0 {
            child_fail(args, Stage::Setsid);
        }
    } else if args.process_group {
        // SAFETY: plain syscall on ourselves.
        if unsafe { libc::setpgid(0, 0) } != 0 {
            child_fail(args, Stage::Setpgid);
        }
    }

    for (target, &src) in args.stdio.iter().enumerate() {
        let target = target as c_int;
        if src >= 0 {
            // SAFETY: both fds are plain integers; dup2 clears CLOEXEC on target.
            if unsafe { libc::dup2(src, target) } < 0 {
                child_fail(args, Stage::Dup2);
            }
        } else {
            // Inherit: the parent's fd may be close-on-exec; make it survive.
            // SAFETY: fcntl on an fd number; EBADF (closed stdio) is harmless.
            unsafe { libc::fcntl(target, libc::F_SETFD, 0) };
            // Blocking, as a shell or `child_process` hands stdio to a
            // program. Only an inherited fd can be otherwise: every source
            // `prepare` opened (the shared /dev/null, a pipe, a file) is
            // blocking already, and no one else holds its description.
            super::stdio::make_blocking(target);
        }
    }

    // After stdio: the terminal is the one on the program's own stdin.
    if args.take_terminal && args.process_group && !args.new_session {
        take_terminal(born_in);
    }

    // After stdio: a stdio source may sit on the notify fd's number, and has
    // been copied to 0..2 by now.
    let [notify_src, notify_target] = args.notify;
    if notify_target >= 0 {
        if notify_src == notify_target {
            // dup2 onto itself keeps close-on-exec; clear it instead.
            // SAFETY: fcntl on an fd of our private table.
            if unsafe { libc::fcntl(notify_target, libc::F_SETFD, 0) } != 0 {
                child_fail(args, Stage::Dup2);
            }
        // SAFETY: both fds are plain integers; dup2 clears CLOEXEC on target.
        } else if unsafe { libc::dup2(notify_src, notify_target) } < 0 {
            child_fail(args, Stage::Dup2);
        }
    }

    // After the notify fd: its source may sit on a socket's number; the
    // sockets' own sources sit above every target (`copy_listen`).
    let listen_end = 3 + args.listen_count;
    for i in 0..args.listen_count {
        // SAFETY: `listen` holds `listen_count` fds, in the parent's memory,
        // alive until clone returns.
        let src = unsafe { *args.listen.add(i as usize) };
        // SAFETY: both fds are plain integers; dup2 clears CLOEXEC on target.
        if unsafe { libc::dup2(src, 3 + i) } < 0 {
            child_fail(args, Stage::Dup2);
        }
        if args.listen_blocking {
            super::stdio::make_blocking(3 + i);
        }
    }
    if !args.listen_pid.is_null() {
        // SAFETY: the raw syscall: our own pid (glibc's wrapper would be
        // right too, but this leaves no doubt about a cache of the parent's).
        let pid = unsafe { libc::syscall(libc::SYS_getpid) };
        write_decimal(args.listen_pid, pid as u64);
    }

    // Nothing but stdio, the sockets and the notify fd crosses into the new
    // program.
    if notify_target >= 3 {
        close_from(listen_end as u32, notify_target as u32);
        close_from(notify_target as u32 + 1, u32::MAX);
    } else {
        close_from(listen_end as u32, u32::MAX);
    }

    // The mask is the child's own: without CLONE_FS it has its own fs
    // attributes (cwd, root, umask), so this leaves the parent's alone.
    // umask cannot fail.
    if args.umask >= 0 {
        // SAFETY: plain syscall with an integer argument, on ourselves.
        unsafe { libc::umask(args.umask as libc::mode_t) };
    }

    if !args.cwd.is_null() {
        // SAFETY: cwd is a NUL-terminated string owned by the parent.
        if unsafe { libc::chdir(args.cwd) } != 0 {
            child_fail(args, Stage::Chdir);
        }
    }

    // Credentials, in libuv's order: after chdir (a directory only this
    // process may enter still works), supplementary groups first, then the
    // gid, then the uid (after which neither could be changed). Raw
    // syscalls: glibc's set*id wrappers signal every thread of the process
    // to change them all, and the threads of this shared address space are
    // the parent's. The kernel changes only this task's credentials.
    if args.set_uid || args.set_gid {
        // Drops root's supplementary groups. As libuv does, a failure
        // (EPERM without CAP_SETGID) is ignored: it leaves the groups this
        // process already has, and the setgid/setuid below still decide.
        // SAFETY: setgroups with size 0 reads no list.
        unsafe { libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()) };
    }
    if args.set_gid {
        // SAFETY: plain syscall with an integer argument.
        if unsafe { libc::syscall(libc::SYS_setgid, args.gid) } != 0 {
            child_fail(args, Stage::Setgid);
        }
    }
    if args.set_uid {
        // SAFETY: plain syscall with an integer argument.
        if unsafe { libc::syscall(libc::SYS_setuid, args.uid) } != 0 {
            child_fail(args, Stage::Setuid);
        }
    }

    // The death signal comes after any credential change: the kernel clears
    // it whenever the effective uid or gid changes (and again at the exec of
    // a set-user-ID or set-group-ID program, which nothing here can prevent).
    if args.death_signal != 0 {
        // SAFETY: plain prctl with integer arguments.
        if unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                args.death_signal as libc::c_ulong,
                0,
                0,
                0,
            )
        } != 0
        {
            child_fail(args, Stage::Prctl);
        }
        // The parent may have died before prctl took effect; then we were
        // already reparented and the death signal will never come.
        // SAFETY: plain syscall.
        if unsafe { libc::getppid() } != args.parent_pid {
            // SAFETY: _exit never returns.
            unsafe { libc::_exit(127) };
        }
    }

    // SAFETY: an empty sigset written by sigemptyset.
    let mut empty: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: initialises the set we own.
    unsafe { libc::sigemptyset(&mut empty) };
    // SAFETY: installs the empty mask on this (child) thread only.
    unsafe { libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) };

    // SAFETY: path, argv and envp are NUL-terminated arrays of NUL-terminated
    // strings owned by the parent and alive until clone returns.
    unsafe { libc::execve(args.path, args.argv, args.envp) };
    child_fail(args, Stage::Execve)
}

/// Writes `n` in decimal and a NUL at `out`. Child side: no allocation, at
/// most 21 bytes written.
fn write_decimal(out: *mut u8, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        // SAFETY: the caller's buffer has room for 20 digits and a NUL.
        unsafe { *out.add(i) = digits[len - 1 - i] };
    }
    // SAFETY: as above; len <= 20.
    unsafe { *out.add(len) = 0 };
}

/// `cgroup.procs` of the cgroup directory `dir`, for the pre-exec child to
/// write itself into.
fn open_procs(dir: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: openat with a NUL-terminated name relative to a directory fd
    // the caller keeps open.
    let fd = unsafe {
        libc::openat(
            dir,
            c"cgroup.procs".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just gave us this fd.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `close_range`'s flag: mark close-on-exec instead of closing.
const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;

/// Closes fds `first..last` (`last` excluded, `u32::MAX` meaning all) for the
/// new program. Child side: raw calls only.
fn close_from(first: u32, last: u32) {
    if first >= last {
        return;
    }
    // Marked close-on-exec rather than closed (Linux 5.11): `execve` closes
    // them after it has released the parent from its vfork wait, so the
    // spawn call does not wait for that work.
    // SAFETY: close_range takes plain integers and only touches our own fd
    // table (no CLONE_FILES, so the parent's fds are unaffected).
    if unsafe { libc::syscall(libc::SYS_close_range, first, last - 1, CLOSE_RANGE_CLOEXEC) } == 0 {
        return;
    }
    // SAFETY: as above; closes them (5.9 and 5.10 know no CLOEXEC flag).
    if unsafe { libc::syscall(libc::SYS_close_range, first, last - 1, 0u32) } != 0 {
        // No close_range (before 5.9): one close per possible fd, up to the
        // limit, asked here rather than by the parent on every spawn.
        let max_fd = max_fd();
        for fd in first as c_int..(last.min(max_fd as u32) as c_int) {
            // SAFETY: closing fds in our private table.
            unsafe { libc::close(fd) };
        }
    }
}

fn null_terminated(strings: &[CString]) -> Vec<*const c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

pub struct RawChild {
    pub pid: Pid,
    pub pidfd: Option<OwnedFd>,
}

/// The fd limit (at most 65536), for `close_from`'s fallback. Child side:
/// one raw call (glibc's getrlimit is the prlimit64 syscall) on the stack.
fn max_fd() -> c_int {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return 1024;
    }
    rl.rlim_cur.min(65536) as c_int
}

/// Undoes a side effect of a credential change in a `CLONE_VM` child on
/// *this* process: the kernel's `commit_creds` resets the dumpable flag of
/// the changing task's memory map (to `fs.suid_dumpable`, 0 by default), and
/// until the child execs that map is ours. Left alone, this process would
/// lose core dumps and its `/proc/<pid>` entries would turn root-owned (no
/// longer readable by its own non-root user) after spawning a child with
/// `uid`/`gid`. The flag is read before the clone and put back after it.
///
/// One credential spawn at a time: two interleaved ones could read each
/// other's cleared flag and leave it cleared.
struct KeepDumpable {
    was: c_int,
    _one_at_a_time: std::sync::MutexGuard<'static, ()>,
}

impl KeepDumpable {
    fn new() -> KeepDumpable {
        static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: PR_GET_DUMPABLE takes no pointer and only reads our flag.
        let was = unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) };
        KeepDumpable {
            was,
            _one_at_a_time: guard,
        }
    }
}

impl Drop for KeepDumpable {
    fn drop(&mut self) {
        // Only 0 and 1 can be set (2, "root only", is the kernel's to give).
        if self.was != 0 && self.was != 1 {
            return;
        }
        // SAFETY: as in `new`.
        let now = unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) };
        if now != self.was {
            // SAFETY: PR_SET_DUMPABLE with 0 or 1 changes only our own flag.
            unsafe { libc::prctl(libc::PR_SET_DUMPABLE, self.was as libc::c_ulong, 0, 0, 0) };
        }
    }
}

/// Set once clone3 or its CLONE_INTO_CGROUP was refused: not asked again.
static NO_CLONE3: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `PROCWARD_NO_CLONE3=1` (read once) forces the `cgroup.procs` path, so
/// the tests can prove it where clone3 works.
fn use_clone3() -> bool {
    static FORCED_OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    super::clone3::supported()
        && !NO_CLONE3.load(Ordering::Relaxed)
        && !*FORCED_OFF.get_or_init(|| std::env::var_os("PROCWARD_NO_CLONE3").is_some())
}

/// Runs on the spawner thread (signals blocked). `stack` is that thread's
/// reusable child stack.
pub fn clone_exec(
    prep: &Prepared,
    want_pidfd: bool,
    stack: &mut [u8],
) -> Result<RawChild, SpawnError> {
    let argv = null_terminated(&prep.argv);
    let mut envp = null_terminated(&prep.envp);
    // `LISTEN_PID=` and room for the child to write its pid after it.
    let mut listen_pid_entry = [0u8; 32];
    listen_pid_entry[..11].copy_from_slice(b"LISTEN_PID=");
    let listen_fds: Vec<c_int> = prep.listen.iter().map(|fd| fd.as_raw_fd()).collect();
    let listen_pid = if listen_fds.is_empty() {
        std::ptr::null_mut()
    } else {
        let entry = listen_pid_entry.as_mut_ptr();
        envp.insert(envp.len() - 1, entry.cast_const().cast());
        // SAFETY: 11 is within the 32-byte entry.
        unsafe { entry.add(11) }
    };
    let mut args = ChildArgs {
        path: prep.path.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: prep.cwd.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
        stdio: [0, 1, 2].map(|i| prep.child_stdio[i].raw()),
        process_group: prep.process_group,
        new_session: prep.new_session,
        ignore_stop_signals: prep.ignore_stop_signals,
        take_terminal: prep.take_terminal,
        cgroup_procs: -1,
        death_signal: prep.death_signal.map_or(0, |s| s.as_raw()),
        notify: prep
            .notify
            .as_ref()
            .map_or([-1, -1], |(fd, target)| [fd.as_raw_fd(), *target]),
        listen: listen_fds.as_ptr(),
        listen_count: listen_fds.len() as c_int,
        listen_blocking: prep.listen_blocking,
        listen_pid,
        set_uid: prep.uid.is_some(),
        uid: prep.uid.unwrap_or(0),
        set_gid: prep.gid.is_some(),
        gid: prep.gid.unwrap_or(0),
        umask: prep.umask.map_or(-1, |m| (m & 0o777) as c_int),
        parent_pid: prep.parent_pid.as_raw(),
        err: AtomicI32::new(0),
        stage: AtomicI32::new(0),
    };
    let _dumpable = (prep.uid.is_some() || prep.gid.is_some()).then(KeepDumpable::new);
    // The stack grows down: hand clone the 16-byte aligned top.
    let top = (stack.as_mut_ptr() as usize + stack.len()) & !15;
    let mut pidfd: c_int = -1;
    let mut flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    if want_pidfd {
        flags |= libc::CLONE_PIDFD;
    }
    // Born in its cgroup where clone3 can do it; otherwise the child writes
    // itself into cgroup.procs before anything else (see child_main).
    let mut ret = -1;
    let mut portable = prep.cgroup.as_ref();
    if let Some(into) = prep.cgroup.as_ref().filter(|_| use_clone3()) {
        // SAFETY: as for clone below; the cgroup directory fd stays open
        // until this returns (the caller holds the cgroup).
        let res = unsafe {
            super::clone3::clone_into(
                child_main,
                &args as *const ChildArgs as *mut c_void,
                stack,
                into.dir,
                want_pidfd,
                &mut pidfd,
            )
        };
        match res {
            Ok(pid) => {
                ret = pid;
                portable = None;
            }
            Err(e) => match e.raw_os_error() {
                // Resource limits: the caller's retry (without a pidfd) or
                // error, as for clone.
                Some(libc::EMFILE | libc::ENFILE | libc::EAGAIN | libc::ENOMEM) => {
                    return Err(SpawnError::os(e, Stage::Clone));
                }
                // No clone3 (before 5.3, or refused by a seccomp profile)
                // or no CLONE_INTO_CGROUP (before 5.7): remembered. Anything
                // else (the cgroup itself) is told by the portable path below.
                errno => {
                    if matches!(
                        errno,
                        Some(libc::ENOSYS | libc::EPERM | libc::E2BIG | libc::EINVAL)
                    ) {
                        NO_CLONE3.store(true, Ordering::Relaxed);
                    }
                }
            },
        }
    }
    // Opened only for this path (clone3 needs none), and kept open until
    // the child has used it (clone returns after its exec or exit).
    let _procs = match portable {
        Some(into) => {
            let fd = open_procs(into.dir).map_err(|e| SpawnError::os(e, Stage::Cgroup))?;
            args.cgroup_procs = fd.as_raw_fd();
            Some(fd)
        }
        None => None,
    };
    if ret == -1 {
        crate::spawn_trace::mark(crate::spawn_trace::BEFORE_CLONE);
        // SAFETY: child_main only makes async-signal-safe calls on `args`,
        // which outlives the child's use of it (CLONE_VFORK suspends us
        // until exec or exit); the stack is ours and unused by anyone else
        // meanwhile; with CLONE_PIDFD the kernel writes the pidfd into
        // `pidfd`.
        ret = unsafe {
            libc::clone(
                child_main,
                top as *mut c_void,
                flags,
                &args as *const ChildArgs as *mut c_void,
                &mut pidfd as *mut c_int,
            )
        };
        crate::spawn_trace::mark(crate::spawn_trace::AFTER_CLONE);
        if ret == -1 {
            return Err(SpawnError::os(io::Error::last_os_error(), Stage::Clone));
        }
    }
    let pid = Pid::from_raw(ret)
        .map_err(|_| SpawnError::os(io::Error::from_raw_os_error(libc::EINVAL), Stage::Clone))?;
    let pidfd = if want_pidfd && pidfd >= 0 {
        // SAFETY: the kernel created this fd for us with CLONE_PIDFD.
        Some(unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) })
    } else {
        None
    };
    let err = args.err.load(Ordering::Relaxed);
    if err != 0 {
        // The child exited with 127 without exec'ing: reap it now, by pid
        // (ours, unreaped, so it cannot be anyone else), and report why.
        let _ = crate::sys::waitid_pid(pid, libc::WEXITED);
        let stage = Stage::from_i32(args.stage.load(Ordering::Relaxed));
        return Err(SpawnError::os(io::Error::from_raw_os_error(err), stage));
    }
    Ok(RawChild { pid, pidfd })
}
