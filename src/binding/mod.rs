//! The napi surface of procward, one file per public concept, written once
//! for every OS: each validates its arguments, calls into a core module and
//! returns plain JS values, or a JS error object (`errors`). The only place
//! a napi type appears; nothing below it imports from here.
//!
//! `supervisor` exists on Linux alone: the Supervisor looks its functions up
//! and does without them elsewhere (no /proc to read a session from).

pub mod cgroup;
pub mod child;
pub mod convert;
pub mod errors;
#[cfg(target_os = "linux")]
pub mod held_sockets;
mod js_loop;
pub mod liveness;
pub mod lock;
pub mod notify;
pub mod os;
#[cfg(feature = "spawn-trace")]
pub mod spawn_trace;
pub mod stop;
#[cfg(target_os = "linux")]
pub mod supervisor;
pub mod wait;

pub use convert::NativeExitInfo;
