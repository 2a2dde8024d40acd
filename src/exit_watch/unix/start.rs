//! Starting a supervised child: the spawn glue between `crate::spawn` and
//! the exit watch. A contained child's cgroup is made (and guarded) before
//! the child, which enters it before it execs; the clock readings around
//! the spawn and the pidfd seed its identity; the result is a registered
//! [`Watched`](super::Watched), not yet watched by any driver.

use super::contain::contain;
use super::register_contained;
use crate::cgroup::{self, CgroupError};
use crate::exit_watch::{forced_fallback, Contained, Containment, StartError, Started};
use crate::proc_info::{self, IdentitySeed};
use crate::spawn::{self, Command};
use crate::sys;

/// Starts `cmd` as a supervised child, not yet watched (see [`watch`](super::watch)).
/// `sweep_group`: its process group is killed when it exits. `containment`:
/// it is born in a cgroup of its own, made here first (and removed again if
/// the spawn fails).
///
/// The clock readings around the spawn usually pin the child's start tick,
/// and its pidfd gives the pidfs inode: its identity without a /proc read.
/// Whatever is missing is read later, while the child is still unreaped.
pub fn start(
    mut cmd: Command,
    sweep_group: bool,
    containment: Option<Containment>,
) -> Result<Started, StartError> {
    // The cgroup exists (and the guardian knows its parent) before the
    // child does; the child enters it before it execs.
    let contained = match containment {
        Some(c) => Some(Contained {
            cgroup: contain(c.parent.as_deref(), c.guarded).map_err(StartError::Cgroup)?,
            bound: c.bound,
        }),
        None => None,
    };
    if let Some(c) = &contained {
        match c.cgroup.into_spawn() {
            Ok(into) => cmd.cgroup = Some(into),
            Err(e) => {
                let _ = c.cgroup.remove();
                let path = c.cgroup.path().to_path_buf();
                return Err(StartError::Cgroup(CgroupError::Io(e, "open", path)));
            }
        }
    }
    proc_info::prepare_identity();
    let before = sys::boottime_ns();
    let spawned = spawn::spawn(&cmd, !forced_fallback());
    // Only the spawn needed where the child starts.
    cmd.cgroup = None;
    let child = match spawned {
        Ok(c) => c,
        Err(e) => {
            if let Some(c) = &contained {
                // The child failed before exec and was reaped: it is empty.
                if c.cgroup.remove().is_err() {
                    cgroup::remove_when_empty(c.cgroup.clone());
                }
            }
            return Err(e.into());
        }
    };
    let seed = IdentitySeed {
        start_time: proc_info::start_tick_between(before, sys::boottime_ns()),
        inode: child.pidfd.as_ref().map(proc_info::pidfd_inode),
    };
    let pgid = cmd.process_group.then_some(child.pid);
    let watched = register_contained(child.pid, pgid, sweep_group, seed, contained, child.pidfd);
    let [a, b, c] = child.pipes;
    Ok(Started {
        watched,
        pipes: [a, b, c, child.notify],
    })
}
