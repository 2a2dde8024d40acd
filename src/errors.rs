//! Errnos as JS names them: the stable `code` of an error (`ENOENT`) and its
//! description in Node's lower case, never with Rust's " (os error N)".
//! Plain values: the binding builds the JS errors from them
//! (`binding::errors`).

/// The errnos procward names; any other is `EUNKNOWN` here (the JS face
/// asks Node for its name).
const NAMED: &[i32] = &[
    libc::EPERM,
    libc::ENOENT,
    libc::ESRCH,
    libc::EINTR,
    libc::EIO,
    libc::ENXIO,
    libc::ENOTSUP,
    libc::E2BIG,
    libc::ENOEXEC,
    libc::EBADF,
    libc::ECHILD,
    libc::EAGAIN,
    libc::ENOMEM,
    libc::EACCES,
    libc::EFAULT,
    libc::EBUSY,
    libc::EEXIST,
    libc::ENODEV,
    libc::ENOTDIR,
    libc::EISDIR,
    libc::EINVAL,
    libc::ENFILE,
    libc::EMFILE,
    libc::ETXTBSY,
    libc::ENOSPC,
    libc::EROFS,
    libc::EPIPE,
    libc::ENOSYS,
    libc::ELOOP,
    libc::ENAMETOOLONG,
    libc::ETIMEDOUT,
    #[cfg(unix)]
    libc::ESTALE,
    #[cfg(unix)]
    libc::EADDRINUSE,
    #[cfg(unix)]
    libc::EADDRNOTAVAIL,
    #[cfg(unix)]
    libc::EAFNOSUPPORT,
    #[cfg(unix)]
    libc::ECONNREFUSED,
    #[cfg(unix)]
    libc::ENOTSOCK,
];

/// The errno a code names (`"EACCES"` → 13), for a coded error that is an
/// errno; None for any other code.
pub fn errno_of_name(code: &str) -> Option<i32> {
    NAMED.iter().copied().find(|&n| errno_name(n) == code)
}

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
        // A held socket's bind and listen (Windows has no such sockets here).
        #[cfg(unix)]
        libc::EADDRINUSE => "EADDRINUSE",
        #[cfg(unix)]
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        #[cfg(unix)]
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        #[cfg(unix)]
        libc::ECONNREFUSED => "ECONNREFUSED",
        #[cfg(unix)]
        libc::ENOTSOCK => "ENOTSOCK",
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
    std::io::Error::from_raw_os_error(errno).to_string()
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

/// An `io::Error` in words for a message, as Node words a system error's
/// cause: `"ENOENT: no such file or directory"`, never Rust's
/// " (os error N)". An error of ours (no errno) is its own text.
pub fn io_text(err: &std::io::Error) -> String {
    match crate::sys::errno_of(err) {
        Some(errno) if err.raw_os_error().is_some() => {
            format!("{}: {}", errno_name(errno), describe(errno))
        }
        _ => err.to_string(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_have_no_rust_suffix_and_read_like_node() {
        assert_eq!(describe(libc::ENOENT), "no such file or directory");
        assert_eq!(describe(libc::EPERM), "operation not permitted");
        assert_eq!(describe(libc::ESRCH), "no such process");
        assert!(!describe(libc::EIO).contains("os error"));
    }

    #[test]
    fn every_named_errno_round_trips() {
        for &n in NAMED {
            assert_eq!(errno_of_name(errno_name(n)), Some(n));
        }
        assert_eq!(errno_of_name("ERR_OUT_OF_RANGE"), None);
        assert_eq!(errno_of_name("EUNKNOWN"), None);
    }

    #[test]
    fn io_errors_read_like_node() {
        let e = std::io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(io_text(&e), "ENOENT: no such file or directory");
        let ours = std::io::Error::other("a reason of ours");
        assert_eq!(io_text(&ours), "a reason of ours");
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n"), r#""a\"b\\c\u000a""#);
        assert_eq!(json_str("é/x"), "\"é/x\"");
    }
}
