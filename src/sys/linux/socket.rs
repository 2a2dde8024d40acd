//! Unix datagram sockets that carry their sender's credentials
//! (`SO_PASSCRED`): the calls of the notify protocol (`notify/linux.rs`
//! keeps the protocol). Linux: `SOCK_CLOEXEC`, `SCM_CREDENTIALS`,
//! `MSG_CMSG_CLOEXEC` and `getrandom` are its own.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use super::super::unix::cvt;

/// A new unix datagram socket, close-on-exec: a child we spawn never holds
/// it.
pub fn unix_dgram_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with constant arguments; returns a new fd or -1.
    let fd = cvt(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: the kernel just returned this fd to us, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// An `AF_UNIX` address as the kernel takes it: a `sockaddr_un` and its
/// length.
#[derive(Clone, Copy)]
pub struct UnixAddr {
    sa: libc::sockaddr_un,
    len: libc::socklen_t,
}

impl UnixAddr {
    /// A socket file's path, or (`abstract_name`) a name in the abstract
    /// namespace, whose length counts exactly its bytes: the kernel compares
    /// all of them. ENAMETOOLONG when it does not fit.
    pub fn new(bytes: &[u8], abstract_name: bool) -> io::Result<UnixAddr> {
        // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
        let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let lead = usize::from(abstract_name);
        if lead + bytes.len() >= sa.sun_path.len() {
            return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        }
        for (dst, src) in sa.sun_path[lead..].iter_mut().zip(bytes) {
            *dst = *src as libc::c_char;
        }
        let base = std::mem::offset_of!(libc::sockaddr_un, sun_path);
        let len = if abstract_name {
            base + 1 + bytes.len()
        } else {
            base + bytes.len() + 1
        };
        Ok(UnixAddr {
            sa,
            len: len as libc::socklen_t,
        })
    }
}

/// `bind(2)` to `addr`.
pub fn bind_unix(fd: BorrowedFd<'_>, addr: &UnixAddr) -> io::Result<()> {
    // SAFETY: a valid fd and an address of the given length.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr.sa as *const libc::sockaddr_un).cast(),
            addr.len,
        )
    })
    .map(drop)
}

/// `SO_PASSCRED` on: every message read carries its sender's credentials.
pub fn set_passcred(fd: BorrowedFd<'_>) -> io::Result<()> {
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

/// `sendto(2)` of one datagram to `to` without ever waiting
/// (`MSG_DONTWAIT`; `MSG_NOSIGNAL` keeps SIGPIPE away), retried on EINTR.
/// WouldBlock: the receiver's queue is full.
pub fn send_nowait(fd: BorrowedFd<'_>, buf: &[u8], to: &UnixAddr) -> io::Result<usize> {
    loop {
        // SAFETY: a valid fd, a buffer we own of the given length, and an
        // address of the given length.
        let ret = unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                (&to.sa as *const libc::sockaddr_un).cast(),
                to.len,
            )
        };
        match cvt(ret) {
            Ok(n) => return Ok(n as usize),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Fills `buf` with random bytes from the kernel (`getrandom(2)`).
pub fn getrandom_fill(buf: &mut [u8]) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        // The system call itself, not glibc's getrandom() wrapper: that is
        // glibc 2.25's, and the binary must load on glibc 2.17.
        // SAFETY: writes at most the remaining length into our buffer.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_getrandom,
                buf[got..].as_mut_ptr(),
                buf.len() - got,
                0,
            )
        };
        match cvt(ret) {
            Ok(n) => got += n as usize,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A sender's credentials as the kernel names them to us.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cred {
    /// 0 when the sender is in a pid namespace the kernel cannot name to us.
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

/// One datagram as [`recv_with_cred`] read it.
#[derive(Debug)]
pub struct Datagram {
    /// Its real length, which may exceed the buffer (`MSG_TRUNC`): the
    /// buffer then holds only its start.
    pub len: usize,
    /// The sender's, when the message carried them (`SO_PASSCRED`).
    pub cred: Option<Cred>,
    /// Whether fds came with it (`SCM_RIGHTS`); every one received is
    /// closed here.
    pub had_fds: bool,
}

/// Room for the credentials and for the most fds one message can carry
/// (`SCM_MAX_FD`), so that every fd passed is received and closed here.
/// Those that would not fit are not installed at all (the kernel drops them
/// on `MSG_CTRUNC`), so none can leak either way.
const CONTROL_MAX: usize = 64 + 253 * size_of::<libc::c_int>() + 64;

/// `recvmsg(2)` of one datagram into `buf` without waiting (WouldBlock when
/// none is there), retried on EINTR, with its sender's credentials. Fds
/// passed with it arrive close-on-exec (`MSG_CMSG_CLOEXEC`, never inherited
/// meanwhile) and are closed before this returns.
pub fn recv_with_cred(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Datagram> {
    // u64 storage: cmsghdr's alignment.
    let mut control = [0u64; CONTROL_MAX / 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain data; all zeroes is a valid, empty value (and
    // musl's has padding fields that must be zero).
    let mut msg: libc::msghdr = unsafe { MaybeUninit::zeroed().assume_init() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // MSG_TRUNC: the datagram's real length, to tell an oversized one.
    let flags = libc::MSG_DONTWAIT | libc::MSG_TRUNC | libc::MSG_CMSG_CLOEXEC;
    let n = loop {
        // SAFETY: a valid fd, and a msghdr whose buffers we own and sized.
        match cvt(unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, flags) }) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => break r? as usize,
        }
    };
    let mut out = Datagram {
        len: n,
        cred: None,
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
                out.cred = Some(Cred {
                    pid: cred.pid,
                    uid: cred.uid,
                    gid: cred.gid,
                });
            }
            (libc::SOL_SOCKET, libc::SCM_RIGHTS) => {
                out.had_fds = true;
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
    Ok(out)
}
