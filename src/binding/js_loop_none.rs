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
use crate::exit_watch::Watched;

/// Stands for the poll handle of the Linux `js_loop`; there is none here.
#[derive(Clone, Default)]
pub struct LoopRef;

impl LoopRef {
    pub fn set_ref(&self, _on: bool) {}
}

type Listener<'a> = Function<'a, NativeExitInfo, ()>;

/// Never here: the caller's other back-end serves.
pub fn watch_on_loop(_: &Env, _: &Listener<'_>, _: &Arc<Watched>) -> Option<LoopRef> {
    None
}
