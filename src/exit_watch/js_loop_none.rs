//! `js_loop` where exits are not delivered on the JS thread's libuv loop
//! (everywhere but Linux): the same interface, never delivering, so the
//! binding always takes the threadsafe-function path.
//!
//! On macOS the kqueue of `exit_watch` could be polled by libuv the way the
//! Linux `js_loop` polls a pidfd; until then a kqueue watcher on procward's
//! runtime delivers the exit.

use std::ffi::c_void;
use std::sync::Arc;

use super::{LoopListener, Watched};

/// Stands for the poll handle of the Linux `js_loop`; there is none here.
#[derive(Clone, Default)]
pub struct LoopRef;

impl LoopRef {
    pub fn set_ref(&self, _on: bool) {}
}

/// Never here: the caller's other back-end serves. Neither the loop nor a
/// listener is asked for.
///
/// # Safety
/// None needed here; the Linux one's contract, for the same caller.
pub unsafe fn watch_on_loop(
    _: &Arc<Watched>,
    _: impl FnOnce() -> Option<*mut c_void>,
    _: impl FnOnce() -> Option<Box<dyn LoopListener>>,
) -> Option<LoopRef> {
    None
}
