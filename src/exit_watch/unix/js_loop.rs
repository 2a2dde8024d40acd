//! Exit delivery on the JS thread's own libuv loop (Linux: the child's
//! pidfd polled there). The binding hands over the loop and a
//! [`LoopListener`] (the `'exit'` callback, tied to its JS environment's
//! teardown); the watch, its handles and every libuv call are here, and no
//! napi type is.
//!
//! Why: off the loop, the pidfd's readiness wakes procward's reaper thread,
//! which then wakes the JS thread through a threadsafe function:
//! two thread wake-ups between the kernel and the `'exit'` listener. Polling
//! the pidfd on the loop napi hands out (`napi_get_uv_event_loop`) makes it
//! one, the same as `child_process`'s own SIGCHLD path: the loop's epoll
//! returns, we sweep and reap on the JS thread (two `waitid`s and a
//! `killpg`, microseconds), and call the listener (the binding calls it
//! through `napi_make_callback`), so promises settle at once. The pidfds of
//! a loop's children sit in one epoll of ours, its hub (`js_loop/hub.rs`),
//! which one `uv_poll_t` watches: a child costs one `epoll_ctl` at its
//! spawn and none at its exit.
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
//! `waitid` cannot see the zombie, while the pidfd stays readable. The hub
//! registers each pidfd one-shot, so that event came once and no more
//! will; the loop parks: it leaves the hub and opens a `uv_async_t` that
//! the native watcher's settle wakes (`Watched::on_settle`); the async
//! callback then delivers the exit. If no native watcher runs (its start
//! failed), parking starts one first, and only if that fails too does the
//! loop arm the registration again and poll on. Each callback looks at the
//! state first, so an exit the native side settled while the loop was
//! blocked is delivered even if another child has the pid by then.
//!
//! A contained child (`cgroup`): its reap waits for the cgroup to empty,
//! which the JS thread must not wait for. Usually it is empty once killed,
//! and the loop settles it at once like any other; when members are still
//! dying, the wait goes to procward's runtime and the loop parks the same
//! way until that settle wakes it.
//!
//! Lifetimes. The handles and their state are owned by the loop, not by
//! the JS object: a dropped or collected `SupervisedProcess` is still reaped.
//! `unref()` takes the child out of the hub's count (its poll handle is
//! referenced while any of its children is), or is `uv_unref` on the
//! parked child's async handle. When the environment is torn down
//! with the child still running (a worker that ends), the hook the listener
//! registered for it ([`LoopListener::on_teardown`]) stops polling and drops
//! the listener without calling it; the native watcher still reaps and
//! sweeps the child.
//!
//! The pidfd is closed once the child is settled and has left the hub
//! (`Watched::detach_loop`), before `'exit'` runs; the close takes it out
//! of the hub's epoll (and the reaper's). libuv never sees it.

mod hub;
mod uv;

use std::ffi::c_void;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{watch_beside_loop, Watched};
use crate::exit_watch::{forced_fallback, forced_tokio, ExitStatus, LoopListener, Wake};
use crate::spawn_trace;
use hub::Hub;
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

/// What the JS object's ref()/unref() acts on: the child's place in its
/// loop's hub, or its async handle once parked (none once closed), and
/// whether the user asked for unref, so that what comes later follows
/// suit. Only touched on the JS thread; the Mutex makes it Send.
#[derive(Default)]
struct RefState {
    target: Target,
    unref: bool,
}

#[derive(Clone, Copy, Default)]
enum Target {
    #[default]
    None,
    /// Registered with this hub: it counts the referenced children.
    Hub(usize),
    /// Parked: this async handle.
    Async(usize),
}

#[derive(Clone, Default)]
pub struct LoopRef(Arc<Mutex<RefState>>);

impl LoopRef {
    fn lock(&self) -> MutexGuard<'_, RefState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `ref()` / `unref()`: the hub's count, or `uv_ref`/`uv_unref` of the
    /// async handle; only remembered once closed.
    pub fn set_ref(&self, on: bool) {
        let mut state = self.lock();
        if state.unref != on {
            return; // no change
        }
        state.unref = !on;
        match state.target {
            Target::None => {}
            // SAFETY: a hub lives while a child is registered with it (the
            // target is cleared when the child leaves), on this thread.
            Target::Hub(hub) => unsafe { hub::set_ref(hub as *mut Hub, on) },
            Target::Async(handle) => {
                if let Some(uv) = uv::uv() {
                    // SAFETY: the handle is open (the target is cleared
                    // before uv_close) and we are on its loop's thread.
                    unsafe { uv.set_ref(handle as *mut c_void, on) }
                }
            }
        }
    }

    fn set_target(&self, target: Target) {
        self.lock().target = target;
    }

    fn unref(&self) -> bool {
        self.lock().unref
    }
}

/// The async handle's address while a settle may still wake it; cleared
/// (under the lock a sender holds while sending) before it is closed.
type WakeSlot = Arc<Mutex<Option<usize>>>;

struct LoopWatch {
    /// The loop's hub, and this child's key there while registered.
    hub: *mut Hub,
    key: u64,
    in_hub: bool,
    /// The polled pidfd (`Watched`'s), open until `detach_loop`.
    pidfd: RawFd,
    /// uv_async_t storage, once parked (see the module docs); its `data`
    /// points back at this struct.
    wake: Option<Box<[u64]>>,
    wake_open: bool,
    /// Handles initialised and not yet through `on_closed`: the struct is
    /// freed when it is done and none is left.
    handles: u8,
    uv_loop: *mut c_void,
    /// The binding's side, taken when the exit is delivered; dropped
    /// uncalled when the JS environment goes first.
    listener: Option<Box<dyn LoopListener>>,
    /// Owns the polled pidfd, open until `detach_loop`.
    watched: Arc<Watched>,
    shared: LoopRef,
    wake_slot: WakeSlot,
    done: bool,
}

/// Starts watching `pidfd` through this thread's hub. None: it could not;
/// nothing watches the fd then.
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
    let mut listener = listener()?;
    // SAFETY: on the loop's thread (caller's contract); the hub's teardown
    // hook goes to this listener's environment.
    let hub = unsafe {
        hub::of(uv, uv_loop, on_ready, on_gone, |hook, arg| {
            listener.on_env_teardown(hook, arg)
        })
    }?;
    let shared = LoopRef::default();
    let watch = Box::into_raw(Box::new(LoopWatch {
        hub,
        key: 0,
        in_hub: false,
        pidfd,
        wake: None,
        wake_open: false,
        handles: 0,
        uv_loop,
        listener: Some(listener),
        watched,
        shared: shared.clone(),
        wake_slot: WakeSlot::default(),
        done: false,
    }));
    // SAFETY: the hub is live, on its thread; the fd is open until
    // `detach_loop`, which comes after the watch leaves the hub.
    let Some(key) = (unsafe { hub::add(hub, pidfd, watch.cast(), false) }) else {
        // SAFETY: nothing refers to the allocation: take it back (the
        // listener, dropped with it, lets go of JS).
        drop(unsafe { Box::from_raw(watch) });
        return None;
    };
    // SAFETY: a fresh allocation; the hub only calls back through it from
    // the loop, not during this call.
    let w = unsafe { &mut *watch };
    w.key = key;
    w.in_hub = true;
    shared.set_target(Target::Hub(hub as usize));
    if let Some(listener) = w.listener.as_mut() {
        // Removed by the listener when the exit is delivered.
        listener.on_teardown(on_teardown, watch.cast());
    }
    Some(shared)
}

/// The hub saw the child's pidfd readable (once: one-shot).
unsafe fn on_ready(arg: *mut c_void) {
    // SAFETY: the hub calls this with a registered, hence live, watch.
    let w = unsafe { &mut *(arg as *mut LoopWatch) };
    if w.done {
        return;
    }
    spawn_trace::mark(spawn_trace::EXIT_READABLE);
    let settled = w.watched.try_settle();
    spawn_trace::mark(spawn_trace::EXIT_SETTLED);
    match settled {
        Some(status) => deliver(w, status),
        // Nothing to reap: exited, yet not waitable (a tracer holds the
        // zombie), or under way elsewhere. The registration is spent; the
        // native watcher's settle wakes the loop instead.
        None => park(w),
    }
}

/// Leaves the hub and waits for the native watcher's settle to wake the
/// loop instead (see the module docs). If nothing else could settle the
/// child, it stays in the hub, armed for one more event.
fn park(w: &mut LoopWatch) {
    let Some(uv) = uv::uv() else { return rearm(w) };
    if !w.watched.has_native_watcher() && watch_beside_loop(&w.watched).is_err() {
        return rearm(w);
    }
    let mut wake = uv.handle_storage(Kind::Async);
    let handle: *mut c_void = wake.as_mut_ptr().cast();
    // SAFETY: zeroed storage of libuv's size, initialised on the JS thread's
    // own loop; on_wake matches uv_async_cb.
    if unsafe { uv.async_init(w.uv_loop, handle, on_wake) } != 0 {
        return rearm(w);
    }
    // SAFETY: async handle storage.
    unsafe { uv::set_data(handle, (w as *mut LoopWatch).cast()) };
    // The box moves; the storage it points at, which libuv knows, does not.
    w.wake = Some(wake);
    w.wake_open = true;
    w.handles += 1;
    if w.shared.unref() {
        // SAFETY: an open handle of this loop, on its thread.
        unsafe { uv.set_ref(handle, false) };
    }
    leave_hub(w);
    w.shared.set_target(Target::Async(handle as usize));
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
}

/// Polls on: the registration armed for one more event.
fn rearm(w: &mut LoopWatch) {
    if w.in_hub {
        // SAFETY: registered, so the hub is live; the fd is open until
        // `detach_loop`.
        unsafe { hub::rearm(w.hub, w.pidfd, w.key) };
    }
}

unsafe extern "C" fn on_wake(handle: *mut c_void) {
    // SAFETY: libuv calls this for our open async handle, whose `data` is
    // its live LoopWatch.
    let w = unsafe { &mut *(uv::data(handle) as *mut LoopWatch) };
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

/// The child is settled: let go of it and call the listener.
///
/// Let go of first, the pidfd with it (`detach_loop`): a listener that
/// spawns at once (a restart) has that fd back, which at the fd limit is
/// the difference between a restart and EMFILE.
fn deliver(w: &mut LoopWatch, status: ExitStatus) {
    w.done = true;
    let listener = w.listener.take();
    // SAFETY: `w` is not used after this.
    unsafe { close(w) };
    spawn_trace::mark(spawn_trace::EXIT_TIDIED);
    // On the JS thread, inside the loop, outside any JS frame.
    if let Some(listener) = listener {
        listener.exit(status);
    }
}

/// Out of the hub, and the pidfd handed back (`detach_loop`: `Watched`
/// closes it once the child is settled).
fn leave_hub(w: &mut LoopWatch) {
    if w.in_hub {
        w.in_hub = false;
        // SAFETY: registered until now, so the hub is live; on its thread.
        unsafe { hub::leave(w.hub, w.key, w.shared.unref()) };
        w.watched.detach_loop();
    }
}

/// Lets go of everything: out of the hub, the async handle closed. The
/// struct is freed here when no handle is left, else in `on_closed`.
///
/// # Safety
/// `w` is not used after this call.
unsafe fn close(w: &mut LoopWatch) {
    w.shared.set_target(Target::None);
    *lock_slot(&w.wake_slot) = None;
    leave_hub(w);
    if w.wake_open {
        w.wake_open = false;
        if let (Some(uv), Some(wake)) = (uv::uv(), w.wake.as_mut()) {
            // SAFETY: an initialised async handle of this loop, closed once
            // (wake_open guards it), and no longer reachable by a sender
            // (the slot was cleared above).
            unsafe { uv.close(wake.as_mut_ptr().cast(), on_closed) };
        }
    }
    if w.handles == 0 {
        // SAFETY: no handle refers to it, the hub no longer holds it, and
        // the caller does not use it again.
        drop(unsafe { Box::from_raw(w as *mut LoopWatch) });
    }
}

unsafe extern "C" fn on_closed(handle: *mut c_void) {
    // SAFETY: `data` points at the LoopWatch; libuv is done with this
    // handle.
    let raw = unsafe { uv::data(handle) } as *mut LoopWatch;
    // SAFETY: as above: the struct lives until its last handle has closed.
    let w = unsafe { &mut *raw };
    w.handles -= 1;
    if w.handles == 0 {
        // SAFETY: the last handle is closed, and `close` ran before it
        // (only `close` closes it): nothing refers to the struct any more.
        drop(unsafe { Box::from_raw(raw) });
    }
}

/// The hook the listener runs at its environment's teardown
/// ([`LoopListener::on_teardown`]): stop watching and drop the listener
/// without calling it. The native watcher started beside this one still
/// sweeps and reaps the child.
unsafe extern "C" fn on_teardown(arg: *mut c_void) {
    // SAFETY: registered with our LoopWatch, still alive: the listener
    // removes the hook when the exit is delivered, and this is the only
    // other way it is let go of.
    unsafe { on_gone(arg) };
}

/// The environment is going with the child unsettled (its listener's
/// teardown hook, or the hub's): as [`on_teardown`].
///
/// # Safety
/// `arg` is a live LoopWatch, not used after this call.
unsafe fn on_gone(arg: *mut c_void) {
    // SAFETY: the caller's contract.
    let w = unsafe { &mut *(arg as *mut LoopWatch) };
    if !w.done {
        w.done = true;
        w.listener = None;
        // SAFETY: `w` is not used after this.
        unsafe { close(w) };
    }
}
