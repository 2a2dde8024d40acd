//! The runtime the exit watchers run on: procward's own, on one thread that
//! lives as long as the process.
//!
//! Not napi's: napi-rs shuts its tokio runtime down when the last Node
//! environment that loaded the addon goes away — a worker that was the only
//! user of procward, say — while the process, and the children that worker
//! spawned, live on. Watchers on that runtime would be dropped and their
//! children left as zombies (found by a stress test of exactly that case).
//! A single current-thread runtime is enough: a watcher wakes once per child
//! exit and spends microseconds on it.

use std::io;
use std::sync::{Mutex, OnceLock};

use tokio::runtime::{Builder, Handle};

/// The runtime, started on first use. A failed start (no fd left for its
/// epoll, no thread) is not remembered: the next call tries again, so one
/// moment of EMFILE does not disable the pidfd back-end for good.
pub fn handle() -> io::Result<Handle> {
    static RT: OnceLock<Handle> = OnceLock::new();
    static STARTING: Mutex<()> = Mutex::new(());
    if let Some(handle) = RT.get() {
        return Ok(handle.clone());
    }
    let _one_at_a_time = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(handle) = RT.get() {
        return Ok(handle.clone());
    }
    let rt = Builder::new_current_thread().enable_all().build()?;
    let handle = rt.handle().clone();
    // On failure the closure, and the runtime in it, is dropped here.
    std::thread::Builder::new()
        .name("procward-reaper".into())
        .spawn(move || rt.block_on(std::future::pending::<()>()))?;
    Ok(RT.get_or_init(|| handle).clone())
}
