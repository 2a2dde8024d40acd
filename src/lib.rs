//! procward: child processes owned correctly, for Node.js.
//!
//! The layers, each importing only the ones below it:
//! - `binding`: the napi surface, one file per public concept, written once
//!   for every OS (the only place a napi type appears);
//! - the core modules, one per mechanism, each with the same types and
//!   functions on every OS (the OS part chosen once, inside the module):
//!   `spawn`, `exit_watch`, `stop`, `lock`, `proc_info`, `wait`, `cgroup`,
//!   `strays`, `listeners` (Linux: the supervisor's port probe), and `runtime` (the exit watchers' own tokio runtime);
//! - `sys`: safe wrappers over the system calls that are not one module's
//!   own mechanism (pidfds, `waitid`, signals, `poll`, clocks, Windows
//!   handles), one file per OS; a module whose mechanism is its calls
//!   (spawn, lock, cgroup, the JS loop's libuv, ...) makes them itself,
//!   fenced, and `sys`'s own doc lists where;
//! - validated values: `pid`, `duration`, `errors` (errno names and texts).
#![deny(clippy::all)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod binding;
pub mod cgroup;
pub mod duration;
pub mod errors;
pub mod exit_watch;
#[cfg(target_os = "linux")]
pub mod held_sockets;
#[cfg(target_os = "linux")]
pub mod listeners;
pub mod lock;
pub mod notify;
pub mod orphans;
pub mod pid;
pub mod proc_info;
pub mod runtime;
pub mod spawn;
pub mod spawn_trace;
pub mod stop;
pub mod strays;
pub mod sys;
pub mod wait;
