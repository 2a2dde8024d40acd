//! The notify protocol on Linux: unix datagram sockets, `SO_PASSCRED`, and
//! the sender's membership read from /proc the moment a message is read.
//!
//! Judging a sender by its pid has one race, the one systemd itself has: a
//! descendant that sends and is reaped before its message is read can no
//! longer be looked at, and is refused. The reader wakes on the socket's
//! readiness (no polling), so the window is the time between the sender's
//! `sendmsg` and our `recvmsg` — microseconds while our runtime thread is
//! free. The child itself is always recognised (its pid is the one we hold,
//! unreaped), and a zombie still shows its parent. A sender in another pid
//! namespace that the kernel cannot name to us arrives as pid 0: refused.
//! The credentials are the kernel's, except that a sender with
//! `CAP_SYS_ADMIN` (root) may attach any pid: it can speak for any child.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::Notify;

use super::{Address, Message, Peers, Sent, Verdict, Wake, MESSAGE_MAX, QUEUE_MAX};
use crate::cgroup::parse;
use crate::pid::Pid;
use crate::proc_info;
use crate::sys::{self, UnixAddr};

/// Linux has the protocol (see `other` for everywhere else).
pub const SUPPORTED: bool = true;

/// `addr` as the kernel takes it.
fn sockaddr(addr: &Address) -> io::Result<UnixAddr> {
    match addr {
        Address::Path(p) => UnixAddr::new(p.as_os_str().as_bytes(), false),
        Address::Abstract(name) => UnixAddr::new(name, true),
    }
}

/// A socket to the manager that started us, kept open for the life of the
/// process. Unconnected: each message is addressed anew, so a manager that
/// re-created its socket (systemd's re-exec) is still reached.
pub struct Sender {
    fd: OwnedFd,
    addr: UnixAddr,
}

impl Sender {
    pub fn open(addr: &Address) -> io::Result<Sender> {
        Ok(Sender {
            addr: sockaddr(addr)?,
            fd: sys::unix_dgram_socket()?,
        })
    }

    /// Sends `text` as one datagram without ever waiting: a full queue at
    /// the manager is `Sent::Full` (dropped). Other failures (no one bound
    /// there: ECONNREFUSED, ENOENT) are errors.
    pub fn send(&self, text: &[u8]) -> io::Result<Sent> {
        match sys::send_nowait(self.fd.as_fd(), text, &self.addr) {
            Ok(_) => Ok(Sent::Sent),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Sent::Full),
            Err(e) => Err(e),
        }
    }
}

/// 16 random bytes from the kernel, as hex: an abstract socket's name that
/// no one guesses (not a defence on its own: senders are judged anyway).
fn random_name() -> io::Result<String> {
    let mut buf = [0u8; 16];
    sys::getrandom_fill(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

fn bind(fd: BorrowedFd<'_>, addr: &Address) -> io::Result<()> {
    sys::bind_unix(fd, &sockaddr(addr)?)
}

/// Shared by the receiver's owner (the JS thread) and its reading task.
struct Shared {
    state: Mutex<State>,
    /// The owner drained the queue: there is room to read again.
    room: Notify,
    /// The owner closed the receiver: the task ends (and closes the socket).
    stop: Notify,
}

struct State {
    /// The socket until the task takes it.
    fd: Option<OwnedFd>,
    queue: VecDeque<Message>,
    wake: Option<Wake>,
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A notify socket of our own (see the module docs of `notify`).
pub struct Receiver {
    address: String,
    /// The socket file we made (path form), removed on close if still ours.
    file: Option<(PathBuf, u64, u64)>,
    shared: Arc<Shared>,
}

impl Receiver {
    /// Binds a new socket with `SO_PASSCRED`: at `path` (a socket file; it
    /// must not exist), or, without one, in the abstract namespace under a
    /// random name. Nothing is read until [`Receiver::start`].
    pub fn bind(path: Option<&Path>) -> io::Result<Receiver> {
        // Close-on-exec: a child we spawn never holds its own notify
        // socket's receiving end.
        let fd = sys::unix_dgram_socket()?;
        // Before the address exists: no message can arrive without
        // credentials.
        sys::set_passcred(fd.as_fd())?;
        let (address, file) = match path {
            Some(p) => {
                let addr = Address::parse(p.as_os_str().as_bytes())
                    .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
                bind(fd.as_fd(), &addr)?;
                let meta = std::fs::symlink_metadata(p)?;
                (
                    p.display().to_string(),
                    Some((p.to_path_buf(), meta.dev(), meta.ino())),
                )
            }
            None => {
                let mut tries = 0;
                loop {
                    let name = format!("procward/notify/{}", random_name()?);
                    match bind(fd.as_fd(), &Address::Abstract(name.clone().into_bytes())) {
                        Ok(()) => break (format!("@{name}"), None),
                        Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) && tries < 3 => {
                            tries += 1
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        };
        Ok(Receiver {
            address,
            file,
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    fd: Some(fd),
                    queue: VecDeque::new(),
                    wake: None,
                    closed: false,
                }),
                room: Notify::new(),
                stop: Notify::new(),
            }),
        })
    }

    /// The `NOTIFY_SOCKET` value that names this socket.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Starts reading on procward's runtime: each message's sender is judged
    /// against `peers` (None: taken as is), and `wake` is called whenever
    /// the queue of read messages stops being empty. Once only; EBADF once
    /// closed, EALREADY when started before.
    pub fn start(&self, peers: Option<Peers>, wake: Wake) -> io::Result<()> {
        let rt = crate::runtime::handle()?;
        let fd = {
            let mut st = self.shared.lock();
            if st.closed {
                return Err(io::Error::from_raw_os_error(libc::EBADF));
            }
            let fd = st
                .fd
                .take()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EALREADY))?;
            st.wake = Some(wake);
            fd
        };
        let shared = self.shared.clone();
        rt.spawn(serve(shared, fd, peers));
        Ok(())
    }

    /// The messages read so far (and room for the reader to read on).
    pub fn drain(&self) -> Vec<Message> {
        let out: Vec<Message> = self.shared.lock().queue.drain(..).collect();
        if !out.is_empty() {
            self.shared.room.notify_one();
        }
        out
    }

    /// Stops reading and closes the socket (the reading task closes it on
    /// its thread, at once); messages not drained are dropped, and `wake` is
    /// never called again. A socket file of ours is removed.
    pub fn close(&self) {
        let fd = {
            let mut st = self.shared.lock();
            if st.closed {
                return;
            }
            st.closed = true;
            st.queue.clear();
            st.wake = None;
            st.fd.take()
        };
        drop(fd);
        self.shared.stop.notify_one();
        if let Some((path, dev, ino)) = &self.file {
            // Only the file we bound: not one that replaced it since.
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.dev() == *dev && m.ino() == *ino) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.close();
    }
}

/// The reading task: waits for the socket to turn readable (or for room in
/// the queue, or for the close), reads every datagram waiting, judges each
/// sender, and wakes the owner.
async fn serve(shared: Arc<Shared>, fd: OwnedFd, peers: Option<Peers>) {
    // SAFETY: the OwnedFd moves into the AsyncFd and stays open (same fd)
    // until the AsyncFd is dropped, which closes it.
    let afd = match unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) } {
        Ok(afd) => afd,
        // The runtime's epoll refused it (ENOMEM, say): nothing will be
        // read; the ready check's timeout decides, as for a silent child.
        Err(_) => return,
    };
    let mut failures = 0;
    loop {
        // Bounded: with the queue full, read nothing until the owner drains.
        loop {
            {
                let st = shared.lock();
                if st.closed {
                    return;
                }
                if st.queue.len() < QUEUE_MAX {
                    break;
                }
            }
            tokio::select! {
                _ = shared.room.notified() => {}
                _ = shared.stop.notified() => return,
            }
        }
        let mut guard = tokio::select! {
            g = afd.readable() => match g {
                Ok(g) => g,
                Err(_) => return,
            },
            _ = shared.stop.notified() => return,
        };
        match guard.try_io(|inner| recv_one(inner.get_ref().as_fd())) {
            Ok(Ok(raw)) => {
                failures = 0;
                let verdict = if raw.oversized {
                    Verdict::Refused
                } else {
                    judge(peers.as_ref(), raw.pid)
                };
                let msg = Message {
                    pid: raw.pid,
                    uid: raw.uid,
                    gid: raw.gid,
                    text: if raw.oversized {
                        String::new()
                    } else {
                        String::from_utf8_lossy(&raw.data).into_owned()
                    },
                    verdict,
                    oversized: raw.oversized,
                    had_fds: raw.had_fds,
                };
                let mut st = shared.lock();
                if st.closed {
                    return;
                }
                let was_empty = st.queue.is_empty();
                st.queue.push_back(msg);
                if was_empty {
                    if let Some(wake) = &st.wake {
                        wake();
                    }
                }
            }
            // A failed read that is not "nothing there" (ENOMEM): tried
            // again after the other tasks had their turn, but an error that
            // persists ends the reading rather than spin this thread (the
            // ready check's timeout then decides, as for a silent child).
            Ok(Err(_)) => {
                failures += 1;
                if failures > READ_FAILURES_MAX {
                    return;
                }
                tokio::task::yield_now().await
            }
            Err(_would_block) => {}
        }
    }
}

/// Failed reads in a row (not "nothing there") after which a receiver stops.
const READ_FAILURES_MAX: u32 = 1000;

/// One datagram as read.
struct Raw {
    pid: i32,
    uid: u32,
    gid: u32,
    data: Vec<u8>,
    oversized: bool,
    had_fds: bool,
}

/// Reads one datagram without waiting (WouldBlock when none is there).
/// Fds passed with it are closed unread; only that they came is kept.
fn recv_one(fd: BorrowedFd<'_>) -> io::Result<Raw> {
    let mut data = vec![0u8; MESSAGE_MAX];
    let got = sys::recv_with_cred(fd, &mut data)?;
    // No credentials (cannot happen with SO_PASSCRED on): nobody's, refused.
    let cred = got.cred.unwrap_or(sys::Cred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    });
    let oversized = got.len > MESSAGE_MAX;
    if oversized {
        data = Vec::new();
    } else {
        data.truncate(got.len);
    }
    Ok(Raw {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
        data,
        oversized,
        had_fds: got.had_fds,
    })
}

/// Whether `pid` may speak for the child (see [`Peers`]).
fn judge(peers: Option<&Peers>, pid: i32) -> Verdict {
    let Some(peers) = peers else {
        return Verdict::Unchecked;
    };
    if pid == peers.child.as_raw() {
        return Verdict::Child;
    }
    let Ok(sender) = Pid::from_raw(pid) else {
        return Verdict::Refused;
    };
    // Its parent chain as it is now: a process the child started (or one
    // of theirs), wherever its group. Joining the child's process group is
    // not enough: any process of our session may (setpgid).
    if descends_from(sender, peers.child) {
        return Verdict::Descendant;
    }
    if let Some(cg) = &peers.cgroup {
        if cgroup_of(sender).is_some_and(|p| p.starts_with(cg)) {
            return Verdict::Cgroup;
        }
    }
    Verdict::Refused
}

/// Ancestors looked at before giving up (a chain longer than this is no
/// daemon's tree; it bounds the reads a sender can make us do).
const ANCESTRY_MAX: usize = 4096;

/// Whether `child` is among `pid`'s ancestors, read from /proc now. Each
/// step must have started no later than the process below it: a parent
/// that died while we read, its pid reused by a newer process, breaks the
/// chain instead of lending it that process's ancestry. A zombie still
/// shows its parent: a descendant that sent and exited, not yet reaped, is
/// recognised. An orphan re-parented away from the child's tree is not.
fn descends_from(pid: Pid, child: Pid) -> bool {
    let Ok(Some(mut st)) = proc_info::stat_of(pid) else {
        return false;
    };
    for _ in 0..ANCESTRY_MAX {
        if st.ppid == child.as_raw() {
            return true;
        }
        // 1 (init's) and 0 (outside our pid namespace) end every chain.
        let Ok(parent) = Pid::from_raw(st.ppid) else {
            return false;
        };
        if parent.as_raw() <= 1 {
            return false;
        }
        match proc_info::stat_of(parent) {
            Ok(Some(p)) if p.start_time <= st.start_time => st = p,
            _ => return false,
        }
    }
    false
}

/// `pid`'s cgroup v2 as a file-system path (as we see it: our cgroup
/// namespace and mounts).
fn cgroup_of(pid: Pid) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{}/cgroup", pid.as_raw())).ok()?;
    let rel = parse::own_v2_path(&text)?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    parse::fs_path(&parse::v2_mounts(&mountinfo), rel).map(|(p, _)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_raw(to: &Receiver, text: &[u8]) {
        let addr = Address::parse(to.address().as_bytes()).unwrap();
        assert_eq!(Sender::open(&addr).unwrap().send(text).unwrap(), Sent::Sent);
    }

    #[test]
    fn reads_with_our_credentials_and_judges_us() {
        let rx = Receiver::bind(None).unwrap();
        assert!(rx.address().starts_with("@procward/notify/"));
        let fd = rx.shared.lock().fd.take().unwrap();
        send_raw(&rx, b"READY=1\nSTATUS=hello");
        let raw = recv_one(fd.as_fd()).unwrap();
        assert_eq!(raw.pid, std::process::id() as i32);
        assert_eq!(raw.data, b"READY=1\nSTATUS=hello");
        assert!(!raw.oversized && !raw.had_fds);
        // Nothing more: WouldBlock, not a wait.
        let err = recv_one(fd.as_fd()).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        let me = Pid::current();
        let child = Peers {
            child: me,
            cgroup: None,
        };
        assert_eq!(judge(Some(&child), me.as_raw()), Verdict::Child);
        assert_eq!(judge(None, me.as_raw()), Verdict::Unchecked);
        // Pid 0 is nobody's; we descend from our parent, not it from us.
        assert_eq!(judge(Some(&child), 0), Verdict::Refused);
        let parent = Pid::from_raw(std::os::unix::process::parent_id() as i32).unwrap();
        if parent.as_raw() > 1 {
            let ours = Peers {
                child: parent,
                cgroup: None,
            };
            assert_eq!(judge(Some(&ours), me.as_raw()), Verdict::Descendant);
            assert_eq!(judge(Some(&child), parent.as_raw()), Verdict::Refused);
        }
    }

    #[test]
    fn a_descendant_is_judged_by_its_parent_chain() {
        // sh → sleep: the sleep descends from the sh, and from us.
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(sh.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let sleep = Pid::from_raw(line.trim().parse().unwrap()).unwrap();
        let sh_pid = Pid::from_raw(sh.id() as i32).unwrap();
        let of = |child: Pid| Peers {
            child,
            cgroup: None,
        };
        assert_eq!(
            judge(Some(&of(sh_pid)), sleep.as_raw()),
            Verdict::Descendant
        );
        assert_eq!(
            judge(Some(&of(Pid::current())), sleep.as_raw()),
            Verdict::Descendant
        );
        assert_eq!(judge(Some(&of(sleep)), sh_pid.as_raw()), Verdict::Refused);
        // SAFETY: kill(2) takes no pointers; the pid is still the sleep's:
        // sh has not reaped it (it waits for it).
        unsafe {
            libc::kill(sleep.as_raw(), libc::SIGKILL);
        }
        sh.wait().unwrap();
    }

    #[test]
    fn oversized_is_refused_whole() {
        let rx = Receiver::bind(None).unwrap();
        let fd = rx.shared.lock().fd.take().unwrap();
        send_raw(&rx, &vec![b'x'; MESSAGE_MAX + 1]);
        let raw = recv_one(fd.as_fd()).unwrap();
        assert!(raw.oversized);
        assert!(raw.data.is_empty());
    }

    #[test]
    fn full_queue_is_dropped_not_waited_for() {
        let rx = Receiver::bind(None).unwrap();
        let addr = Address::parse(rx.address().as_bytes()).unwrap();
        let tx = Sender::open(&addr).unwrap();
        let mut full = false;
        for _ in 0..100_000 {
            if tx.send(b"STATUS=spam").unwrap() == Sent::Full {
                full = true;
                break;
            }
        }
        assert!(full);
    }

    #[test]
    fn nobody_bound_is_an_error() {
        let tx = Sender::open(&Address::Abstract(b"procward/notify/nobody-here".to_vec())).unwrap();
        let err = tx.send(b"READY=1").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ECONNREFUSED));
    }

    #[test]
    fn path_socket_is_removed_on_close() {
        let dir = std::env::temp_dir().join(format!("procward-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let rx = Receiver::bind(Some(&path)).unwrap();
        assert_eq!(rx.address(), path.display().to_string());
        send_raw(&rx, b"READY=1");
        rx.close();
        assert!(!path.exists());
        std::fs::remove_dir(&dir).unwrap();
    }
}
