//! One child's cgroup, from creation to removal: made fresh under its
//! parent (named for the guardian when guarded), held open (its directory,
//! `cgroup.kill` and `cgroup.events`, so its exit needs no new fd), killed,
//! asked whether anything runs in it, read for usage, removed; and what
//! spawn needs to start a child inside.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::discovery::{enable_controllers, guarded_prefix, owner, resolve_parent};
use super::wait::remove_tree;
use super::{open_at, open_dir};
use crate::cgroup::{parse, CgroupError, Usage};

/// One child's cgroup, from creation to removal.
pub struct Cgroup {
    path: PathBuf,
    id: u64,
    /// Its fds, closed once it is removed, so a handle JS keeps around
    /// holds none.
    dir: std::sync::Mutex<Option<Held>>,
}

/// What a live cgroup keeps open. `cgroup.kill` and `cgroup.events` are
/// opened with the directory, at the spawn: its exit (kill it, see it
/// empty) then needs no new fd, so a process out of fds (EMFILE) at that
/// moment still kills everything in it before `'exit'`.
struct Held {
    /// For `clone3`'s `CLONE_INTO_CGROUP`, and to reach its other files
    /// without resolving the path again.
    dir: OwnedFd,
    kill: OwnedFd,
    events: OwnedFd,
}

impl Held {
    fn open(dir: OwnedFd) -> io::Result<Held> {
        let kill = open_at(dir.as_fd(), c"cgroup.kill", libc::O_WRONLY)?;
        let events = open_at(dir.as_fd(), c"cgroup.events", libc::O_RDONLY)?;
        Ok(Held { dir, kill, events })
    }
}

pub(super) fn gone() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOENT)
}

/// A small control file, whole. Plain reads into one buffer: `read_to_string`
/// would first `statx` and `lseek` to size it, which a kernfs file cannot
/// tell (size 0), and these reads are on a contained child's exit path.
fn read_at(dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> io::Result<String> {
    let f = open_at(dir, name, libc::O_RDONLY)?;
    let mut buf = vec![0u8; 1024];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(len * 2, 0);
        }
        let spare = &mut buf[len..];
        // SAFETY: reads into the spare part of a buffer we own, at most its length.
        let n = unsafe { libc::read(f.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len()) };
        match n {
            0 => break,
            n if n > 0 => len += n as usize,
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    buf.truncate(len);
    String::from_utf8(buf).map_err(|_| io::Error::from_raw_os_error(libc::EILSEQ))
}

impl Cgroup {
    /// Makes a fresh child cgroup under `parent`. `guarded`: named so that
    /// this process's guardian kills it when we die.
    pub fn create(parent: &Path, guarded: bool) -> Result<Cgroup, CgroupError> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let (pid, tick) = owner();
        let made = loop {
            let seq = SEQ.fetch_add(1, Ordering::Relaxed);
            let path = parent.join(parse::child_name(pid, tick, seq, guarded));
            match std::fs::create_dir(&path) {
                Ok(()) => break path,
                // Left by an earlier process with our pid and start tick?
                // Impossible within a boot; but never reuse one.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(CgroupError::Io(e, "mkdir", path));
                }
            }
        };
        let dir = match open_dir(&made) {
            Ok(dir) => dir,
            Err(e) => {
                let _ = std::fs::remove_dir(&made);
                return Err(CgroupError::Io(e, "open", made));
            }
        };
        let id = match crate::sys::inode_of(dir.as_fd()) {
            Ok(id) => id,
            Err(e) => {
                let _ = std::fs::remove_dir(&made);
                return Err(CgroupError::Io(e, "fstat", made));
            }
        };
        match Cgroup::with(made.clone(), id, dir) {
            Ok(cg) => Ok(cg),
            Err(e) => {
                let _ = std::fs::remove_dir(&made);
                Err(CgroupError::Io(e, "open", made))
            }
        }
    }

    pub(super) fn with(path: PathBuf, id: u64, dir: OwnedFd) -> io::Result<Cgroup> {
        Ok(Cgroup {
            path,
            id,
            dir: std::sync::Mutex::new(Some(Held::open(dir)?)),
        })
    }

    /// Runs `f` on the open fds; ENOENT once it was removed.
    fn held<T>(&self, f: impl FnOnce(&Held) -> io::Result<T>) -> io::Result<T> {
        let held = self.dir.lock().unwrap_or_else(|e| e.into_inner());
        match held.as_ref() {
            Some(h) => f(h),
            None => Err(gone()),
        }
    }

    /// Runs `f` on the open directory; ENOENT once it was removed.
    fn at<T>(&self, f: impl FnOnce(BorrowedFd<'_>) -> io::Result<T>) -> io::Result<T> {
        self.held(|h| f(h.dir.as_fd()))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// Kills every process in the cgroup and below, at once (the kernel
    /// walks it; a process forking meanwhile cannot escape). ENOENT/ENODEV:
    /// it was removed already.
    pub fn kill(&self) -> io::Result<()> {
        self.held(|h| {
            // SAFETY: writes one byte from a static buffer to an fd we hold.
            let n = unsafe { libc::write(h.kill.as_raw_fd(), b"1".as_ptr().cast(), 1) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })
    }

    /// Whether anything runs in it or below (`populated` of `cgroup.events`).
    pub fn populated(&self) -> io::Result<bool> {
        self.held(|h| {
            let mut buf = [0u8; 128];
            let n = crate::sys::pread0(h.events.as_fd(), &mut buf)?;
            parse::populated(&String::from_utf8_lossy(&buf[..n]))
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
        })
    }

    /// Removes the (empty) cgroup, and closes our fd of it. ENOENT: gone
    /// already (and closed).
    pub fn remove(&self) -> io::Result<()> {
        let mut dir = self.dir.lock().unwrap_or_else(|e| e.into_inner());
        if dir.is_none() {
            return Ok(());
        }
        match remove_tree(&self.path) {
            Err(e) if e.raw_os_error() != Some(libc::ENOENT) => return Err(e),
            _ => {}
        }
        *dir = None;
        Ok(())
    }

    /// CPU time from `cpu.stat` (every v2 cgroup has it), memory and pids
    /// where those controllers are enabled for it (else None).
    pub fn usage(&self) -> Usage {
        let read = |name| self.at(|d| read_at(d, name)).ok();
        Usage {
            cpu_usec: read(c"cpu.stat").and_then(|t| parse::cpu_usage_usec(&t)),
            memory_bytes: read(c"memory.current").and_then(|t| parse::single_u64(&t)),
            pids: read(c"pids.current").and_then(|t| parse::single_u64(&t)),
        }
    }

    /// `cgroup.events`, open for polling: the kernel wakes its pollers
    /// (POLLPRI) whenever `populated` or `frozen` changes. Opened before the
    /// state is read, so no change between the read and the wait is missed.
    ///
    /// Why not inotify: closing an inotify instance waits for an SRCU grace
    /// period (about 15 ms measured here), which would stall the runtime
    /// thread on every contained exit; poll wakes at once, and closing a
    /// cgroup file costs nothing. The kernel rate-limits these notifications
    /// to one per 10 ms per file, so an exit that comes within 10 ms of the
    /// cgroup's first process may be told that much later.
    pub fn events_file(&self) -> io::Result<OwnedFd> {
        // A copy of the one held, for a waiter to own (and register with
        // the runtime's epoll): the held one may be closed under it.
        self.held(|h| h.events.try_clone())
    }
}

/// A fresh cgroup for a child about to be spawned: under `parent` (or the
/// default), named for the guardian when `guarded`. `before`: told the
/// parent first, with this process's guarded name prefix when `guarded`
/// (the guardian, which must know both before any child is there).
/// Nothing is left behind on failure.
pub fn contain(
    parent: Option<&Path>,
    guarded: bool,
    before: impl FnOnce(&Path, Option<&str>) -> Result<(), CgroupError>,
) -> Result<std::sync::Arc<Cgroup>, CgroupError> {
    let default = parent.is_none();
    let parent = resolve_parent(parent)?;
    before(&parent, guarded.then(guarded_prefix).as_deref())?;
    match Cgroup::create(&parent, guarded) {
        // Our default parent was removed since we made it: make it again.
        Err(CgroupError::Io(e, "mkdir", _)) if default && e.kind() == io::ErrorKind::NotFound => {
            match std::fs::create_dir(&parent) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                    return Err(CgroupError::Io(e, "mkdir", parent));
                }
                _ => enable_controllers(&parent),
            }
            Cgroup::create(&parent, guarded)
        }
        r => r,
    }
    .map(std::sync::Arc::new)
}

impl Cgroup {
    /// What spawn needs to start a child inside (see `spawn::IntoCgroup`).
    pub fn into_spawn(&self) -> io::Result<crate::spawn::IntoCgroup> {
        let dir = self.at(|d| Ok(d.as_raw_fd()))?;
        Ok(crate::spawn::IntoCgroup { dir })
    }
}
