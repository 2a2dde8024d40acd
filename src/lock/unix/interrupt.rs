//! A blocking `flock(LOCK_EX)` that another thread can interrupt, on Linux
//! and macOS alike.
//!
//! A blocked `flock(LOCK_EX)` ends only when the lock is granted or a signal
//! arrives: closing the fd from another thread does not wake it (the call
//! holds its own reference to the file). So each waiting thread registers
//! itself in a static slot table, and the canceller sends it a signal with
//! `pthread_kill`. The waiting thread keeps every signal blocked except that
//! one, and that one only during the call itself.
//!
//! The classic race — the signal lands after the thread checked "cancelled?"
//! but before it entered `flock`, so the call blocks anyway — is closed by
//! the handler itself: for a cancelled slot it `dup2`s an *inert* descriptor
//! over the lock fd, one through which `flock` can lock nothing anyone else
//! shares. Whatever the thread was doing, that settles it:
//! - not yet in `flock`: the call meets the inert fd and returns at once;
//! - blocked in `flock`: the call returns `EINTR`, or, if the handler was
//!   installed with `SA_RESTART`, is restarted by the kernel — which looks
//!   the fd number up again and meets the inert fd. Either way the lock was
//!   never granted;
//! - `flock` had just succeeded: the handler unlocks it (`LOCK_UN`; a close
//!   alone would not do while a child forked but not yet exec'd holds a
//!   copy of the descriptor), then swaps the descriptor out.
//!
//! The thread checks its slot's cancelled flag after every return of
//! `flock`, whatever it returned, so what the inert fd makes `flock` do
//! (fail, or lock a private object) does not matter.
//!
//! What differs between systems is a [`Flavour`]: which signal, and which
//! inert descriptor.
//! - Linux: the highest free real-time signal, and an `O_PATH` fd
//!   (`flock` fails on it with `EBADF`). See `linux.rs`.
//! - macOS has neither real-time signals nor `O_PATH`: [`SIGURG_SOCKET`],
//!   SIGURG and a Unix socket. SIGURG is what Go's runtime took for its
//!   thread preemption for the same reasons: its default action is to
//!   ignore it, and only out-of-band socket data raises it (to a process
//!   that asked for that with `F_SETOWN`). The socket is not a vnode, so
//!   macOS's `flock` fails on it at once (flock(2): `ENOTSUP`, "the
//!   referenced descriptor is not of the correct type"); Linux's locks the
//!   socket's own inode, which nobody else has, and returns at once. Linux
//!   can run this flavour too (`PROCWARD_LOCK_INTERRUPT=sigurg`), which is
//!   how it is tested.
//!
//! # Sharing the signal
//!
//! SIGURG may have an owner already (a Go library in the process, a
//! `process.on('SIGURG')`), so the handler *chains*: a signal that does not
//! find its own thread in a cancelled slot goes to the disposition that was
//! there before ours, with the same `siginfo` and context (a handler that was
//! `SIG_DFL` or `SIG_IGN` is left at that: nothing to do, both mean "ignore"
//! for SIGURG, and a real-time signal is only claimed when it had no
//! owner). Ours takes the previous handler's `SA_RESTART` and `SA_ONSTACK`,
//! so the other threads' system calls are restarted (or not) as before;
//! over `SIG_DFL`/`SIG_IGN` it uses `SA_RESTART`, so that a stray signal
//! interrupts nobody's system call. Limits: a process-directed signal that
//! the kernel happens to deliver to a waiter at the moment it is being
//! cancelled is taken for the cancel (the two cannot be told apart), and
//! the chained handler runs with every signal blocked.
//!
//! The slot is found by `pthread_self()` (async-signal-safe since POSIX
//! 2016), not by a thread-local: on macOS a thread's first access to a
//! thread-local may allocate, which a handler must not do on a thread that
//! never touched it. The handler reads only atomics and makes only plain
//! system calls (`flock`, `dup2`, `fcntl`); it never follows a pointer that
//! a signal carried.

use std::ffi::{c_int, c_void};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;

use super::imp;
use super::OpenError;

/// How the waiters of one process are interrupted: the signal, and the
/// descriptor the handler swaps in.
pub(super) struct Flavour {
    /// Chooses the signal and installs the handler for it; run once. None:
    /// no signal could be had.
    claim: fn() -> Option<c_int>,
    /// A new descriptor through which `flock` locks nothing shared, and the
    /// system call that makes it (for errors).
    inert: fn() -> io::Result<OwnedFd>,
    inert_call: &'static str,
    claimed: OnceLock<Option<c_int>>,
}

impl Flavour {
    pub(super) const fn new(
        claim: fn() -> Option<c_int>,
        inert: fn() -> io::Result<OwnedFd>,
        inert_call: &'static str,
    ) -> Flavour {
        Flavour {
            claim,
            inert,
            inert_call,
            claimed: OnceLock::new(),
        }
    }

    pub(super) fn inert(&self) -> io::Result<OwnedFd> {
        (self.inert)()
    }

    fn signal(&self) -> Result<c_int, OpenError> {
        self.claimed
            .get_or_init(self.claim)
            .ok_or(OpenError::NoSignal)
    }
}

/// SIGURG and a Unix socket: macOS's flavour (see the module docs).
pub(super) static SIGURG_SOCKET: Flavour = Flavour::new(claim_sigurg, unix_socket, "socket");

fn claim_sigurg() -> Option<c_int> {
    install(libc::SIGURG).then_some(libc::SIGURG)
}

fn unix_socket() -> io::Result<OwnedFd> {
    // std makes it close-on-exec (atomically on Linux, right after creation
    // on macOS, which has no SOCK_CLOEXEC). Unbound and unconnected: if a
    // child forked in that moment inherits it, it inherits nothing at all.
    std::os::unix::net::UnixDatagram::unbound().map(OwnedFd::from)
}

/// Claims the signal of the process's flavour (installs the handler) if that
/// was not done yet. Called on the thread that starts a wait, so that the
/// choice and the `sigaction` happen there, not on a waiter thread.
pub(super) fn prepare() {
    let _ = imp::flavour().signal();
}

// ---- the handler and the disposition it chains to ----------------------------

/// A disposition found in place when ours was installed. Never freed: the
/// handler may be reading one while a newer one replaces it (a replacement
/// happens only when someone else took the signal back, so they are few).
struct Prev {
    handler: usize,
    siginfo: bool,
}

struct Chain {
    sig: AtomicI32,
    prev: AtomicPtr<Prev>,
}

/// One entry per signal we ever installed on (one, two in tests).
static CHAINS: [Chain; 4] = [const {
    Chain {
        sig: AtomicI32::new(0),
        prev: AtomicPtr::new(std::ptr::null_mut()),
    }
}; 4];

fn chain_of(sig: c_int) -> Option<&'static Chain> {
    CHAINS.iter().find(|c| c.sig.load(Ordering::Acquire) == sig)
}

fn handler_address() -> usize {
    on_signal as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize
}

fn is_function(handler: usize) -> bool {
    handler != libc::SIG_DFL && handler != libc::SIG_IGN && handler != handler_address()
}

/// Threads inside [`chain`] right now (`pthread_self()`, 0: free).
static CHAINING: [AtomicUsize; 16] = [const { AtomicUsize::new(0) }; 16];

/// Runs the disposition that was in place before ours.
///
/// Once: a handler that chains too (it kept ours as *its* previous one when
/// it replaced ours, and we took the signal back, chaining to it) would call
/// ours again, and the two would recurse until the stack ran out. A thread
/// already inside this function returns at once instead. (Should more
/// threads than the table holds be chaining at once, the others go
/// unguarded.)
fn chain(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: pthread_self cannot fail and is async-signal-safe.
    let me = unsafe { libc::pthread_self() } as usize;
    if CHAINING.iter().any(|t| t.load(Ordering::Acquire) == me) {
        return;
    }
    let mark = CHAINING.iter().find(|t| {
        t.compare_exchange(0, me, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    });
    call_previous(sig, info, ctx);
    if let Some(mark) = mark {
        mark.store(0, Ordering::Release);
    }
}

fn call_previous(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let Some(chain) = chain_of(sig) else {
        return;
    };
    let prev = chain.prev.load(Ordering::Acquire);
    if prev.is_null() {
        return;
    }
    // SAFETY: a leaked Box, never freed nor written after publication.
    let prev = unsafe { &*prev };
    if !is_function(prev.handler) {
        return;
    }
    if prev.siginfo {
        // SAFETY: the address of a function installed with SA_SIGINFO, which
        // has this signature.
        let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
            unsafe { std::mem::transmute(prev.handler) };
        f(sig, info, ctx);
    } else {
        // SAFETY: the address of a plain handler, which has this signature.
        let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(prev.handler) };
        f(sig);
    }
}

extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let errno = imp::errno_location();
    // SAFETY: this thread's errno; saved and restored so the interrupted code
    // never sees ours (nor the chained handler's, if it does not restore it).
    let saved = unsafe { *errno };
    // SAFETY: pthread_self cannot fail and is async-signal-safe.
    let me = unsafe { libc::pthread_self() } as usize;
    let mine = SLOT_TABLE
        .iter()
        .find(|s| s.thread.load(Ordering::Acquire) == me);
    match mine {
        Some(slot) if slot.cancelled.load(Ordering::SeqCst) => {
            let fd = slot.fd.load(Ordering::Acquire);
            // Unlock first, in case flock had just been granted: a close is
            // not enough while a child forked but not yet exec'd holds a copy
            // of the descriptor.
            // SAFETY: the fd belongs to this slot's thread (this thread) and
            // stays open while the slot is claimed; flock is a plain system
            // call, safe in a handler.
            unsafe { libc::flock(fd, libc::LOCK_UN) };
            // The inert spare in its place, close-on-exec from the first
            // instant where the OS allows (a child started meanwhile by
            // another thread must not inherit it).
            crate::sys::dup_cloexec_onto(slot.spare.load(Ordering::Acquire), fd);
        }
        _ => chain(sig, info, ctx),
    }
    // SAFETY: as above.
    unsafe { *errno = saved };
}

/// The current disposition of `sig`, or None if it cannot be read.
pub(super) fn disposition(sig: c_int) -> Option<libc::sigaction> {
    let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: reading the current action into a buffer we own.
    if unsafe { libc::sigaction(sig, std::ptr::null(), old.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: sigaction succeeded, so the buffer is initialised.
    Some(unsafe { old.assume_init() })
}

/// Whether our handler is the one installed for `sig`.
fn is_ours(sig: c_int) -> bool {
    disposition(sig).is_some_and(|d| d.sa_sigaction == handler_address())
}

/// Installs our handler on `sig`, chaining to whatever is there now (see the
/// module docs). Also how a cancel takes the signal back from someone who
/// replaced our handler since (another addon, `process.on('SIGURG')`, an
/// `LD_PRELOAD` library): their handler becomes the one we chain to. A
/// replacement between the read and the install is not seen: a claim on a
/// signal is cooperative, like every handler's.
pub(super) fn install(sig: c_int) -> bool {
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let Some(old) = disposition(sig) else {
        return false;
    };
    if old.sa_sigaction == handler_address() {
        return true;
    }
    let chain = match chain_of(sig) {
        Some(c) => c,
        None => match CHAINS.iter().find(|c| {
            c.sig
                .compare_exchange(0, sig, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        }) {
            Some(c) => c,
            None => return false,
        },
    };
    // Published before ours is installed: the handler may run right after.
    let prev = Box::leak(Box::new(Prev {
        handler: old.sa_sigaction,
        siginfo: old.sa_flags & libc::SA_SIGINFO != 0,
    }));
    chain.prev.store(prev, Ordering::Release);

    let act = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: a zeroed sigaction is a valid starting point.
    let mut act = unsafe { act.assume_init() };
    act.sa_sigaction = handler_address();
    // Restarting is safe for the waiter: a restarted flock meets the inert
    // fd (module docs). The other threads keep what they had.
    let inherited = if is_function(old.sa_sigaction) {
        old.sa_flags & (libc::SA_RESTART | libc::SA_ONSTACK)
    } else {
        libc::SA_RESTART
    };
    act.sa_flags = libc::SA_SIGINFO | inherited;
    // SAFETY: fills the mask we own.
    unsafe { libc::sigfillset(&mut act.sa_mask) };
    // SAFETY: installs a handler that only touches atomics, calls
    // async-signal-safe functions, and chains to the previous one.
    unsafe { libc::sigaction(sig, &act, std::ptr::null_mut()) == 0 }
}

// ---- threads and slots ------------------------------------------------------------

fn empty_set() -> libc::sigset_t {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::zeroed();
    // SAFETY: initialises the set we own.
    unsafe { libc::sigemptyset(set.as_mut_ptr()) };
    // SAFETY: initialised just above.
    unsafe { set.assume_init() }
}

fn one_signal(sig: c_int) -> libc::sigset_t {
    let mut set = empty_set();
    // SAFETY: adds a valid signal number to the set we own.
    unsafe { libc::sigaddset(&mut set, sig) };
    set
}

fn set_mask(how: c_int, set: &libc::sigset_t, old: Option<&mut libc::sigset_t>) {
    let old = old.map_or(std::ptr::null_mut(), |o| o as *mut _);
    // SAFETY: valid set pointers; pthread_sigmask cannot fail with a valid `how`.
    unsafe { libc::pthread_sigmask(how, set, old) };
}

/// Spawns a thread with every signal blocked, so that no process-directed
/// signal is ever delivered to it (the waiter unblocks only its own, and
/// only inside `flock`).
pub(super) fn spawn_quiet<F>(name: &str, stack: usize, f: F) -> io::Result<JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    let mut all = std::mem::MaybeUninit::<libc::sigset_t>::zeroed();
    // SAFETY: fills the set we own.
    unsafe { libc::sigfillset(all.as_mut_ptr()) };
    // SAFETY: initialised just above.
    let all = unsafe { all.assume_init() };
    let mut old = empty_set();
    // The new thread inherits the mask in force at creation.
    set_mask(libc::SIG_BLOCK, &all, Some(&mut old));
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .stack_size(stack)
        .spawn(f);
    set_mask(libc::SIG_SETMASK, &old, None);
    spawned
}

/// How many threads may wait for a lock at once in one process. Each is a
/// thread blocked in the kernel; beyond this many, a wait fails with EAGAIN.
const SLOTS: usize = 1024;

struct Slot {
    /// Owned by a waiting thread (claim flag, set before the fields below).
    claimed: AtomicBool,
    /// The owner's `pthread_self()`, published last: the handler matches on
    /// it. 0: none.
    thread: AtomicUsize,
    fd: AtomicI32,
    spare: AtomicI32,
    cancelled: AtomicBool,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            claimed: AtomicBool::new(false),
            thread: AtomicUsize::new(0),
            fd: AtomicI32::new(-1),
            spare: AtomicI32::new(-1),
            cancelled: AtomicBool::new(false),
        }
    }
}

static SLOT_TABLE: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];

/// A waiting thread's registration (see the module docs). Created and
/// dropped on that thread.
pub(super) struct Interruptible {
    slot: &'static Slot,
    sig: c_int,
    _spare: OwnedFd,
}

/// Lets another thread interrupt a registered waiter. Only valid while the
/// waiter is registered and alive: the caller guarantees it (the lock
/// module sends it only under the mutex that the waiter must take before it
/// unregisters).
#[derive(Clone, Copy)]
pub(in crate::lock) struct InterruptHandle {
    slot: &'static Slot,
    thread: libc::pthread_t,
    sig: c_int,
}

/// How a blocking lock ended without the lock.
#[derive(Debug)]
pub(super) enum Blocked {
    Interrupted,
    Os(io::Error),
}

impl Interruptible {
    /// Registers the calling thread, whose signals are all blocked, as a
    /// waiter on `fd`, interruptible the process's way.
    pub fn register(fd: BorrowedFd<'_>) -> Result<Interruptible, OpenError> {
        Interruptible::register_as(fd, imp::flavour())
    }

    /// The same with a given flavour (tests run both on Linux).
    pub(super) fn register_as(
        fd: BorrowedFd<'_>,
        flavour: &'static Flavour,
    ) -> Result<Interruptible, OpenError> {
        let sig = flavour.signal()?;
        let spare = flavour.inert().map_err(|err| OpenError::Os {
            err,
            op: flavour.inert_call,
        })?;
        let slot = SLOT_TABLE
            .iter()
            .find(|s| {
                s.claimed
                    .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            })
            .ok_or(OpenError::TooManyWaiters { max: SLOTS })?;
        slot.fd.store(fd.as_raw_fd(), Ordering::Release);
        slot.spare.store(spare.as_raw_fd(), Ordering::Release);
        slot.cancelled.store(false, Ordering::SeqCst);
        // SAFETY: pthread_self cannot fail.
        let me = unsafe { libc::pthread_self() };
        slot.thread.store(me as usize, Ordering::Release);
        Ok(Interruptible {
            slot,
            sig,
            _spare: spare,
        })
    }

    pub fn handle(&self) -> InterruptHandle {
        InterruptHandle {
            slot: self.slot,
            // SAFETY: pthread_self cannot fail.
            thread: unsafe { libc::pthread_self() },
            sig: self.sig,
        }
    }

    /// `flock(fd, LOCK_EX)`, blocking until granted or interrupted. `fd` is
    /// the one given to `register`. Returns with the signal blocked again.
    pub fn lock_exclusive(&self, fd: BorrowedFd<'_>) -> Result<(), Blocked> {
        self.lock_exclusive_after(fd, || {})
    }

    /// The same, running `between` after the last "cancelled?" check and
    /// before the call: tests widen the race window with it.
    pub(super) fn lock_exclusive_after(
        &self,
        fd: BorrowedFd<'_>,
        between: impl Fn(),
    ) -> Result<(), Blocked> {
        let set = one_signal(self.sig);
        loop {
            set_mask(libc::SIG_UNBLOCK, &set, None);
            if self.slot.cancelled.load(Ordering::SeqCst) {
                set_mask(libc::SIG_BLOCK, &set, None);
                return Err(Blocked::Interrupted);
            }
            between();
            // SAFETY: `fd` is a valid fd number (possibly replaced by the
            // inert spare, see the module docs).
            let ret = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX) };
            let err = io::Error::last_os_error();
            set_mask(libc::SIG_BLOCK, &set, None);
            // Whatever flock said: on a swapped-in inert fd it may even have
            // "succeeded" (Linux locks a socket's own inode).
            if self.slot.cancelled.load(Ordering::SeqCst) {
                return Err(Blocked::Interrupted);
            }
            if ret == 0 {
                return Ok(());
            }
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(Blocked::Os(err));
            }
        }
    }
}

impl Drop for Interruptible {
    fn drop(&mut self) {
        // The signal is blocked here (lock_exclusive returns so), so the
        // handler cannot run on this thread while the slot is taken apart; a
        // signal still pending dies with the thread.
        self.slot.thread.store(0, Ordering::Release);
        self.slot.fd.store(-1, Ordering::Release);
        self.slot.spare.store(-1, Ordering::Release);
        self.slot.cancelled.store(false, Ordering::SeqCst);
        self.slot.claimed.store(false, Ordering::Release);
    }
}

impl InterruptHandle {
    pub fn interrupt(&self) {
        self.slot.cancelled.store(true, Ordering::SeqCst);
        // Someone may have replaced our handler since we claimed the signal:
        // the signal would then be ignored, or handled by code that knows
        // nothing of our slot, and the wait would last until the holder lets
        // go. Take it back first, chaining to theirs.
        if !is_ours(self.sig) {
            install(self.sig);
        }
        // SAFETY: the thread is alive (see the type's docs); an error
        // (ESRCH) would mean it is not, and then there is nothing to wake.
        unsafe { libc::pthread_kill(self.thread, self.sig) };
    }
}

// The handle is sent to the cancelling thread; pthread_t is an integer or a
// pointer used only as an id here.
// SAFETY: no thread-affine state: a static slot reference, an id, a number.
unsafe impl Send for InterruptHandle {}

#[cfg(test)]
mod tests;
