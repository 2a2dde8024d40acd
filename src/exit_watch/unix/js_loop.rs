//! Exit delivery on the JS thread's own libuv loop (Linux: the child's
//! pidfd polled there). The binding hands over the loop and a
//! [`LoopListener`] (the `'exit'` callback, tied to its JS environment's
//! teardown); the watch, its handles and every libuv call are here, and no
//! napi type is.
//!
//! Why: off the loop, the pidfd's readiness wakes procward's reaper thread,
//! which then wakes the JS thread through a threadsafe function:
//! two thread wake-ups between the kernel and the `'exit'` listener. Polling
//! the pidfd with a `uv_poll_t` on the loop napi hands out
//! (`napi_get_uv_event_loop`) makes it one, the same as `child_process`'s
//! own SIGCHLD path: the loop's epoll returns, we sweep and reap on the JS
//! thread (two `waitid`s and a `killpg`, microseconds), and call the
//! listener (the binding calls it through `napi_make_callback`), so
//! promises settle at once.
//!
//! libuv's functions are looked up with `dlsym` in the running process
//! (Node exports them to addons; `js_loop/uv.rs` is the one file that calls
//! them). Finding them is not enough: Bun exports every
//! `uv_*` symbol as a stub that aborts the process, so the JS side allows
//! this back-end only under Node (`use_loop`); elsewhere, and with
//! `PROCWARD_EXIT_WATCH=tokio`, the tokio back-end serves.
//!
//! The loop delivers; it is not the only reaper. procward's reaper thread
//! holds the same pidfd in its own epoll (no duplicate: the child's one fd,
//! which `Watched` owns) and settles the child itself if the loop has not
//! within its grace (1 ms) of the exit, so a blocked JS thread never leaves
//! a zombie. Settling happens once, under one lock; the other side finds it
//! settled. The JS side adds the direct wake-up.
//!
//! Readable, yet nothing to reap: a tracer (`PTRACE_SEIZE` from another
//! process) is told of the exit first, and until it detaches or waits our
//! `waitid` cannot see the zombie, while the pidfd stays readable. libuv
//! polls level-triggered, so polling on would spin the JS thread. The loop
//! parks instead: it closes the poll handle and opens a `uv_async_t` that
//! the native watcher's settle wakes (`Watched::on_settle`); the async
//! callback then delivers the exit. If no native watcher runs (its start
//! failed), parking starts one first, and only if that fails too does the
//! loop keep polling. Each callback looks at the state first, so an
//! exit the native side settled while the loop was blocked is delivered even
//! if another child has the pid by then.
//!
//! A contained child (`cgroup`): its reap waits for the cgroup to empty,
//! which the JS thread must not wait for. Usually it is empty once killed,
//! and the loop settles it at once like any other; when members are still
//! dying, the wait goes to procward's runtime and the loop parks the same
//! way until that settle wakes it.
//!
//! Lifetimes. The handles and their state are owned by the loop, not by
//! the JS object: a dropped or collected `SupervisedProcess` is still reaped.
//! `unref()` is `uv_unref` on the handle. When the environment is torn down
//! with the child still running (a worker that ends), the hook the listener
//! registered for it ([`LoopListener::on_teardown`]) stops polling and drops
//! the listener without calling it; the native watcher still reaps and
//! sweeps the child.
//!
//! The pidfd is closed only once the child is settled and libuv has stopped
//! polling it (`Watched::detach_loop` after `uv_poll_stop`): closed under a
//! live poll, libuv's epoll would keep a stale entry for that fd number.

mod uv;

use std::ffi::{c_int, c_void};
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{watch_beside_loop, Watched};
use crate::exit_watch::{forced_fallback, forced_tokio, ExitStatus, LoopListener, Wake};
use crate::spawn_trace;
use uv::{Kind, Uv};

/// Whether children can be watched on the JS loop in this process.
fn available() -> bool {
    !forced_tokio() && !forced_fallback() && uv::uv().is_some()
}

/// Delivers `watched`'s exit on this JS thread's loop, through its pidfd,
/// when this process can. None: not here (no pidfd, no libuv, a forced
/// back-end, or the loop refused it); the caller's other back-end serves.
/// `uv_loop` and `listener` are asked only once the pidfd is attached.
///
/// The loop only *delivers* the exit. The reap must never wait for the JS
/// thread (a blocked loop would leave a zombie, the very bug of
/// child_process this library ends), so the native reaper settles the child
/// too if the loop has not within its grace; settling happens once, under
/// one lock. Where the reaper cannot take the child, a waiter thread does.
///
/// # Safety
/// On a JS thread; `uv_loop` gives that thread's libuv loop, and the
/// listener is one to be called on that thread.
pub unsafe fn watch_on_loop(
    watched: &Arc<Watched>,
    uv_loop: impl FnOnce() -> Option<*mut c_void>,
    listener: impl FnOnce() -> Option<Box<dyn LoopListener>>,
) -> Option<LoopRef> {
    if !available() {
        return None;
    }
    let fd = watched.attach_loop()?;
    // SAFETY: the loop and listener are this thread's (caller's contract);
    // `fd` stays open until `detach_loop`.
    let Some(loop_ref) = (unsafe { start(uv_loop, listener, watched.clone(), fd) }) else {
        watched.detach_loop();
        return None;
    };
    spawn_trace::mark(spawn_trace::ON_LOOP);
    // An error here (no reaper and no thread) leaves the loop as the only
    // reaper, which still reaps whenever the loop runs.
    if spawn_trace::safety_net() {
        let _ = watch_beside_loop(watched);
    }
    spawn_trace::mark(spawn_trace::BESIDE_LOOP);
    Some(loop_ref)
}

/// What the JS object's ref()/unref() acts on: the open handle (the poll
/// handle, or the async one once parked; none once closed), and whether the
/// user asked for unref, so that a handle opened later follows suit. Only
/// touched on the JS thread; the Mutex makes it Send.
#[derive(Default)]
struct RefState {
    handle: Option<usize>,
    unref: bool,
}

#[derive(Clone, Default)]
pub struct LoopRef(Arc<Mutex<RefState>>);

impl LoopRef {
    fn lock(&self) -> MutexGuard<'_, RefState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `uv_ref`/`uv_unref` the open handle; only remembered once closed.
    pub fn set_ref(&self, on: bool) {
        let mut state = self.lock();
        state.unref = !on;
        let (Some(uv), Some(handle)) = (uv::uv(), state.handle) else {
            return;
        };
        // SAFETY: the handle is open (the slot is cleared before uv_close)
        // and we are on its loop's thread.
        unsafe { uv.set_ref(handle as *mut c_void, on) }
    }

    fn set_handle(&self, handle: Option<*mut c_void>) {
        self.lock().handle = handle.map(|h| h as usize);
    }
}

/// The async handle's address while a settle may still wake it; cleared
/// (under the lock a sender holds while sending) before it is closed.
type WakeSlot = Arc<Mutex<Option<usize>>>;

struct LoopWatch {
    /// uv_poll_t storage (`uv_handle_size(UV_POLL)` bytes, 8-aligned). Its
    /// first field, `data`, points back at this struct.
    poll: Box<[u64]>,
    /// uv_async_t storage, once parked (see the module docs); `data` as above.
    wake: Option<Box<[u64]>>,
    poll_open: bool,
    wake_open: bool,
    /// Handles initialised and not yet through `on_closed`: the struct is
    /// freed when the last one has closed.
    handles: u8,
    uv_loop: *mut c_void,
    /// The binding's side, taken when the exit is delivered; dropped
    /// uncalled when the JS environment goes first.
    listener: Option<Box<dyn LoopListener>>,
    /// Owns the polled pidfd, open until `detach_loop` (right after
    /// `uv_poll_stop`).
    watched: Arc<Watched>,
    shared: LoopRef,
    wake_slot: WakeSlot,
    done: bool,
}

impl LoopWatch {
    fn poll_ptr(&mut self) -> *mut c_void {
        self.poll.as_mut_ptr().cast()
    }
}

/// The LoopWatch a handle belongs to.
///
/// # Safety
/// `handle` is one of a live LoopWatch's handles, its `data` set.
unsafe fn watch_of<'a>(handle: *mut c_void) -> &'a mut LoopWatch {
    // SAFETY: one of our handles (caller's contract).
    let w = unsafe { uv::data(handle) } as *mut LoopWatch;
    // SAFETY: `data` points at the LoopWatch, alive until its last handle
    // has closed (caller's contract).
    unsafe { &mut *w }
}

/// Starts polling `pidfd` on the JS thread's loop. None: it could not;
/// nothing polls the fd then.
///
/// # Safety
/// As [`watch_on_loop`]; `pidfd` is open until `watched.detach_loop()`.
unsafe fn start(
    uv_loop: impl FnOnce() -> Option<*mut c_void>,
    listener: impl FnOnce() -> Option<Box<dyn LoopListener>>,
    watched: Arc<Watched>,
    pidfd: RawFd,
) -> Option<LoopRef> {
    let uv = uv::uv()?;
    let uv_loop = uv_loop().filter(|l| !l.is_null())?;
    let listener = listener()?;
    let shared = LoopRef::default();
    let watch = Box::into_raw(Box::new(LoopWatch {
        poll: uv.handle_storage(Kind::Poll),
        wake: None,
        poll_open: false,
        wake_open: false,
        handles: 0,
        uv_loop,
        listener: Some(listener),
        watched,
        shared: shared.clone(),
        wake_slot: WakeSlot::default(),
        done: false,
    }));
    // SAFETY: `watch` is a fresh, uniquely owned allocation.
    let w = unsafe { &mut *watch };
    let handle = w.poll_ptr();
    // SAFETY: a zeroed handle of libuv's size on the JS thread's loop; the
    // fd stays open until the handle is stopped (caller's contract).
    let rc = unsafe { uv.poll_init(uv_loop, handle, pidfd) };
    if rc != 0 {
        // SAFETY: nothing refers to the allocation yet; take it back (the
        // listener, dropped with it, lets go of JS).
        drop(unsafe { Box::from_raw(watch) });
        return None;
    }
    // SAFETY: poll handle storage.
    unsafe { uv::set_data(handle, watch.cast()) };
    w.poll_open = true;
    w.handles = 1;
    // SAFETY: the handle was initialised; on_readable matches uv_poll_cb.
    if unsafe { uv.poll_start_readable(handle, on_readable) } != 0 {
        // An initialised handle must be closed, not freed; the pidfd is
        // left to the caller's other back-end (libuv never added it to its
        // epoll set).
        w.done = true;
        w.listener = None;
        close(w);
        return None;
    }
    shared.set_handle(Some(handle));
    if let Some(listener) = w.listener.as_mut() {
        // Removed by the listener when the exit is delivered.
        listener.on_teardown(on_teardown, watch.cast());
    }
    Some(shared)
}

unsafe extern "C" fn on_readable(handle: *mut c_void, _status: c_int, _events: c_int) {
    // SAFETY: libuv calls this for our open poll handle.
    let w = unsafe { watch_of(handle) };
    if w.done {
        return;
    }
    spawn_trace::mark(spawn_trace::EXIT_READABLE);
    let settled = w.watched.try_settle();
    spawn_trace::mark(spawn_trace::EXIT_SETTLED);
    match settled {
        Some(status) => deliver(w, status),
        None => {
            // Nothing to reap. With the child still running (an error
            // event, say), poll on. Exited, yet not waitable: a tracer holds
            // the zombie; polling on would spin.
            if w.watched.pidfd_readable() {
                park(w);
            }
        }
    }
}

/// Stops polling the pidfd and waits for the native watcher's settle to
/// wake the loop instead (see the module docs). Leaves things as they were
/// (polling) only if nothing else could settle the child.
fn park(w: &mut LoopWatch) {
    let Some(uv) = uv::uv() else { return };
    if !w.watched.has_native_watcher() && watch_beside_loop(&w.watched).is_err() {
        return;
    }
    let mut wake = uv.handle_storage(Kind::Async);
    let handle: *mut c_void = wake.as_mut_ptr().cast();
    // SAFETY: zeroed storage of libuv's size, initialised on the JS thread's
    // own loop; on_wake matches uv_async_cb.
    if unsafe { uv.async_init(w.uv_loop, handle, on_wake) } != 0 {
        return;
    }
    // SAFETY: async handle storage.
    unsafe { uv::set_data(handle, (w as *mut LoopWatch).cast()) };
    // The box moves; the storage it points at, which libuv knows, does not.
    w.wake = Some(wake);
    w.wake_open = true;
    w.handles += 1;
    if w.shared.lock().unref {
        // SAFETY: an open handle of this loop, on its thread.
        unsafe { uv.set_ref(handle, false) };
    }
    w.shared.set_handle(Some(handle));
    *lock_slot(&w.wake_slot) = Some(handle as usize);
    let slot = w.wake_slot.clone();
    let uv: &'static Uv = uv;
    let wake: Wake = Box::new(move || {
        let slot = lock_slot(&slot);
        if let Some(handle) = *slot {
            // SAFETY: uv_async_send may be called from any thread; the
            // handle is open while the slot holds it, and it is closed only
            // after the slot is cleared under this same lock.
            unsafe { uv.async_send(handle as *mut c_void) };
        }
    });
    if let Err(wake) = w.watched.on_settle(wake) {
        wake(); // settled meanwhile: on_wake delivers on the next turn
    }
    close_poll(w);
}

unsafe extern "C" fn on_wake(handle: *mut c_void) {
    // SAFETY: libuv calls this for our open async handle.
    let w = unsafe { watch_of(handle) };
    if w.done {
        return;
    }
    if let Some(status) = w.watched.exit_status() {
        deliver(w, status);
    }
}

fn lock_slot(slot: &WakeSlot) -> MutexGuard<'_, Option<usize>> {
    slot.lock().unwrap_or_else(|e| e.into_inner())
}

/// The child is settled: close the handles and call the listener.
///
/// Closed first, the pidfd with them (`close_poll` → `detach_loop`): a
/// listener that spawns at once (a restart) has that fd back, which at the
/// fd limit is the difference between a restart and EMFILE. Four system
/// calls stand between the reap and the listener for it.
fn deliver(w: &mut LoopWatch, status: ExitStatus) {
    w.done = true;
    let listener = w.listener.take();
    close(w);
    spawn_trace::mark(spawn_trace::EXIT_TIDIED);
    // On the JS thread, inside the loop, outside any JS frame.
    if let Some(listener) = listener {
        listener.exit(status);
    }
}

/// Stops polling and closes the poll handle; the pidfd may then be closed
/// (by `Watched`, once the child is settled).
fn close_poll(w: &mut LoopWatch) {
    if w.poll_open {
        w.poll_open = false;
        if let Some(uv) = uv::uv() {
            let handle = w.poll_ptr();
            // SAFETY: an initialised handle of this loop.
            unsafe { uv.poll_stop(handle) };
            // SAFETY: closed exactly once (poll_open guards it); libuv
            // allows closing the polled fd right after this.
            unsafe { uv.close(handle, on_closed) };
        }
        w.watched.detach_loop();
    }
}

/// Closes every handle; the allocation is freed in `on_closed` once the
/// last has closed, which libuv reports on a later loop iteration.
fn close(w: &mut LoopWatch) {
    w.shared.set_handle(None);
    *lock_slot(&w.wake_slot) = None;
    close_poll(w);
    if w.wake_open {
        w.wake_open = false;
        if let (Some(uv), Some(wake)) = (uv::uv(), w.wake.as_mut()) {
            // SAFETY: an initialised async handle of this loop, closed once
            // (wake_open guards it), and no longer reachable by a sender
            // (the slot was cleared above).
            unsafe { uv.close(wake.as_mut_ptr().cast(), on_closed) };
        }
    }
}

unsafe extern "C" fn on_closed(handle: *mut c_void) {
    // SAFETY: `data` points at the Box we leaked in `start`; libuv is done
    // with this handle.
    let raw = unsafe { uv::data(handle) } as *mut LoopWatch;
    // SAFETY: as above; the struct lives until its last handle has closed.
    let w = unsafe { &mut *raw };
    w.handles -= 1;
    if w.handles == 0 {
        // SAFETY: the last handle is closed: nothing refers to it any more.
        drop(unsafe { Box::from_raw(raw) });
    }
}

/// The JS environment is going away with the child still running: stop
/// watching and drop the listener without calling it. The native watcher
/// started beside this one still sweeps and reaps the child.
fn finish_without_js(w: &mut LoopWatch) {
    w.done = true;
    w.listener = None;
    close(w);
}

/// The hook the listener runs at its environment's teardown
/// ([`LoopListener::on_teardown`]).
unsafe extern "C" fn on_teardown(arg: *mut c_void) {
    // SAFETY: registered with our LoopWatch, still alive: the listener
    // removes the hook when the exit is delivered, and the watch is freed
    // only on a later loop turn (`on_closed`).
    let w = unsafe { &mut *(arg as *mut LoopWatch) };
    if !w.done {
        finish_without_js(w);
    }
}
