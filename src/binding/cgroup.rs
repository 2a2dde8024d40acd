//! Containment: `cgroupSupport()`, a spawn's `cgroup` option, a child's
//! usage, and the Supervisor's kill of a recorded cgroup. Validation and
//! error codes here; the mechanism in `crate::cgroup`.

use std::path::PathBuf;

use napi::bindgen_prelude::PromiseRaw;
use napi::{Env, Result};
use napi_derive::napi;

use super::convert::duration_ms;
use super::errors::{promise, JsErr};
use crate::cgroup::{self, CgroupError, Usage};

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

pub fn cgroup_err(err: CgroupError) -> JsErr {
    match err {
        CgroupError::BadParent(msg) => JsErr::coded("ERR_INVALID_ARG_VALUE", msg),
        CgroupError::Unavailable(reason) => JsErr::coded(
            "ERR_CGROUP_UNAVAILABLE",
            format!("cgroup v2 containment is unavailable: {reason}"),
        ),
        // A step that should have worked failed (EMFILE, ENOSPC from
        // cgroup.max.descendants, ...): the errno, as for any system call.
        CgroupError::Io(e, what, path) => match crate::sys::errno_of(&e) {
            Some(errno) => JsErr::system(errno, what).path(&path),
            None => JsErr::coded(
                "ERR_CGROUP_UNAVAILABLE",
                format!(
                    "cgroup v2 containment is unavailable: {what} {}: {}",
                    path.display(),
                    crate::errors::io_text(&e)
                ),
            ),
        },
    }
}

#[napi(object)]
pub struct NativeUsage {
    pub cpu_usec: Option<f64>,
    pub memory_bytes: Option<f64>,
    pub pids: Option<f64>,
}

pub fn usage(u: Option<Usage>) -> NativeUsage {
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
#[napi(ts_return_type = "Promise<boolean>")]
pub fn kill_recorded_cgroup<'env>(
    env: &'env Env,
    path: String,
    id: f64,
    bound_ms: f64,
) -> Result<PromiseRaw<'env, bool>> {
    promise(env, async move {
        if !(id.fract() == 0.0 && id > 0.0 && id < 2f64.powi(53)) {
            return Err(JsErr::coded(
                "ERR_INVALID_ARG_VALUE",
                format!("cgroup id must be a positive integer, got {id}"),
            ));
        }
        let bound = duration_ms(bound_ms, "bound")?.as_duration();
        cgroup::kill_recorded(&PathBuf::from(path), id as u64, bound)
            .await
            .map_err(cgroup_err)
    })
}
