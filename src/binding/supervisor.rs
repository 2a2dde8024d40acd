//! Native helpers of the Supervisor (package-internal, not public API): a
//! process's session and start time for the state file's record, and the
//! takeover's sweep of a dead predecessor's stray group members.

use std::os::fd::AsFd;

use napi::bindgen_prelude::PromiseRaw;
use napi::{Env, Result};
use napi_derive::napi;

use super::convert::{check_identity, to_pid, to_signal};
use super::errors::{promise, throw, JsErr, Res};
use crate::listeners;
use crate::orphans;
use crate::proc_info::{self, Identity};
use crate::strays::{self, GroupRecord};
use crate::sys;
use crate::wait::same_process;

#[napi(object)]
pub struct NativeProcStat {
    pub pgid: i32,
    pub session: i32,
}

/// Group and session of a live process, or null when there is none.
#[napi]
pub fn proc_stat(env: Env, pid: f64) -> Result<Option<NativeProcStat>> {
    let pid = throw(&env, to_pid(pid))?;
    let st = throw(
        &env,
        proc_info::stat_of(pid).map_err(|e| JsErr::os(&e, proc_info::INFO_CALL)),
    )?;
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
#[napi(ts_return_type = "Promise<NativeSwept>")]
pub fn sweep_strays<'env>(
    env: &'env Env,
    record: NativeGroupRecord,
    kill_timeout_ms: f64,
) -> Result<PromiseRaw<'env, NativeSwept>> {
    promise(env, sweep(record, kill_timeout_ms))
}

async fn sweep(record: NativeGroupRecord, kill_timeout_ms: f64) -> Res<NativeSwept> {
    let pgid = to_pid(record.pgid)?.as_raw();
    // Session 0 is a real session: the one a container's init (and every
    // process under it that never called setsid) runs in.
    let session = if record.session == 0.0 {
        0
    } else {
        to_pid(record.session)?.as_raw()
    };
    if !record.alive_at_ms.is_finite() || !kill_timeout_ms.is_finite() || kill_timeout_ms < 0.0 {
        return Err(JsErr::coded(
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
        .map_err(|e| JsErr::os(&e, "kill"))?;
    Ok(NativeSwept {
        killed: swept.killed,
        suspects: swept.suspects,
    })
}

/// Signals `pid` only if it is still the process `identity` names: pinned
/// with a pidfd, checked through it, signalled through it, so a pid reused
/// since the caller last looked is never hit (an adopted orphan is not our
/// child: nothing holds its pid for us). false when it has exited or the
/// pid now holds another process.
#[napi]
pub fn signal_identified(env: Env, pid: f64, identity: String, signal: i32) -> Result<bool> {
    throw(&env, signal_if_same(pid, &identity, signal))
}

fn signal_if_same(pid: f64, identity: &str, signal: i32) -> Res<bool> {
    let pid = to_pid(pid)?;
    check_identity(Some(identity))?;
    let sig = to_signal(signal)?;
    let pidfd = match sys::pidfd_open(pid) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(false),
        Err(e) => return Err(JsErr::os(&e, "pidfd_open")),
    };
    match proc_info::stat_and_identity_of_pidfd(pid, &pidfd) {
        Ok(Some((st, current))) if st.state.is_running() && same_process(&current, identity) => {}
        Ok(_) => return Ok(false),
        Err(proc_info::InfoError::Hidden) => return Err(JsErr::system(libc::EACCES, "kill")),
        Err(proc_info::InfoError::Io(e)) => return Err(JsErr::os(&e, "kill")),
    }
    match sys::pidfd_send_signal(pidfd.as_fd(), sig) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
        Err(e) => Err(JsErr::os(&e, "kill")),
    }
}

/// The inodes (decimal strings) of the TCP sockets listening on `port` in
/// our network namespace, IPv4 and IPv6 (the ready check's probe: a
/// sock_diag dump of the listening sockets, not a read of /proc/net/tcp).
#[napi]
pub fn listening_inodes(env: Env, port: f64) -> Result<Vec<String>> {
    if !(port.fract() == 0.0 && (1.0..=65535.0).contains(&port)) {
        return throw(
            &env,
            Err(JsErr::coded(
                "ERR_OUT_OF_RANGE",
                format!("port must be an integer in 1..=65535, got {port}"),
            )),
        );
    }
    let inodes = throw(
        &env,
        listeners::listening_inodes(port as u16).map_err(|e| JsErr::os(&e, "sock_diag")),
    )?;
    Ok(inodes.into_iter().map(|i| i.to_string()).collect())
}

/// Makes this process a child subreaper (`procward run --init` outside a
/// pid namespace's PID 1): orphaned descendants become our children.
#[napi]
pub fn become_subreaper(env: Env) -> Result<()> {
    throw(
        &env,
        orphans::become_subreaper().map_err(|e| JsErr::os(&e, "prctl")),
    )
}

/// Reaps every exited child of this process that is not one of `own` (the
/// live supervised children the caller knows of). Returns the pids reaped.
#[napi]
pub fn reap_orphans(env: Env, own: Vec<f64>) -> Result<Vec<i32>> {
    let own = throw(
        &env,
        own.into_iter()
            .map(|p| to_pid(p).map(|p| p.as_raw()))
            .collect::<Res<Vec<i32>>>(),
    )?;
    throw(
        &env,
        orphans::reap(&own).map_err(|e| JsErr::os(&e, "waitpid")),
    )
}
