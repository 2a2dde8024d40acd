//! `js_loop` where exits are not delivered on the JS thread's libuv loop
//! (everywhere but Linux): the same interface, never delivering, so the
//! binding always takes the threadsafe-function path.
//!
//! On macOS the kqueue of `exit_watch` could be polled by libuv the way the
//! Linux `js_loop` polls a pidfd; until then a kqueue watcher on procward's
//! runtime delivers the exit.

use std::sync::Arc;

use napi::bindgen_prelude::Function;
use napi::Env;

use super::convert::NativeExitInfo;
use crate::exit_watch::{ExitFd, Watched};

/// Stands for the poll handle of the Linux `js_loop`; there is none here.
#[derive(Clone, Default)]
pub struct LoopRef;

impl LoopRef {
    pub fn set_ref(&self, _on: bool) {}
}

/// Never here: `exit_fd` stays with the caller.
pub fn watch_on_loop(
    _env: &Env,
    _on_exit: &Function<NativeExitInfo, ()>,
    _watched: &Arc<Watched>,
    _exit_fd: &mut Option<ExitFd>,
) -> Option<LoopRef> {
    None
}
