//! What Linux and macOS share: the wait holds one descriptor (a pidfd, a
//! kqueue) that turns readable when the process exits, awaited on the
//! runtime's reactor and counted against the budget; `imp` opens it and
//! reads what it can through it.

use std::io;
use std::os::fd::OwnedFd;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::budget::Slot;
use super::{imp, Opened};
use crate::exit_watch::{self, ExitStatus};
use crate::pid::Pid;
use crate::proc_info::{Identity, InfoError};

/// The process's descriptor, on the reactor, and its unit of the budget.
pub struct Held {
    fd: AsyncFd<OwnedFd>,
    _slot: Slot,
}

impl Held {
    /// Must run inside a tokio runtime (the descriptor joins its reactor).
    /// Polls where the fallback is forced or the budget is spent.
    pub fn open(pid: Pid) -> io::Result<Opened<Held>> {
        if exit_watch::forced_fallback() {
            return Ok(Opened::Poll);
        }
        let Some(slot) = Slot::take() else {
            return Ok(Opened::Poll);
        };
        let fd = match imp::open(pid)? {
            Opened::Held(fd) => fd,
            Opened::Ended(exited) => return Ok(Opened::Ended(exited)),
            Opened::Poll => return Ok(Opened::Poll),
        };
        // SAFETY: the OwnedFd moves into the AsyncFd and stays open (same fd)
        // until the AsyncFd is dropped.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(Opened::Held(Held { fd, _slot: slot }))
    }

    pub fn holder(&self, pid: Pid) -> Result<Option<Identity>, InfoError> {
        imp::holder(pid, self.fd.get_ref())
    }

    pub async fn exited(&mut self) -> io::Result<()> {
        self.fd.readable().await.map(drop)
    }

    pub fn status(self, pid: Pid) -> Option<ExitStatus> {
        imp::status(pid, self.fd.get_ref())
    }
}
