//! Waiting for a cgroup to empty, and removing it: event-driven (a poll
//! on `cgroup.events`, which the kernel notifies when `populated` changes;
//! never a timer loop, except when no fd can be had), async on procward's
//! runtime or blocking on a thread that may block; the removal of a cgroup
//! and the empty ones a child made below it, and a watcher that removes one
//! once it empties, however long that takes.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use super::{cvt, open_at, open_dir, Cgroup};
use crate::cgroup::parse;

/// No fd to be had (EMFILE, ENFILE): worth another try later.
fn no_fd(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// How often a wait that could get no fd to poll with looks again.
const NO_FD_RETRY: Duration = Duration::from_millis(10);

/// `populated` from an open `cgroup.events` (read from its start; a read
/// also re-arms the poll). An error counts as empty: the cgroup is gone.
fn populated_now(events: BorrowedFd<'_>) -> bool {
    let mut buf = [0u8; 128];
    match crate::sys::pread0(events, &mut buf) {
        Ok(n) => parse::populated(&String::from_utf8_lossy(&buf[..n])).unwrap_or(false),
        Err(_) => false,
    }
}

/// Removes an empty cgroup and the (empty) cgroups a child made below it
/// (a container runtime inside, say), deepest first: `rmdir` of a cgroup
/// with children fails with EBUSY. Only directories are touched; the files
/// in a cgroup directory go with it.
///
/// A loop, not a recursion, with one directory open at a time, each
/// reached from the one before (a name down, `..` up): a member may nest
/// its cgroups thousands deep, deeper than PATH_MAX and than any stack (a
/// few hundred levels of recursion overflow the fallback waiter's 64 KiB).
/// It ends: every step either goes one level down a finite tree or removes
/// a directory, and the tree cannot grow (nothing runs in it any more).
pub(super) fn remove_tree(path: &Path) -> io::Result<()> {
    match std::fs::remove_dir(path) {
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
        r => return r,
    }
    let mut cur = open_dir(path)?;
    let mut names: Vec<CString> = Vec::new();
    loop {
        match first_subdir(cur.as_fd())? {
            Some(name) => {
                let down = open_at(cur.as_fd(), &name, libc::O_RDONLY | libc::O_DIRECTORY)?;
                names.push(name);
                cur = down;
            }
            None => {
                let Some(name) = names.pop() else { break };
                let up = open_at(cur.as_fd(), c"..", libc::O_RDONLY | libc::O_DIRECTORY)?;
                drop(cur);
                // SAFETY: unlinkat of a NUL-terminated name relative to a
                // directory fd we hold.
                cvt(unsafe { libc::unlinkat(up.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) })?;
                cur = up;
            }
        }
    }
    drop(cur);
    std::fs::remove_dir(path)
}

/// A subdirectory of `dir`, if any. Read through `/proc/self/fd`, which
/// reaches the directory itself however long its path is.
fn first_subdir(dir: BorrowedFd<'_>) -> io::Result<Option<CString>> {
    for entry in std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))? {
        let entry = entry?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let name = CString::new(entry.file_name().as_bytes())
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            return Ok(Some(name));
        }
    }
    Ok(None)
}

/// Waits (async, on procward's runtime) until the cgroup is empty, or until
/// `deadline` (None: no bound). True when empty. An error reading the state
/// (the cgroup removed behind our back) counts as empty.
pub async fn wait_empty(cg: &Cgroup, deadline: Option<tokio::time::Instant>) -> bool {
    use tokio::io::unix::AsyncFd;
    use tokio::io::Interest;
    let events = match cg.events_file() {
        Ok(events) => events,
        // No fd to poll with: look at the held one now and then instead.
        Err(e) if no_fd(&e) => loop {
            if !cg.populated().unwrap_or(false) {
                return true;
            }
            if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                return false;
            }
            let next = tokio::time::Instant::now() + NO_FD_RETRY;
            tokio::time::sleep_until(deadline.map_or(next, |d| d.min(next))).await;
        },
        Err(_) => return true,
    };
    // Usually empty already (the leader alone, or members that died with
    // the kill before we look): no registration at all then.
    if !populated_now(events.as_fd()) {
        return true;
    }
    // SAFETY: the OwnedFd moves into the AsyncFd and stays open (same fd)
    // until the AsyncFd is dropped.
    let afd = match unsafe { AsyncFd::register_with_interest(events, Interest::PRIORITY) } {
        Ok(a) => a,
        Err(e) => {
            // The runtime's epoll refused it: a blocking wait on a worker.
            let events = e.into_parts().0;
            let timeout =
                deadline.map(|d| d.saturating_duration_since(tokio::time::Instant::now()));
            return tokio::task::spawn_blocking(move || poll_empty(events.as_fd(), timeout))
                .await
                .unwrap_or(false);
        }
    };
    loop {
        if !populated_now(afd.get_ref().as_fd()) {
            return true;
        }
        let ready = async {
            match afd.ready(Interest::PRIORITY).await {
                Ok(mut g) => {
                    g.clear_ready();
                    true
                }
                Err(_) => false,
            }
        };
        let woke = match deadline {
            Some(d) => tokio::time::timeout_at(d, ready).await.unwrap_or(false),
            None => ready.await,
        };
        if !woke {
            return !populated_now(afd.get_ref().as_fd());
        }
    }
}

/// The same wait, blocking this (non-JS) thread in `poll`.
pub fn wait_empty_blocking(cg: &Cgroup, timeout: Option<Duration>) -> bool {
    match cg.events_file() {
        Ok(events) => poll_empty(events.as_fd(), timeout),
        // No fd to poll with: look at the held one now and then instead.
        Err(e) if no_fd(&e) => {
            let start = std::time::Instant::now();
            loop {
                if !cg.populated().unwrap_or(false) {
                    return true;
                }
                let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
                if left.is_some_and(|l| l.is_zero()) {
                    return false;
                }
                std::thread::sleep(left.map_or(NO_FD_RETRY, |l| l.min(NO_FD_RETRY)));
            }
        }
        Err(_) => true,
    }
}

fn poll_empty(events: BorrowedFd<'_>, timeout: Option<Duration>) -> bool {
    let start = std::time::Instant::now();
    loop {
        if !populated_now(events) {
            return true;
        }
        let left = match timeout {
            Some(t) => match t.checked_sub(start.elapsed()) {
                Some(l) if !l.is_zero() => l.as_millis().clamp(1, i32::MAX as u128) as i32,
                _ => return false,
            },
            None => -1,
        };
        let mut pfd = libc::pollfd {
            fd: events.as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        };
        // SAFETY: polls one pollfd we own.
        unsafe { libc::poll(&mut pfd, 1, left) };
    }
}

/// Removes `cg` once it empties, however long that takes (a member stuck
/// in uninterruptible sleep): a task on procward's runtime, or a thread.
pub fn remove_when_empty(cg: std::sync::Arc<Cgroup>) {
    if let Ok(rt) = crate::runtime::handle() {
        rt.spawn(async move {
            wait_empty(&cg, None).await;
            let _ = cg.remove();
        });
    } else {
        let _ = std::thread::Builder::new()
            .name("procward-cgroup".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                wait_empty_blocking(&cg, None);
                let _ = cg.remove();
            });
    }
}
