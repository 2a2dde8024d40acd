//! The Windows binding: the same JS-facing names as the Unix binding in
//! `lib.rs` (`spawnSupervised`, `NativeChild`, `stopPid`,
//! `NativeExitWait`), over the Windows core modules. Liveness, identity, the
//! stop options and results are shared with `lib.rs`.
//!
//! What each call means on Windows:
//! - the child is born in a Job object (the group); `pgid` is its console
//!   process group (its own pid) when `processGroup` is set;
//! - `stop()`: CTRL_BREAK_EVENT (reported as SIGBREAK) when the child leads
//!   a console group that shares our console, else straight to SIGKILL;
//!   SIGKILL is `TerminateJobObject` (group) or `TerminateProcess`;
//! - `kill(sig)`: SIGBREAK as above; SIGTERM, SIGKILL, SIGINT, SIGQUIT
//!   terminate the child alone, as `child_process` does on Windows; others
//!   are ENOSYS, as there;
//! - not available: `'pipe'` stdio, `uid`/`gid`, the readiness fd (ENOTSUP);
//!   `cgroup` (ERR_CGROUP_UNAVAILABLE: the Job object is the containment).

use std::ffi::OsString;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use napi::bindgen_prelude::{Function, PromiseRaw};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Result, Status};
use napi_derive::napi;

use crate::errors::{coded, system_err};
use crate::exit_watch::{self, Watched};
use crate::pid::{Pid, Signal};
use crate::proc_info;
use crate::spawn::{self, Command, SpawnError, Stdio};
use crate::stop::targets::{ChildTarget, HandleTarget, Open};
use crate::stop::{self, Outcome, StopPlan, StopReport};
use crate::sys;
use crate::{
    check_identity, exit_info, stop_plan, stop_result, to_pid, to_signal, NativeExitInfo,
    NativeSpawnOptions, NativeStopControl, NativeStopOptions, NativeStopResult,
};

/// Node's number for SIGBREAK on Windows: what a CTRL_BREAK_EVENT is to
/// the child.
const SIGBREAK: i32 = 21;

/// A Win32 error for JS: its errno name as `code`, the call as `syscall`.
pub(crate) fn win_err(e: &io::Error, syscall: &str) -> napi::Error {
    system_err(sys::errno_of(e), syscall, "")
}

fn not_supported(what: &str) -> napi::Error {
    coded("ENOTSUP", format!("{what} is not supported on Windows"))
}

fn spawn_err(err: SpawnError) -> napi::Error {
    match err {
        SpawnError::Invalid(msg) => coded("ERR_INVALID_ARG_VALUE", msg),
        SpawnError::File { fd, err } => system_err(
            sys::errno_of(&err),
            "open",
            &format!(",\"at\":\"open\",\"fd\":{fd}"),
        ),
        SpawnError::Os { err, at, syscall } => {
            system_err(sys::errno_of(&err), syscall, &format!(",\"at\":\"{at}\""))
        }
    }
}

type ExitCallback = ThreadsafeFunction<NativeExitInfo, (), NativeExitInfo, Status, false>;

/// The native side of a `SupervisedProcess` on Windows.
#[napi]
pub struct NativeChild {
    watched: Arc<Watched>,
    callback: Arc<Mutex<Option<ExitCallback>>>,
}

#[napi]
impl NativeChild {
    #[napi(getter)]
    pub fn pid(&self) -> i32 {
        self.watched.pid().as_raw()
    }

    #[napi(getter)]
    pub fn pgid(&self) -> Option<i32> {
        self.watched.pgid().map(Pid::as_raw)
    }

    #[napi(getter)]
    pub fn identity(&self) -> String {
        self.watched.identity().encode()
    }

    /// A registered wait on the process handle, the job swept after it.
    #[napi(getter)]
    pub fn backend(&self) -> &'static str {
        "job"
    }

    /// No cgroups on Windows (the Job object contains the tree instead).
    #[napi(getter)]
    pub fn cgroup(&self) -> Option<String> {
        None
    }

    #[napi]
    pub fn cgroup_record(&self) -> Option<Vec<String>> {
        None
    }

    /// Unknown here: every field null.
    #[napi]
    pub fn resource_usage(&self) -> crate::binding::cgroup::NativeUsage {
        crate::binding::cgroup::usage(None)
    }

    /// false once it has exited.
    #[napi]
    pub fn kill(&self, signal: i32) -> Result<bool> {
        let sig = to_signal(signal)?;
        let r = match sig.as_raw() {
            SIGBREAK if self.watched.can_break() => self.watched.ctrl_break(),
            2 | 3 | 9 | 15 => self.watched.terminate(sig),
            _ if self.watched.is_settled() => Ok(false),
            _ => {
                return Err(coded(
                    "ENOSYS",
                    format!(
                        "{} cannot be delivered on Windows (SIGTERM, SIGKILL, SIGINT and SIGQUIT terminate; SIGBREAK needs a shared console)",
                        sig.name().unwrap_or("this signal")
                    ),
                ))
            }
        };
        r.map_err(|e| win_err(&e, "kill"))
    }

    #[napi(js_name = "ref")]
    #[allow(deprecated)] // napi-rs keeps napi_(un)ref_threadsafe_function behind refer/unref
    pub fn refer(&self, env: Env) -> Result<()> {
        match self
            .callback
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            Some(cb) => cb.refer(&env),
            None => Ok(()),
        }
    }

    #[napi]
    #[allow(deprecated)]
    pub fn unref(&self, env: Env) -> Result<()> {
        match self
            .callback
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            Some(cb) => cb.unref(&env),
            None => Ok(()),
        }
    }

    /// No pipes on Windows (`'pipe'` is refused at spawn).
    #[napi]
    pub fn take_pipes(&self) -> Vec<i32> {
        vec![-1; 4]
    }

    #[napi]
    pub fn exit_status(&self) -> Option<NativeExitInfo> {
        self.watched.exit_status().map(exit_info)
    }

    #[napi(ts_return_type = "Promise<NativeStopResult>")]
    pub fn stop<'env>(
        &self,
        env: &'env Env,
        options: NativeStopOptions,
        control: &NativeStopControl,
    ) -> Result<PromiseRaw<'env, NativeStopResult>> {
        let started = Instant::now();
        let plan = soft_step(stop_plan(&options)?, self.watched.can_break());
        // As on Unix: the group by default when the child leads one.
        let group = options.group.unwrap_or(self.watched.pgid().is_some());
        let watched = self.watched.clone();
        let escalation = control.escalation.clone();
        env.spawn_future(async move {
            let mut target = ChildTarget::new(watched.clone(), group);
            let report = stop::run(&mut target, &plan, &escalation)
                .await
                .map_err(|e| win_err(&e, "kill"))?;
            Ok(stop_result(report, started, watched.exit_status()))
        })
    }
}

/// The first step of a stop: CTRL_BREAK_EVENT where it can reach the
/// target, else none at all (the stop goes straight to SIGKILL and says so).
fn soft_step(mut plan: StopPlan, can_break: bool) -> StopPlan {
    if plan.signal != Signal::KILL {
        plan.signal = match Signal::from_raw(SIGBREAK) {
            Some(b) if can_break => b,
            _ => Signal::KILL,
        };
    }
    plan
}

fn stdio_spec(options: &NativeSpawnOptions, i: usize) -> Result<Stdio> {
    let s = options
        .stdio
        .get(i)
        .ok_or_else(|| coded("ERR_INVALID_ARG_VALUE", "stdio needs three entries"))?;
    Ok(match s.kind.as_str() {
        "ignore" => Stdio::Ignore,
        "inherit" => Stdio::Inherit,
        "pipe" => return Err(not_supported("stdio 'pipe'")),
        "file" => Stdio::File {
            path: s.path.clone().unwrap_or_default().into(),
            append: s.append.unwrap_or(false),
        },
        other => {
            return Err(coded(
                "ERR_INVALID_ARG_VALUE",
                format!("bad stdio {other:?}"),
            ))
        }
    })
}

#[napi]
pub fn spawn_supervised(
    command: String,
    args: Vec<String>,
    options: NativeSpawnOptions,
    on_exit: Function<NativeExitInfo, ()>,
) -> Result<NativeChild> {
    if options.uid.is_some() || options.gid.is_some() {
        return Err(not_supported("uid/gid"));
    }
    if options.notify_fd.is_some() {
        return Err(not_supported("a readiness fd (notifyFd)"));
    }
    if options.cgroup {
        // The Job object already holds the whole tree; a cgroup request
        // gets ERR_CGROUP_UNAVAILABLE with that reason, never a silent
        // "yes".
        crate::binding::cgroup::contain(options.cgroup_parent.as_deref(), true)?;
    }
    let stdio = [
        stdio_spec(&options, 0)?,
        stdio_spec(&options, 1)?,
        stdio_spec(&options, 2)?,
    ];
    let env: Vec<(OsString, OsString)> = if options.inherit_env {
        std::env::vars_os().collect()
    } else {
        options
            .env_keys
            .iter()
            .zip(options.env_values.iter())
            .map(|(k, v)| (k.into(), v.into()))
            .collect()
    };
    let cmd = Command {
        program: command,
        args,
        env,
        cwd: options.cwd.clone().map(Into::into),
        stdio,
        process_group: options.process_group,
        kill_on_close: options.death_signal != 0,
        argv0: options.argv0.clone(),
    };
    let callback: ExitCallback = on_exit
        .build_threadsafe_function()
        .callee_handled::<false>()
        .build()?;
    let child = spawn::spawn(&cmd).map_err(spawn_err)?;
    let identity = match proc_info::identity_of_handle(&child.process) {
        Ok(id) => id,
        Err(e) => {
            let _ = sys::terminate_job(&child.job);
            return Err(win_err(&e, "GetProcessTimes"));
        }
    };
    let pgid = options.process_group.then_some(child.pid);
    let watched = Watched::new(
        child.pid,
        pgid,
        child.process,
        child.job,
        options.kill_group_on_exit,
        identity,
    );
    let callback = Arc::new(Mutex::new(Some(callback)));
    let slot = callback.clone();
    let deliver: exit_watch::OnExit = Box::new(move |status| {
        let cb = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(cb) = cb {
            cb.call(exit_info(status), ThreadsafeFunctionCallMode::NonBlocking);
        }
    });
    if let Err(e) = exit_watch::watch(&watched, deliver) {
        // No watcher: take the tree down again, so nothing is left behind.
        let _ = watched.terminate_job();
        return Err(win_err(&e, "RegisterWaitForSingleObject"));
    }
    Ok(NativeChild { watched, callback })
}

/// Stops a bare pid: opened once, identity-checked through the handle.
#[napi(ts_return_type = "Promise<NativeStopResult>")]
pub fn stop_pid<'env>(
    env: &'env Env,
    pid: f64,
    options: NativeStopOptions,
    identity: Option<String>,
    control: &NativeStopControl,
) -> Result<PromiseRaw<'env, NativeStopResult>> {
    let started = Instant::now();
    let pid = to_pid(pid)?;
    if pid == Pid::current() {
        return Err(coded(
            "ERR_OUT_OF_RANGE",
            "refusing to stop this process itself",
        ));
    }
    let plan = stop_plan(&options)?;
    let group = options.group.unwrap_or(false);
    check_identity(identity.as_deref())?;
    let escalation = control.escalation.clone();
    env.spawn_future(async move {
        let nothing_sent = |pid_reused| NativeStopResult {
            pid_reused,
            ..stop_result(
                StopReport {
                    outcome: Outcome::AlreadyExited,
                    signals: vec![],
                },
                started,
                None,
            )
        };
        let opened =
            HandleTarget::open(pid, identity.as_deref(), group).map_err(|e| win_err(&e, "kill"))?;
        let mut target = match opened {
            Open::Gone => return Ok(nothing_sent(false)),
            Open::Reused => return Ok(nothing_sent(true)),
            Open::Target(t) => t,
        };
        // A bare pid gets no CTRL_BREAK_EVENT: it need not lead a console
        // group, and an event for a group id that names none is not
        // confined to it. Straight to TerminateProcess.
        let plan = soft_step(plan, false);
        let report = stop::run(&mut target, &plan, &escalation)
            .await
            .map_err(|e| win_err(&e, "kill"))?;
        Ok(stop_result(report, started, None))
    })
}
