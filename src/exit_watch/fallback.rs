//! Fallback back-end: one small thread per child blocks in
//! `waitid(P_PID, pid, WEXITED | WNOWAIT)`.
//!
//! Never on the JS thread (another runtime stalled its event loop exactly
//! there), and not on tokio's blocking pool either: that pool is capped
//! (512 threads), and a thousand long-lived children would starve it. A
//! thread with a 64 KiB stack costs little more than its kernel task.

use std::sync::Arc;

use super::{OnExit, Watched};
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
/// reaped by someone else.
pub fn wait_exit(watched: &Watched) -> Option<WaitStatus> {
    loop {
        match sys::waitid_pid(watched.pid, libc::WEXITED | libc::WNOWAIT) {
            Ok(WaitStatus::StillAlive) => continue,
            Ok(w) => return Some(w),
            Err(_) => return None,
        }
    }
}
