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
use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle};

pub fn handle() -> io::Result<Handle> {
    static RT: OnceLock<Result<Handle, String>> = OnceLock::new();
    RT.get_or_init(|| {
        let rt = Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let handle = rt.handle().clone();
        std::thread::Builder::new()
            .name("procward-reaper".into())
            .spawn(move || rt.block_on(std::future::pending::<()>()))
            .map_err(|e| e.to_string())?;
        Ok(handle)
    })
    .clone()
    .map_err(io::Error::other)
}
