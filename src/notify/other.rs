//! The notify protocol where there is no service manager that speaks it,
//! nor kernel-attached credentials to judge a sender by (everywhere but
//! Linux): the same types, every constructor `Unsupported`, so the binding
//! above is written once and says so in one place.

use std::io;
use std::path::Path;

use super::{Address, Message, Peers, Sent, Wake};

pub const SUPPORTED: bool = false;

fn unsupported() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "the notify protocol needs Linux (unix datagram sockets with SCM_CREDENTIALS)",
    )
}

/// Never made here.
pub struct Sender(std::convert::Infallible);

impl Sender {
    pub fn open(_addr: &Address) -> io::Result<Sender> {
        Err(unsupported())
    }

    pub fn send(&self, _text: &[u8]) -> io::Result<Sent> {
        match self.0 {}
    }
}

/// Never made here.
pub struct Receiver(std::convert::Infallible);

impl Receiver {
    pub fn bind(_path: Option<&Path>) -> io::Result<Receiver> {
        Err(unsupported())
    }

    pub fn address(&self) -> &str {
        match self.0 {}
    }

    pub fn start(&self, _peers: Option<Peers>, _wake: Wake) -> io::Result<()> {
        match self.0 {}
    }

    pub fn drain(&self) -> Vec<Message> {
        match self.0 {}
    }

    pub fn close(&self) {
        match self.0 {}
    }
}
