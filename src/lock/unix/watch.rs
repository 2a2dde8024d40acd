//! Does the path still name the locked file? Watched by the kernel, for a
//! held lock whose holder asked (`HeldLock::watch`).
//!
//! Why: a lock on a file the path no longer names excludes nobody. The next
//! acquirer opens (and creates) what the path names now and locks that, and
//! two processes each hold "the" lock. systemd removes a unit's
//! `RuntimeDirectory=` on every stop and restart, so a lock kept there
//! loses its file while its old holder still runs.
//!
//! How: the OS part (`inotify` on Linux, `kqueue` on macOS) places marks
//! that fire on anything that may have changed what the path names, and
//! this part confirms each such hint with a fresh `lstat` of the path,
//! compared with the held file's device and inode: nothing there, or
//! another file, is gone; the same file (a `touch`, another name of the
//! directory coming or going) is not. Only the `lstat` decides, so a mark
//! may fire too often, never too late.
//!
//! One kernel object per process, shared by every watched lock, read by
//! one task on procward's runtime thread (`crate::runtime`) — never on the
//! JS thread, never polled. Not one per lock: inotify instances are few
//! (`fs.inotify.max_user_instances`, 128 by default, for all of a user's
//! processes together), and an fd per lock would double what a lock costs
//! in fds. It is opened with the first watch and closed, on the caller's
//! thread, with the last: a process that watches no lock holds nothing.
//!
//! A watch that fires is over: the holder has been told, once.

#[cfg(target_os = "linux")]
mod inotify;
#[cfg(target_os = "linux")]
use inotify as imp;
#[cfg(target_os = "macos")]
mod kqueue;
#[cfg(target_os = "macos")]
use kqueue as imp;

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::os::{self, FileId};
use crate::lock::{Gone, OnGone, Watching};

/// Reads in one turn of the reader before it lets the runtime's other
/// tasks (exit watchers) run: a busy directory can keep it fed for ever.
const READS_PER_TURN: usize = 16;

struct Entry {
    path: PathBuf,
    file: FileId,
    mark: imp::Mark,
    /// The instance the mark is in (a later one never sees it).
    generation: u64,
    on_gone: OnGone,
}

struct Instance {
    fd: AsyncFd<OwnedFd>,
    marks: imp::Marks,
    generation: u64,
}

#[derive(Default)]
struct Registry {
    instance: Option<Instance>,
    entries: HashMap<u64, Entry>,
    next_id: u64,
    generation: u64,
    /// The reader's waker, to let it end when its instance closes.
    reader: Option<Waker>,
}

fn registry() -> MutexGuard<'static, Registry> {
    static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(Default::default);
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

type Failure = (io::Error, &'static str);

impl Registry {
    /// The instance, opened (and its reader started) if there is none.
    fn open(&mut self) -> Result<&mut Instance, Failure> {
        if self.instance.is_none() {
            let rt = crate::runtime::handle().map_err(|e| (e, imp::REACTOR_CALL))?;
            let fd = imp::open().map_err(|e| (e, imp::OPEN_CALL))?;
            let _in_runtime = rt.enter();
            // SAFETY: the OwnedFd moves into the AsyncFd and stays open (same
            // fd) until the AsyncFd is dropped, which closes it.
            let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
                .map_err(|e| (e.into_parts().1, imp::REACTOR_CALL))?;
            self.generation += 1;
            let generation = self.generation;
            // It waits for this lock before its first look.
            rt.spawn(read_events(generation));
            self.instance = Some(Instance {
                fd,
                marks: imp::Marks::new(),
                generation,
            });
        }
        self.instance
            .as_mut()
            .ok_or_else(|| (io::Error::from_raw_os_error(libc::EBADF), imp::OPEN_CALL))
    }

    fn unmark(&mut self, entry: &Entry) {
        if let Some(inst) = &mut self.instance {
            if inst.generation == entry.generation {
                inst.marks.remove(inst.fd.get_ref().as_fd(), &entry.mark);
            }
        }
    }

    /// With no lock watched, closes the instance (its fd, now) and returns
    /// the reader's waker, to be woken once the registry is unlocked: it
    /// then finds its instance gone and ends.
    fn close_if_idle(&mut self) -> Option<Waker> {
        if !self.entries.is_empty() || self.instance.is_none() {
            return None;
        }
        self.instance = None;
        self.reader.take()
    }

    /// Takes a watch out: its mark removed, the instance closed if it was
    /// the last. The caller drops the entry (its callback) and wakes the
    /// reader after unlocking.
    fn take(&mut self, id: u64) -> (Option<Entry>, Option<Waker>) {
        let entry = self.entries.remove(&id);
        if let Some(e) = &entry {
            self.unmark(e);
        }
        (entry, self.close_if_idle())
    }
}

/// A watch in place; dropping it ends it (before the lock's fd is closed).
pub(super) struct Watch(u64);

impl Drop for Watch {
    fn drop(&mut self) {
        let (entry, reader) = registry().take(self.0);
        drop(entry);
        if let Some(w) = reader {
            w.wake();
        }
    }
}

/// Whether `path` still names `file`; if not, how.
fn gone(path: &Path, file: FileId) -> Option<Gone> {
    match os::id_at(path) {
        Ok(Some(now)) if now == file => None,
        Ok(Some(_)) => Some(Gone::Replaced),
        Ok(None) => Some(Gone::Removed),
        // EACCES on a directory of the path, say: nobody can open it there
        // now, nor take another lock through it. Not gone.
        Err(_) => None,
    }
}

/// Watches `held`, locked through `path`. The handle is `Some` while a
/// watch is in place.
pub(super) fn watch(
    held: BorrowedFd<'_>,
    path: &Path,
    on_gone: OnGone,
) -> (Watching, Option<Watch>) {
    let file = match os::file_id(held) {
        Ok(f) => f,
        Err(err) => return (Watching::Failed { err, op: "fstat" }, None),
    };
    let id = {
        let mut reg = registry();
        let id = reg.next_id;
        reg.next_id += 1;
        let placed = reg.open().and_then(|inst| {
            let mark = inst
                .marks
                .add(inst.fd.get_ref().as_fd(), id, held, path)
                .map_err(|e| (e, imp::MARK_CALL))?;
            Ok((mark, inst.generation))
        });
        match placed {
            Ok((mark, generation)) => {
                reg.entries.insert(
                    id,
                    Entry {
                        path: path.to_path_buf(),
                        file,
                        mark,
                        generation,
                        on_gone,
                    },
                );
            }
            Err((err, op)) => {
                let reader = reg.close_if_idle();
                drop(reg);
                if let Some(w) = reader {
                    w.wake();
                }
                return (Watching::Failed { err, op }, None);
            }
        }
        id
    };
    // Whatever happened before the marks were in place is seen here.
    let Some(how) = gone(path, file) else {
        return (Watching::Started, Some(Watch(id)));
    };
    let (entry, reader) = registry().take(id);
    if let Some(w) = reader {
        w.wake();
    }
    match entry {
        // Told here, not through `on_gone` (dropped).
        Some(_) => (Watching::Gone(how), None),
        // The reader saw it first and has called `on_gone`.
        None => (Watching::Started, None),
    }
}

async fn read_events(generation: u64) {
    std::future::poll_fn(|cx| read_turn(cx, generation)).await;
}

/// One turn of the reader: reads what the kernel has queued, confirms each
/// hint, tells the holders whose file is gone. Ready when its instance is
/// closed.
fn read_turn(cx: &mut Context<'_>, generation: u64) -> Poll<()> {
    for _ in 0..READS_PER_TURN {
        let due = {
            let mut guard = registry();
            let reg = &mut *guard;
            let Some(Instance { fd, marks, .. }) =
                reg.instance.as_mut().filter(|i| i.generation == generation)
            else {
                return Poll::Ready(());
            };
            if !reg.reader.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                reg.reader = Some(cx.waker().clone());
            }
            let mut ready = match fd.poll_read_ready(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(r)) => r,
                // The reactor is gone (the runtime shutting down): nothing
                // more will come. A later watch opens a new instance.
                Poll::Ready(Err(_)) => {
                    reg.instance = None;
                    return Poll::Ready(());
                }
            };
            let events = match ready.try_io(|fd| imp::read(fd.get_ref().as_fd())) {
                Ok(Ok(events)) => events,
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Not seen in practice (a read of a queue we own); the
                // instance goes, as above.
                Ok(Err(_)) => {
                    reg.instance = None;
                    return Poll::Ready(());
                }
                // Drained; readiness cleared, so the next poll waits.
                Err(_would_block) => continue,
            };
            let mut due: Vec<(u64, PathBuf, FileId)> = Vec::new();
            for ev in &events {
                marks.seen(ev);
                for (&id, e) in &reg.entries {
                    if e.generation == generation && imp::concerns(ev, id, &e.mark) {
                        due.push((id, e.path.clone(), e.file));
                    }
                }
            }
            due
        };
        let mut gone_now: Vec<(u64, Gone)> = Vec::new();
        for (id, path, file) in due {
            if gone_now.iter().any(|(seen, _)| *seen == id) {
                continue;
            }
            if let Some(how) = gone(&path, file) {
                gone_now.push((id, how));
            }
        }
        let mut told = Vec::new();
        {
            let mut reg = registry();
            for (id, how) in gone_now {
                // Not there: released meanwhile (its watch dropped).
                if let Some(e) = reg.entries.remove(&id) {
                    reg.unmark(&e);
                    told.push((e.on_gone, how));
                }
            }
            // Our own waker, if it closed: the next look ends the task.
            drop(reg.close_if_idle());
        }
        for (on_gone, how) in told {
            on_gone(how);
        }
    }
    cx.waker().wake_by_ref();
    Poll::Pending
}

#[cfg(test)]
mod tests;
