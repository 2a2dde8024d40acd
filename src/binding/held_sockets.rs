//! Listening sockets a Supervisor holds (`held_sockets`), for
//! `lib/supervisor/sockets.js` (package-internal): each is an object that
//! owns its fd until `close()` (or its collection), so no fd number is ever
//! closed twice or closed under a spawn that is copying it.

use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use napi::{Env, Result};
use napi_derive::napi;

use super::errors::{throw, JsErr};
use crate::held_sockets::{self, Address};

#[napi]
pub struct HeldSocket {
    fd: Option<OwnedFd>,
    address: Option<Address>,
    /// A unix socket file we created, removed at `close()`.
    owned_path: Option<(PathBuf, held_sockets::SocketFile)>,
}

#[napi]
impl HeldSocket {
    /// The fd number while open; -1 once closed.
    #[napi(getter)]
    pub fn fd(&self) -> i32 {
        self.fd.as_ref().map_or(-1, |fd| fd.as_raw_fd())
    }

    /// The bound IP address (TCP), as text.
    #[napi(getter)]
    pub fn host(&self) -> Option<String> {
        match &self.address {
            Some(Address::Tcp(a)) => Some(a.ip().to_string()),
            _ => None,
        }
    }

    #[napi(getter)]
    pub fn port(&self) -> Option<u32> {
        match &self.address {
            Some(Address::Tcp(a)) => Some(u32::from(a.port())),
            _ => None,
        }
    }

    #[napi(getter)]
    pub fn path(&self) -> Option<String> {
        match &self.address {
            Some(Address::Unix(p)) => Some(p.to_string_lossy().into_owned()),
            _ => None,
        }
    }

    /// Closes the socket (and removes the file of a unix socket bound here,
    /// unless another has been bound there since). Idempotent.
    #[napi]
    pub fn close(&mut self) {
        if let Some(fd) = self.fd.take() {
            match self.owned_path.take() {
                Some((path, file)) => held_sockets::close_unix(fd, &path, file),
                None => drop(fd),
            }
        }
    }
}

fn backlog(n: u32) -> i32 {
    n.min(i32::MAX as u32) as i32
}

/// Binds and listens on `host:port`; `host` an IP literal (checked by JS).
#[napi]
pub fn listen_tcp(env: Env, host: String, port: u32, queue: u32) -> Result<HeldSocket> {
    let ip: IpAddr = throw(
        &env,
        host.parse().map_err(|_| {
            JsErr::coded(
                "ERR_INVALID_ARG_VALUE",
                format!("not an IP address: {host}"),
            )
        }),
    )?;
    let port = throw(
        &env,
        u16::try_from(port)
            .map_err(|_| JsErr::coded("ERR_OUT_OF_RANGE", format!("port out of range: {port}"))),
    )?;
    let (fd, port) = throw(
        &env,
        held_sockets::listen_tcp(ip, port, backlog(queue)).map_err(|e| JsErr::os(&e, "listen")),
    )?;
    Ok(HeldSocket {
        fd: Some(fd),
        address: Some(Address::Tcp(std::net::SocketAddr::new(ip, port))),
        owned_path: None,
    })
}

/// Binds and listens on the unix socket `path` (absolute, checked by JS).
#[napi]
pub fn listen_unix(env: Env, path: String, mode: Option<u32>, queue: u32) -> Result<HeldSocket> {
    let path = PathBuf::from(path);
    let (fd, file) = throw(
        &env,
        held_sockets::listen_unix(&path, mode, backlog(queue))
            .map_err(|e| JsErr::os(&e, "listen").path(&path)),
    )?;
    Ok(HeldSocket {
        fd: Some(fd),
        address: Some(Address::Unix(path.clone())),
        owned_path: file.map(|f| (path, f)),
    })
}

/// Takes over fd `fd`, handed to this process by a socket unit
/// (`LISTEN_FDS`): it must be a listening stream socket.
#[napi]
pub fn adopt_listen_fd(env: Env, fd: i32) -> Result<HeldSocket> {
    let (fd, address) = throw(
        &env,
        held_sockets::adopt(fd).map_err(|e| {
            let reason = match e.raw_os_error() {
                Some(libc::EINVAL) => "not a listening socket".to_string(),
                Some(libc::ENOTSOCK) => "not a socket".to_string(),
                _ => format!("fd {fd} cannot be taken over"),
            };
            JsErr::os(&e, "getsockopt").reason(reason)
        }),
    )?;
    Ok(HeldSocket {
        fd: Some(fd),
        address,
        owned_path: None,
    })
}
