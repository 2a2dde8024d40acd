//! Discovery and delegation: where the cgroup2 hierarchy is, where this
//! process sits in it, which parent a child's cgroup may go under (the
//! default one below ours, made on first use, or the caller's), whether
//! our cgroup is delegated to us, and, where it is, the move of this
//! process into a leaf of its own so that controllers can be handed down
//! (see the module docs of `cgroup::linux`). Also this process's name for
//! its children's cgroups (`owner`, `guarded_prefix`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::{cpath, cvt, is_cgroup2};
use crate::cgroup::{parse, CgroupError, Support};
use crate::errors::io_text;

fn writable(p: &Path) -> io::Result<()> {
    let c = cpath(p)?;
    // SAFETY: faccessat reads a NUL-terminated path we own.
    cvt(unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) })
        .map(drop)
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
pub(super) fn enable_controllers(parent: &Path) {
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
pub(super) fn resolve_parent(parent: Option<&Path>) -> Result<PathBuf, CgroupError> {
    match parent {
        Some(p) => explicit_parent(p),
        None => ensure_default_parent(),
    }
}

/// This process's pid and start tick, for child cgroup names.
pub(super) fn owner() -> (i32, u64) {
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

/// The name prefix of this process's guarded cgroups (`<pid>-<start
/// tick>-`): what the guardian kills when this process dies.
pub(super) fn guarded_prefix() -> String {
    let (pid, tick) = owner();
    parse::guarded_prefix(pid, tick)
}
