//! Stops: the options and result of `SupervisedProcess.stop()` and
//! `stopPid`, the escalation a later caller tightens (`NativeStopControl`),
//! and `stopPid` itself (a child's own stop is `NativeChild::stop`).

use std::io;
use std::time::Instant;

use napi::bindgen_prelude::PromiseRaw;
use napi::{Env, Result};
use napi_derive::napi;

use super::convert::{check_identity, duration_ms, exit_info, signal_label, to_pid, to_signal};
use super::errors::{promise, throw, JsErr, Res};
use super::NativeExitInfo;
use crate::exit_watch::ExitStatus;
use crate::pid::Pid;
use crate::proc_info::{self, ThreadOf};
use crate::stop::targets::{self, PidStop};
use crate::stop::{Deadlines, Escalation, StopPlan, StopReport};

#[napi(object)]
pub struct NativeStopOptions {
    pub signal: i32,
    pub grace_ms: f64,
    pub kill_timeout_ms: f64,
    pub group: Option<bool>,
}

#[napi(object)]
pub struct NativeStopResult {
    pub outcome: String,
    /// A bare-pid stop found a live process on the pid, but not the one
    /// `identity` names.
    pub pid_reused: bool,
    pub signals: Vec<String>,
    pub elapsed_ms: f64,
    pub exit: Option<NativeExitInfo>,
}

/// One running stop's escalation: passed to `stop`/`stopPid` when it starts,
/// and tightened by later callers with their options (`escalate`).
#[napi]
pub struct NativeStopControl {
    pub(super) escalation: Escalation,
}

#[napi]
impl NativeStopControl {
    #[napi(constructor)]
    #[allow(clippy::new_without_default)] // a JS constructor, not a Rust API
    pub fn new() -> NativeStopControl {
        NativeStopControl {
            escalation: Escalation::new(),
        }
    }

    /// A later caller's options: the stop sends SIGKILL and gives up no
    /// later than they would have (never later than it already would).
    #[napi]
    pub fn escalate(&self, env: Env, options: NativeStopOptions) -> Result<()> {
        let plan = throw(&env, stop_plan(&options))?;
        self.escalation
            .tighten(Deadlines::of(&plan, tokio::time::Instant::now()));
        Ok(())
    }
}

pub fn stop_plan(o: &NativeStopOptions) -> Res<StopPlan> {
    Ok(StopPlan {
        signal: to_signal(o.signal)?,
        grace: duration_ms(o.grace_ms, "graceMs")?,
        kill_timeout: duration_ms(o.kill_timeout_ms, "killTimeoutMs")?,
    })
}

pub fn stop_result(
    report: StopReport,
    started: Instant,
    exit: Option<ExitStatus>,
) -> NativeStopResult {
    NativeStopResult {
        outcome: report.outcome.as_str().to_owned(),
        pid_reused: false,
        signals: report
            .signals
            .iter()
            .map(|s| signal_label(s.as_raw()))
            .collect(),
        elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
        exit: exit.map(exit_info),
    }
}

/// A failed signal: its errno, or EINVAL for a target refused before any
/// signal (a group stop of a process that leads no group).
pub fn stop_err(e: io::Error) -> JsErr {
    if e.kind() == io::ErrorKind::InvalidInput && e.raw_os_error().is_none() {
        return JsErr::coded("EINVAL", e);
    }
    JsErr::os(&e, "kill")
}

/// Why a bare-pid stop must not touch `pid` (besides this process itself),
/// or None. pid 1 is init: a container's init ends the container with it.
/// An ancestor of ours is no process we could have started, and stopping it
/// ends the session we run in; a group stop of our own group reaches us.
/// The same test on every OS: `process_info` is.
fn untouchable(pid: Pid, group: bool) -> Option<&'static str> {
    if pid.as_raw() == 1 {
        return Some("it is pid 1 (init)");
    }
    let own = proc_info::process_info(Pid::current()).ok().flatten()?;
    if group && own.pgid > 0 && own.pgid == pid.as_raw() {
        return Some("its group holds this process");
    }
    // Up the parent chain. A parent started no later than its child: one
    // that started later holds a recycled pid (Windows records the parent's
    // pid at creation and never updates it), and the chain ends there.
    let mut child = own;
    for _ in 0..128 {
        if child.ppid <= 1 {
            break;
        }
        let parent = Pid::from_raw(child.ppid)
            .ok()
            .and_then(|p| proc_info::process_info(p).ok().flatten());
        match parent {
            Some(p) if p.identity.start_time > child.identity.start_time => break,
            Some(p) => {
                if p.pid == pid.as_raw() {
                    return Some("it is an ancestor of this process");
                }
                child = p;
            }
            // Unreadable (hidden from us, say): still our parent's pid.
            None if child.ppid == pid.as_raw() => return Some("it is an ancestor of this process"),
            None => break,
        }
    }
    None
}

/// Stops a bare pid (not a child of ours): pinned once (pidfd, process
/// handle), identity-checked through that. Bad arguments throw here, before
/// anything is sent.
#[napi(ts_return_type = "Promise<NativeStopResult>")]
pub fn stop_pid<'env>(
    env: &'env Env,
    pid: f64,
    options: NativeStopOptions,
    identity: Option<String>,
    control: &NativeStopControl,
) -> Result<PromiseRaw<'env, NativeStopResult>> {
    let started = Instant::now();
    let (pid, thread, plan) = throw(
        env,
        (|| {
            let pid = to_pid(pid)?;
            // A thread id signals its whole process: ours is refused like our
            // pid; another process's non-leader thread names no process (see
            // proc_info).
            let thread = proc_info::thread_of(pid);
            if pid == Pid::current() || thread == ThreadOf::Us {
                return Err(JsErr::coded(
                    "ERR_OUT_OF_RANGE",
                    "refusing to stop this process itself (its pid or one of its thread ids)",
                ));
            }
            if let Some(why) = untouchable(pid, options.group.unwrap_or(false)) {
                return Err(JsErr::coded(
                    "ERR_OUT_OF_RANGE",
                    format!("refusing to stop pid {}: {why}", pid.as_raw()),
                ));
            }
            let plan = stop_plan(&options)?;
            check_identity(identity.as_deref())?;
            Ok((pid, thread, plan))
        })(),
    )?;
    let group = options.group.unwrap_or(false);
    let escalation = control.escalation.clone();
    promise(env, async move {
        let nothing_sent = |pid_reused| NativeStopResult {
            pid_reused,
            ..stop_result(
                StopReport {
                    outcome: crate::stop::Outcome::AlreadyExited,
                    signals: vec![],
                },
                started,
                None,
            )
        };
        if thread == ThreadOf::Other {
            return Ok(nothing_sent(false));
        }
        let done = targets::stop_pid(pid, identity.as_deref(), group, &plan, &escalation)
            .await
            .map_err(stop_err)?;
        Ok(match done {
            PidStop::Gone => nothing_sent(false),
            PidStop::Reused => nothing_sent(true),
            PidStop::Stopped(report) => stop_result(report, started, None),
        })
    })
}
