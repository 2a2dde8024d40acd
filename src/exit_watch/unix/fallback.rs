//! Fallback back-end: one small thread per child blocks in
//! `waitid(P_PID, pid, WEXITED | WNOWAIT)`.
//!
//! Never on the JS thread (another runtime stalled its event loop exactly
//! there), and not on tokio's blocking pool either: that pool is capped
//! (512 threads), and a thousand long-lived children would starve it. A
//! thread with a 64 KiB stack costs little more than its kernel task.
//!
//! Without a pidfd the wait is by pid. Under a tracer that never waits, the
//! blocking `waitid` simply sleeps until the tracer detaches or waits (the
//! kernel wakes the real parent's waiters then): no spin; that is also why
//! the reaper hands a traced child to this thread. Pid reuse: the child is
//! ours and unreaped, so its pid cannot be handed on unless someone else
//! reaps it. The JS loop may, beside this thread (when the reaper could not
//! take the child); the thread then wakes with ECHILD, or, if another
//! child of this process got the pid first, stays blocked until that one
//! exits, and then only finds this child settled: it never reports or reaps
//! the newcomer. A `waitpid(-1)` elsewhere in the process defeats any waiter
//! by pid; that is documented as unsupported.

use std::sync::Arc;
use std::time::Duration;

use super::Watched;
use crate::exit_watch::OnExit;
use crate::sys::{self, WaitStatus};

const STACK: usize = 64 * 1024;

pub fn start(watched: Arc<Watched>, on_exit: OnExit) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("procward-wait".into())
        .stack_size(STACK)
        .spawn(move || {
            let seen = wait_exit(&watched);
            watched.finish(seen, on_exit);
        })
        .map(drop)
}

/// Blocks until the child exits, leaving it unreaped. None: ECHILD, it was
/// reaped by someone else, or settled by another driver meanwhile.
pub fn wait_exit(watched: &Watched) -> Option<WaitStatus> {
    loop {
        if watched.exit_status().is_some() {
            return None;
        }
        match sys::waitid_pid(watched.pid(), libc::WEXITED | libc::WNOWAIT) {
            // A blocking waitid does not return without a state change; were
            // it ever to, do not turn that into a busy loop.
            Ok(WaitStatus::StillAlive) => std::thread::sleep(Duration::from_millis(10)),
            Ok(w) => return Some(w),
            Err(_) => return None,
        }
    }
}
