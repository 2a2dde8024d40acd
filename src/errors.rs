//! Errors that reach JS keep their errno as a stable `code`.
//!
//! napi's `From<io::Error>` keeps only the message, so the errno would be
//! lost. We prefix the message with `[CODE]`; the JS face (`lib/errors.js`)
//! turns that into `err.code` and picks `TypeError`/`RangeError` where due.
//! A system error carries a small JSON object after the code (`errno`,
//! `syscall`, `desc` and, for spawns, where it failed), from which the JS
//! face builds the message and properties Node's own `SystemError`s have.
//! Messages never carry Rust's " (os error N)".

use std::io;

pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::ENOTSUP => "ENOTSUP",
        libc::E2BIG => "E2BIG",
        libc::ENOEXEC => "ENOEXEC",
        libc::EBADF => "EBADF",
        libc::ECHILD => "ECHILD",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ETXTBSY => "ETXTBSY",
        libc::ENOSPC => "ENOSPC",
        libc::EROFS => "EROFS",
        libc::EPIPE => "EPIPE",
        libc::ENOSYS => "ENOSYS",
        libc::ELOOP => "ELOOP",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ETIMEDOUT => "ETIMEDOUT",
        #[cfg(unix)]
        libc::ESTALE => "ESTALE",
        _ => "EUNKNOWN",
    }
}

/// The C library's text for an errno, in Node's lower case, without Rust's
/// " (os error N)" suffix: "no such file or directory".
pub fn describe(errno: i32) -> String {
    let text = c_library_text(errno);
    let text = match text.rfind(" (os error ") {
        Some(i) => &text[..i],
        None => &text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => format!("error {errno}"),
    }
}

#[cfg(unix)]
fn c_library_text(errno: i32) -> String {
    io::Error::from_raw_os_error(errno).to_string()
}

/// On Windows an `io::Error` number is a Win32 error, not an errno: ask the
/// C runtime instead.
#[cfg(windows)]
fn c_library_text(errno: i32) -> String {
    // SAFETY: strerror returns a NUL-terminated string in a per-thread
    // buffer of the C runtime, read at once here.
    let text = unsafe { std::ffi::CStr::from_ptr(libc::strerror(errno)) };
    text.to_string_lossy().into_owned()
}

/// A JSON string literal (the fields here are short and mostly ASCII).
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A system error: `[CODE] {"errno":N,"syscall":"…","desc":"…"<extra>}`.
/// `extra` is more JSON members, each starting with a comma.
pub fn system_err(errno: i32, syscall: &str, extra: &str) -> napi::Error {
    napi::Error::from_reason(system_reason(errno, syscall, extra))
}

fn system_reason(errno: i32, syscall: &str, extra: &str) -> String {
    format!(
        "[{}] {{\"errno\":{errno},\"syscall\":{},\"desc\":{}{extra}}}",
        errno_name(errno),
        json_str(syscall),
        json_str(&describe(errno)),
    )
}

/// A JS-bound error for a failed system call.
pub fn io_err(err: &io::Error, syscall: &str) -> napi::Error {
    match err.raw_os_error() {
        Some(errno) => system_err(errno, syscall, ""),
        None => napi::Error::from_reason(format!("[EUNKNOWN] {syscall}: {err}")),
    }
}

pub fn coded(code: &str, message: impl std::fmt::Display) -> napi::Error {
    napi::Error::from_reason(format!("[{code}] {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_have_no_rust_suffix_and_read_like_node() {
        assert_eq!(describe(libc::ENOENT), "no such file or directory");
        assert_eq!(describe(libc::EPERM), "operation not permitted");
        let reason = system_reason(libc::ESRCH, "kill", "");
        assert_eq!(
            reason,
            r#"[ESRCH] {"errno":3,"syscall":"kill","desc":"no such process"}"#
        );
        assert!(!reason.contains("os error"));
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n"), r#""a\"b\\c\u000a""#);
        assert_eq!(json_str("é/x"), "\"é/x\"");
    }
}
