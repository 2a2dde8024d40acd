//! Creating the child on the right thread. `common` has prepared the spawn
//! on the calling thread; this file picks the thread that creates the
//! child and retries a refused `CLONE_PIDFD`, and `linux` (`clone`) or
//! `macos` (`posix_spawn`) creates it. The cut is std's: its
//! `sys/process/unix/common.rs` holds the command and its stdio, its
//! `unix.rs` makes the process.
//!
//! Which thread creates the child: `PR_SET_PDEATHSIG` fires when the
//! *thread* that created the child exits, not the process (Go's `Pdeathsig`
//! users learned this the hard way). The JS main thread lives as long as the
//! process, so it creates its children itself, with every signal blocked
//! around the clone. A child created from a Node worker thread would be
//! killed when that worker ends, so workers hand the clone to a spawner
//! thread that lives as long as the process: for every child the death
//! signal means exactly "the supervisor process is gone". The spawner
//! thread only runs `clone`: whatever can fail for the caller's reasons
//! failed in `prepare`, before any thread was asked.

#[cfg(target_os = "linux")]
mod clone3;
mod common;
#[cfg(target_os = "linux")]
mod linux;
mod listen;
mod stage;
mod stdio;
#[cfg(target_os = "linux")]
use linux as imp;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as imp;
#[cfg(target_os = "macos")]
use macos::on_main_thread;

pub use common::{pipe_into_raw, IntoCgroup, Pipe};

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;

use super::{Command, SpawnError};
use crate::pid::Pid;
use common::{prepare, Prepared};
use stage::Stage;

/// A started child. `pidfd` is present when the exit watch can use one.
pub struct Child {
    pub pid: Pid,
    pub pidfd: Option<OwnedFd>,
    /// The parent's ends of `'pipe'` stdio, by fd number 0..3.
    pub pipes: [Option<OwnedFd>; 3],
    /// The read end of the `notify_fd` pipe.
    pub notify: Option<OwnedFd>,
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
    use super::common::tests::command;
    use super::*;
    use crate::pid::Signal;
    use crate::spawn::At;

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

    #[cfg(target_os = "linux")]
    #[test]
    fn listening_sockets_are_fds_3_on_with_the_childs_own_listen_pid() {
        use std::os::fd::AsRawFd;
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        // A non-blocking description (as a Node daemon leaves it): the child
        // clears the flag when asked to.
        for l in [&a, &b] {
            l.set_nonblocking(true).unwrap();
        }
        let link = |pid: i32, fd: i32| {
            std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        };
        let me = std::process::id() as i32;
        let cmd = Command {
            env: crate::spawn::Environment::Set(
                vec![
                    ("PATH".into(), "/usr/bin:/bin".into()),
                    ("LISTEN_PID".into(), "999".into()),
                    ("LISTEN_FDNAMES".into(), "stale".into()),
                ]
                .into(),
            ),
            notify_fd: Some(9),
            listen: Some(crate::spawn::Listen {
                fds: vec![a.as_raw_fd(), b.as_raw_fd()],
                names: vec!["web".into(), "admin".into()],
                blocking: true,
            }),
            ..command("/bin/sh", vec!["-c".into(), "exec sleep 10".into()])
        };
        let child = spawn(&cmd, false).unwrap();
        let pid = child.pid.as_raw();
        let dir = format!("/proc/{pid}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::fs::read_to_string(format!("{dir}/comm")).unwrap() != "sleep\n"
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let environ = std::fs::read(format!("{dir}/environ")).unwrap();
        let vars: Vec<String> = environ
            .split(|b| *b == 0)
            .filter(|v| v.starts_with(b"LISTEN_"))
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect();
        // `sleep` opens files of its own as it starts (its locale): the
        // lowest free number, 5 here, for a moment. A leaked fd would stay.
        let fds_now = || {
            let mut fds: Vec<i32> = std::fs::read_dir(format!("{dir}/fd"))
                .unwrap()
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect();
            fds.sort();
            fds
        };
        let mut fds = fds_now();
        while fds != [0, 1, 2, 3, 4, 9] && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
            fds = fds_now();
        }
        let links = [link(pid, 3), link(pid, 4)];
        let ours = [link(me, a.as_raw_fd()), link(me, b.as_raw_fd())];
        // SAFETY: F_GETFL reads the flags of a socket we own.
        let flags = unsafe { libc::fcntl(a.as_raw_fd(), libc::F_GETFL) };
        crate::sys::kill(child.pid, Signal::KILL).unwrap();
        crate::sys::waitid_pid(child.pid, libc::WEXITED).unwrap();
        let mut vars = vars;
        vars.sort();
        assert_eq!(
            vars,
            [
                "LISTEN_FDNAMES=web:admin".to_string(),
                "LISTEN_FDS=2".to_string(),
                format!("LISTEN_PID={pid}"),
            ]
        );
        assert_eq!(fds, [0, 1, 2, 3, 4, 9]);
        assert!(links[0].starts_with("socket:"), "{links:?}");
        assert_eq!(links, ours, "fd 3 and 4 are the sockets, in order");
        assert_eq!(flags & libc::O_NONBLOCK, 0, "handed over blocking");

        // The notify fd among the sockets' numbers is refused, before any
        // process exists.
        let clash = Command {
            notify_fd: Some(4),
            ..cmd.clone()
        };
        assert!(matches!(spawn(&clash, false), Err(SpawnError::Invalid(_))));
        // A closed fd is the spawn's error, not the child's.
        let gone = Command {
            listen: Some(crate::spawn::Listen {
                fds: vec![987_654],
                names: vec!["x".into()],
                blocking: false,
            }),
            notify_fd: None,
            ..cmd
        };
        match spawn(&gone, false) {
            Err(SpawnError::Os { err, syscall, .. }) => {
                assert_eq!(err.raw_os_error(), Some(libc::EBADF));
                assert_eq!(syscall, "dup");
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("spawned with a closed fd"),
        }
    }
}
