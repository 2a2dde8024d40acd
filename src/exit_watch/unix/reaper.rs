//! The reaper (Linux): one thread and one epoll for the pidfds of every
//! supervised child of this process.
//!
//! Why one, not one watcher per child: a child used to cost a tokio task
//! waiting on a duplicate of its pidfd, woken at spawn, at exit and again
//! after the JS loop's grace — two fds, three wake-ups of another thread and
//! an eventfd write, most of it on the spawning (JS) thread. Here the
//! spawning thread adds the child's own pidfd to the reaper's epoll itself
//! (`epoll_ctl` is thread-safe): nothing is woken at spawn, no fd is
//! duplicated, and an idle reaper sleeps in `epoll_wait` with no timer.
//!
//! One-shot. Each pidfd is registered `EPOLLONESHOT`: it reports its exit
//! once and then stays silent, however long it stays readable. A traced
//! child's pidfd is readable while its zombie is invisible to our `waitid`
//! (see the module docs of `exit_watch`); a level-triggered registration
//! would spin on it, and re-arming would fire again at once. Such a child is
//! handed to a waiter thread (`fallback`), whose blocking `waitid` wakes
//! when the tracer lets go: rare, and it never delays any other child.
//!
//! The JS loop first. A child `js_loop` polls is left to the
//! loop for `LOOP_GRACE` after its exit (the loop usually settles it at
//! once, and delivers `'exit'` with no thread in between); one deadline
//! list sets `epoll_wait`'s timeout. Past its deadline the reaper settles the child
//! itself: a blocked loop never leaves a zombie. Other children (no loop:
//! the `pidfd-tokio` back-end, a worker torn down, a guardian) settle at
//! once, on this thread. A contained child's reap may have to wait for its
//! cgroup to empty: that wait goes to procward's runtime (or a waiter
//! thread), never here, where it would hold up every other reap.
//!
//! Ownership. The pidfd is the `Watched`'s, lent to this epoll
//! (`Watched::lend_pidfd`); the reaper holds the child (`Arc<Watched>`, and
//! the delivery) under a key until the fd is released, when `forget`
//! (left with the `Watched` as its holder) takes the child out of the
//! table. The fd's close takes it out of this epoll; nothing here removes
//! it first, which would be one more system call between every reap and
//! its `'exit'`. A copy of the fd in a child forked meanwhile keeps the
//! registration alive until that copy closes (at its exec), and harmlessly:
//! epoll keys a registration by its open file, not the fd number, so a
//! later fd with the same number is registered apart; an event carries our
//! key, and keys are never reused, so a late event for a released child
//! finds nothing.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::pidfd::{Holder, Released};
use super::settle::{Driver, Settle};
use super::{fallback, Watched};
use crate::exit_watch::OnExit;
use crate::spawn_trace;
use crate::sys;

/// How long a child the JS loop polls is left to the loop after its exit.
pub const LOOP_GRACE: Duration = Duration::from_millis(1);

/// A child that needs a thread or the runtime (traced, contained) when
/// neither could start is looked at again this often.
const RETRY: Duration = Duration::from_millis(100);

const STACK: usize = 128 * 1024;

/// What the reaper holds for one child.
struct Entry {
    watched: Arc<Watched>,
    /// The delivery, run once after the settle (None: the loop delivers).
    on_exit: Option<OnExit>,
}

struct Reaper {
    epoll: OwnedFd,
    entries: Mutex<HashMap<u64, Entry>>,
    next_key: AtomicU64,
}

static REAPER: OnceLock<Arc<Reaper>> = OnceLock::new();

/// The reaper, started on first use. A failed start (no fd for the epoll, no
/// thread) is not remembered: one moment of EMFILE does not send every later
/// child to a waiter thread.
fn reaper() -> io::Result<&'static Reaper> {
    static STARTING: Mutex<()> = Mutex::new(());
    if let Some(r) = REAPER.get() {
        return Ok(r);
    }
    let _one_at_a_time = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = REAPER.get() {
        return Ok(r);
    }
    let r = Arc::new(Reaper {
        epoll: sys::epoll_create()?,
        entries: Mutex::new(HashMap::new()),
        next_key: AtomicU64::new(1),
    });
    let thread_r = r.clone();
    // On failure the closure, and with it the epoll, is dropped here.
    std::thread::Builder::new()
        .name("procward-exits".into())
        .stack_size(STACK)
        .spawn(move || thread_r.run())?;
    Ok(REAPER.get_or_init(|| r))
}

/// Hands `watched` (its pidfd) to the reaper; `on_exit` runs after its
/// settle, whoever settles it. `Err`: not taken (no pidfd, no reaper, the
/// epoll refused the fd); the delivery comes back for another back-end.
pub fn add(watched: &Arc<Watched>, on_exit: Option<OnExit>) -> Result<(), Option<OnExit>> {
    let Ok(r) = reaper() else {
        return Err(on_exit);
    };
    let key = r.next_key.fetch_add(1, Ordering::Relaxed);
    let entry = Entry {
        watched: watched.clone(),
        on_exit,
    };
    r.lock().insert(key, entry);
    let holder = Holder {
        key,
        let_go: forget,
    };
    let added = watched.lend_pidfd(holder, |fd, key| {
        sys::epoll_add_once(r.epoll.as_fd(), fd, key).is_ok()
    });
    if added {
        return Ok(());
    }
    let entry = r.lock().remove(&key);
    Err(entry.and_then(|e| e.on_exit))
}

/// Removes a released child from the table (its pidfd leaves the epoll as
/// it closes: see the module docs). Called under the child's state lock
/// (the `Watched` holds this as its pidfd's [`Holder`]); the caller drops
/// the entry, and runs its delivery, after unlocking.
fn forget(key: u64) -> Released {
    let Some(r) = REAPER.get() else {
        return Released::default();
    };
    Released(r.lock().remove(&key).map(|e| (e.watched, e.on_exit)))
}

/// When to look at a child again (its grace, or a retry), soonest first.
type Deadlines = BinaryHeap<Reverse<(Instant, u64)>>;

fn ceil_ms(d: Duration) -> i32 {
    let ms = d.as_nanos().div_ceil(1_000_000);
    ms.min(i32::MAX as u128) as i32
}

impl Reaper {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn watched(&self, key: u64) -> Option<Arc<Watched>> {
        self.lock().get(&key).map(|e| e.watched.clone())
    }

    fn run(&self) {
        let mut keys = [0u64; 256];
        let mut graced = Deadlines::new();
        loop {
            let timeout = graced.peek().map_or(-1, |&Reverse((at, _))| {
                ceil_ms(at.saturating_duration_since(Instant::now()))
            });
            let n = match sys::epoll_wait(self.epoll.as_fd(), &mut keys, timeout) {
                Ok(n) => n,
                Err(_) => {
                    // Cannot happen to a valid epoll; do not spin if it does.
                    std::thread::sleep(Duration::from_millis(10));
                    0
                }
            };
            for &key in &keys[..n] {
                spawn_trace::mark_shared(spawn_trace::REAPER_WOKE);
                one_child(|| self.exited(key, &mut graced));
            }
            let now = Instant::now();
            while let Some(&Reverse((at, key))) = graced.peek() {
                if at > now {
                    break;
                }
                graced.pop();
                one_child(|| self.settle(key, &mut graced));
            }
        }
    }

    /// `key`'s pidfd turned readable: its child has exited.
    fn exited(&self, key: u64, graced: &mut Deadlines) {
        let Some(watched) = self.watched(key) else {
            return; // released meanwhile (the loop settled it)
        };
        if watched.loop_first() {
            graced.push(Reverse((Instant::now() + LOOP_GRACE, key)));
        } else {
            self.settle(key, graced);
        }
    }

    /// Settles `key`'s child unless another driver has (the one settle
    /// path, `Watched::look`; its delivery runs from there, through the
    /// release).
    fn settle(&self, key: u64, graced: &mut Deadlines) {
        let Some(watched) = self.watched(key) else {
            return;
        };
        let retry = match watched.look(Driver::HandOn) {
            Settle::Done(_) | Settle::Pending => false,
            // Exited (the pidfd said so) yet not waitable: a tracer holds
            // the zombie. A waiter thread waits for it to let go.
            Settle::NotSeen => fallback::start(watched, Box::new(|_| {})).is_err(),
            // A contained child's wait found no runtime and no thread.
            Settle::Refused => true,
        };
        if retry {
            graced.push(Reverse((Instant::now() + RETRY, key)));
        }
    }
}

/// One child's turn: a panic in it (a delivery, say) ends that turn, not
/// the reaper, which every other child needs. (The state locks it may have
/// poisoned are taken with `into_inner` everywhere.)
fn one_child(f: impl FnOnce()) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
}
