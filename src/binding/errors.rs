//! Errors for JS, as objects: the binding builds each error itself, with
//! the class and properties Node's own errors have, and throws it (or
//! rejects a promise with it). Nothing is encoded in a message.
//!
//! What JS receives:
//! - an `ERR_OUT_OF_RANGE` is a `RangeError`, an `ERR_INVALID_ARG_*` a
//!   `TypeError`, with `code` and our message;
//! - any other coded error is an `Error` whose message starts with its code
//!   (`"EACCES: ..."`), with `code`, and `errno` (negative, as Node's) when
//!   the code is an errno;
//! - a failed system call is an `Error` shaped like Node's `SystemError`s:
//!   message `"CODE: description, syscall"`, `code`, `errno`, `syscall`,
//!   `path` where one is involved, and `info` — what the JS face words it
//!   from: `{ errno, code, message, syscall, path?, at?, fd?, reason? }`
//!   (`message`: the C library's description; `reason`: ours, where it says
//!   better; `at`/`fd`: where a spawn failed, see `binding::child`).
//!
//! Every one carries the brand `Symbol.for('procward.error')` (non-enumerable,
//! as `lib/errors.js` sets it), so `isProcwardError` knows it. A [`JsErr`] is
//! plain data until [`JsErr::into_napi`] builds it on the JS thread, so an
//! async function makes one on any thread and its promise rejects with the
//! object (see [`promise`]).

use std::future::Future;
use std::io;

use napi::bindgen_prelude::{JsObjectValue, Object, PromiseRaw, ToNapiValue};
use napi::{
    Env, JsError, JsRangeError, JsTypeError, JsValue, Property, PropertyAttributes, Unknown,
};

use crate::errors::{describe, errno_name, errno_of_name};

/// The brand every procward error carries (see `lib/errors.js`).
const BRAND: &str = "procward.error";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Error,
    Type,
    Range,
}

/// A failed system call's parts (see the module docs).
#[derive(Debug)]
struct System {
    errno: i32,
    syscall: String,
    path: Option<String>,
    /// Our words for it, where they say better than the errno's.
    reason: Option<String>,
    at: Option<&'static str>,
    fd: Option<usize>,
}

impl System {
    fn message(&self, code: &str) -> String {
        let desc = self.reason.clone().unwrap_or_else(|| describe(self.errno));
        match &self.path {
            Some(p) => format!("{code}: {desc}, {} '{p}'", self.syscall),
            None => format!("{code}: {desc}, {}", self.syscall),
        }
    }
}

/// An error bound for JS, not yet built.
#[derive(Debug)]
pub struct JsErr {
    class: Class,
    code: String,
    /// The message of a coded error (a system error's is made from its parts).
    message: String,
    errno: Option<i32>,
    system: Option<Box<System>>,
}

impl JsErr {
    /// An error of ours with a stable `code`: `TypeError`/`RangeError` for
    /// Node's `ERR_INVALID_ARG_*`/`ERR_OUT_OF_RANGE`, else an `Error`.
    pub fn coded(code: &str, message: impl std::fmt::Display) -> JsErr {
        let class = if code == "ERR_OUT_OF_RANGE" {
            Class::Range
        } else if code.starts_with("ERR_INVALID_ARG") {
            Class::Type
        } else {
            Class::Error
        };
        let message = match class {
            Class::Error => format!("{code}: {message}"),
            _ => message.to_string(),
        };
        JsErr {
            class,
            code: code.to_owned(),
            message,
            errno: errno_of_name(code),
            system: None,
        }
    }

    /// A failed system call: `errno` (positive, the OS's), `syscall`.
    pub fn system(errno: i32, syscall: &str) -> JsErr {
        JsErr {
            class: Class::Error,
            code: errno_name(errno).to_owned(),
            message: String::new(),
            errno: Some(errno),
            system: Some(Box::new(System {
                errno,
                syscall: syscall.to_owned(),
                path: None,
                reason: None,
                at: None,
                fd: None,
            })),
        }
    }

    /// An `io::Error` from `syscall`. One with no errno is ours: an
    /// `Unsupported` one (the OS lacks the call) is ENOSYS with its text,
    /// any other EUNKNOWN.
    pub fn os(err: &io::Error, syscall: &str) -> JsErr {
        match crate::sys::errno_of(err) {
            Some(errno) => JsErr::system(errno, syscall),
            None if err.kind() == io::ErrorKind::Unsupported => JsErr::coded("ENOSYS", err),
            None => JsErr::coded("EUNKNOWN", format!("{syscall}: {err}")),
        }
    }

    /// A refusal of ours, dressed as the system error whose errno says it
    /// best, with our own words for it.
    pub fn refused(errno: i32, syscall: &str, reason: impl Into<String>) -> JsErr {
        JsErr::system(errno, syscall).reason(reason)
    }

    fn with(mut self, f: impl FnOnce(&mut System)) -> JsErr {
        if let Some(s) = self.system.as_mut() {
            f(s);
        }
        self
    }

    /// The file the failed call was about (a system error's `path`).
    pub fn path(self, path: &std::path::Path) -> JsErr {
        self.with(|s| s.path = Some(path.display().to_string()))
    }

    /// Where a spawn failed: `"spawn"`, `"chdir"`, `"open"` or `"setup"`.
    pub fn at(self, at: &'static str) -> JsErr {
        self.with(|s| s.at = Some(at))
    }

    /// The child's fd whose stdio file could not be opened.
    pub fn fd(self, fd: usize) -> JsErr {
        self.with(|s| s.fd = Some(fd))
    }

    /// Our words for a system error, in place of the errno's description.
    pub fn reason(self, reason: impl Into<String>) -> JsErr {
        let reason = reason.into();
        self.with(|s| s.reason = Some(reason))
    }

    pub fn code(&self) -> &str {
        &self.code
    }

    /// The JS error object, built on the JS thread of `env`.
    pub fn to_js<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let message = match &self.system {
            Some(s) => s.message(&self.code),
            None => self.message.clone(),
        };
        let base = napi::Error::new(self.code.clone(), message);
        let unknown: Unknown<'env> = match self.class {
            Class::Error => JsError::from(base).into_unknown(*env),
            Class::Type => JsTypeError::from(base).into_unknown(*env),
            Class::Range => JsRangeError::from(base).into_unknown(*env),
        };
        // SAFETY: napi_create_error and its siblings return an Error object.
        let mut err: Object<'env> = unsafe { unknown.cast()? };
        if let Some(errno) = self.errno {
            err.set_named_property("errno", -errno)?;
        }
        if let Some(s) = &self.system {
            err.set_named_property("syscall", s.syscall.as_str())?;
            if let Some(p) = &s.path {
                err.set_named_property("path", p.as_str())?;
            }
            let mut info = Object::new(env)?;
            info.set_named_property("errno", -s.errno)?;
            info.set_named_property("code", self.code.as_str())?;
            info.set_named_property("message", describe(s.errno))?;
            info.set_named_property("syscall", s.syscall.as_str())?;
            if let Some(p) = &s.path {
                info.set_named_property("path", p.as_str())?;
            }
            if let Some(r) = &s.reason {
                info.set_named_property("reason", r.as_str())?;
            }
            if let Some(at) = s.at {
                info.set_named_property("at", at)?;
            }
            if let Some(fd) = s.fd {
                info.set_named_property("fd", fd as u32)?;
            }
            err.set_named_property("info", info)?;
        }
        let brand = env.symbol_for(BRAND)?;
        err.define_properties(&[Property::new()
            .with_name(env, brand)?
            .with_napi_value(env, true)?
            .with_property_attributes(PropertyAttributes::Default)])?;
        Ok(err)
    }

    /// The error to throw from a `#[napi]` function (or reject with): the
    /// object itself, which napi hands to JS unchanged.
    pub fn into_napi(self, env: &Env) -> napi::Error {
        match self.to_js(env) {
            Ok(obj) => napi::Error::from(obj.to_unknown()),
            // No object could be made (the environment is going away):
            // napi's own error, with the code and message.
            Err(_) => napi::Error::from_reason(self.code),
        }
    }
}

/// `Result` with a [`JsErr`]: what the binding's helpers return.
pub type Res<T> = std::result::Result<T, JsErr>;

/// Throws a [`JsErr`] from a `#[napi]` function.
pub fn throw<T>(env: &Env, r: Res<T>) -> napi::Result<T> {
    r.map_err(|e| e.into_napi(env))
}

/// A promise for `fut`, rejected with the JS error object of its `JsErr`
/// (built on the JS thread, where the promise settles).
pub fn promise<'env, T>(
    env: &'env Env,
    fut: impl Future<Output = Res<T>> + Send + 'static,
) -> napi::Result<PromiseRaw<'env, T>>
where
    T: ToNapiValue + Send + 'static,
{
    env.spawn_future_with_callback(async move { Ok(fut.await) }, |env, done| {
        done.map_err(|e| e.into_napi(env))
    })
}
