//! One epoll per JS thread's loop, holding the pidfds of the children that
//! loop watches, and one `uv_poll_t` on that epoll: the loop's own epoll
//! sees a single fd however many children there are.
//!
//! Why not a `uv_poll_t` per child: `uv_poll_init` checks the fd with an
//! `epoll_ctl` ADD and DEL on the loop's epoll and sets it non-blocking
//! (three system calls, about 6 µs of the spawn call), the loop then adds
//! it on its next turn, and `uv_poll_stop` removes it with two more. Here a
//! child costs one `epoll_ctl` ADD at the spawn and nothing at its exit:
//! each pidfd is registered one-shot (`EPOLLONESHOT`), so after its one
//! event it stays silent, however long it stays readable (a traced child's
//! zombie), and its close takes it out of this epoll. An event carries the
//! child's key, never reused, so a registration left alive by a copy of the
//! fd (a child forked meanwhile) finds nothing.
//!
//! `unref()`: the poll handle is referenced while any child it holds is,
//! so a process whose children are all `unref()`ed can exit.
//!
//! Lifetime: a hub lives as long as its JS environment. Its teardown hook
//! is registered before any of its children's (the hub is made for the
//! first), and napi runs cleanup hooks in reverse order, so the children's
//! watches have let go of it when it closes its handle; it is freed once
//! libuv has closed that.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};

use super::uv::{self, Kind, Uv};
use crate::sys;

/// What the hub calls with a watch (the opaque pointer its owner
/// registered): its child's pidfd turned readable (`on_ready`), or the
/// environment is going with the watch still registered (`on_gone`, which
/// must make it leave).
pub(super) type Callback = unsafe fn(*mut c_void);

pub(super) struct Hub {
    epoll: OwnedFd,
    /// uv_poll_t storage on `epoll`; its `data` points back at this struct.
    poll: Box<[u64]>,
    /// key → the watch (an opaque pointer the owner gave), while registered.
    watches: HashMap<u64, *mut c_void>,
    next_key: u64,
    /// Registered children counted as referenced (not `unref()`ed).
    refs: usize,
    /// Whether the poll handle is `uv_ref`ed now.
    poll_ref: bool,
    on_ready: Callback,
    on_gone: Callback,
}

thread_local! {
    /// This thread's hubs, by loop (Node: one environment, one loop).
    static HUBS: RefCell<Vec<(usize, *mut Hub)>> = const { RefCell::new(Vec::new()) };
}

/// The hub of `uv_loop` (this thread's), made on first use; `teardown`
/// registers its environment's cleanup hook (`(hook, arg)`), once. None: it
/// could not be made (no fd for the epoll, or libuv refused the poll).
///
/// # Safety
/// On the thread of `uv_loop`.
pub(super) unsafe fn of(
    uv: &'static Uv,
    uv_loop: *mut c_void,
    on_ready: Callback,
    on_gone: Callback,
    teardown: impl FnOnce(unsafe extern "C" fn(*mut c_void), *mut c_void),
) -> Option<*mut Hub> {
    let found = HUBS.with(|h| {
        h.borrow()
            .iter()
            .find(|(l, _)| *l == uv_loop as usize)
            .map(|&(_, hub)| hub)
    });
    if let Some(hub) = found {
        return Some(hub);
    }
    let epoll = sys::epoll_create().ok()?;
    let hub = Box::into_raw(Box::new(Hub {
        epoll,
        poll: uv.handle_storage(Kind::Poll),
        watches: HashMap::new(),
        next_key: 1,
        refs: 0,
        poll_ref: true,
        on_ready,
        on_gone,
    }));
    // SAFETY: a fresh, uniquely owned allocation.
    let h = unsafe { &mut *hub };
    let handle: *mut c_void = h.poll.as_mut_ptr().cast();
    let fd = h.epoll.as_fd();
    // SAFETY: zeroed storage of libuv's size on this thread's loop; the
    // epoll fd stays open until the handle has closed (`on_closed`).
    if unsafe { uv.poll_init(uv_loop, handle, raw(fd)) } != 0 {
        // SAFETY: libuv does not know the handle: take the allocation back.
        drop(unsafe { Box::from_raw(hub) });
        return None;
    }
    // SAFETY: poll handle storage.
    unsafe { uv::set_data(handle, hub.cast()) };
    // SAFETY: initialised above; on_readable matches uv_poll_cb.
    if unsafe { uv.poll_start_readable(handle, on_readable) } != 0 {
        // SAFETY: an initialised handle, closed once; freed in on_closed.
        unsafe { uv.close(handle, on_closed) };
        return None;
    }
    // No child yet: nothing to hold the loop open for.
    set_poll_ref(uv, h, false);
    teardown(on_teardown, hub.cast());
    HUBS.with(|hubs| hubs.borrow_mut().push((uv_loop as usize, hub)));
    Some(hub)
}

fn raw(fd: BorrowedFd<'_>) -> RawFd {
    use std::os::fd::AsRawFd;
    fd.as_raw_fd()
}

/// Registers `pidfd` for one readable event, reported to `on_ready` with
/// `watch`; referenced unless `unref`. The key, or None if the epoll
/// refused it.
///
/// # Safety
/// `hub` is live, on its loop's thread; `pidfd` open until the watch
/// leaves (`leave`) and the fd closes.
pub(super) unsafe fn add(
    hub: *mut Hub,
    pidfd: RawFd,
    watch: *mut c_void,
    unref: bool,
) -> Option<u64> {
    // SAFETY: live (caller's contract); no other borrow of it is held here.
    let h = unsafe { &mut *hub };
    let key = h.next_key;
    // SAFETY: open (caller's contract) for as long as this borrow.
    let fd = unsafe { BorrowedFd::borrow_raw(pidfd) };
    sys::epoll_add_once(h.epoll.as_fd(), fd, key).ok()?;
    h.next_key += 1;
    h.watches.insert(key, watch);
    if !unref {
        adjust_refs(h, true);
    }
    Some(key)
}

/// Arms `key`'s registration again: one more event (a child found with
/// nothing to reap, when nothing else would settle it).
///
/// # Safety
/// As [`add`], `key` registered.
pub(super) unsafe fn rearm(hub: *mut Hub, pidfd: RawFd, key: u64) {
    // SAFETY: live (caller's contract).
    let h = unsafe { &*hub };
    // SAFETY: open (caller's contract).
    let fd = unsafe { BorrowedFd::borrow_raw(pidfd) };
    let _ = sys::epoll_rearm_once(h.epoll.as_fd(), fd, key);
}

/// Takes `key`'s watch out: no event reaches it any more (its registration,
/// one-shot, goes with the fd's close).
///
/// # Safety
/// `hub` is live, on its loop's thread.
pub(super) unsafe fn leave(hub: *mut Hub, key: u64, unref: bool) {
    // SAFETY: live (caller's contract).
    let h = unsafe { &mut *hub };
    if h.watches.remove(&key).is_some() && !unref {
        adjust_refs(h, false);
    }
}

/// One registered child `ref()`ed (`on`) or `unref()`ed.
///
/// # Safety
/// As [`leave`].
pub(super) unsafe fn set_ref(hub: *mut Hub, on: bool) {
    // SAFETY: live (caller's contract).
    adjust_refs(unsafe { &mut *hub }, on);
}

fn adjust_refs(h: &mut Hub, more: bool) {
    if more {
        h.refs += 1;
    } else {
        h.refs = h.refs.saturating_sub(1);
    }
    if let Some(uv) = uv::uv() {
        set_poll_ref(uv, h, h.refs > 0);
    }
}

fn set_poll_ref(uv: &Uv, h: &mut Hub, on: bool) {
    if h.poll_ref != on {
        h.poll_ref = on;
        // SAFETY: the hub's open poll handle, on its loop's thread.
        unsafe { uv.set_ref(h.poll.as_mut_ptr().cast(), on) };
    }
}

unsafe extern "C" fn on_readable(handle: *mut c_void, _status: c_int, _events: c_int) {
    // SAFETY: our poll handle: `data` is its live Hub.
    let hub = unsafe { uv::data(handle) } as *mut Hub;
    let mut keys = [0u64; 64];
    let n = {
        // SAFETY: live; this borrow ends before any watch runs.
        let h = unsafe { &*hub };
        sys::epoll_wait(h.epoll.as_fd(), &mut keys, 0).unwrap_or(0)
    };
    for &key in &keys[..n] {
        // Looked up afresh for each: a listener (JS) may have spawned or
        // let go of children meanwhile.
        let (watch, on_ready) = {
            // SAFETY: live until its teardown, which no callback of its
            // loop runs into; this borrow ends before the watch runs.
            let h = unsafe { &*hub };
            (h.watches.get(&key).copied(), h.on_ready)
        };
        if let Some(watch) = watch {
            // SAFETY: a registered watch is live (its owner leaves before
            // freeing it).
            unsafe { on_ready(watch) };
        }
    }
}

/// The environment's cleanup hook: the children's own hooks have run
/// (napi runs them in reverse order of registration), so nothing should be
/// registered; whatever is, is let go of first. Then the poll handle closes.
unsafe extern "C" fn on_teardown(arg: *mut c_void) {
    let hub = arg as *mut Hub;
    HUBS.with(|h| h.borrow_mut().retain(|&(_, x)| x != hub));
    let (left, on_gone) = {
        // SAFETY: live until on_closed, which runs after this; the borrow
        // ends before any watch runs.
        let h = unsafe { &*hub };
        (h.watches.values().copied().collect::<Vec<_>>(), h.on_gone)
    };
    for watch in left {
        // SAFETY: registered, hence live; it leaves the hub.
        unsafe { on_gone(watch) };
    }
    let Some(uv) = uv::uv() else { return };
    // SAFETY: as above.
    let h = unsafe { &mut *hub };
    h.watches.clear();
    let handle: *mut c_void = h.poll.as_mut_ptr().cast();
    // SAFETY: the open poll handle, stopped and closed once (the hub is out
    // of HUBS, so nothing registers with it again).
    unsafe { uv.poll_stop(handle) };
    // SAFETY: as above.
    unsafe { uv.close(handle, on_closed) };
}

unsafe extern "C" fn on_closed(handle: *mut c_void) {
    // SAFETY: `data` is the Hub we leaked in `of`; libuv is done with it.
    let hub = unsafe { uv::data(handle) } as *mut Hub;
    // SAFETY: as above: nothing refers to it any more; its epoll closes.
    drop(unsafe { Box::from_raw(hub) });
}
