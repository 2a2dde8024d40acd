//! Which TCP sockets listen on a port (Linux): the inodes of the listening
//! sockets of our network namespace, asked of the kernel through sock_diag
//! netlink (`NETLINK_SOCK_DIAG`, `SOCK_DIAG_BY_FAMILY` dumps filtered to the
//! LISTEN state).
//!
//! Why not `/proc/net/tcp`: reading it walks every bucket of the TCP hash
//! tables, whatever few sockets there are — on a machine with a lot of memory
//! (large tables) about 12 ms of CPU per read, so a ready check that probed it
//! every 100 ms behind a leftover listener spent a tenth of a core. A LISTEN
//! dump walks only the listening hash: microseconds.
//!
//! The socket and the messages are built by hand: `libc` has the netlink
//! constants on some targets only and none of the `inet_diag` structures.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::sys::cvt;

// linux/netlink.h, linux/sock_diag.h, linux/inet_diag.h, net/tcp_states.h
const NETLINK_SOCK_DIAG: libc::c_int = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const TCP_LISTEN: u32 = 10;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct NlMsgHdr {
    len: u32,
    kind: u16,
    flags: u16,
    seq: u32,
    pid: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct InetDiagSockId {
    sport: [u8; 2], // big-endian
    dport: [u8; 2],
    src: [u32; 4],
    dst: [u32; 4],
    interface: u32,
    cookie: [u32; 2],
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct InetDiagReqV2 {
    family: u8,
    protocol: u8,
    ext: u8,
    pad: u8,
    states: u32,
    id: InetDiagSockId,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Request {
    hdr: NlMsgHdr,
    req: InetDiagReqV2,
}

/// The part of `struct inet_diag_msg` we read: the socket id, then the inode.
const MSG_SPORT: usize = 4;
const MSG_INODE: usize = 4 + size_of::<InetDiagSockId>() + 4 * 4;
const HDR: usize = size_of::<NlMsgHdr>();

/// The inodes of the TCP sockets listening on `port` (IPv4 and IPv6) in this
/// process's network namespace.
pub fn listening_inodes(port: u16) -> io::Result<Vec<u64>> {
    let sock = diag_socket()?;
    let mut inodes = Vec::new();
    for (seq, family) in [(1, libc::AF_INET), (2, libc::AF_INET6)] {
        dump(
            &sock,
            seq,
            family as u8,
            1 << TCP_LISTEN,
            &|sport, _| sport == port,
            &mut inodes,
        )?;
    }
    Ok(inodes)
}

/// The inodes of the TCP connections whose local port is `port` and whose
/// peer's is `peer` (not listening: accepted ones), in this process's
/// network namespace: the server side of a connection we made from port
/// `peer` to `port`, whichever process accepted it.
pub fn accepted_inodes(port: u16, peer: u16) -> io::Result<Vec<u64>> {
    let sock = diag_socket()?;
    let mut inodes = Vec::new();
    let states = !(1u32 << TCP_LISTEN);
    let pair = |sport, dport| sport == port && dport == peer;
    for (seq, family) in [(1, libc::AF_INET), (2, libc::AF_INET6)] {
        dump(&sock, seq, family as u8, states, &pair, &mut inodes)?;
    }
    Ok(inodes)
}

/// A sock_diag netlink socket of our own, for one question.
fn diag_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers; the result is checked.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    })?;
    // SAFETY: fd was just returned by socket(2) and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Dumps the TCP sockets of `family` in `states` (a bit per state) and
/// keeps the inodes of those whose (local, peer) ports `keep` accepts.
fn dump(
    sock: &OwnedFd,
    seq: u32,
    family: u8,
    states: u32,
    keep: &dyn Fn(u16, u16) -> bool,
    out: &mut Vec<u64>,
) -> io::Result<()> {
    let request = Request {
        hdr: NlMsgHdr {
            len: size_of::<Request>() as u32,
            kind: SOCK_DIAG_BY_FAMILY,
            flags: NLM_F_REQUEST | NLM_F_DUMP,
            seq,
            pid: 0,
        },
        req: InetDiagReqV2 {
            family,
            protocol: libc::IPPROTO_TCP as u8,
            states,
            ..Default::default()
        },
    };
    // SAFETY: `request` is a plain repr(C) value that outlives the call; its
    // size is passed; a netlink socket needs no address (the kernel is the peer).
    let sent = cvt(unsafe {
        libc::send(
            sock.as_raw_fd(),
            (&request as *const Request).cast(),
            size_of::<Request>(),
            0,
        )
    })?;
    if sent as usize != size_of::<Request>() {
        return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
    }
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        // SAFETY: buf is a live, writable buffer of buf.len() bytes.
        let n = cvt(unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) })?
            as usize;
        if n == 0 {
            return Err(io::Error::from_raw_os_error(libc::EPROTO));
        }
        let mut at = 0;
        while at + HDR <= n {
            let len = u32::from_ne_bytes(buf[at..at + 4].try_into().unwrap_or_default()) as usize;
            let kind = u16::from_ne_bytes(buf[at + 4..at + 6].try_into().unwrap_or_default());
            if len < HDR || at + len > n {
                return Err(io::Error::from_raw_os_error(libc::EPROTO));
            }
            let body = &buf[at + HDR..at + len];
            match kind {
                NLMSG_DONE => return Ok(()),
                NLMSG_ERROR => {
                    let errno = body
                        .get(..4)
                        .map(|b| i32::from_ne_bytes(b.try_into().unwrap_or_default()))
                        .unwrap_or(-libc::EPROTO);
                    // No such family here (IPv6 disabled): nothing listens on it.
                    if errno == -libc::ENOENT || errno == 0 {
                        return Ok(());
                    }
                    return Err(io::Error::from_raw_os_error(-errno));
                }
                SOCK_DIAG_BY_FAMILY if body.len() >= MSG_INODE + 4 => {
                    let sport = u16::from_be_bytes([body[MSG_SPORT], body[MSG_SPORT + 1]]);
                    let dport = u16::from_be_bytes([body[MSG_SPORT + 2], body[MSG_SPORT + 3]]);
                    if keep(sport, dport) {
                        let inode = u32::from_ne_bytes(
                            body[MSG_INODE..MSG_INODE + 4]
                                .try_into()
                                .unwrap_or_default(),
                        );
                        out.push(u64::from(inode));
                    }
                }
                _ => {}
            }
            // Messages are aligned to 4 bytes.
            at += (len + 3) & !3;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn finds_a_listener_by_port_with_its_inode() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let inode = std::fs::metadata(format!("/proc/self/fd/{}", l.as_raw_fd()))
            .expect("fd")
            .ino();
        let found = listening_inodes(port).expect("sock_diag");
        assert_eq!(found, vec![inode]);
        drop(l);
        // Not "none": the port is free again, and another listener (a test
        // running beside this one, another process) may have it by now. Nor
        // at once: a child forked by a test beside this one holds a copy of
        // our fds (the listener too) until its exec closes them.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while listening_inodes(port).expect("sock_diag").contains(&inode) {
            assert!(
                std::time::Instant::now() < deadline,
                "the closed listener still listens"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    #[test]
    fn a_v6_listener_counts_too() {
        let Ok(l) = TcpListener::bind("[::1]:0") else {
            return; // no IPv6 here
        };
        let port = l.local_addr().expect("addr").port();
        assert_eq!(listening_inodes(port).expect("sock_diag").len(), 1);
    }

    #[test]
    fn finds_the_server_side_of_a_connection_by_its_two_ports() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let (server, _) = l.accept().expect("accept");
        let peer = client.local_addr().expect("addr").port();
        let inode = |fd: i32| {
            std::fs::metadata(format!("/proc/self/fd/{fd}"))
                .expect("fd")
                .ino()
        };
        let found = accepted_inodes(port, peer).expect("sock_diag");
        // The accepted side only: not the listener, not our client's side.
        assert_eq!(found, vec![inode(server.as_raw_fd())]);
        assert!(accepted_inodes(port, peer.wrapping_add(1))
            .expect("sock_diag")
            .is_empty());
    }
}
