//! A contained child's drain: after its leader's exit is seen, its cgroup
//! is killed (`cgroup.kill`), and the reap waits until the cgroup is empty
//! and removed, at most the spawn's `killTimeoutMs`; past that the reap
//! goes ahead and a watcher removes the cgroup once it empties. The leader
//! stays an unreaped zombie meanwhile, so its pid and pgid stay ours.
//!
//! Usually the cgroup is empty the moment it is killed (the leader alone,
//! or members that died with it): then the driver that looks settles at
//! once, with no other thread woken. A wait, when there is one, happens
//! outside the state lock (`kill()`, `stop()` and the identity stay
//! answerable): a waiter thread blocks in it; the JS loop and the reaper
//! hand it to procward's runtime (an inotify readiness), or to a thread of
//! its own when the runtime cannot be had. One driver drains; the others
//! wait for its settle.

use std::sync::Arc;
use std::time::Duration;

use super::settle::{Driver, Settle};
use super::{State, Watched};
use crate::cgroup::{self, Cgroup};
use crate::exit_watch::{Contained, ExitStatus};
use crate::sys::WaitStatus;

/// The first half of a contained child's settle.
enum Drain {
    /// Settled already.
    Done(ExitStatus),
    /// Another driver drains the cgroup; wait for its settle.
    Busy,
    /// Nothing in the cgroup was alive (the leader alone): finish with
    /// [`Watched::settle_drained`] at once.
    Empty,
    /// Killed: wait for the cgroup to empty, at most `Duration`, then
    /// finish with [`Watched::settle_drained`].
    Wait(Arc<Cgroup>, Duration),
}

impl Watched {
    /// Drains `c` (the child's cgroup) after the leader's exit was seen
    /// (`seen`), then settles; how a wait happens is the driver's.
    pub(super) fn drain(
        self: &Arc<Self>,
        c: &Contained,
        seen: WaitStatus,
        driver: Driver,
    ) -> Settle {
        match (self.begin_drain(c), driver) {
            (Drain::Done(s), _) => Settle::Done(s),
            (Drain::Busy, Driver::Block) => Settle::Done(self.wait_settled()),
            (Drain::Busy, Driver::HandOn) => Settle::Pending,
            (Drain::Empty, _) => Settle::Done(self.settle_drained(Some(seen), true)),
            (Drain::Wait(cg, bound), Driver::Block) => {
                let empty = cgroup::wait_empty_blocking(&cg, Some(bound));
                Settle::Done(self.settle_drained(Some(seen), empty))
            }
            (Drain::Wait(cg, bound), Driver::HandOn) => self.hand_on(cg, bound, seen),
        }
    }

    /// Kills a contained child's cgroup after its leader's exit was seen,
    /// and sweeps the group, under the lock (the leader is an unreaped
    /// zombie, so its pgid is still ours). The wait for the cgroup to empty
    /// happens outside the lock.
    fn begin_drain(&self, c: &Contained) -> Drain {
        let mut inner = self.lock();
        if let State::Reaped(status) = inner.state {
            return Drain::Done(status);
        }
        if inner.draining {
            return Drain::Busy;
        }
        self.last_look(&mut inner);
        inner.draining = true;
        // Nothing alive in it (the leader alone: a zombie does not count):
        // nothing to kill or wait for. Gone (removed behind our back) counts
        // as empty too.
        let populated = match c.cgroup.populated() {
            Ok(populated) => populated,
            Err(e) => !matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENODEV)),
        };
        if !populated {
            return Drain::Empty;
        }
        let _ = c.cgroup.kill();
        Drain::Wait(c.cgroup.clone(), c.bound)
    }

    /// Blocks until settled (a blocking driver that found another draining).
    fn wait_settled(&self) -> ExitStatus {
        let mut inner = self.lock();
        loop {
            if let State::Reaped(s) = inner.state {
                return s;
            }
            inner.settle_waiters += 1;
            inner = self.settled.wait(inner).unwrap_or_else(|e| e.into_inner());
            inner.settle_waiters -= 1;
        }
    }

    /// A driver that must not wait (the JS thread, the reaper) hands the
    /// wait on: to procward's runtime, else a thread of its own. Members that
    /// die of the kill take a moment: one more look first.
    fn hand_on(self: &Arc<Self>, cg: Arc<Cgroup>, bound: Duration, seen: WaitStatus) -> Settle {
        if !cg.populated().unwrap_or(true) {
            return Settle::Done(self.settle_drained(Some(seen), true));
        }
        let me = self.clone();
        let handed = match crate::runtime::handle() {
            Ok(rt) => {
                rt.spawn(async move {
                    let deadline = tokio::time::Instant::now() + bound;
                    let empty = cgroup::wait_empty(&cg, Some(deadline)).await;
                    me.settle_drained(Some(seen), empty);
                });
                true
            }
            Err(_) => std::thread::Builder::new()
                .name("procward-drain".into())
                .spawn(move || {
                    let empty = cgroup::wait_empty_blocking(&cg, Some(bound));
                    me.settle_drained(Some(seen), empty);
                })
                .is_ok(),
        };
        if handed {
            return Settle::Pending;
        }
        // No thread for the wait: the drain is given back, and the reaper
        // takes it up (it retries until it can).
        self.lock().draining = false;
        Settle::Refused
    }

    /// After the drain: read the final usage, remove the cgroup (or leave
    /// that to a watcher of its `populated 0` when a member outlived the
    /// bound), then reap and publish as any child.
    fn settle_drained(&self, seen: Option<WaitStatus>, empty: bool) -> ExitStatus {
        if let Some(c) = &self.contained {
            let usage = c.cgroup.usage();
            self.lock().final_usage = Some(usage);
            if !empty || c.cgroup.remove().is_err() {
                cgroup::remove_when_empty(c.cgroup.clone());
            }
        }
        self.settle(seen)
    }
}
