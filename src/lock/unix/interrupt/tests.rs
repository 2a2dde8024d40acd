//! Every flavour this system can run (on Linux: its own and macOS's).

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU32;
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

use super::super::os::{open_for_lock, try_lock_exclusive};
use super::*;

/// One at a time: some change a signal's disposition, which all of them use.
static DISPOSITIONS: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    DISPOSITIONS.lock().unwrap_or_else(|e| e.into_inner())
}

fn scratch(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("procward-intr-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// A waiter on `path`, held by someone else, in flavour `flavour`: its
/// interrupt handle and the channel its end comes on.
fn waiter(
    path: &Path,
    flavour: &'static Flavour,
    between: impl Fn() + Send + 'static,
) -> (
    InterruptHandle,
    mpsc::Receiver<Result<(), Blocked>>,
    JoinHandle<()>,
) {
    let fd = open_for_lock(path, 0o600, false).unwrap();
    let (handle_tx, handle_rx) = mpsc::channel();
    let (end_tx, end_rx) = mpsc::channel();
    let thread = spawn_quiet("test-waiter", 256 * 1024, move || {
        let intr = Interruptible::register_as(fd.as_fd(), flavour).unwrap();
        handle_tx.send(intr.handle()).unwrap();
        let end = intr.lock_exclusive_after(fd.as_fd(), between);
        let _ = end_tx.send(end);
        // Keeps the thread (and its registration) alive until the end is read.
        drop(intr);
    })
    .unwrap();
    (handle_rx.recv().unwrap(), end_rx, thread)
}

/// `path` opened and locked by a holder other than the waiters.
fn held(path: &Path) -> OwnedFd {
    let holder = open_for_lock(path, 0o600, false).unwrap();
    assert!(try_lock_exclusive(holder.as_fd()).unwrap());
    holder
}

/// A waiter's end, received within 5 s: the interrupt's.
fn assert_interrupted(end: Result<Result<(), Blocked>, mpsc::RecvTimeoutError>, what: &str) {
    let end = end.unwrap_or_else(|_| panic!("{what}: the interrupt was lost"));
    assert!(matches!(end, Err(Blocked::Interrupted)), "{what}: {end:?}");
}

/// Runs `test` in every flavour, one at a time, each on a scratch path of
/// its own (removed afterwards).
fn each_flavour(name: &str, test: impl Fn(&str, &'static Flavour, &Path)) {
    let _serial = serial();
    for (i, flavour) in imp::test_flavours().into_iter().enumerate() {
        let path = scratch(&format!("{name}{i}"));
        test(&format!("flavour {i}"), flavour, &path);
        let _ = std::fs::remove_file(&path);
    }
}

/// True once `cond` holds, within about a second.
fn eventually(cond: impl Fn() -> bool) -> bool {
    for _ in 0..500 {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

/// The race the handler's dup2 exists for: the interrupt lands after the
/// waiter's last check, before it enters flock. Without the dup2 the signal
/// would be spent and flock would block for good.
#[test]
fn an_interrupt_before_the_call_is_not_lost() {
    each_flavour("window", |what, flavour, path| {
        let holder = held(path);
        let in_window = Arc::new(Barrier::new(2));
        let theirs = in_window.clone();
        let (handle, end, thread) = waiter(path, flavour, move || {
            theirs.wait();
            std::thread::sleep(Duration::from_millis(30));
        });
        in_window.wait();
        handle.interrupt();
        assert_interrupted(end.recv_timeout(Duration::from_secs(5)), what);
        thread.join().unwrap();
        // The lock fd was swapped out, never locked: the holder still has it.
        let other = open_for_lock(path, 0o600, false).unwrap();
        assert!(!try_lock_exclusive(other.as_fd()).unwrap());
        drop(holder);
    });
}

/// Interrupted while blocked in flock, in every flavour; and so even where
/// something replaced our handler after we claimed the signal (here:
/// SIG_IGN; an LD_PRELOAD library or another addon can do the same).
/// Without a check at cancel time that interrupt is lost and the waiter
/// blocks until the holder lets go.
#[test]
fn an_interrupt_ends_a_blocked_flock_even_past_a_replaced_handler() {
    for replaced in [false, true] {
        each_flavour("blocked", |what, flavour, path| {
            let what = format!("{what}{}", if replaced { ", SIG_IGN" } else { "" });
            let holder = held(path);
            let (handle, end, thread) = waiter(path, flavour, || {});
            std::thread::sleep(Duration::from_millis(30));
            assert!(end.try_recv().is_err(), "{what}: not waiting");
            let sig = flavour.signal().unwrap();
            if replaced {
                // SAFETY: SIG_IGN for a signal whose only users in this test
                // process are our waiters (and these tests).
                unsafe { libc::signal(sig, libc::SIG_IGN) };
            }
            handle.interrupt();
            let end = end.recv_timeout(Duration::from_secs(5));
            // Let go first: a waiter whose interrupt was lost ends too.
            drop(holder);
            assert_interrupted(end, &what);
            thread.join().unwrap();
            assert!(is_ours(sig), "{what}");
        });
    }
}

static SEEN: AtomicU32 = AtomicU32::new(0);
static SEEN_SIGNO: AtomicI32 = AtomicI32::new(0);

extern "C" fn counting(sig: c_int, info: *mut libc::siginfo_t, _ctx: *mut c_void) {
    SEEN.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler,
    // and chain() passes ours on.
    let signo = unsafe { (*info).si_signo };
    SEEN_SIGNO.store(if signo == sig { sig } else { -1 }, Ordering::SeqCst);
}

fn set_action(sig: c_int, handler: usize, flags: c_int) {
    // SAFETY: a zeroed sigaction is a valid starting point.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = flags;
    // SAFETY: empties the mask we own.
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    // SAFETY: installs a handler that only touches atomics.
    assert_eq!(
        unsafe { libc::sigaction(sig, &act, std::ptr::null_mut()) },
        0
    );
}

fn wait_seen(n: u32) -> bool {
    eventually(|| SEEN.load(Ordering::SeqCst) >= n)
}

/// SIGURG belongs to whoever had it: a signal that is not our interrupt
/// reaches the handler that was there before ours (siginfo intact), on any
/// thread, a waiter's included; our interrupts never do; and our handler
/// keeps its SA_RESTART choice.
#[test]
fn sigurg_chains_to_the_handler_that_was_there() {
    let _serial = serial();
    let sig = libc::SIGURG;
    let counting = counting as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize;
    // Someone's handler, without SA_RESTART, taken over by our claim (or, if
    // the claim happened earlier in this process, by the re-install).
    set_action(sig, counting, libc::SA_SIGINFO);
    assert!(install(sig));
    assert!(is_ours(sig));
    let flags = disposition(sig).unwrap().sa_flags;
    assert_eq!(flags & libc::SA_RESTART, 0, "theirs had no SA_RESTART");
    assert_ne!(flags & libc::SA_SIGINFO, 0);
    let _ = SIGURG_SOCKET.signal().unwrap();
    SEEN.store(0, Ordering::SeqCst);

    // On this (plain) thread.
    // SAFETY: signals this thread; the handler chains to `counting`.
    unsafe { libc::pthread_kill(libc::pthread_self(), sig) };
    assert!(wait_seen(1), "not chained on a plain thread");
    assert_eq!(SEEN_SIGNO.load(Ordering::SeqCst), sig);

    // On a waiter that is not cancelled: theirs, and the wait goes on.
    let path = scratch("chain");
    let holder = held(&path);
    let (handle, end, thread) = waiter(&path, &SIGURG_SOCKET, || {});
    std::thread::sleep(Duration::from_millis(20));
    // SAFETY: the waiter thread is alive (it has not sent its end).
    unsafe { libc::pthread_kill(handle.thread, sig) };
    assert!(wait_seen(2), "not chained on a waiter");
    std::thread::sleep(Duration::from_millis(20));
    assert!(end.try_recv().is_err(), "a stray SIGURG ended the wait");

    // Our own interrupt: consumed, not passed on.
    handle.interrupt();
    assert_interrupted(end.recv_timeout(Duration::from_secs(5)), "SIGURG");
    thread.join().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        SEEN.load(Ordering::SeqCst),
        2,
        "our interrupt reached their handler"
    );
    drop(holder);
    let _ = std::fs::remove_file(&path);

    // Back to the default, chained: SA_RESTART, and nothing to call.
    set_action(sig, libc::SIG_DFL, 0);
    assert!(install(sig));
    assert_ne!(disposition(sig).unwrap().sa_flags & libc::SA_RESTART, 0);
    // SAFETY: as above; SIG_DFL for SIGURG is to ignore it.
    unsafe { libc::pthread_kill(libc::pthread_self(), sig) };
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(SEEN.load(Ordering::SeqCst), 2);
}

/// A plain (non-SA_SIGINFO) handler is called with the signal alone.
#[test]
fn sigurg_chains_to_a_plain_handler() {
    static PLAIN: AtomicU32 = AtomicU32::new(0);
    extern "C" fn plain(_sig: c_int) {
        PLAIN.fetch_add(1, Ordering::SeqCst);
    }
    let _serial = serial();
    let sig = libc::SIGURG;
    set_action(
        sig,
        plain as extern "C" fn(c_int) as usize,
        libc::SA_RESTART,
    );
    assert!(install(sig));
    assert_ne!(disposition(sig).unwrap().sa_flags & libc::SA_RESTART, 0);
    // SAFETY: signals this thread; the handler chains to `plain`.
    unsafe { libc::pthread_kill(libc::pthread_self(), sig) };
    eventually(|| PLAIN.load(Ordering::SeqCst) > 0);
    assert_eq!(PLAIN.load(Ordering::SeqCst), 1);
    set_action(sig, libc::SIG_DFL, 0);
    assert!(install(sig));
}

/// A handler that chains back to ours (it replaced ours, keeping ours as its
/// previous one, and a cancel took the signal back, chaining to it): each
/// signal reaches it once, with no recursion between the two.
#[test]
fn a_handler_that_chains_back_does_not_recurse() {
    static BACK: AtomicU32 = AtomicU32::new(0);
    extern "C" fn chains_back(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
        // Bounded, so that a missing guard fails the test instead of the stack.
        if BACK.fetch_add(1, Ordering::SeqCst) < 100 {
            on_signal(sig, info, ctx);
        }
    }
    let _serial = serial();
    let sig = libc::SIGURG;
    set_action(
        sig,
        chains_back as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize,
        libc::SA_SIGINFO | libc::SA_RESTART,
    );
    assert!(install(sig));
    // SAFETY: signals this thread; ours chains to `chains_back`, which calls ours.
    unsafe { libc::pthread_kill(libc::pthread_self(), sig) };
    eventually(|| BACK.load(Ordering::SeqCst) > 0);
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(BACK.load(Ordering::SeqCst), 1);
    set_action(sig, libc::SIG_DFL, 0);
    assert!(install(sig));
}
