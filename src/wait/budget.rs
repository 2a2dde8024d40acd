//! How many descriptors (pidfds on Linux, kqueues on macOS) waits may hold
//! at once. Thousands of waits must not fill the fd table and leave the
//! application's own `open` and `accept` failing with EMFILE; beyond the
//! budget a wait polls liveness instead (and sees no status).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Descriptors held by waits now, across the process.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// Half the soft `RLIMIT_NOFILE`, at least 16.
fn budget() -> usize {
    static BUDGET: OnceLock<usize> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        let soft = match crate::sys::nofile_soft_limit() {
            Some(cur) => usize::try_from(cur).unwrap_or(usize::MAX),
            None => 1 << 20,
        };
        (soft / 2).max(16)
    })
}

/// One unit of the budget, returned when the wait ends (or is cancelled).
pub struct Slot;

impl Slot {
    pub fn take() -> Option<Slot> {
        let limit = budget();
        HELD.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < limit).then_some(n + 1)
        })
        .ok()
        .map(|_| Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        HELD.fetch_sub(1, Ordering::AcqRel);
    }
}
