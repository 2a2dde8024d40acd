//! Native helpers of the Supervisor (package-internal, not public API): a
//! process's session and start time for the state file's record, and the
//! takeover's sweep of a dead predecessor's stray group members.

use napi::Result;
use napi_derive::napi;

use crate::errors::{coded, io_err};
use crate::proc_info::{self, Identity};
use crate::strays::{self, GroupRecord};
use crate::to_pid;

#[napi(object)]
pub struct NativeProcStat {
    pub pgid: i32,
    pub session: i32,
}

/// Group and session of a live process, or null when there is none.
#[napi]
pub fn proc_stat(pid: f64) -> Result<Option<NativeProcStat>> {
    let pid = to_pid(pid)?;
    let st = proc_info::stat_of(pid).map_err(|e| io_err(&e, "read /proc"))?;
    Ok(st.filter(|s| s.state.is_running()).map(|s| NativeProcStat {
        pgid: s.pgid,
        session: s.session,
    }))
}

#[napi(object)]
pub struct NativeGroupRecord {
    pub pgid: f64,
    pub session: f64,
    /// The recorded leader's identity: which boot the record is from.
    pub identity: String,
    /// `aliveAt`, in milliseconds since the epoch.
    pub alive_at_ms: f64,
}

#[napi(object)]
pub struct NativeSwept {
    pub killed: Vec<i32>,
    pub suspects: Vec<i32>,
}

/// SIGKILLs the proven members of a dead predecessor's recorded group
/// (see `strays`) and waits up to `killTimeoutMs` for them to exit.
#[napi]
pub async fn sweep_strays(record: NativeGroupRecord, kill_timeout_ms: f64) -> Result<NativeSwept> {
    let pgid = to_pid(record.pgid)?.as_raw();
    // Session 0 is a real session: the one a container's init (and every
    // process under it that never called setsid) runs in.
    let session = if record.session == 0.0 {
        0
    } else {
        to_pid(record.session)?.as_raw()
    };
    if !record.alive_at_ms.is_finite() || !kill_timeout_ms.is_finite() || kill_timeout_ms < 0.0 {
        return Err(coded(
            "ERR_OUT_OF_RANGE",
            "aliveAt and killTimeoutMs must be finite",
        ));
    }
    // No identity (or not one of ours): no boot to match, so no member can
    // be proven.
    let boot = Identity::decode(&record.identity).map_or_else(String::new, |i| i.boot);
    let rec = GroupRecord {
        pgid,
        session,
        boot,
        alive_at_boot_ms: strays::boot_clock_ms(record.alive_at_ms),
    };
    let timeout = std::time::Duration::from_secs_f64(kill_timeout_ms.min(2f64.powi(31)) / 1000.0);
    let swept = strays::sweep(&rec, timeout)
        .await
        .map_err(|e| io_err(&e, "kill"))?;
    Ok(NativeSwept {
        killed: swept.killed,
        suspects: swept.suspects,
    })
}
