//! cgroup v2 on Linux: finding a parent we may use, creating a child's
//! cgroup, killing it (`cgroup.kill`, Linux 5.14), waiting event-driven for
//! it to empty (poll on `cgroup.events`, which the kernel notifies when
//! `populated` changes), removing it, and reading its usage.
//!
//! Discovery. Our cgroup is the `0::` line of `/proc/self/cgroup`, and the
//! v2 hierarchy is the `cgroup2` mount in `/proc/self/mountinfo` (a hybrid
//! system mounts it at `/sys/fs/cgroup/unified`, a pure v2 one at
//! `/sys/fs/cgroup`). The default parent is a `procward` cgroup *below*
//! ours: our children must stay inside the subtree that our own manager
//! kills (`systemctl stop` signals, or `cgroup.kill`s, every process of the
//! unit's cgroup, and a cgroup beside the unit's is outside it). The "no
//! internal processes" rule forbids a cgroup that holds processes to hand
//! controllers to its children, so where our cgroup is delegated to us we
//! follow systemd's layout for delegated services: at the first contained
//! spawn this process (only this one, once) moves into a leaf of its own,
//! `<own>/supervisor`, and the children's cgroups go beside it, under
//! `<own>/procward`, where memory and pids can then be enabled. Where it is
//! not (root in a unit that did not ask for `Delegate=`: everything is
//! writable to root, but the manager owns the tree), we are not moved and
//! the children still go below our cgroup, with no controllers (usage null
//! for memory and pids). At the root of the mount (a container with its own
//! cgroup namespace, or the host's root) it is `<root>/procward`, as
//! processes in the root do not stop controllers below it. A child's own
//! cgroup is a fresh leaf: a process may always enter it.
//!
//! Permission. Moving a process between cgroups needs write access to
//! `cgroup.procs` of the common ancestor of both, and creating needs write
//! access to the parent directory: what systemd's delegation (`Delegate=`,
//! a user's `user@.service`) grants. Both are checked with the effective
//! ids (`faccessat(AT_EACCESS)`), which also sees a read-only mount.
//!
//! Identity. A cgroup is recorded by path and id (its directory's inode,
//! the kernel's cgroup id): a path can be removed and made again.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use super::parse;
use super::{CgroupError, Support, Usage};
use crate::errors::io_text;

const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn writable(p: &Path) -> io::Result<()> {
    let c = cpath(p)?;
    // SAFETY: faccessat reads a NUL-terminated path we own.
    cvt(unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) })
        .map(drop)
}

fn is_cgroup2(p: &Path) -> io::Result<bool> {
    let c = cpath(p)?;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: statfs fills the buffer we own from a NUL-terminated path.
    cvt(unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) })?;
    // SAFETY: statfs succeeded, so the buffer is initialised.
    let st = unsafe { st.assume_init() };
    // f_type is i64 with glibc and u64 (or 32 bits) elsewhere.
    #[allow(clippy::unnecessary_cast)]
    let t = st.f_type as i64;
    Ok(t == CGROUP2_SUPER_MAGIC)
}

fn kernel_release() -> String {
    // SAFETY: a zeroed utsname is valid storage for uname.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname fills the struct we own.
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    String::from_utf8_lossy(&crate::sys::c_field(&u.release)).into_owned()
}

/// Where the hierarchy is and where we are in it.
struct Place {
    mounts: Vec<parse::Mount>,
    own: PathBuf,
    own_mount: parse::Mount,
}

fn place() -> Result<Place, String> {
    if !parse::kernel_at_least(&kernel_release(), 5, 14) {
        return Err(format!(
            "Linux {} has no cgroup.kill (needs Linux 5.14 or later)",
            kernel_release()
        ));
    }
    let cg = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {}", io_text(&e)))?;
    let own = parse::own_v2_path(&cg)
        .ok_or("no cgroup v2 hierarchy: /proc/self/cgroup has no 0:: line (cgroup v1 only)")?
        .to_owned();
    let mi = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {}", io_text(&e)))?;
    let mounts = parse::v2_mounts(&mi);
    if mounts.is_empty() {
        return Err("cgroup v2 is not mounted (no cgroup2 entry in /proc/self/mountinfo)".into());
    }
    let (own_path, own_mount) = parse::fs_path(&mounts, &own).ok_or_else(|| {
        format!("this process's cgroup {own} is not visible under any cgroup2 mount")
    })?;
    Ok(Place {
        mounts,
        own: own_path,
        own_mount,
    })
}

/// The common ancestor of two paths (both under one mount point).
fn common_ancestor(a: &Path, b: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for (x, y) in a.components().zip(b.components()) {
        if x != y {
            break;
        }
        out.push(x);
    }
    out
}

/// Why `parent` cannot take children that this process moves there, or Ok.
/// `parent` may not exist yet (the default one is made on first use); then
/// its would-be parent directory must be writable.
fn check_writable(place: &Place, parent: &Path) -> Result<(), String> {
    let mount = parse::mount_of(&place.mounts, parent)
        .ok_or_else(|| format!("{} is not under a cgroup2 mount", parent.display()))?;
    if mount.read_only {
        return Err(format!(
            "cgroup2 is mounted read-only at {} (a container without a writable cgroup)",
            mount.point.display()
        ));
    }
    if mount.point != place.own_mount.point {
        return Err(format!(
            "{} is in another cgroup2 mount than this process's cgroup",
            parent.display()
        ));
    }
    let (target, what) = if parent.exists() {
        (parent.to_path_buf(), "")
    } else {
        let up = parent.parent().unwrap_or(parent).to_path_buf();
        (up, " (to create the procward cgroup in)")
    };
    writable(&target).map_err(|e| {
        format!(
            "{}{what} is not writable by this process ({}): it is not delegated to uid {} \
             (run under a delegated cgroup, e.g. systemd-run --user, or pass cgroup: {{ parent }} \
             naming one)",
            target.display(),
            crate::errors::errno_name(e.raw_os_error().unwrap_or(0)),
            // SAFETY: geteuid takes no arguments and cannot fail.
            unsafe { libc::geteuid() }
        )
    })?;
    let ancestor = common_ancestor(&place.own, parent);
    let procs = ancestor.join("cgroup.procs");
    writable(&procs).map_err(|e| {
        format!(
            "{} is not writable ({}): a child cannot be moved from this process's cgroup {} to {}",
            procs.display(),
            crate::errors::errno_name(e.raw_os_error().unwrap_or(0)),
            place.own.display(),
            parent.display()
        )
    })
}

/// Below ours, at the root of the mount too (see the module docs).
fn default_parent(place: &Place) -> PathBuf {
    place.own.join("procward")
}

/// The leaf this process moves into where its cgroup is delegated.
const OWN_LEAF: &str = "supervisor";

/// Is our cgroup ours to reorganise? Writable to us (the directory, its
/// `cgroup.procs` and `cgroup.subtree_control`: what delegation chowns) and,
/// for root, to whom every cgroup is writable, marked delegated by its
/// manager (systemd sets the `trusted.delegate` or `user.delegate` xattr on
/// a unit's cgroup with `Delegate=yes`).
fn delegated(own: &Path) -> bool {
    let writable_all = ["", "cgroup.procs", "cgroup.subtree_control"]
        .iter()
        .all(|f| writable(&own.join(f)).is_ok());
    // SAFETY: geteuid takes no arguments and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    writable_all
        && (!root || has_xattr(own, c"trusted.delegate") || has_xattr(own, c"user.delegate"))
}

fn has_xattr(path: &Path, name: &std::ffi::CStr) -> bool {
    let Ok(c) = cpath(path) else {
        return false;
    };
    // SAFETY: getxattr with a NULL buffer and size 0 only asks the value's
    // size; both strings are NUL-terminated and ours.
    let n = unsafe { libc::getxattr(c.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
    n >= 0
}

/// Moves this process (all its threads) into `<own>/supervisor`, so that
/// our cgroup holds no process of ours and may hand controllers down. False
/// when it did not move (then the leaf it made is removed again).
fn move_into_leaf(own: &Path) -> bool {
    let leaf = own.join(OWN_LEAF);
    let made = match std::fs::create_dir(&leaf) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
        Err(_) => return false,
    };
    let moved = std::fs::write(leaf.join("cgroup.procs"), std::process::id().to_string()).is_ok();
    if !moved && made {
        let _ = std::fs::remove_dir(&leaf);
    }
    moved
}

/// Can this process create child cgroups under the default parent? No side
/// effect: the parent is made only by the first contained spawn.
pub fn support() -> Support {
    let place = match place() {
        Ok(p) => p,
        Err(reason) => return Support::no(None, reason),
    };
    // Once made, the default parent is where it was made: this process may
    // have moved into its leaf since, below it.
    let parent = MADE
        .get()
        .cloned()
        .unwrap_or_else(|| default_parent(&place));
    match check_writable(&place, &parent) {
        Ok(()) => Support::yes(parent),
        Err(reason) => Support::no(Some(parent), reason),
    }
}

/// The default parent, once made.
static MADE: OnceLock<PathBuf> = OnceLock::new();

/// The default parent, made (and its controllers enabled) on first use and
/// remembered once it works.
fn ensure_default_parent() -> Result<PathBuf, CgroupError> {
    if let Some(p) = MADE.get() {
        return Ok(p.clone());
    }
    let place = place().map_err(CgroupError::Unavailable)?;
    let parent = default_parent(&place);
    check_writable(&place, &parent).map_err(CgroupError::Unavailable)?;
    match std::fs::create_dir(&parent) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(CgroupError::Unavailable(format!(
                "cannot create {}: {}",
                parent.display(),
                io_text(&e)
            )))
        }
    }
    // Below a delegated cgroup (not the root: processes there do not stop
    // controllers below it), out of our cgroup into a leaf, so that it can
    // hand controllers to ours (where other processes still sit in it, the
    // kernel refuses and usage stays null for them).
    if place.own != place.own_mount.point && delegated(&place.own) && move_into_leaf(&place.own) {
        enable_controllers(&place.own);
    }
    enable_controllers(&parent);
    Ok(MADE.get_or_init(|| parent).clone())
}

/// Best effort: hand memory and pids to the children of `parent` (our
/// `procward` cgroup, or our own once we left it) where the hierarchy
/// offers them (listed in its `cgroup.controllers`). The "no internal
/// processes" rule allows it only while it holds no process; where it
/// fails, usage reports null for them.
fn enable_controllers(parent: &Path) {
    let Ok(offered) = std::fs::read_to_string(parent.join("cgroup.controllers")) else {
        return;
    };
    let enabled =
        std::fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
    for c in ["memory", "pids"] {
        if offered.split_whitespace().any(|o| o == c) && !enabled.split_whitespace().any(|o| o == c)
        {
            let _ = std::fs::write(parent.join("cgroup.subtree_control"), format!("+{c}"));
        }
    }
}

/// A caller's `parent`: an existing directory of the cgroup2 hierarchy this
/// process may use, as its canonical path (no `..`, no symlink: the mount
/// and the common ancestor are judged by path components, and the path is
/// what `cgroup` reports and a Supervisor records). Nothing is created for
/// it.
fn explicit_parent(parent: &Path) -> Result<PathBuf, CgroupError> {
    if !parent.is_absolute() {
        return Err(CgroupError::BadParent(format!(
            "options.cgroup.parent must be an absolute path, got {:?}",
            parent.display().to_string()
        )));
    }
    let bad = |e: io::Error| {
        CgroupError::BadParent(format!(
            "options.cgroup.parent {}: {}",
            parent.display(),
            io_text(&e)
        ))
    };
    let parent = std::fs::canonicalize(parent).map_err(bad)?;
    let parent = parent.as_path();
    let meta = std::fs::metadata(parent).map_err(bad)?;
    if !meta.is_dir() || !is_cgroup2(parent).unwrap_or(false) {
        return Err(CgroupError::BadParent(format!(
            "options.cgroup.parent {} is not a directory of a cgroup v2 hierarchy",
            parent.display()
        )));
    }
    // Below a threaded cgroup, or a threaded subtree's root ("domain
    // threaded"), a new cgroup is threaded or "domain invalid": no process
    // can be moved into it (EOPNOTSUPP from the child, after the fact). The
    // root has no cgroup.type (it is always a domain).
    if let Ok(t) = std::fs::read_to_string(parent.join("cgroup.type")) {
        if t.trim() != "domain" {
            return Err(CgroupError::BadParent(format!(
                "options.cgroup.parent {} is a \"{}\" cgroup: a child's cgroup there could hold no \
                 process (it needs a \"domain\" one)",
                parent.display(),
                t.trim()
            )));
        }
    }
    let place = place().map_err(CgroupError::Unavailable)?;
    check_writable(&place, parent).map_err(CgroupError::Unavailable)?;
    Ok(parent.to_path_buf())
}

/// Where a new child's cgroup goes: `parent` if given, else the default.
pub fn resolve_parent(parent: Option<&Path>) -> Result<PathBuf, CgroupError> {
    match parent {
        Some(p) => explicit_parent(p),
        None => ensure_default_parent(),
    }
}

/// This process's pid and start tick, for child cgroup names.
pub fn owner() -> (i32, u64) {
    static OWNER: OnceLock<(i32, u64)> = OnceLock::new();
    *OWNER.get_or_init(|| {
        let pid = std::process::id() as i32;
        let tick = std::fs::read("/proc/self/stat")
            .ok()
            .and_then(|b| crate::proc_info::stat::parse(&b).ok())
            .map_or(0, |s| s.start_time);
        (pid, tick)
    })
}

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

/// No fd to be had (EMFILE, ENFILE): worth another try later.
fn no_fd(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// How often a wait that could get no fd to poll with looks again.
const NO_FD_RETRY: Duration = Duration::from_millis(10);

fn gone() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOENT)
}

fn open_at(dir: BorrowedFd<'_>, name: &std::ffi::CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: openat with a NUL-terminated name relative to a dir fd we hold.
    let fd = cvt(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC) })?;
    // SAFETY: the kernel just gave us this fd.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Opens the directory `path` read-only: how a cgroup is held and walked.
fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let c = cpath(path)?;
    // SAFETY: open of a NUL-terminated path we own.
    let fd = cvt(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: the kernel just gave us this fd.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
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

    fn with(path: PathBuf, id: u64, dir: OwnedFd) -> io::Result<Cgroup> {
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
fn remove_tree(path: &Path) -> io::Result<()> {
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

/// A cgroup recorded earlier (a dead supervisor's state file): kill it and
/// remove it once empty, but only if it is still the one recorded — the
/// same directory (inode = cgroup id), on a cgroup2 file system, named as
/// procward names a child's cgroup. Ok(false): gone (or someone else's).
pub async fn kill_recorded(path: &Path, id: u64, bound: Duration) -> Result<bool, CgroupError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if !path.is_absolute() || !parse::is_child_name(name) {
        return Ok(false);
    }
    let dir = match open_dir(path) {
        Ok(dir) => dir,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) => {
            return Ok(false)
        }
        Err(e) => return Err(CgroupError::Io(e, "open", path.into())),
    };
    let same = crate::sys::inode_of(dir.as_fd()).ok() == Some(id);
    if !same || !is_cgroup2(path).unwrap_or(false) {
        return Ok(false);
    }
    let cg = match Cgroup::with(path.to_path_buf(), id, dir) {
        Ok(cg) => cg,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENODEV)) => {
            return Ok(false)
        }
        Err(e) => return Err(CgroupError::Io(e, "open", path.into())),
    };
    match cg.kill() {
        Ok(()) => {}
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENODEV)) => {
            return Ok(false)
        }
        Err(e) => return Err(CgroupError::Io(e, "write cgroup.kill", path.into())),
    }
    let deadline = tokio::time::Instant::now() + bound;
    if wait_empty(&cg, Some(deadline)).await {
        let _ = cg.remove();
    } else {
        remove_when_empty(std::sync::Arc::new(cg));
    }
    Ok(true)
}

/// The name prefix of this process's guarded cgroups (`<pid>-<start
/// tick>-`): what the guardian kills when this process dies.
pub fn guarded_prefix() -> String {
    let (pid, tick) = owner();
    parse::guarded_prefix(pid, tick)
}

/// A fresh cgroup for a child about to be spawned: under `parent` (or the
/// default), named for the guardian when `guarded`. `before`: told the
/// parent first (the guardian, which must know it before any child is
/// there). Nothing is left behind on failure.
pub fn contain(
    parent: Option<&Path>,
    guarded: bool,
    before: impl FnOnce(&Path) -> Result<(), CgroupError>,
) -> Result<std::sync::Arc<Cgroup>, CgroupError> {
    let default = parent.is_none();
    let parent = resolve_parent(parent)?;
    before(&parent)?;
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
