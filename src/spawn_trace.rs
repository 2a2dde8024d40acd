//! Where one spawn's time goes, and one exit's, for `bench/split.mjs`
//! alone: with the Cargo feature `spawn-trace` (off by default, never
//! shipped) each step of `spawnSupervised` on the calling thread, and each
//! step of an exit delivered on the JS loop, records its thread CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`) and its wall time (`CLOCK_MONOTONIC`) into a
//! per-thread table, which JS reads with `spawnTraceTake()`. Without the
//! feature [`mark`] is an empty inline function and [`safety_net`] a
//! constant `true`: nothing is recorded, and the release build is the same
//! code as before.

/// The steps, in the order a Linux spawn passes them.
pub const ENTRY: usize = 0; // spawn_supervised entered (arguments converted by napi-rs)
pub const COMMAND: usize = 1; // Command built (environ copied, stdio specs)
pub const PREPARED: usize = 2; // prepare(): CStrings, PATH lookup, stdio fds
pub const BEFORE_CLONE: usize = 3; // signals blocked, ChildArgs filled: clone next
pub const AFTER_CLONE: usize = 4; // clone returned: the child has exec'd (vfork wait)
pub const SPAWNED: usize = 5; // signal mask restored, spawn::spawn returned
pub const REGISTERED: usize = 6; // identity seed (fstat of the pidfd), Watched built
pub const ON_LOOP: usize = 7; // the pidfd into the loop's hub, listener reference, async context
pub const BESIDE_LOOP: usize = 8; // the reaper's epoll took the pidfd
pub const RETURN: usize = 9; // NativeChild built, about to return to napi-rs
                             // Slots 10..16 are JS's (bench/split.mjs), between the spawn and exit ones.
/// An exit on the JS loop: the loop found the pidfd readable.
pub const EXIT_READABLE: usize = 16;
/// Swept and reaped (`Watched::try_settle` returned).
pub const EXIT_SETTLED: usize = 17;
/// The `'exit'` listener's argument built: `napi_make_callback` next.
pub const EXIT_CALL: usize = 18;
/// The handles closed, the pidfd let go of: the listener next.
pub const EXIT_TIDIED: usize = 19;
/// The table's size; the slots not named here are JS's.
pub const SLOTS: usize = 24;

/// An exit the reaper delivers (no JS loop: under Bun, in a worker), in a
/// table of its own shared by every thread (the reaper marks it, JS reads
/// it): the reaper's epoll returned.
pub const REAPER_WOKE: usize = 0;
/// Swept and reaped, the delivery next.
pub const REAPER_SETTLED: usize = 1;
/// The delivery (the threadsafe call) returned.
pub const REAPER_CALLED: usize = 2;
#[cfg(feature = "spawn-trace")]
const SHARED_SLOTS: usize = 4;

#[cfg(feature = "spawn-trace")]
mod imp {
    use std::cell::Cell;

    thread_local! {
        static MARKS: Cell<[(u64, u64); super::SLOTS]> = const { Cell::new([(0, 0); super::SLOTS]) };
    }

    fn clock(id: libc::clockid_t) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: fills the timespec we own.
        unsafe { libc::clock_gettime(id, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    /// (thread CPU ns, monotonic ns) now.
    pub fn now() -> (u64, u64) {
        (
            clock(libc::CLOCK_THREAD_CPUTIME_ID),
            clock(libc::CLOCK_MONOTONIC),
        )
    }

    pub fn mark(step: usize) {
        let t = now();
        MARKS.with(|m| {
            let mut all = m.get();
            if let Some(slot) = all.get_mut(step) {
                *slot = t;
            }
            m.set(all);
        });
    }

    thread_local! {
        static SAFETY_NET: Cell<bool> = const { Cell::new(true) };
    }

    /// Whether a child watched on the JS loop is also handed to the reaper
    /// (on unless bench/split.mjs turns it off to measure what it costs).
    pub fn safety_net() -> bool {
        SAFETY_NET.with(Cell::get)
    }

    pub fn set_safety_net(on: bool) {
        SAFETY_NET.with(|s| s.set(on));
    }

    /// The table, as [cpu0, wall0, cpu1, wall1, ...], and cleared.
    pub fn take() -> Vec<f64> {
        flat(&MARKS.with(|m| m.replace([(0, 0); super::SLOTS])))
    }

    static SHARED: std::sync::Mutex<[(u64, u64); super::SHARED_SLOTS]> =
        std::sync::Mutex::new([(0, 0); super::SHARED_SLOTS]);

    /// Records `step` of the shared table (the reaper's marks).
    pub fn mark_shared(step: usize) {
        let t = now();
        let mut all = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = all.get_mut(step) {
            *slot = t;
        }
    }

    /// The shared table, as `take`'s, and cleared.
    pub fn take_shared() -> Vec<f64> {
        let mut all = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        flat(&std::mem::replace(&mut *all, [(0, 0); super::SHARED_SLOTS]))
    }

    fn flat(marks: &[(u64, u64)]) -> Vec<f64> {
        marks
            .iter()
            .flat_map(|&(c, w)| [c as f64, w as f64])
            .collect()
    }
}

#[cfg(feature = "spawn-trace")]
pub use imp::{mark, mark_shared, now, safety_net, set_safety_net, take, take_shared};

/// Records `step` (with the feature `spawn-trace`; nothing without it).
#[cfg(not(feature = "spawn-trace"))]
#[inline(always)]
pub fn mark(_step: usize) {}

/// Records `step` of the shared table (nothing without the feature).
#[cfg(not(feature = "spawn-trace"))]
#[inline(always)]
pub fn mark_shared(_step: usize) {}

/// Whether a child watched on the JS loop is also handed to the reaper:
/// always, but in bench/split.mjs's measurement of what that costs.
#[cfg(not(feature = "spawn-trace"))]
#[inline(always)]
pub fn safety_net() -> bool {
    true
}
