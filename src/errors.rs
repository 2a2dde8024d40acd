//! Errors that reach JS keep their errno as a stable `code`.
//!
//! napi's `From<io::Error>` keeps only the message, so the errno would be
//! lost. We prefix the message with `[CODE]`; the JS face (`index.js`) turns
//! that into `err.code` / `err.errno` / `err.syscall`, the way Node's own
//! `SystemError`s look, and picks `TypeError`/`RangeError` where due.

use std::io;

pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::E2BIG => "E2BIG",
        libc::ENOEXEC => "ENOEXEC",
        libc::EBADF => "EBADF",
        libc::ECHILD => "ECHILD",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ETXTBSY => "ETXTBSY",
        libc::ENOSYS => "ENOSYS",
        libc::ELOOP => "ELOOP",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        _ => "EUNKNOWN",
    }
}

/// A JS-bound error: `[code] syscall: message`.
pub fn io_err(err: &io::Error, syscall: &str) -> napi::Error {
    match err.raw_os_error() {
        Some(errno) => {
            napi::Error::from_reason(format!("[{}] {syscall}: {err}", errno_name(errno)))
        }
        None => napi::Error::from_reason(format!("[EUNKNOWN] {syscall}: {err}")),
    }
}

pub fn coded(code: &str, message: impl std::fmt::Display) -> napi::Error {
    napi::Error::from_reason(format!("[{code}] {message}"))
}
