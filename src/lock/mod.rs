//! A file lock whose holder is a process: the same types and functions on
//! every OS. `unix`: an exclusive `flock(2)`, waited for on a thread of its
//! own; `windows`: `LockFileEx` on the file's last byte. The holder writes
//! its record (JSON) into the file; a clean release truncates it. A held
//! lock can be watched for its file going away ([`HeldLock::watch`]: the
//! path no longer names the locked file, so another process can lock the
//! file the path names now).

#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as imp;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as imp;

pub use imp::{holder_running, read, try_acquire, HeldLock, LockFile, READ_CALL, THREAD_CALL};

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

#[derive(Debug)]
pub enum OpenError {
    Os {
        err: io::Error,
        op: &'static str,
    },
    /// A directory, FIFO, socket or device.
    NotRegular {
        directory: bool,
    },
    /// Owned by another uid, and we are not root: someone else's file (in
    /// `/tmp`, say) could be held by its owner forever.
    OtherOwner {
        uid: u32,
    },
    /// On a network filesystem and not allowed.
    NetworkFs {
        fs: &'static str,
    },
    /// On a kernel pseudo-filesystem (proc, sysfs, cgroup…): its files are
    /// kernel interfaces, and the record would be written into one.
    PseudoFs {
        fs: &'static str,
    },
    /// More than one name for the file: the record would overwrite whatever
    /// the other name stands for.
    HardLinked {
        links: u64,
    },
    /// A symbolic link or other reparse point (Windows: Unix opens with
    /// `O_NOFOLLOW`, which fails with ELOOP as `Os`).
    Symlink,
    /// Not empty and not a procward record: a data file, which acquiring
    /// would overwrite and releasing would truncate.
    Foreign,
    /// Removed or replaced under us `REOPEN_MAX` times in a row.
    Replaced,
    /// No signal could be claimed to interrupt waiters with (Linux: every
    /// real-time signal has a handler).
    NoSignal,
    /// Every waiter slot of this process is taken.
    TooManyWaiters {
        max: usize,
    },
}

/// The lock, the record found in the file when it was taken, and ours.
pub struct Acquired {
    pub lock: HeldLock,
    pub previous: Vec<u8>,
    pub record: String,
}

/// What [`try_acquire`] found.
pub enum Try {
    Acquired(Acquired),
    /// Another holder has it exclusively.
    Held,
    /// Only shared locks kept it out, through the whole grace: a `readLock`
    /// probe that was preempted, or another program's shared lock. A caller
    /// that may wait a little does so in the kernel ([`wait`]). (Unix only.)
    SharedOnly,
}

/// How the path stopped naming the locked file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gone {
    /// Nothing at the path: removed, renamed away, or its directory removed
    /// or renamed.
    Removed,
    /// Another file at the path: a rename over it, or removed and made anew.
    Replaced,
}

impl Gone {
    pub fn as_str(self) -> &'static str {
        match self {
            Gone::Removed => "removed",
            Gone::Replaced => "replaced",
        }
    }
}

/// Called once, on another thread, when a watched lock's path no longer
/// names its file.
pub type OnGone = Box<dyn FnOnce(Gone) + Send>;

/// What [`HeldLock::watch`] started.
pub enum Watching {
    /// The kernel reports a change; `on_gone` runs when the path is seen no
    /// longer to name the file, and never after a release.
    Started,
    /// The path no longer names the file already (`on_gone` is dropped, not
    /// called).
    Gone(Gone),
    /// No watch could be had (out of fds or inotify watches); the call
    /// that failed.
    Failed { err: io::Error, op: &'static str },
    /// This OS has no watch here (Windows), or the lock was released.
    Unsupported,
}

/// What a reader sees: whether a process holds the lock now, and the record.
pub struct Observed {
    pub held: bool,
    pub record: Vec<u8>,
}

pub enum WaitEnd {
    Acquired(Acquired),
    /// Cancelled before the lock was ours: nothing is held, the descriptor is
    /// closed.
    Cancelled,
    Failed(OpenError),
}

/// What `cancel` achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cancel {
    /// The wait ends with [`WaitEnd::Cancelled`]; the lock was not taken (or,
    /// if the kernel granted it at that very moment, was dropped at once).
    Cancelled,
    /// The waiter already has the lock (or failed); its end says which.
    TooLate,
}

// ---- waiting ------------------------------------------------------------------------

/// Where a wait stands. Cancellation and the grant race, and one mutex
/// decides: whichever leaves `Waiting` first wins; a grant that loses is
/// let go before the wait ends `Cancelled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Waiting,
    Cancelled,
    /// The waiter has the lock (or failed): a cancel comes too late.
    Done,
}

struct WaitState {
    phase: Phase,
    /// How a cancel reaches the waiter thread while it is blocked in the
    /// kernel (Unix: a signal, while the thread is registered for one;
    /// Windows: an event it waits on beside its lock request).
    interrupt: imp::Interrupter,
}

type Shared = Mutex<WaitState>;

fn lock_state(shared: &Shared) -> MutexGuard<'_, WaitState> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// A wait in progress on a thread of its own.
pub struct Waiter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Starts waiting for the lock on `file`, on a thread of its own. `done`
/// runs once, on that thread, as its last act.
pub fn wait(
    file: LockFile,
    purpose: Option<String>,
    done: Box<dyn FnOnce(WaitEnd) + Send>,
) -> io::Result<Waiter> {
    let shared = Arc::new(Mutex::new(WaitState {
        phase: Phase::Waiting,
        interrupt: imp::interrupter()?,
    }));
    let theirs = shared.clone();
    let thread = imp::spawn_waiter(move || done(imp::run_wait(file, purpose.as_deref(), &theirs)))?;
    Ok(Waiter {
        shared,
        thread: Some(thread),
    })
}

impl Waiter {
    pub fn cancel(&self) -> Cancel {
        let mut st = lock_state(&self.shared);
        match st.phase {
            Phase::Waiting => {
                st.phase = Phase::Cancelled;
                imp::interrupt(&st.interrupt);
                Cancel::Cancelled
            }
            Phase::Cancelled => Cancel::Cancelled,
            Phase::Done => Cancel::TooLate,
        }
    }

    /// Waits for the thread to exit. Call it once `done` has run: the
    /// thread has then nothing left to do but return.
    pub fn join(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Waiter {
    /// A wait nobody can hear the end of (its environment is gone, its JS
    /// handle collected) must not take the lock later and keep it forever.
    fn drop(&mut self) {
        self.cancel();
    }
}
