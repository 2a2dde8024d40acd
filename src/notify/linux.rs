//! The notify protocol on Linux: unix datagram sockets, `SO_PASSCRED`, and
//! the sender's membership read from /proc the moment a message is read.
//!
//! Judging a sender by its pid has one race, the one systemd itself has: a
//! group member that sends and is reaped before its message is read can no
//! longer be looked at, and is refused. The reader wakes on the socket's
//! readiness (no polling), so the window is the time between the sender's
//! `sendmsg` and our `recvmsg` — microseconds while our runtime thread is
//! free. The child itself is always recognised (its pid is the one we hold,
//! unreaped), and a zombie still shows its group. A sender in another pid
//! namespace that the kernel cannot name to us arrives as pid 0: refused.

use std::collections::VecDeque;
use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
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

/// Linux has the protocol (see `other` for everywhere else).
pub const SUPPORTED: bool = true;

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn cvt_size(ret: libc::ssize_t) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// A new unix datagram socket, close-on-exec: a child we spawn never holds
/// the manager's socket, nor its own notify socket's receiving end.
fn dgram_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with constant arguments; returns a new fd or -1.
    let fd = cvt(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: the kernel just returned this fd to us, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `addr` as a `sockaddr_un` and its length (an abstract name's length
/// counts exactly its bytes: the kernel compares all of them).
fn sockaddr(addr: &Address) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let (bytes, lead): (&[u8], usize) = match addr {
        Address::Path(p) => (p.as_os_str().as_bytes(), 0),
        Address::Abstract(name) => (name, 1),
    };
    if lead + bytes.len() >= sa.sun_path.len() {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    for (dst, src) in sa.sun_path[lead..].iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    let base = std::mem::offset_of!(libc::sockaddr_un, sun_path);
    let len = match addr {
        Address::Path(_) => base + bytes.len() + 1,
        Address::Abstract(_) => base + 1 + bytes.len(),
    };
    Ok((sa, len as libc::socklen_t))
}

/// A socket to the manager that started us, kept open for the life of the
/// process. Unconnected: each message is addressed anew, so a manager that
/// re-created its socket (systemd's re-exec) is still reached.
pub struct Sender {
    fd: OwnedFd,
    addr: libc::sockaddr_un,
    len: libc::socklen_t,
}

impl Sender {
    pub fn open(addr: &Address) -> io::Result<Sender> {
        let (addr, len) = sockaddr(addr)?;
        Ok(Sender {
            fd: dgram_socket()?,
            addr,
            len,
        })
    }

    /// Sends `text` as one datagram without ever waiting: a full queue at
    /// the manager is `Sent::Full` (dropped). Other failures (no one bound
    /// there: ECONNREFUSED, ENOENT) are errors.
    pub fn send(&self, text: &[u8]) -> io::Result<Sent> {
        loop {
            // SAFETY: a valid fd, a buffer we own of the given length, and an
            // address of the given length; MSG_NOSIGNAL keeps SIGPIPE away.
            let ret = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    text.as_ptr().cast(),
                    text.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                    (&self.addr as *const libc::sockaddr_un).cast(),
                    self.len,
                )
            };
            match cvt_size(ret) {
                Ok(_) => return Ok(Sent::Sent),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Sent::Full),
                Err(e) => return Err(e),
            }
        }
    }
}

/// 16 random bytes from the kernel, as hex: an abstract socket's name that
/// no one guesses (not a defence on its own: senders are judged anyway).
fn random_name() -> io::Result<String> {
    let mut buf = [0u8; 16];
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: writes at most the remaining length into our buffer.
        let ret = unsafe { libc::getrandom(buf[got..].as_mut_ptr().cast(), buf.len() - got, 0) };
        match cvt_size(ret) {
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

fn set_passcred(fd: BorrowedFd<'_>) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: a valid fd and an int option value of the stated size.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

fn bind(fd: BorrowedFd<'_>, addr: &Address) -> io::Result<()> {
    let (sa, len) = sockaddr(addr)?;
    // SAFETY: a valid fd and an address of the given length.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_un).cast(),
            len,
        )
    })
    .map(drop)
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
        let fd = dgram_socket()?;
        // Before the address exists: no message can arrive without
        // credentials.
        set_passcred(fd.as_fd())?;
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

/// Room for the credentials and for the most fds one message can carry
/// (`SCM_MAX_FD`), so that every fd passed is received and closed here.
/// Those that would not fit are not installed at all (the kernel drops them
/// on `MSG_CTRUNC`), so none can leak either way.
const CONTROL_MAX: usize = 64 + 253 * size_of::<libc::c_int>() + 64;

/// Reads one datagram without waiting (WouldBlock when none is there).
fn recv_one(fd: BorrowedFd<'_>) -> io::Result<Raw> {
    let mut data = vec![0u8; MESSAGE_MAX];
    // u64 storage: cmsghdr's alignment.
    let mut control = [0u64; CONTROL_MAX / 8];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data; all zeroes is a valid, empty value (and
    // musl's has padding fields that must be zero).
    let mut msg: libc::msghdr = unsafe { MaybeUninit::zeroed().assume_init() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // MSG_TRUNC: the datagram's real length, to refuse an oversized one.
    // MSG_CMSG_CLOEXEC: fds passed to us are never inherited meanwhile.
    let flags = libc::MSG_DONTWAIT | libc::MSG_TRUNC | libc::MSG_CMSG_CLOEXEC;
    let n = loop {
        // SAFETY: a valid fd, and a msghdr whose buffers we own and sized.
        match cvt_size(unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, flags) }) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => break r?,
        }
    };
    let mut raw = Raw {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
        data: Vec::new(),
        oversized: n > MESSAGE_MAX,
        had_fds: false,
    };
    // SAFETY: msg was filled in by recvmsg; FIRSTHDR reads its control fields.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !cmsg.is_null() {
        // SAFETY: a non-null header inside our control buffer.
        let hdr = unsafe { &*cmsg };
        // SAFETY: CMSG_DATA of a valid header points inside the buffer.
        let payload = unsafe { libc::CMSG_DATA(cmsg) };
        // SAFETY: CMSG_LEN(0) is arithmetic on a constant.
        let head = unsafe { libc::CMSG_LEN(0) } as usize;
        let len = (hdr.cmsg_len as usize).saturating_sub(head);
        match (hdr.cmsg_level, hdr.cmsg_type) {
            (libc::SOL_SOCKET, libc::SCM_CREDENTIALS) if len >= size_of::<libc::ucred>() => {
                // SAFETY: the kernel wrote a ucred there (it may be unaligned).
                let cred = unsafe { std::ptr::read_unaligned(payload as *const libc::ucred) };
                raw.pid = cred.pid;
                raw.uid = cred.uid;
                raw.gid = cred.gid;
            }
            (libc::SOL_SOCKET, libc::SCM_RIGHTS) => {
                raw.had_fds = true;
                for i in 0..len / size_of::<libc::c_int>() {
                    let at = payload.wrapping_add(i * size_of::<libc::c_int>());
                    // SAFETY: the i-th int of the fd array, inside the
                    // control data the kernel wrote (maybe unaligned).
                    let fd = unsafe { std::ptr::read_unaligned(at as *const libc::c_int) };
                    if fd >= 0 {
                        // SAFETY: the kernel installed this fd for us alone;
                        // owning it closes it.
                        drop(unsafe { OwnedFd::from_raw_fd(fd) });
                    }
                }
            }
            _ => {}
        }
        // SAFETY: NXTHDR walks within msg's control buffer, null at its end.
        cmsg = unsafe { libc::CMSG_NXTHDR(&msg, cmsg) };
    }
    if !raw.oversized {
        data.truncate(n);
        raw.data = data;
    }
    Ok(raw)
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
    if let Some(group) = peers.group {
        // A zombie still shows its group: a member that sent and exited,
        // not yet reaped, is recognised.
        if let Ok(Some(st)) = proc_info::stat_of(sender) {
            if st.pgid == group.as_raw() {
                return Verdict::Group;
            }
        }
    }
    if let Some(cg) = &peers.cgroup {
        if cgroup_of(sender).is_some_and(|p| p.starts_with(cg)) {
            return Verdict::Cgroup;
        }
    }
    Verdict::Refused
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
            group: None,
            cgroup: None,
        };
        assert_eq!(judge(Some(&child), me.as_raw()), Verdict::Child);
        assert_eq!(judge(None, me.as_raw()), Verdict::Unchecked);
        // Pid 1 is not in our group (we are not init's group here) and
        // neither is pid 0.
        let other = Peers {
            child: Pid::from_raw(1).unwrap(),
            group: Pid::from_raw(1).ok(),
            cgroup: None,
        };
        assert_eq!(judge(Some(&other), 0), Verdict::Refused);
        if proc_info::stat_of(me).unwrap().unwrap().pgid != 1 {
            assert_eq!(judge(Some(&other), me.as_raw()), Verdict::Refused);
        }
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
