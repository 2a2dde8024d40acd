//! The JS side of `crate::spawn_trace` (feature `spawn-trace`, bench-only):
//! a mark JS can set between the native ones, the table, and an empty call
//! (what any N-API call costs, for bench/split.mjs to subtract).

use napi_derive::napi;

use crate::spawn_trace;

/// Records slot `step` (0..24) of this thread's table now.
#[napi]
pub fn spawn_trace_mark(step: u32) {
    spawn_trace::mark(step as usize);
}

/// This thread's table, [cpu ns, wall ns] per slot (0: never marked), cleared.
#[napi]
pub fn spawn_trace_take() -> Vec<f64> {
    spawn_trace::take()
}

/// The shared table (the reaper's marks of an exit it delivered), as
/// `spawnTraceTake`'s, cleared.
#[napi]
pub fn spawn_trace_take_shared() -> Vec<f64> {
    spawn_trace::take_shared()
}

/// [thread CPU ns, monotonic ns] now.
#[napi]
pub fn spawn_trace_now() -> Vec<f64> {
    let (c, w) = spawn_trace::now();
    vec![c as f64, w as f64]
}

/// Does nothing: an empty N-API call.
#[napi]
pub fn spawn_trace_noop() {}

/// What one native mark costs, [thread CPU ns, wall ns]: 1000 in a row.
#[napi]
pub fn spawn_trace_mark_cost() -> Vec<f64> {
    let (c0, w0) = spawn_trace::now();
    for _ in 0..1000 {
        spawn_trace::mark(spawn_trace::SLOTS - 1);
    }
    let (c1, w1) = spawn_trace::now();
    vec![(c1 - c0) as f64 / 1000.0, (w1 - w0) as f64 / 1000.0]
}

/// Whether children spawned next on this thread and watched on its loop
/// are handed to the reaper too (its safety net): on by default; off only
/// to measure what that costs an exit.
#[napi]
pub fn spawn_trace_safety_net(on: bool) {
    spawn_trace::set_safety_net(on);
}
