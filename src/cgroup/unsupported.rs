//! Containment where there is no cgroup v2 (macOS and others): never
//! available, and says so. No silent fallback: a `cgroup` spawn option is
//! refused by the binding with this reason.

use super::{Support, Usage};

/// Windows needs no cgroup: every child is born in a Job object that holds
/// its whole tree.
#[cfg(windows)]
const WHY: &str = "cgroups are a Linux mechanism; on Windows every child is already contained by its Job object (its whole tree dies with it, and with this process)";
#[cfg(not(windows))]
const WHY: &str = "cgroups are a Linux mechanism, and this system has none (nothing here can contain a process tree that leaves its process group)";

pub fn support() -> Support {
    Support::no(None, WHY.to_string())
}

/// Never constructed here; it keeps the exit path's types the same on
/// every platform.
pub struct Cgroup(std::convert::Infallible);

impl Cgroup {
    pub fn path(&self) -> &std::path::Path {
        match self.0 {}
    }

    pub fn id(&self) -> u64 {
        match self.0 {}
    }

    pub fn usage(&self) -> Usage {
        match self.0 {}
    }
}

impl Cgroup {
    pub fn kill(&self) -> std::io::Result<()> {
        match self.0 {}
    }

    pub fn remove(&self) -> std::io::Result<()> {
        match self.0 {}
    }

    pub fn populated(&self) -> std::io::Result<bool> {
        match self.0 {}
    }
}

pub fn wait_empty_blocking(cg: &Cgroup, _timeout: Option<std::time::Duration>) -> bool {
    match cg.0 {}
}

pub async fn wait_empty(cg: &Cgroup, _deadline: Option<tokio::time::Instant>) -> bool {
    match cg.0 {}
}

pub fn remove_when_empty(cg: std::sync::Arc<Cgroup>) {
    match cg.0 {}
}

pub fn contain(
    _parent: Option<&std::path::Path>,
    _guarded: bool,
    _before: impl FnOnce(&std::path::Path, Option<&str>) -> Result<(), super::CgroupError>,
) -> Result<std::sync::Arc<Cgroup>, super::CgroupError> {
    Err(super::CgroupError::Unavailable(
        support().reason.unwrap_or_default(),
    ))
}

impl Cgroup {
    pub fn into_spawn(&self) -> std::io::Result<crate::spawn::IntoCgroup> {
        match self.0 {}
    }
}

/// No cgroup can have been recorded here.
pub async fn kill_recorded(
    _path: &std::path::Path,
    _id: u64,
    _bound: std::time::Duration,
) -> Result<bool, super::CgroupError> {
    Ok(false)
}
