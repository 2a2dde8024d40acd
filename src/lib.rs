//! The napi surface of procward: validate, call into the core modules, map
//! results to plain JS values. The binding layer is this file, `errors`
//! (errno → JS `code`) and `js_loop` (exit delivery on the JS thread's
//! loop); the core modules (`pid`, `proc_info`, `spawn`, `exit_watch`,
//! `stop`, `sys`, `runtime`) never see a napi type.
#![deny(clippy::all)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod binding;
pub mod cgroup;
pub mod duration;
pub mod errors;
#[cfg(unix)]
pub mod exit_watch;
#[cfg(windows)]
#[path = "exit_watch/windows.rs"]
pub mod exit_watch;
#[cfg(target_os = "linux")]
mod js_loop;
#[cfg(target_os = "macos")]
#[path = "js_loop_none.rs"]
mod js_loop;
#[cfg(any(target_os = "linux", target_os = "macos"))]
pub mod lock;
#[cfg(windows)]
#[path = "lock/windows.rs"]
pub mod lock;
pub mod pid;
pub mod proc_info;
#[cfg(unix)]
mod runtime;
#[cfg(unix)]
pub mod spawn;
#[cfg(windows)]
#[path = "spawn/windows.rs"]
pub mod spawn;
pub mod stop;
#[cfg(target_os = "linux")]
pub mod strays;
#[cfg(target_os = "linux")]
pub mod sys;
#[cfg(target_os = "macos")]
#[path = "sys_macos.rs"]
pub mod sys;
#[cfg(windows)]
#[path = "sys_windows.rs"]
pub mod sys;
pub mod wait;

#[cfg(unix)]
use napi::bindgen_prelude::JsValue;
use napi::Result;
use napi_derive::napi;

use duration::Millis;
use errors::{coded, io_err};
use pid::Pid;
use proc_info::InfoError;

fn to_pid(value: f64) -> Result<Pid> {
    // The JS face already threw TypeError/RangeError; this is the last line
    // before a number could become a pid.
    Pid::from_f64(value).map_err(|e| coded("ERR_OUT_OF_RANGE", e))
}

/// An identity must be one `getProcessInfo` could have produced. A stored
/// one that is empty or garbled (a truncated pidfile, a field mix-up) is the
/// caller's bug: answering "not running" or "already exited" would hide it
/// and leave the process it meant running, so it is refused instead.
fn check_identity(identity: Option<&str>) -> Result<()> {
    match identity {
        Some(id) if proc_info::Identity::decode(id).is_none() => Err(coded(
            "ERR_INVALID_ARG_VALUE",
            format!(
                "identity {:?} is not a process identity (take it from getProcessInfo(pid).identity)",
                id.chars().take(60).collect::<String>()
            ),
        )),
        _ => Ok(()),
    }
}

fn info_err(err: InfoError) -> napi::Error {
    match err {
        InfoError::Hidden => coded(
            "EACCES",
            "the process exists but /proc (hidepid) does not show it to this user",
        ),
        InfoError::Io(e) => io_err(&e, "read /proc"),
    }
}

/// Exists and has not exited; a zombie is not running.
#[napi]
pub fn is_process_running(pid: f64, identity: Option<String>) -> Result<bool> {
    let pid = to_pid(pid)?;
    check_identity(identity.as_deref())?;
    match identity {
        None => proc_info::is_running(pid).map_err(|e| io_err(&e, "read /proc")),
        Some(id) => proc_info::is_running_as(pid, &id).map_err(info_err),
    }
}

#[napi(object)]
pub struct ProcessInfo {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    pub state: String,
    pub identity: String,
    pub name: String,
}

#[napi]
pub fn get_process_info(pid: f64) -> Result<Option<ProcessInfo>> {
    let pid = to_pid(pid)?;
    let info = proc_info::process_info(pid).map_err(info_err)?;
    Ok(info.map(|i| ProcessInfo {
        pid: i.pid,
        ppid: i.ppid,
        pgid: i.pgid,
        state: i.state.as_str().to_owned(),
        identity: i.identity.encode(),
        name: i.name,
    }))
}

// ---- supervised spawn ---------------------------------------------------------

#[cfg(unix)]
use std::os::fd::IntoRawFd;
#[cfg(unix)]
use std::sync::{Arc, Mutex};
#[cfg(unix)]
use std::time::Duration;
use std::time::Instant;

#[cfg(unix)]
use napi::bindgen_prelude::{Function, PromiseRaw};
#[cfg(unix)]
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
#[cfg(unix)]
use napi::{Env, Status};

use exit_watch::ExitStatus;
#[cfg(unix)]
use exit_watch::{Backend, Watched};
use pid::Signal;
#[cfg(unix)]
use spawn::{Command, SpawnError, Stdio};
#[cfg(unix)]
use stop::targets::{ChildTarget, Open, PidfdTarget, PollTarget};
#[cfg(unix)]
use stop::Outcome;
use stop::{Deadlines, Escalation, StopPlan, StopReport};

#[napi(object)]
pub struct NativeStdio {
    /// 'ignore' | 'inherit' | 'pipe' | 'file'
    pub kind: String,
    pub path: Option<String>,
    pub append: Option<bool>,
}

#[napi(object)]
pub struct NativeSpawnOptions {
    pub cwd: Option<String>,
    /// Use this process's own environment (`environ`) instead of
    /// env_keys/env_values: saves converting `process.env` on every spawn.
    pub inherit_env: bool,
    pub env_keys: Vec<String>,
    pub env_values: Vec<String>,
    pub stdio: Vec<NativeStdio>,
    pub process_group: bool,
    pub kill_group_on_exit: bool,
    /// 0: none.
    pub death_signal: i32,
    /// A readiness pipe's write end at this fd number (>= 3) in the child.
    pub notify_fd: Option<i32>,
    /// Credentials for the child: integers in 0..=2^32-2, checked again here
    /// (napi's u32 conversion would wrap).
    pub uid: Option<f64>,
    pub gid: Option<f64>,
    pub argv0: Option<String>,
    /// May the exit be watched on this thread's libuv loop? The JS side says
    /// no outside Node: Bun exports every `uv_*` symbol as an aborting stub,
    /// so finding the symbol proves nothing.
    pub use_loop: bool,
    /// Born in a cgroup of its own (under `cgroup_parent`, else the default).
    pub cgroup: bool,
    pub cgroup_parent: Option<String>,
    /// The spawn's stop default `killTimeoutMs`: how long its exit may wait
    /// for the cgroup to empty.
    pub kill_timeout_ms: Option<f64>,
}

#[napi(object)]
#[derive(Clone)]
pub struct NativeExitInfo {
    pub code: Option<i32>,
    pub signal: Option<String>,
}

pub(crate) fn exit_info(status: ExitStatus) -> NativeExitInfo {
    match status {
        ExitStatus::Code(c) => NativeExitInfo {
            code: Some(c),
            signal: None,
        },
        ExitStatus::Signal(s) => NativeExitInfo {
            code: None,
            signal: Some(signal_label(s)),
        },
        ExitStatus::Unknown => NativeExitInfo {
            code: None,
            signal: None,
        },
    }
}

fn signal_label(num: i32) -> String {
    pid::signal_name(num).map_or_else(|| format!("SIG{num}"), str::to_owned)
}

#[cfg(unix)]
type ExitCallback = ThreadsafeFunction<NativeExitInfo, (), NativeExitInfo, Status, false>;

fn to_signal(num: i32) -> Result<Signal> {
    Signal::from_raw(num)
        .ok_or_else(|| coded("ERR_OUT_OF_RANGE", format!("bad signal number {num}")))
}

/// A spawn failure for the JS face, which words it as Node does (see
/// `spawnSupervised` in lib/supervised.js): `at` says what failed — "spawn"
/// (finding or executing the program: Node's `spawn <command> <CODE>`),
/// "chdir" (the cwd), "open" (the stdio file of fd `fd`) or "setup" (a step
/// of the child between clone and exec: setuid, setgid, setpgid, ...).
#[cfg(unix)]
fn spawn_err(err: SpawnError) -> napi::Error {
    use spawn::Stage;
    match err {
        SpawnError::Invalid(msg) => coded("ERR_INVALID_ARG_VALUE", msg),
        SpawnError::File { fd, err, reason } => match err.raw_os_error() {
            Some(errno) => {
                let reason = reason.map_or(String::new(), |r| {
                    format!(",\"reason\":{}", errors::json_str(r))
                });
                errors::system_err(
                    errno,
                    "open",
                    &format!(",\"at\":\"open\",\"fd\":{fd}{reason}"),
                )
            }
            None => io_err(&err, "open"),
        },
        SpawnError::Os { err, stage } => {
            let at = match stage {
                Stage::Cwd | Stage::Chdir => "chdir",
                Stage::Setpgid
                | Stage::Prctl
                | Stage::Dup2
                | Stage::Setgid
                | Stage::Setuid
                | Stage::Cgroup
                | Stage::Setsid => "setup",
                Stage::Resolve | Stage::Stdio | Stage::Clone | Stage::Execve | Stage::Spawner => {
                    "spawn"
                }
            };
            match err.raw_os_error() {
                Some(errno) => {
                    errors::system_err(errno, stage.syscall(), &format!(",\"at\":\"{at}\""))
                }
                None => io_err(&err, stage.syscall()),
            }
        }
    }
}

/// A uid or gid from JS: an integer in 0..=2^32-2 (2^32-1 is the "no
/// change" id of setresuid, never a real one).
#[cfg(unix)]
fn to_id(value: Option<f64>, what: &str) -> Result<Option<u32>> {
    match value {
        None => Ok(None),
        Some(v) if v.fract() == 0.0 && (0.0..=f64::from(u32::MAX - 1)).contains(&v) => {
            Ok(Some(v as u32))
        }
        Some(v) => Err(coded(
            "ERR_OUT_OF_RANGE",
            format!("{what} must be an integer in 0..=4294967294, got {v}"),
        )),
    }
}

/// How the exit reaches JS: a threadsafe function (from a runtime or
/// waiter thread), or the JS loop itself.
#[cfg(unix)]
enum Delivery {
    Threadsafe(Arc<Mutex<Option<ExitCallback>>>),
    Loop(js_loop::LoopRef),
}

/// The native side of a `SupervisedProcess`. The JS class in `lib/` wraps it.
#[cfg(unix)]
#[napi]
pub struct NativeChild {
    watched: Arc<Watched>,
    backend: Backend,
    delivery: Delivery,
    /// Parent ends: stdio 0..3, then the notify pipe's read end.
    pipes: Mutex<[Option<std::os::fd::OwnedFd>; 4]>,
}

#[cfg(unix)]
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

    /// The child's own identity, read or remembered (see `Watched::identity`).
    #[napi(getter)]
    pub fn identity(&self) -> Result<String> {
        self.watched
            .identity()
            .map(|id| id.encode())
            .map_err(info_err)
    }

    /// How this child's exit is watched: 'pidfd' (on the JS loop),
    /// 'pidfd-tokio' or 'fallback'.
    #[napi(getter)]
    pub fn backend(&self) -> &'static str {
        match self.backend {
            Backend::PidfdLoop => "pidfd",
            Backend::PidfdTokio => "pidfd-tokio",
            Backend::Fallback => "fallback",
            Backend::Kqueue => "kqueue",
        }
    }

    /// The child's own cgroup (its file-system path) while it lives; null
    /// once reaped, or when it is not contained.
    #[napi(getter)]
    pub fn cgroup(&self) -> Option<String> {
        self.watched
            .cgroup()
            .map(|c| c.path().display().to_string())
    }

    /// The cgroup's path and id (its inode), for as long as this handle
    /// lives: what a state file records.
    #[napi]
    pub fn cgroup_record(&self) -> Option<Vec<String>> {
        self.watched
            .cgroup_record()
            .map(|(p, id)| vec![p.display().to_string(), id.to_string()])
    }

    /// CPU time, memory and pids of the child's cgroup (live, or as last
    /// read before its removal); null where a controller is not enabled or
    /// the child is not contained.
    #[napi]
    pub fn resource_usage(&self) -> binding::cgroup::NativeUsage {
        binding::cgroup::usage(self.watched.usage())
    }

    /// Signals the child alone; false once it has exited (zombie included).
    #[napi]
    pub fn kill(&self, signal: i32) -> Result<bool> {
        let sig = to_signal(signal)?;
        self.watched
            .signal_if_running(sig)
            .map_err(|e| io_err(&e, "kill"))
    }

    #[napi(js_name = "ref")]
    pub fn refer(&self, env: Env) -> Result<()> {
        self.set_ref(&env, true)
    }

    #[napi]
    pub fn unref(&self, env: Env) -> Result<()> {
        self.set_ref(&env, false)
    }

    /// Hands the parent's pipe ends to JS (once): fd numbers for stdio 0..3
    /// and the notify pipe, -1 where none.
    #[napi]
    pub fn take_pipes(&self) -> Vec<i32> {
        let mut pipes = self.pipes.lock().unwrap_or_else(|e| e.into_inner());
        pipes
            .iter_mut()
            .map(|p| p.take().map_or(-1, IntoRawFd::into_raw_fd))
            .collect()
    }

    /// The reaped status, or null while the child has not been reaped.
    #[napi]
    pub fn exit_status(&self) -> Option<NativeExitInfo> {
        self.watched.exit_status().map(exit_info)
    }

    /// Starts a stop that later callers can escalate through `control`.
    /// Bad options throw here, before anything is sent.
    #[napi(ts_return_type = "Promise<NativeStopResult>")]
    pub fn stop<'env>(
        &self,
        env: &'env Env,
        options: NativeStopOptions,
        control: &NativeStopControl,
    ) -> Result<PromiseRaw<'env, NativeStopResult>> {
        let started = Instant::now();
        let plan = stop_plan(&options)?;
        let group = options.group.unwrap_or(self.watched.pgid().is_some());
        let watched = self.watched.clone();
        let escalation = control.escalation.clone();
        env.spawn_future(async move {
            let mut target = ChildTarget::new(watched.clone(), group);
            let report = stop::run(&mut target, &plan, &escalation)
                .await
                .map_err(|e| io_err(&e, "kill"))?;
            Ok(stop_result(report, started, watched.exit_status()))
        })
    }
}

#[cfg(unix)]
impl NativeChild {
    #[allow(deprecated)] // napi-rs keeps napi_(un)ref_threadsafe_function behind refer/unref
    fn set_ref(&self, env: &Env, on: bool) -> Result<()> {
        match &self.delivery {
            Delivery::Loop(l) => {
                l.set_ref(on);
                Ok(())
            }
            Delivery::Threadsafe(cb) => match cb.lock().unwrap_or_else(|e| e.into_inner()).as_mut()
            {
                Some(cb) if on => cb.refer(env),
                Some(cb) => cb.unref(env),
                None => Ok(()),
            },
        }
    }
}

#[cfg(unix)]
fn threadsafe_delivery(
    on_exit: &Function<NativeExitInfo, ()>,
) -> Result<(Arc<Mutex<Option<ExitCallback>>>, exit_watch::OnExit)> {
    let callback: ExitCallback = on_exit
        .build_threadsafe_function()
        .callee_handled::<false>()
        .build()?;
    let callback = Arc::new(Mutex::new(Some(callback)));
    let slot = callback.clone();
    let deliver: exit_watch::OnExit = Box::new(move |status| {
        let cb = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(cb) = cb {
            cb.call(exit_info(status), ThreadsafeFunctionCallMode::NonBlocking);
            // Dropping `cb` releases the threadsafe function: after this
            // last call nothing of ours holds the event loop open.
        }
    });
    Ok((callback, deliver))
}

#[cfg(unix)]
fn pipe_ends(
    [a, b, c]: [Option<std::os::fd::OwnedFd>; 3],
    notify: Option<std::os::fd::OwnedFd>,
) -> [Option<std::os::fd::OwnedFd>; 4] {
    [a, b, c, notify]
}

/// How long the native reaper leaves a child's exit to the JS loop before
/// settling it itself (see `exit_watch::watch_beside_loop`).
#[cfg(unix)]
const LOOP_FIRST: Duration = Duration::from_millis(1);

#[cfg(unix)]
#[napi]
pub fn spawn_supervised(
    env: Env,
    command: String,
    args: Vec<String>,
    options: NativeSpawnOptions,
    on_exit: Function<NativeExitInfo, ()>,
) -> Result<NativeChild> {
    let stdio_spec = |i: usize| -> Result<Stdio> {
        let s = options
            .stdio
            .get(i)
            .ok_or_else(|| coded("ERR_INVALID_ARG_VALUE", "stdio needs three entries"))?;
        Ok(match s.kind.as_str() {
            "ignore" => Stdio::Ignore,
            "inherit" => Stdio::Inherit,
            "pipe" => Stdio::Pipe,
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
    };
    let death_signal = match options.death_signal {
        0 => None,
        n => Some(to_signal(n)?),
    };
    let cmd = Command {
        program: command,
        args,
        env: if options.inherit_env {
            std::env::vars_os().collect()
        } else {
            options
                .env_keys
                .iter()
                .zip(options.env_values.iter())
                .map(|(k, v)| (k.into(), v.into()))
                .collect()
        },
        cwd: options.cwd.clone().map(Into::into),
        stdio: [stdio_spec(0)?, stdio_spec(1)?, stdio_spec(2)?],
        process_group: options.process_group,
        death_signal,
        notify_fd: options.notify_fd,
        uid: to_id(options.uid, "uid")?,
        gid: to_id(options.gid, "gid")?,
        argv0: options.argv0.clone(),
        new_session: false,
        cgroup: None,
    };
    // The clock readings around the spawn usually pin the child's start
    // tick, and its pidfd gives the pidfs inode: its identity without a
    // /proc read. Whatever is missing is read later, while the child is
    // still unreaped (see exit_watch).
    let kill_timeout = match options.kill_timeout_ms {
        Some(ms) => duration_ms(ms, "stop.killTimeoutMs")?.as_duration(),
        None => Duration::from_secs(2),
    };
    // The cgroup exists (and the guardian knows its parent) before the
    // child does; the child enters it before it execs.
    let contained = if options.cgroup {
        let guarded = death_signal.is_some();
        let cg = binding::cgroup::contain(options.cgroup_parent.as_deref(), guarded)?;
        Some(cg)
    } else {
        None
    };
    let mut cmd = cmd;
    if let Some(cg) = &contained {
        match cg.into_spawn() {
            Ok(into) => cmd.cgroup = Some(into),
            Err(e) => {
                let _ = cg.remove();
                return Err(binding::cgroup::cgroup_err(cgroup::CgroupError::Io(
                    e,
                    "open",
                    cg.path().to_path_buf(),
                )));
            }
        }
    }
    proc_info::prepare_identity();
    let before = sys::boottime_ns();
    let spawned = spawn::spawn(&cmd, !exit_watch::forced_fallback());
    // The child holds no reference to the procs fd once it exists (it has
    // exec'd or failed): close ours now.
    cmd.cgroup = None;
    let child = match spawned {
        Ok(c) => c,
        Err(e) => {
            if let Some(cg) = &contained {
                // The child failed before exec and was reaped: it is empty.
                if cg.remove().is_err() {
                    cgroup::remove_when_empty(cg.clone());
                }
            }
            return Err(spawn_err(e));
        }
    };
    let seed = proc_info::IdentitySeed {
        start_time: proc_info::start_tick_between(before, sys::boottime_ns()),
        inode: child.pidfd.as_ref().map(proc_info::pidfd_inode),
    };
    let pid = child.pid;
    let pgid = options.process_group.then_some(pid);
    let watched = exit_watch::register_contained(
        pid,
        pgid,
        options.kill_group_on_exit,
        seed,
        contained.map(|cgroup| exit_watch::Contained {
            cgroup,
            bound: kill_timeout,
        }),
    );

    let mut pidfd = child.pidfd;
    if let Some(fd) = pidfd.take_if(|_| options.use_loop && js_loop::available()) {
        // The loop only *delivers* the exit. The reap must never wait for
        // the JS thread (a blocked loop would leave a zombie, the very bug of
        // child_process this library ends), so a native watcher on a
        // duplicate of the pidfd settles the child too if the loop has not
        // within LOOP_FIRST; settling happens once, under one lock. Without
        // a spare fd the native side is a waiter thread.
        let native_fd = fd.try_clone().ok();
        // SAFETY: on the JS thread of `env`, with a function of that env.
        match unsafe { js_loop::start(env.raw(), on_exit.raw(), watched.clone(), fd) } {
            Ok(loop_ref) => {
                // An error here (a failed thread spawn) leaves the loop as
                // the only reaper, which still reaps whenever the loop runs.
                let _ = exit_watch::watch_beside_loop(&watched, native_fd, LOOP_FIRST);
                return Ok(NativeChild {
                    watched,
                    backend: Backend::PidfdLoop,
                    delivery: Delivery::Loop(loop_ref),
                    pipes: Mutex::new(pipe_ends(child.pipes, child.notify)),
                });
            }
            Err(fd) => pidfd = Some(fd),
        }
    }
    let started = threadsafe_delivery(&on_exit).and_then(|(callback, deliver)| {
        exit_watch::watch(&watched, pidfd, deliver)
            .map(|backend| (callback, backend))
            .map_err(|e| io_err(&e, "spawn watcher"))
    });
    match started {
        Ok((callback, backend)) => Ok(NativeChild {
            watched,
            backend,
            delivery: Delivery::Threadsafe(callback),
            pipes: Mutex::new(pipe_ends(child.pipes, child.notify)),
        }),
        Err(e) => {
            // No watcher could be started: take the child down again so that
            // nothing is left behind, and say why.
            let _ = watched.kill_all(true);
            let _ = sys::waitid_pid(pid, libc::WEXITED);
            if let Some(cg) = watched.contained_cgroup() {
                cgroup::remove_when_empty(cg);
            }
            Err(e)
        }
    }
}

// ---- stop ---------------------------------------------------------------------

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
    escalation: Escalation,
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
    pub fn escalate(&self, options: NativeStopOptions) -> Result<()> {
        let plan = stop_plan(&options)?;
        self.escalation
            .tighten(Deadlines::of(&plan, tokio::time::Instant::now()));
        Ok(())
    }
}

fn duration_ms(ms: f64, what: &str) -> Result<Millis> {
    Millis::from_f64(ms).map_err(|e| coded("ERR_OUT_OF_RANGE", format!("{what} {e}, got {ms}")))
}

fn stop_plan(o: &NativeStopOptions) -> Result<StopPlan> {
    Ok(StopPlan {
        signal: to_signal(o.signal)?,
        grace: duration_ms(o.grace_ms, "graceMs")?,
        kill_timeout: duration_ms(o.kill_timeout_ms, "killTimeoutMs")?,
    })
}

fn stop_result(report: StopReport, started: Instant, exit: Option<ExitStatus>) -> NativeStopResult {
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

#[cfg(unix)]
fn stop_io_err(e: std::io::Error) -> napi::Error {
    if e.kind() == std::io::ErrorKind::InvalidInput && e.raw_os_error().is_none() {
        return coded("EINVAL", e);
    }
    io_err(&e, "kill")
}

/// Stops a bare pid (not a child of ours): pidfd-pinned, identity-checked.
/// Bad arguments throw here, before anything is sent.
#[cfg(unix)]
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
    // A thread id signals its whole process: ours is refused like our pid;
    // another process's non-leader thread names no process (see proc_info).
    let thread = proc_info::thread_of(pid);
    if pid == Pid::current() || thread == proc_info::ThreadOf::Us {
        return Err(coded(
            "ERR_OUT_OF_RANGE",
            "refusing to stop this process itself (its pid or one of its thread ids)",
        ));
    }
    let plan = stop_plan(&options)?;
    let group = options.group.unwrap_or(false);
    check_identity(identity.as_deref())?;
    let escalation = control.escalation.clone();
    env.spawn_future(async move {
        let identity = identity.as_deref();
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
        if thread == proc_info::ThreadOf::Other {
            return Ok(nothing_sent(false));
        }
        let use_pidfd = !exit_watch::forced_fallback();
        let pidfd_target = if use_pidfd {
            match PidfdTarget::open(pid, identity, group) {
                Ok(t) => Some(t),
                // No pidfd to be had (old kernel, EMFILE): poll instead.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ENOSYS) | Some(libc::EMFILE) | Some(libc::ENFILE)
                    ) =>
                {
                    None
                }
                Err(e) => return Err(stop_io_err(e)),
            }
        } else {
            None
        };
        let report = match pidfd_target {
            Some(Open::Gone) => return Ok(nothing_sent(false)),
            Some(Open::Reused) => return Ok(nothing_sent(true)),
            Some(Open::Target(mut t)) => stop::run(&mut t, &plan, &escalation).await,
            None => match PollTarget::open(pid, identity, group).map_err(stop_io_err)? {
                Open::Gone => return Ok(nothing_sent(false)),
                Open::Reused => return Ok(nothing_sent(true)),
                Open::Target(mut t) => stop::run(&mut t, &plan, &escalation).await,
            },
        }
        .map_err(stop_io_err)?;
        Ok(stop_result(report, started, None))
    })
}
