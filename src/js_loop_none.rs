//! Mounted as `js_loop` where exits are not delivered on the JS thread's
//! libuv loop (everywhere but Linux): the same interface, never available,
//! so the binding layer always takes the threadsafe-function path.
//!
//! On macOS the kqueue of `exit_watch::macos` could be polled by libuv the
//! way `js_loop.rs` polls a pidfd; until then a kqueue watcher on procward's
//! runtime delivers the exit.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use napi::sys;

use crate::exit_watch::Watched;

/// Never: no loop back-end on this OS.
pub fn available() -> bool {
    false
}

/// Stands for the poll handle of `js_loop.rs`; there is none here.
#[derive(Clone, Default)]
pub struct LoopRef;

impl LoopRef {
    pub fn set_ref(&self, _on: bool) {}
}

/// Hands the fd straight back: the caller uses another back-end.
///
/// # Safety
/// None needed here; unsafe to match `js_loop::start`.
pub unsafe fn start(
    _env: sys::napi_env,
    _callback: sys::napi_value,
    _watched: Arc<Watched>,
    fd: OwnedFd,
) -> Result<LoopRef, OwnedFd> {
    Err(fd)
}
