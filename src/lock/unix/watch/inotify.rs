//! Linux: the lock watch's marks are inotify watches (see `watch.rs` for
//! how their hints are confirmed).
//!
//! Two per lock:
//! - on the locked file itself: its link count changes (`IN_ATTRIB`: `rm`,
//!   a rename over it, which unlinks it, and `rm -rf` of its directory), or
//!   it is renamed away (`IN_MOVE_SELF`). Placed through `/proc/self/fd/N`,
//!   so it lands on the file we hold even if the path changed a moment ago.
//!   `IN_DELETE_SELF` alone would not do: it comes when the inode is freed,
//!   never while we hold it open.
//! - on its directory: the directory itself removed or renamed (only this
//!   mark sees a rename of it), and an entry of the lock's name removed or
//!   moved either way — a second witness of what the file's mark sees,
//!   matched by name, so other names of a busy directory cost a compare.
//!
//! inotify keeps one watch per inode and instance: adding one again returns
//! the same descriptor and replaces its mask. So every directory gets the
//! same mask, and each descriptor's users are counted: two locks in one
//! directory share its watch, and it goes with the last of them.
//!
//! Not seen: a directory higher up renamed (that is an event of its own
//! watch, which is not placed), or a filesystem mounted over the directory.

use std::collections::HashMap;
use std::ffi::{c_int, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::sys::cvt;

pub(super) const OPEN_CALL: &str = "inotify_init1";
pub(super) const MARK_CALL: &str = "inotify_add_watch";
/// The runtime's epoll, which the instance is registered with.
pub(super) const REACTOR_CALL: &str = "epoll_ctl";

const FILE_MASK: u32 = libc::IN_ATTRIB | libc::IN_MOVE_SELF | libc::IN_DELETE_SELF;

/// No `IN_CREATE`: a name that exists cannot be created, so a file made
/// under the lock's name follows a removal or a move away already seen.
const DIR_MASK: u32 = libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR;

/// Events about the watched inode itself, which carry no name.
const ITSELF: u32 = libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_IGNORED | libc::IN_UNMOUNT;

/// `struct inotify_event` without its name.
const HEADER: usize = std::mem::size_of::<libc::inotify_event>();

/// One lock's watches.
pub(super) struct Mark {
    file: c_int,
    dir: c_int,
    name: Vec<u8>,
}

/// What was read: a watch descriptor, what happened, and a name in a
/// watched directory.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Event {
    wd: c_int,
    mask: u32,
    name: Vec<u8>,
}

/// How many locks use each watch descriptor.
pub(super) struct Marks {
    users: HashMap<c_int, usize>,
}

pub(super) fn open() -> io::Result<OwnedFd> {
    // SAFETY: plain flags; returns a new fd or -1.
    let raw = cvt(unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) })?;
    // SAFETY: inotify_init1 just returned this fd, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn add_watch(ino: BorrowedFd<'_>, path: &CString, mask: u32) -> io::Result<c_int> {
    // SAFETY: a NUL-terminated path and plain integers.
    cvt(unsafe { libc::inotify_add_watch(ino.as_raw_fd(), path.as_ptr(), mask) })
}

/// The file's watch, through the descriptor we hold; by its path where
/// there is no `/proc` (then `watch` confirms, after, that the path named
/// our file).
fn add_file_watch(ino: BorrowedFd<'_>, held: BorrowedFd<'_>, path: &Path) -> io::Result<c_int> {
    let by_fd = c_path(Path::new(&format!("/proc/self/fd/{}", held.as_raw_fd())))?;
    match add_watch(ino, &by_fd, FILE_MASK) {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            add_watch(ino, &c_path(path)?, FILE_MASK | libc::IN_DONT_FOLLOW)
        }
        other => other,
    }
}

impl Marks {
    pub(super) fn new() -> Marks {
        Marks {
            users: HashMap::new(),
        }
    }

    /// Places a lock's watches: its file's (ENOSPC: the user's watches,
    /// `fs.inotify.max_user_watches`, are all in use) and its directory's.
    pub(super) fn add(
        &mut self,
        ino: BorrowedFd<'_>,
        _id: u64,
        held: BorrowedFd<'_>,
        path: &Path,
    ) -> io::Result<Mark> {
        let file = add_file_watch(ino, held, path)?;
        self.used(file);
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("/"),
        };
        let dir = match c_path(dir).and_then(|d| add_watch(ino, &d, DIR_MASK)) {
            Ok(wd) => wd,
            Err(e) => {
                self.unused(ino, file);
                return Err(e);
            }
        };
        self.used(dir);
        Ok(Mark {
            file,
            dir,
            name: path
                .file_name()
                .map(|n| n.as_bytes().to_vec())
                .unwrap_or_default(),
        })
    }

    pub(super) fn remove(&mut self, ino: BorrowedFd<'_>, mark: &Mark) {
        self.unused(ino, mark.file);
        self.unused(ino, mark.dir);
    }

    /// `IN_IGNORED`: the kernel dropped that watch (its inode freed, its
    /// filesystem unmounted, or our own removal): nothing left to remove.
    pub(super) fn seen(&mut self, ev: &Event) {
        if ev.mask & libc::IN_IGNORED != 0 {
            self.users.remove(&ev.wd);
        }
    }

    fn used(&mut self, wd: c_int) {
        *self.users.entry(wd).or_default() += 1;
    }

    fn unused(&mut self, ino: BorrowedFd<'_>, wd: c_int) {
        let Some(n) = self.users.get_mut(&wd) else {
            return;
        };
        *n -= 1;
        if *n == 0 {
            self.users.remove(&wd);
            // SAFETY: plain integers. EINVAL if the kernel dropped it
            // meanwhile (its IN_IGNORED not read yet): nothing to undo.
            let _ = unsafe { libc::inotify_rm_watch(ino.as_raw_fd(), wd) };
        }
    }

    #[cfg(test)]
    pub(super) fn in_use(&self) -> usize {
        self.users.len()
    }
}

/// Whether `ev` may mean that `mark`'s path no longer names its file. A
/// queue overflow (more than `fs.inotify.max_queued_events` unread) may
/// hide anything: every lock is checked.
pub(super) fn concerns(ev: &Event, _id: u64, mark: &Mark) -> bool {
    ev.mask & libc::IN_Q_OVERFLOW != 0
        || ev.wd == mark.file
        || (ev.wd == mark.dir && (ev.mask & ITSELF != 0 || ev.name == mark.name))
}

/// What the instance has queued (`WouldBlock` when nothing).
pub(super) fn read(ino: BorrowedFd<'_>) -> io::Result<Vec<Event>> {
    // Room for 15 events of the longest name (NAME_MAX), many more of
    // short ones; what does not fit waits for the next read.
    let mut buf = [0u8; 4096];
    // SAFETY: our buffer and its length.
    let n = cvt(unsafe { libc::read(ino.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) })?;
    Ok(parse(&buf[..n as usize]))
}

/// The events in what one read returned: each a header and `len` bytes of
/// name, NUL-padded.
fn parse(mut bytes: &[u8]) -> Vec<Event> {
    let mut out = Vec::new();
    while bytes.len() >= HEADER {
        let word = |at: usize| [bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]];
        let wd = c_int::from_ne_bytes(word(0));
        let mask = u32::from_ne_bytes(word(4));
        let len = u32::from_ne_bytes(word(12)) as usize;
        let Some(name) = bytes.get(HEADER..HEADER + len) else {
            break;
        };
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        out.push(Event {
            wd,
            mask,
            name: name[..end].to_vec(),
        });
        bytes = &bytes[HEADER + len..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(wd: c_int, mask: u32, name: &[u8], padded: usize) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&wd.to_ne_bytes());
        out.extend_from_slice(&mask.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(&(padded as u32).to_ne_bytes());
        out.extend_from_slice(name);
        out.resize(HEADER + padded, 0);
        out
    }

    #[test]
    fn events_are_parsed_with_their_names() {
        let mut bytes = raw(3, libc::IN_ATTRIB, b"", 0);
        bytes.extend(raw(4, libc::IN_DELETE, b"l.lock", 16));
        bytes.extend(raw(-1, libc::IN_Q_OVERFLOW, b"", 0));
        assert_eq!(
            parse(&bytes),
            vec![
                Event {
                    wd: 3,
                    mask: libc::IN_ATTRIB,
                    name: vec![]
                },
                Event {
                    wd: 4,
                    mask: libc::IN_DELETE,
                    name: b"l.lock".to_vec()
                },
                Event {
                    wd: -1,
                    mask: libc::IN_Q_OVERFLOW,
                    name: vec![]
                },
            ]
        );
        // A torn tail (never returned by the kernel) is left alone.
        assert_eq!(parse(&bytes[..HEADER + 3]).len(), 1);
    }

    #[test]
    fn events_concern_their_own_lock() {
        let mark = Mark {
            file: 3,
            dir: 4,
            name: b"l.lock".to_vec(),
        };
        let ev = |wd, mask, name: &[u8]| Event {
            wd,
            mask,
            name: name.to_vec(),
        };
        assert!(concerns(&ev(3, libc::IN_ATTRIB, b""), 0, &mark));
        assert!(concerns(&ev(4, libc::IN_MOVED_TO, b"l.lock"), 0, &mark));
        assert!(concerns(&ev(4, libc::IN_MOVE_SELF, b""), 0, &mark));
        assert!(concerns(&ev(-1, libc::IN_Q_OVERFLOW, b""), 0, &mark));
        assert!(!concerns(&ev(4, libc::IN_DELETE, b"other"), 0, &mark));
        assert!(!concerns(&ev(5, libc::IN_ATTRIB, b""), 0, &mark));
    }
}
