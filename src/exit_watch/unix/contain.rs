//! A contained spawn's cgroup, made before the child (see `crate::cgroup`
//! for the cgroup itself). On Linux a guarded one (the child dies with this
//! process) is named for the `guardian`, which is told of its parent first
//! and kills it when this process dies, by any means; the guardian lives
//! here, beside the only code that asks for it. Elsewhere
//! `cgroup::contain` says why there is no cgroup.

#[cfg(target_os = "linux")]
mod guardian;

use std::path::Path;
use std::sync::Arc;

use crate::cgroup::{self, Cgroup, CgroupError};

/// The child's cgroup, made (and, if `guarded`, guarded) under `parent` or
/// the default.
#[cfg(target_os = "linux")]
pub(super) fn contain(parent: Option<&Path>, guarded: bool) -> Result<Arc<Cgroup>, CgroupError> {
    cgroup::contain(parent, guarded, |dir, prefix| {
        let Some(prefix) = prefix else {
            return Ok(());
        };
        guardian::guard(dir, prefix).map_err(|e| {
            CgroupError::Unavailable(format!(
                "the guardian that kills contained children when this process dies (/bin/sh) could not start: {}",
                crate::errors::io_text(&e)
            ))
        })
    })
}

/// No cgroups here: `cgroup::contain` says why.
#[cfg(not(target_os = "linux"))]
pub(super) fn contain(parent: Option<&Path>, guarded: bool) -> Result<Arc<Cgroup>, CgroupError> {
    cgroup::contain(parent, guarded, |_, _| Ok(()))
}
