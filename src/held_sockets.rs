//! Listening sockets a supervisor holds for its daemons (Unix): bound and
//! listening once, handed to each child (`spawn::Listen`), and kept open
//! across the child's restarts, so that a connection arriving while no
//! daemon runs waits in the kernel's backlog instead of being refused.
//!
//! Linux only: the children get them with a `LISTEN_PID` of their own,
//! which only the Linux spawn (code of ours between clone and exec) can
//! set; elsewhere the binding has no such functions and `listen` is refused.
//!
//! Every socket here is blocking and close-on-exec: the supervisor never
//! accepts on it (the flag on the open file description is the daemons'),
//! and no other child of this process (`child_process`, a second
//! supervisor) inherits it by accident.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where a held socket listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn new_socket(family: libc::c_int) -> io::Result<OwnedFd> {
    socket_with(family, 0)
}

fn socket_with(family: libc::c_int, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket takes plain integers and returns a new fd or -1.
    let fd =
        cvt(unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | flags, 0) })?;
    // SAFETY: the kernel just gave us this fd.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn listen(fd: &OwnedFd, backlog: i32) -> io::Result<()> {
    // SAFETY: listen on a socket we own.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) }).map(drop)
}

fn sockaddr_of(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is a valid (unspecified) address.
    let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large enough and aligned for every
            // sockaddr type; the zeroed bytes are a valid sockaddr_in.
            let sin = unsafe {
                &mut *(&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>()
            };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe {
                &mut *(&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_scope_id = a.scope_id();
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// Binds and listens on `ip:port` (port 0: any free one); returns the
/// socket and the port it got. `SO_REUSEADDR` as Node, Go and systemd set
/// it: a port whose last connections sit in TIME_WAIT can be bound again at
/// once, a port someone listens on still cannot (EADDRINUSE).
pub fn listen_tcp(ip: IpAddr, port: u16, backlog: i32) -> io::Result<(OwnedFd, u16)> {
    let family = if ip.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let fd = new_socket(family)?;
    let one: libc::c_int = 1;
    // SAFETY: setsockopt reads one c_int from `one`.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    let (storage, len) = sockaddr_of(&SocketAddr::new(ip, port));
    // SAFETY: bind reads `len` bytes of the address we built.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len,
        )
    })?;
    listen(&fd, backlog)?;
    let port = match local_address(fd.as_raw_fd())? {
        Some(Address::Tcp(a)) => a.port(),
        _ => port,
    };
    Ok((fd, port))
}

fn sockaddr_un(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut sun: libc::sockaddr_un = unsafe { zeroed() };
    sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    // One byte is the NUL.
    if bytes.len() >= sun.sun_path.len() {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    for (dst, src) in sun.sun_path.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    let len = size_of::<libc::sa_family_t>() + bytes.len() + 1;
    Ok((sun, len as libc::socklen_t))
}

fn bind_unix(fd: &OwnedFd, path: &Path) -> io::Result<()> {
    let (sun, len) = sockaddr_un(path)?;
    // SAFETY: bind reads `len` bytes of the address we built.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sun as *const libc::sockaddr_un).cast(),
            len,
        )
    })
    .map(drop)
}

/// Whether a unix socket at `path` has a listener: a connect is refused
/// (ECONNREFUSED) only when nobody listens, the file of a dead holder.
/// Non-blocking: a blocking unix connect to a listener whose queue is full
/// waits for room (for ever, if it never accepts); this one fails EAGAIN,
/// which says someone listens.
fn has_listener(path: &Path) -> io::Result<bool> {
    let probe = socket_with(libc::AF_UNIX, libc::SOCK_NONBLOCK)?;
    let (sun, len) = sockaddr_un(path)?;
    // SAFETY: connect reads `len` bytes of the address we built; on a
    // non-blocking unix socket it completes or fails at once.
    let r = unsafe {
        libc::connect(
            probe.as_raw_fd(),
            (&sun as *const libc::sockaddr_un).cast(),
            len,
        )
    };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => Ok(false),
        // A full backlog: someone listens.
        Some(libc::EAGAIN) => Ok(true),
        _ => Err(e),
    }
}

/// The socket file a [`listen_unix`] created, as the file system knows it
/// (device and inode): what [`close_unix`] removes, and nothing bound
/// there since.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketFile {
    dev: u64,
    ino: u64,
}

impl SocketFile {
    fn of(path: &Path) -> Option<SocketFile> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let m = std::fs::symlink_metadata(path).ok()?;
        m.file_type().is_socket().then(|| SocketFile {
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

/// Binds and listens on the unix socket `path` (absolute). A socket file
/// left by a holder that died (a connect is refused) is replaced, as systemd
/// and most daemons do; a live one, or a file that is not a socket, is not
/// (EADDRINUSE). `mode`: the file's permissions, set before `listen`, so no
/// client ever reaches it under the umask's. Also returns the file created,
/// for [`close_unix`].
pub fn listen_unix(
    path: &Path,
    mode: Option<u32>,
    backlog: i32,
) -> io::Result<(OwnedFd, Option<SocketFile>)> {
    let fd = new_socket(libc::AF_UNIX)?;
    match bind_unix(&fd, path) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) => {
            use std::os::unix::fs::FileTypeExt;
            let is_socket = std::fs::symlink_metadata(path)
                .map(|m| m.file_type().is_socket())
                .unwrap_or(false);
            if !is_socket || has_listener(path)? {
                return Err(e);
            }
            std::fs::remove_file(path)?;
            bind_unix(&fd, path)?;
        }
        Err(e) => return Err(e),
    }
    if let Some(mode) = mode {
        use std::os::unix::fs::PermissionsExt;
        if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)) {
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
    }
    if let Err(e) = listen(&fd, backlog) {
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok((fd, SocketFile::of(path)))
}

/// The address a socket is bound to, if it is an IP or a path one.
pub fn local_address(fd: RawFd) -> io::Result<Option<Address>> {
    // SAFETY: an all-zero sockaddr_storage is valid; getsockname fills it.
    let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: getsockname writes at most `len` bytes into `storage`.
    cvt(unsafe {
        libc::getsockname(
            fd,
            (&mut storage as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    })?;
    let ptr = (&storage as *const libc::sockaddr_storage).cast::<u8>();
    Ok(match storage.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the kernel wrote a sockaddr_in for an AF_INET socket.
            let sin = unsafe { &*ptr.cast::<libc::sockaddr_in>() };
            let ip = std::net::Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(Address::Tcp(SocketAddr::new(
                ip.into(),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the kernel wrote a sockaddr_in6 for an AF_INET6 socket.
            let sin6 = unsafe { &*ptr.cast::<libc::sockaddr_in6>() };
            let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(Address::Tcp(SocketAddr::new(
                ip.into(),
                u16::from_be(sin6.sin6_port),
            )))
        }
        libc::AF_UNIX => {
            // SAFETY: the kernel wrote a sockaddr_un for an AF_UNIX socket.
            let sun = unsafe { &*ptr.cast::<libc::sockaddr_un>() };
            let bytes: Vec<u8> = sun
                .sun_path
                .iter()
                .take(len as usize - size_of::<libc::sa_family_t>())
                .map(|c| *c as u8)
                .take_while(|b| *b != 0)
                .collect();
            // An unnamed or abstract socket has no path.
            (!bytes.is_empty())
                .then(|| Address::Unix(PathBuf::from(std::ffi::OsStr::from_bytes(&bytes))))
        }
        _ => None,
    })
}

/// Takes over an inherited fd (a socket unit's `LISTEN_FDS`): it must be a
/// stream socket in the listening state. Marked close-on-exec, so that only
/// our daemons, through their spawn's copies, get it.
pub fn adopt(fd: RawFd) -> io::Result<(OwnedFd, Option<Address>)> {
    let mut accepting: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes one c_int into `accepting`; a non-socket
    // fails ENOTSOCK, a closed fd EBADF.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ACCEPTCONN,
            (&mut accepting as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    if accepting == 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: F_SETFD on an fd we were handed and now own.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) })?;
    let address = local_address(fd)?;
    // SAFETY: the fd was handed to this process to own (sd_listen_fds).
    Ok((unsafe { OwnedFd::from_raw_fd(fd) }, address))
}

/// Closes our unix socket `fd` and removes the socket file we created at
/// `path` for it, if it is still that file: a successor that bound its own
/// there meanwhile had to remove ours first, and its file is left. The
/// file is judged before the close, while our socket pins its inode (no
/// other file can then have its number), and not by a connect: a child of
/// ours between its clone and its exec holds a copy of the socket, which
/// would still answer one after our close.
pub fn close_unix(fd: OwnedFd, path: &Path, ours: SocketFile) {
    let still_ours = SocketFile::of(path) == Some(ours);
    drop(fd);
    if still_ours {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn tcp_port_zero_gets_a_port_and_queues_connections_without_accepting() {
        let (fd, port) = listen_tcp("127.0.0.1".parse().unwrap(), 0, 16).unwrap();
        assert_ne!(port, 0);
        // Nobody accepts, yet the connect succeeds: the kernel queues it.
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(b"x").unwrap();
        let listener = std::net::TcpListener::from(fd);
        let (mut s, _) = listener.accept().unwrap();
        let mut b = [0u8; 1];
        s.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"x");
    }

    #[test]
    fn a_port_in_use_is_eaddrinuse() {
        let (_fd, port) = listen_tcp("127.0.0.1".parse().unwrap(), 0, 16).unwrap();
        let e = listen_tcp("127.0.0.1".parse().unwrap(), port, 16).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EADDRINUSE));
    }

    #[test]
    fn a_stale_unix_socket_is_replaced_a_live_one_and_a_plain_file_are_not() {
        let dir = std::env::temp_dir().join(format!("procward-held-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let (live, _) = listen_unix(&path, Some(0o600), 8).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let e = listen_unix(&path, None, 8).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EADDRINUSE));
        drop(live); // the file stays, with nobody listening
        assert!(path.exists());
        // Another test thread spawning at this instant holds a copy of every
        // fd of this process until its child's execve closes them, `live`
        // included (a connect then succeeds: someone listens). Retried until
        // that copy is gone; a stale socket never replaced still fails.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let (again, file) = loop {
            match listen_unix(&path, None, 8) {
                Err(e)
                    if e.raw_os_error() == Some(libc::EADDRINUSE)
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                r => break r.unwrap(),
            }
        };
        assert_eq!(
            local_address(again.as_raw_fd()).unwrap(),
            Some(Address::Unix(path.clone()))
        );
        // Ours, even while a spawn's copy of `again` would still answer.
        close_unix(again, &path, file.unwrap());
        assert!(!path.exists());
        let plain = dir.join("plain");
        std::fs::write(&plain, b"keep").unwrap();
        let e = listen_unix(&plain, None, 8).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EADDRINUSE));
        assert_eq!(std::fs::read(&plain).unwrap(), b"keep");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn adopt_takes_a_listening_socket_only() {
        let (fd, port) = listen_tcp("127.0.0.1".parse().unwrap(), 0, 16).unwrap();
        let raw = std::os::fd::IntoRawFd::into_raw_fd(fd);
        let (owned, addr) = adopt(raw).unwrap();
        assert_eq!(
            addr,
            Some(Address::Tcp(SocketAddr::new(
                "127.0.0.1".parse().unwrap(),
                port
            )))
        );
        drop(owned);
        let not_listening = new_socket(libc::AF_INET).unwrap();
        let raw = std::os::fd::IntoRawFd::into_raw_fd(not_listening);
        assert_eq!(adopt(raw).unwrap_err().raw_os_error(), Some(libc::EINVAL));
        // SAFETY: closes the fd adopt refused (and so did not take).
        unsafe { libc::close(raw) };
    }

    #[test]
    fn a_live_listener_with_a_full_queue_is_in_use_and_the_probe_never_waits() {
        let dir = std::env::temp_dir().join(format!("procward-held-full-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("full.sock");
        let (live, _) = listen_unix(&path, None, 0).unwrap();
        // Fill its queue: non-blocking connects until one would wait.
        let mut queued = Vec::new();
        for _ in 0..64 {
            let c = socket_with(libc::AF_UNIX, libc::SOCK_NONBLOCK).unwrap();
            let (sun, len) = sockaddr_un(&path).unwrap();
            // SAFETY: connect reads `len` bytes of the address we built.
            let r = unsafe {
                libc::connect(
                    c.as_raw_fd(),
                    (&sun as *const libc::sockaddr_un).cast(),
                    len,
                )
            };
            if r != 0 {
                break;
            }
            queued.push(c);
        }
        let e = listen_unix(&path, None, 8).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EADDRINUSE));
        drop(queued);
        drop(live);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_the_socket_file_we_created_is_removed() {
        let dir = std::env::temp_dir().join(format!("procward-held-file-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        // Ours is removed even while a copy of its fd listens on (as a
        // spawn's child holds one until its exec).
        let (ours, file) = listen_unix(&path, None, 8).unwrap();
        let copy = ours.try_clone().unwrap();
        close_unix(ours, &path, file.unwrap());
        assert!(!path.exists(), "our socket file was left");
        drop(copy);
        // A successor removes our file and binds its own at the same path.
        let (ours, file) = listen_unix(&path, None, 8).unwrap();
        std::fs::remove_file(&path).unwrap();
        let (theirs, _) = listen_unix(&path, None, 8).unwrap();
        close_unix(ours, &path, file.unwrap());
        assert!(path.exists(), "the successor's socket file was removed");
        drop(theirs);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
