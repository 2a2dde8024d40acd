//! Containment: `cgroupSupport()`, a spawn's `cgroup` option, a child's
//! usage, and the Supervisor's kill of a recorded cgroup. Validation and
//! error codes here; the mechanism in `crate::cgroup`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use napi::Result;
use napi_derive::napi;

use crate::cgroup::{self, CgroupError, Usage};
use crate::errors::coded;

#[napi(object)]
pub struct NativeCgroupSupport {
    pub available: bool,
    pub parent: Option<String>,
    pub reason: Option<String>,
}

/// Can this process create child cgroups under the default parent? No side
/// effect.
#[napi]
pub fn cgroup_support() -> NativeCgroupSupport {
    let s = cgroup::support();
    NativeCgroupSupport {
        available: s.available,
        parent: s.parent.map(|p| p.display().to_string()),
        reason: s.reason,
    }
}

pub(crate) fn cgroup_err(err: CgroupError) -> napi::Error {
    match err {
        CgroupError::BadParent(msg) => coded("ERR_INVALID_ARG_VALUE", msg),
        CgroupError::Unavailable(reason) => coded(
            "ERR_CGROUP_UNAVAILABLE",
            format!("cgroup v2 containment is unavailable: {reason}"),
        ),
        // A step that should have worked failed (EMFILE, ENOSPC from
        // cgroup.max.descendants, ...): the errno, as for any system call.
        CgroupError::Io(e, what, path) => match e.raw_os_error() {
            Some(errno) => crate::errors::system_err(
                errno,
                what,
                &format!(
                    ",\"path\":{}",
                    crate::errors::json_str(&path.display().to_string())
                ),
            ),
            None => coded(
                "ERR_CGROUP_UNAVAILABLE",
                format!(
                    "cgroup v2 containment is unavailable: {what} {}: {e}",
                    path.display()
                ),
            ),
        },
    }
}

/// A contained spawn's cgroup, made before the child; `guarded`: killed by
/// the guardian when this process dies (the child has a death signal).
pub(crate) fn contain(parent: Option<&str>, guarded: bool) -> Result<Arc<cgroup::Cgroup>> {
    let parent = parent.map(Path::new);
    cgroup::contain(parent, guarded).map_err(cgroup_err)
}

#[napi(object)]
pub struct NativeUsage {
    pub cpu_usec: Option<f64>,
    pub memory_bytes: Option<f64>,
    pub pids: Option<f64>,
}

pub(crate) fn usage(u: Option<Usage>) -> NativeUsage {
    let u = u.unwrap_or_default();
    let n = |v: Option<u64>| v.map(|v| v as f64);
    NativeUsage {
        cpu_usec: n(u.cpu_usec),
        memory_bytes: n(u.memory_bytes),
        pids: n(u.pids),
    }
}

/// Kills a cgroup a dead predecessor recorded (path + id), if it is still
/// that cgroup and one procward made; removes it once empty (waiting at
/// most `bound_ms` before leaving the removal to a watcher). Resolves
/// whether anything was killed.
#[napi]
pub async fn kill_recorded_cgroup(path: String, id: f64, bound_ms: f64) -> Result<bool> {
    if !(id.fract() == 0.0 && id > 0.0 && id < 2f64.powi(53)) {
        return Err(coded(
            "ERR_INVALID_ARG_VALUE",
            format!("cgroup id must be a positive integer, got {id}"),
        ));
    }
    let bound = crate::duration::Millis::from_f64(bound_ms)
        .map_err(|e| coded("ERR_OUT_OF_RANGE", format!("bound {e}, got {bound_ms}")))?;
    let path = PathBuf::from(path);
    let bound: Duration = bound.as_duration();
    cgroup::kill_recorded(&path, id as u64, bound)
        .await
        .map_err(cgroup_err)
}
