//! The takeover kill: a cgroup recorded earlier (by a supervisor that
//! died, in its state file) is killed and removed, but only if it is still
//! the one recorded, never a directory made since under the same path.

use std::os::fd::AsFd;
use std::path::Path;
use std::time::Duration;

use super::{is_cgroup2, open_dir, remove_when_empty, wait_empty, Cgroup};
use crate::cgroup::{parse, CgroupError};

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
