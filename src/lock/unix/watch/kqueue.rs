//! macOS: the lock watch's marks are kqueue `EVFILT_VNODE` filters on the
//! held descriptor itself (see `watch.rs` for how their hints are
//! confirmed), so a watch costs no fd of its own.
//!
//! XNU posts `NOTE_DELETE` (with `NOTE_LINK`) to a file unlinked, and to
//! the file a rename replaces; `NOTE_RENAME` to a file renamed
//! (`bsd/vfs/kpi_vfs.c`: `vn_remove`, `post_rename`); `NOTE_REVOKE` when
//! its filesystem is unmounted. `rm -rf` of the directory unlinks the file
//! first. Not seen: the directory, or one higher up, renamed (that would
//! take a descriptor per directory, `O_EVTONLY`).
//!
//! The filter goes by itself when the descriptor closes; it is removed
//! before that (`HeldLock::release`), since the number may then be reused.

use std::ffi::c_int;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::ptr;

use crate::sys::cvt;

pub(super) const OPEN_CALL: &str = "kqueue";
pub(super) const MARK_CALL: &str = "kevent";
/// The runtime's own kqueue, which ours is registered with.
pub(super) const REACTOR_CALL: &str = "kevent";

const FFLAGS: u32 = libc::NOTE_DELETE | libc::NOTE_RENAME | libc::NOTE_REVOKE | libc::NOTE_LINK;

/// The held descriptor the filter is on.
pub(super) struct Mark {
    held: RawFd,
}

/// Which watch fired (the filter's `udata`).
pub(super) struct Event {
    id: u64,
}

/// Nothing to keep: each filter is its lock's own.
pub(super) struct Marks;

pub(super) fn open() -> io::Result<OwnedFd> {
    // SAFETY: kqueue takes no arguments and returns a new fd or -1.
    let raw = cvt(unsafe { libc::kqueue() })?;
    // SAFETY: kqueue just returned this fd, and nothing else owns it.
    let kq = unsafe { OwnedFd::from_raw_fd(raw) };
    // kqueue(2): not inherited across fork; close-on-exec keeps the number
    // from leaking into an exec'd child as well.
    // SAFETY: a valid fd and a plain flag.
    cvt(unsafe { libc::fcntl(kq.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) })?;
    Ok(kq)
}

fn change(kq: BorrowedFd<'_>, held: RawFd, flags: u16, fflags: u32, id: u64) -> io::Result<()> {
    let change = libc::kevent {
        ident: held as usize,
        filter: libc::EVFILT_VNODE,
        flags,
        fflags,
        data: 0,
        udata: ptr::without_provenance_mut(id as usize),
    };
    // SAFETY: one change from a kevent we own; no events asked for.
    cvt(unsafe { libc::kevent(kq.as_raw_fd(), &change, 1, ptr::null_mut(), 0, ptr::null()) })?;
    Ok(())
}

impl Marks {
    pub(super) fn new() -> Marks {
        Marks
    }

    pub(super) fn add(
        &mut self,
        kq: BorrowedFd<'_>,
        id: u64,
        held: BorrowedFd<'_>,
        _path: &Path,
    ) -> io::Result<Mark> {
        let held = held.as_raw_fd();
        change(kq, held, libc::EV_ADD | libc::EV_CLEAR, FFLAGS, id)?;
        Ok(Mark { held })
    }

    pub(super) fn remove(&mut self, kq: BorrowedFd<'_>, mark: &Mark) {
        // ENOENT if it is gone already: nothing to undo.
        let _ = change(kq, mark.held, libc::EV_DELETE, 0, 0);
    }

    pub(super) fn seen(&mut self, _ev: &Event) {}
}

pub(super) fn concerns(ev: &Event, id: u64, _mark: &Mark) -> bool {
    ev.id == id
}

/// What the kqueue has pending (`WouldBlock` when nothing).
pub(super) fn read(kq: BorrowedFd<'_>) -> io::Result<Vec<Event>> {
    // SAFETY: an all-zero kevent is a valid buffer for the kernel to fill.
    let mut got: [libc::kevent; 32] = unsafe { std::mem::zeroed() };
    let now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: no changes; our buffer and its length; a zero timeout, so it
    // never blocks.
    let n = cvt(unsafe {
        libc::kevent(
            kq.as_raw_fd(),
            ptr::null(),
            0,
            got.as_mut_ptr(),
            got.len() as c_int,
            &now,
        )
    })?;
    if n == 0 {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    Ok(got[..n as usize]
        .iter()
        .map(|e| Event {
            id: e.udata.addr() as u64,
        })
        .collect())
}
