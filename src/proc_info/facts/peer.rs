//! Who is at the other end of a connected unix socket: the pid, uid and gid
//! the kernel recorded for the peer when it connected (`SO_PEERCRED`). A
//! group's control socket (`procward restart NAME -f FILE`) answers only its
//! owner: the kernel's word, not anything the peer says of itself.
//!
//! Linux only; elsewhere `None`, "cannot tell" (and the control socket then
//! refuses everyone).

use std::io;

/// The peer's credentials as the kernel gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

/// The credentials of `fd`'s peer (`fd` a connected unix socket of ours,
/// borrowed: not closed); an error where `fd` is no such socket.
#[cfg(target_os = "linux")]
pub fn peer_cred(fd: i32) -> io::Result<Option<PeerCred>> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, which we
    // own and which is that large; `fd` is only read, never closed.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != std::mem::size_of::<libc::ucred>() {
        return Ok(None);
    }
    Ok(Some(PeerCred {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
    }))
}

#[cfg(not(target_os = "linux"))]
pub fn peer_cred(_fd: i32) -> io::Result<Option<PeerCred>> {
    Ok(None)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    use super::peer_cred;

    #[test]
    fn a_socket_pair_s_peer_is_this_process() {
        let (a, _b) = UnixStream::pair().unwrap();
        let cred = peer_cred(a.as_raw_fd()).unwrap().unwrap();
        assert_eq!(cred.pid, std::process::id() as i32);
        // SAFETY: getuid takes no arguments and cannot fail.
        assert_eq!(cred.uid, unsafe { libc::getuid() });
    }

    #[test]
    fn a_file_is_no_socket() {
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        assert_eq!(
            peer_cred(f.as_raw_fd()).unwrap_err().raw_os_error(),
            Some(libc::ENOTSOCK)
        );
    }
}
