//! The napi side of exit delivery on the JS thread's own loop
//! (`exit_watch::js_loop`, which holds the watch, its libuv handles and the
//! reasons): this file hands it the thread's libuv loop and a listener that
//! calls the `'exit'` callback as an event callback, and that ties the
//! watch to the JS environment's teardown. The same on every OS; where the
//! core delivers no exit on the loop, it asks for neither.

use std::ffi::c_void;
use std::ptr;
use std::sync::Arc;

use napi::bindgen_prelude::{Function, ToNapiValue};
use napi::{sys, Env, JsValue};

use super::convert::{exit_info, ExitArgs};
use crate::exit_watch::{js_loop, ExitStatus, LoopListener, Watched};

pub use js_loop::LoopRef;

/// Delivers `watched`'s exit on this JS thread's loop when this process
/// can (see `exit_watch::js_loop`). None: not here; the caller's other
/// back-end serves.
pub fn watch_on_loop(
    env: &Env,
    on_exit: &Function<ExitArgs, ()>,
    watched: &Arc<Watched>,
) -> Option<LoopRef> {
    let (env, callback) = (env.raw(), on_exit.raw());
    // SAFETY: on the JS thread of `env`, whose loop `uv_loop_of` gives;
    // `callback` is a function value of that environment: a napi call hands
    // us both, and the listener is called on that thread alone.
    unsafe {
        js_loop::watch_on_loop(
            watched,
            || uv_loop_of(env),
            || JsListener::new(env, callback).map(|l| Box::new(l) as Box<dyn LoopListener>),
        )
    }
}

/// The libuv loop of `env`'s thread.
///
/// # Safety
/// On the JS thread of `env`.
unsafe fn uv_loop_of(env: sys::napi_env) -> Option<*mut c_void> {
    let mut uv_loop = ptr::null_mut();
    // SAFETY: env is valid on this thread (caller's contract).
    if unsafe { sys::napi_get_uv_event_loop(env, &mut uv_loop) } != sys::Status::napi_ok {
        return None;
    }
    Some(uv_loop.cast())
}

/// The `'exit'` callback of one child, held for the loop watch: a strong
/// reference to it and an async context for `napi_make_callback`, both let
/// go of when dropped (on the JS thread, where the watch drops it).
struct JsListener {
    env: sys::napi_env,
    callback: sys::napi_ref,
    async_ctx: sys::napi_async_context,
    /// The environment cleanup hook registered for the watch, until the
    /// exit is delivered.
    teardown: Option<(unsafe extern "C" fn(*mut c_void), *mut c_void)>,
}

impl JsListener {
    /// # Safety
    /// On the JS thread of `env`; `callback` is a function value of `env`.
    unsafe fn new(env: sys::napi_env, callback: sys::napi_value) -> Option<JsListener> {
        let mut cb_ref = ptr::null_mut();
        // SAFETY: a strong reference to the listener, deleted after the call.
        if unsafe { sys::napi_create_reference(env, callback, 1, &mut cb_ref) }
            != sys::Status::napi_ok
        {
            return None;
        }
        let mut name = ptr::null_mut();
        let label = c"procward.exit";
        let mut async_ctx = ptr::null_mut();
        // SAFETY: creates a JS string on this env's thread.
        let named = unsafe {
            sys::napi_create_string_utf8(
                env,
                label.as_ptr(),
                label.count_bytes() as isize,
                &mut name,
            )
        } == sys::Status::napi_ok;
        // SAFETY: an async context for napi_make_callback, named by `name`.
        let ok = named
            && unsafe { sys::napi_async_init(env, ptr::null_mut(), name, &mut async_ctx) }
                == sys::Status::napi_ok;
        if !ok {
            // SAFETY: deleting the reference we just created.
            unsafe { sys::napi_delete_reference(env, cb_ref) };
            return None;
        }
        Some(JsListener {
            env,
            callback: cb_ref,
            async_ctx,
            teardown: None,
        })
    }
}

impl LoopListener for JsListener {
    fn on_teardown(&mut self, hook: unsafe extern "C" fn(*mut c_void), arg: *mut c_void) {
        // SAFETY: on env's thread (the watch calls us there); removed in
        // `exit`, or run by napi at the environment's teardown.
        unsafe { sys::napi_add_env_cleanup_hook(self.env, Some(hook), arg) };
        self.teardown = Some((hook, arg));
    }

    fn on_env_teardown(&mut self, hook: unsafe extern "C" fn(*mut c_void), arg: *mut c_void) {
        // SAFETY: on env's thread (the watch calls us there); napi runs it
        // at the environment's teardown, after every hook added later.
        unsafe { sys::napi_add_env_cleanup_hook(self.env, Some(hook), arg) };
    }

    fn exit(mut self: Box<Self>, status: ExitStatus) {
        if let Some((hook, arg)) = self.teardown.take() {
            // SAFETY: same env and argument as at registration.
            unsafe { sys::napi_remove_env_cleanup_hook(self.env, Some(hook), arg) };
        }
        // SAFETY: on the JS thread, inside the loop, outside any JS frame
        // (the watch calls us from a libuv callback).
        unsafe { call_listener(self.env, self.callback, self.async_ctx, status) };
    }
}

impl Drop for JsListener {
    /// Releases the listener reference and the async context (JS thread),
    /// and its teardown hook if dropped uncalled (napi skips a hook removed
    /// while it runs the others, even the one running).
    fn drop(&mut self) {
        if let Some((hook, arg)) = self.teardown.take() {
            // SAFETY: same env and argument as at registration.
            unsafe { sys::napi_remove_env_cleanup_hook(self.env, Some(hook), arg) };
        }
        // SAFETY: created in `new` on this env; dropped once, on its thread.
        unsafe { sys::napi_async_destroy(self.env, self.async_ctx) };
        // SAFETY: as above.
        unsafe { sys::napi_delete_reference(self.env, self.callback) };
    }
}

/// Calls the `'exit'` listener like any event callback: in a handle scope,
/// through napi_make_callback (so microtasks run), with an exception thrown
/// by the listener reported as uncaught.
unsafe fn call_listener(
    env: sys::napi_env,
    callback: sys::napi_ref,
    ctx: sys::napi_async_context,
    status: ExitStatus,
) {
    let mut scope = ptr::null_mut();
    // SAFETY: on the JS thread of env.
    if unsafe { sys::napi_open_handle_scope(env, &mut scope) } != sys::Status::napi_ok {
        return;
    }
    // SAFETY: in the scope just opened, on env's thread.
    unsafe { invoke(env, callback, ctx, status) };
    // SAFETY: closing the scope opened above.
    unsafe { sys::napi_close_handle_scope(env, scope) };
}

/// The body of [`call_listener`], inside its handle scope.
///
/// # Safety
/// On env's JS thread, inside an open handle scope.
unsafe fn invoke(
    env: sys::napi_env,
    callback: sys::napi_ref,
    ctx: sys::napi_async_context,
    status: ExitStatus,
) {
    let ok = sys::Status::napi_ok;
    let mut func = ptr::null_mut();
    // SAFETY: the reference is alive until this watch releases it.
    if unsafe { sys::napi_get_reference_value(env, callback, &mut func) } != ok || func.is_null() {
        return;
    }
    // napi_make_callback needs an object as receiver: the global object.
    let mut recv = ptr::null_mut();
    // SAFETY: plain getter on env's thread.
    if unsafe { sys::napi_get_global(env, &mut recv) } != ok {
        return;
    }
    // (code, signal name), as `ExitArgs`: two primitives.
    let info = exit_info(status);
    // SAFETY: a number or null, in this scope.
    let Ok(code) = (unsafe { Option::<i32>::to_napi_value(env, info.code) }) else {
        return;
    };
    // SAFETY: a string or null, in this scope.
    let Ok(signal) = (unsafe { Option::<String>::to_napi_value(env, info.signal) }) else {
        return;
    };
    let args = [code, signal];
    let mut result = ptr::null_mut();
    crate::spawn_trace::mark(crate::spawn_trace::EXIT_CALL);
    // SAFETY: a function value, two arguments, our async context.
    let rc =
        unsafe { sys::napi_make_callback(env, ctx, recv, func, 2, args.as_ptr(), &mut result) };
    if rc == sys::Status::napi_pending_exception {
        let mut err = ptr::null_mut();
        // SAFETY: takes the exception the listener threw...
        unsafe { sys::napi_get_and_clear_last_exception(env, &mut err) };
        // SAFETY: ...and reports it as uncaught, as Node does for a throwing
        // event listener.
        unsafe { sys::napi_fatal_exception(env, err) };
    }
}
