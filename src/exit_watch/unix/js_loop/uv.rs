//! The libuv calls of the loop watch, looked up with `dlsym` in the running
//! process (Node exports them to addons; whether they are real is decided
//! by the JS side, see `js_loop`). One C call per function; the handles are
//! untyped storage of `uv_handle_size` bytes that the caller owns.

use std::ffi::{c_int, c_void, CStr};
use std::os::fd::RawFd;
use std::sync::OnceLock;

const UV_ASYNC: c_int = 1; // uv_handle_type
const UV_POLL: c_int = 8;
const UV_READABLE: c_int = 1;

/// `uv_poll_cb`.
pub type PollCb = unsafe extern "C" fn(*mut c_void, c_int, c_int);
/// `uv_async_cb`.
pub type AsyncCb = unsafe extern "C" fn(*mut c_void);
/// `uv_close_cb`.
pub type CloseCb = unsafe extern "C" fn(*mut c_void);
type HandleSizeFn = unsafe extern "C" fn(c_int) -> usize;
type PollInitFn = unsafe extern "C" fn(*mut c_void, *mut c_void, c_int) -> c_int;
type PollStartFn = unsafe extern "C" fn(*mut c_void, c_int, PollCb) -> c_int;
type AsyncInitFn = unsafe extern "C" fn(*mut c_void, *mut c_void, AsyncCb) -> c_int;
type HandleFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type CloseFn = unsafe extern "C" fn(*mut c_void, Option<CloseCb>);
type RefFn = unsafe extern "C" fn(*mut c_void);

/// The handle kinds the loop watch opens.
#[derive(Clone, Copy)]
pub enum Kind {
    Poll,
    Async,
}

pub struct Uv {
    handle_size: HandleSizeFn,
    poll_init: PollInitFn,
    poll_start: PollStartFn,
    poll_stop: HandleFn,
    async_init: AsyncInitFn,
    async_send: HandleFn,
    close: CloseFn,
    ref_: RefFn,
    unref: RefFn,
}

/// The function `name` of the running process, as the fn pointer type `F`.
///
/// # Safety
/// `F` must be the fn pointer type of the C function called `name`.
unsafe fn sym<F: Copy>(name: &CStr) -> Option<F> {
    // SAFETY: dlsym with RTLD_DEFAULT searches the already loaded objects;
    // the name is NUL-terminated.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if p.is_null() || std::mem::size_of::<F>() != std::mem::size_of::<*mut c_void>() {
        return None;
    }
    // SAFETY: a non-null code address of the right size, and the caller
    // vouches that `F` is its signature.
    Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
}

/// libuv's functions, once all are found in this process.
pub fn uv() -> Option<&'static Uv> {
    static UV: OnceLock<Option<Uv>> = OnceLock::new();
    UV.get_or_init(|| {
        // SAFETY (each sym): the types are libuv's documented signatures.
        Some(Uv {
            handle_size: unsafe { sym::<HandleSizeFn>(c"uv_handle_size") }?,
            poll_init: unsafe { sym::<PollInitFn>(c"uv_poll_init") }?,
            poll_start: unsafe { sym::<PollStartFn>(c"uv_poll_start") }?,
            poll_stop: unsafe { sym::<HandleFn>(c"uv_poll_stop") }?,
            async_init: unsafe { sym::<AsyncInitFn>(c"uv_async_init") }?,
            async_send: unsafe { sym::<HandleFn>(c"uv_async_send") }?,
            close: unsafe { sym::<CloseFn>(c"uv_close") }?,
            ref_: unsafe { sym::<RefFn>(c"uv_ref") }?,
            unref: unsafe { sym::<RefFn>(c"uv_unref") }?,
        })
    })
    .as_ref()
}

impl Uv {
    /// Zeroed storage for a handle of `kind`: `uv_handle_size` bytes,
    /// 8-aligned. The caller keeps it in place (a boxed slice) while libuv
    /// knows the handle.
    pub fn handle_storage(&self, kind: Kind) -> Box<[u64]> {
        let kind = match kind {
            Kind::Poll => UV_POLL,
            Kind::Async => UV_ASYNC,
        };
        // SAFETY: uv_handle_size is a pure query.
        let size = unsafe { (self.handle_size)(kind) };
        vec![0u64; size.div_ceil(8)].into_boxed_slice()
    }

    /// `uv_poll_init(loop, handle, fd)`: 0 or a libuv error.
    ///
    /// # Safety
    /// `handle`: zeroed poll storage ([`Uv::handle_storage`]) that stays in
    /// place until closed; `uv_loop`: the loop of this thread; `fd` open
    /// until the handle is stopped.
    pub unsafe fn poll_init(&self, uv_loop: *mut c_void, handle: *mut c_void, fd: RawFd) -> c_int {
        // SAFETY: the caller's contract.
        unsafe { (self.poll_init)(uv_loop, handle, fd) }
    }

    /// `uv_poll_start(handle, UV_READABLE, cb)`: 0 or a libuv error.
    ///
    /// # Safety
    /// `handle` initialised by [`Uv::poll_init`], on its loop's thread.
    pub unsafe fn poll_start_readable(&self, handle: *mut c_void, cb: PollCb) -> c_int {
        // SAFETY: the caller's contract.
        unsafe { (self.poll_start)(handle, UV_READABLE, cb) }
    }

    /// `uv_poll_stop(handle)`.
    ///
    /// # Safety
    /// As [`Uv::poll_start_readable`].
    pub unsafe fn poll_stop(&self, handle: *mut c_void) {
        // SAFETY: the caller's contract.
        unsafe { (self.poll_stop)(handle) };
    }

    /// `uv_async_init(loop, handle, cb)`: 0 or a libuv error.
    ///
    /// # Safety
    /// As [`Uv::poll_init`], with async storage.
    pub unsafe fn async_init(
        &self,
        uv_loop: *mut c_void,
        handle: *mut c_void,
        cb: AsyncCb,
    ) -> c_int {
        // SAFETY: the caller's contract.
        unsafe { (self.async_init)(uv_loop, handle, cb) }
    }

    /// `uv_async_send(handle)`, from any thread.
    ///
    /// # Safety
    /// `handle` is an initialised async handle not yet closed.
    pub unsafe fn async_send(&self, handle: *mut c_void) {
        // SAFETY: the caller's contract.
        unsafe { (self.async_send)(handle) };
    }

    /// `uv_close(handle, cb)`.
    ///
    /// # Safety
    /// An initialised handle, closed once, on its loop's thread.
    pub unsafe fn close(&self, handle: *mut c_void, cb: CloseCb) {
        // SAFETY: the caller's contract.
        unsafe { (self.close)(handle, Some(cb)) };
    }

    /// `uv_ref(handle)` or `uv_unref(handle)`.
    ///
    /// # Safety
    /// An open handle, on its loop's thread.
    pub unsafe fn set_ref(&self, handle: *mut c_void, on: bool) {
        let f = if on { self.ref_ } else { self.unref };
        // SAFETY: the caller's contract.
        unsafe { f(handle) };
    }
}

/// Sets a handle's `data` (the first field of every uv handle).
///
/// # Safety
/// `handle` is handle storage of libuv's size.
pub unsafe fn set_data(handle: *mut c_void, data: *mut c_void) {
    // SAFETY: `data` is the first field of every uv handle (caller's
    // contract: the storage is one).
    unsafe { *(handle as *mut *mut c_void) = data };
}

/// A handle's `data`.
///
/// # Safety
/// As [`set_data`].
pub unsafe fn data(handle: *mut c_void) -> *mut c_void {
    // SAFETY: as in `set_data`.
    unsafe { *(handle as *mut *mut c_void) }
}
