//! The service manager's notify protocol for the JS side (package-internal:
//! `procward run` and the Supervisor's `ready: { notify: true }` use it; see
//! `lib/supervisor/notify.js`). Node has no unix datagram sockets, so both
//! ends are native: a `NotifySender` to the manager that started us, and a
//! `NotifyReceiver`, a manager of our own for one child.
//!
//! A receiver's messages are read on procward's runtime and queued there
//! (bounded); the JS side is woken through a weak threadsafe function when
//! the queue stops being empty, and takes the whole queue with `drain()`.
//! One wake-up per batch, and nothing that a child sends can pile up
//! without bound on the JS side.

use std::path::PathBuf;
use std::sync::Mutex;

use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Result, Status};
use napi_derive::napi;

use super::convert::to_pid;
use super::errors::{throw, JsErr, Res};
use crate::notify::{self, Address, Peers, Sent};

fn notify_err(err: &std::io::Error, syscall: &str) -> JsErr {
    if err.kind() == std::io::ErrorKind::Unsupported {
        JsErr::coded("ERR_NOTIFY_UNAVAILABLE", err)
    } else {
        JsErr::os(err, syscall)
    }
}

/// Whether this OS has the notify protocol (Linux).
#[napi]
pub fn notify_supported() -> bool {
    notify::SUPPORTED
}

/// A socket to the service manager that started this process (the value
/// of its `NOTIFY_SOCKET`).
#[napi]
pub struct NotifySender {
    inner: Mutex<Option<notify::Sender>>,
}

#[napi]
impl NotifySender {
    /// `address`: `/absolute/path` or `@abstract-name`. Anything else (a
    /// relative path, `vsock:`) is ERR_INVALID_ARG_VALUE.
    #[napi(factory)]
    pub fn open(env: Env, address: String) -> Result<NotifySender> {
        throw(
            &env,
            (|| {
                let addr = Address::parse(address.as_bytes()).map_err(|e| {
                    JsErr::coded(
                        "ERR_INVALID_ARG_VALUE",
                        format!("NOTIFY_SOCKET {address:?} names no socket: {e}"),
                    )
                })?;
                let sender = notify::Sender::open(&addr).map_err(|e| notify_err(&e, "socket"))?;
                Ok(NotifySender {
                    inner: Mutex::new(Some(sender)),
                })
            })(),
        )
    }

    /// Sends `text` as one datagram, never waiting: true when sent, false
    /// when the manager's queue is full (the message is dropped). A closed
    /// sender sends nothing (false). Other failures throw (ECONNREFUSED:
    /// nothing is bound there any more).
    #[napi]
    pub fn send(&self, env: Env, text: String) -> Result<bool> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(sender) = inner.as_ref() else {
            return Ok(false);
        };
        throw(
            &env,
            match sender.send(text.as_bytes()) {
                Ok(Sent::Sent) => Ok(true),
                Ok(Sent::Full) => Ok(false),
                Err(e) => Err(JsErr::os(&e, "sendmsg")),
            },
        )
    }

    /// Closes the socket.
    #[napi]
    pub fn close(&self) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// Who may speak for a child: its pid (and so its descendants), its cgroup.
#[napi(object)]
pub struct NativeNotifyPeers {
    pub child: f64,
    /// A file-system path under the cgroup2 mount.
    pub cgroup: Option<String>,
}

/// One message read, and how its sender was judged.
#[napi(object)]
pub struct NativeNotifyMessage {
    /// The sender's pid as the kernel attached it (0: none came).
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
    pub text: String,
    /// 'unchecked' (no peers given), 'child', 'descendant', 'cgroup' or
    /// 'refused'.
    pub verdict: String,
    pub trusted: bool,
    /// Longer than 4096 bytes: refused, its text dropped.
    pub oversized: bool,
    /// It carried file descriptors: they were closed unread.
    pub had_fds: bool,
}

type WakeFn = ThreadsafeFunction<(), (), (), Status, false, true>;

/// A notify socket of our own, for one child's `NOTIFY_SOCKET`.
#[napi]
pub struct NotifyReceiver {
    inner: notify::Receiver,
}

#[napi]
impl NotifyReceiver {
    /// Binds a new socket: at `path` (a socket file, which must not exist;
    /// removed on close), or in the abstract namespace under a random name.
    #[napi(factory)]
    pub fn bind(env: Env, path: Option<String>) -> Result<NotifyReceiver> {
        let path = path.map(PathBuf::from);
        throw(
            &env,
            notify::Receiver::bind(path.as_deref())
                .map(|inner| NotifyReceiver { inner })
                .map_err(|e| {
                    let err = notify_err(&e, "bind");
                    match &path {
                        Some(p) => err.path(p),
                        None => err,
                    }
                }),
        )
    }

    /// The `NOTIFY_SOCKET` value naming this socket.
    #[napi(getter)]
    pub fn address(&self) -> String {
        self.inner.address().to_owned()
    }

    /// Starts reading: every sender is judged against `peers` (null: none
    /// is, as a stand-in for a manager), and `onWake` is called (on this
    /// thread, without holding its event loop open) when messages wait to
    /// be drained.
    #[napi]
    pub fn start(
        &self,
        env: Env,
        peers: Option<NativeNotifyPeers>,
        on_wake: Function<(), ()>,
    ) -> Result<()> {
        let peers = throw(&env, peers.map(to_peers).transpose())?;
        let wake: WakeFn = on_wake
            .build_threadsafe_function()
            .weak::<true>()
            .callee_handled::<false>()
            .build()?;
        let wake: notify::Wake = Box::new(move || {
            wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
        });
        throw(
            &env,
            self.inner
                .start(peers, wake)
                .map_err(|e| notify_err(&e, "epoll_ctl")),
        )
    }

    /// The messages read since the last drain, oldest first.
    #[napi]
    pub fn drain(&self) -> Vec<NativeNotifyMessage> {
        self.inner
            .drain()
            .into_iter()
            .map(|m| NativeNotifyMessage {
                pid: m.pid,
                uid: m.uid,
                gid: m.gid,
                text: m.text,
                verdict: m.verdict.as_str().to_owned(),
                trusted: m.verdict.trusted(),
                oversized: m.oversized,
                had_fds: m.had_fds,
            })
            .collect()
    }

    /// Stops reading and closes the socket; `onWake` is not called again.
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }
}

fn to_peers(p: NativeNotifyPeers) -> Res<Peers> {
    Ok(Peers {
        child: to_pid(p.child)?,
        cgroup: p.cgroup.map(PathBuf::from),
    })
}
