//! `spawnSupervised` and the native side of a `SupervisedProcess`
//! (`NativeChild`), the same on every OS: what differs (how a child is
//! started and watched, which signals reach it, whether it has pipes or a
//! cgroup) is the core's to say (`exit_watch`, `spawn`, `stop::targets`).
//!
//! The exit reaches JS through a threadsafe function, or, under Node on
//! Linux, on the JS thread's own event loop (`js_loop`).

use std::ffi::OsString;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use napi::bindgen_prelude::{External, FnArgs, Function, PromiseRaw};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Result, Status};
use napi_derive::napi;

use super::cgroup::{cgroup_err, usage, NativeUsage};
use super::convert::{
    duration_ms, exit_args, exit_info, info_err, to_id, to_signal, ExitArgs, NativeExitInfo,
};
use super::errors::{promise, throw, JsErr, Res};
use super::js_loop;
use super::stop::{stop_plan, stop_result, NativeStopControl, NativeStopOptions, NativeStopResult};
use crate::exit_watch::{self, Backend, Containment, StartError, Watched};
use crate::pid::Pid;
use crate::spawn::{self, Command, Environment, Listen, SpawnError, Stdio};
use crate::spawn_trace;
use crate::stop::{self, targets::ChildTarget};

/// The spawn's common options, packed into the integers of one call:
/// napi-rs reads a `#[napi(object)]` field by field (a property lookup and
/// a conversion each, through the runtime's N-API layer), and a plain
/// `/bin/true` spawn paid for twenty of them. What most spawns leave unset
/// comes in [`NativeSpawnExtra`], absent when none of it is given.
///
/// `flags`: these bits (`lib/spawn-options.js` reads them from here).
#[napi]
pub const SPAWN_INHERIT_ENV: u32 = 1;
#[napi]
pub const SPAWN_PROCESS_GROUP: u32 = 2;
#[napi]
pub const SPAWN_KILL_GROUP_ON_EXIT: u32 = 4;
/// May the exit be watched on this thread's libuv loop? The JS side says
/// no outside Node: Bun exports every `uv_*` symbol as an aborting stub,
/// so finding the symbol proves nothing.
#[napi]
pub const SPAWN_USE_LOOP: u32 = 8;
/// Born in a cgroup of its own (under `cgroupParent`, else the default).
#[napi]
pub const SPAWN_CGROUP: u32 = 16;
/// Package-internal (`procward run`): the child takes the foreground of
/// the terminal on its stdin, if our group has it (`Command::take_terminal`),
/// and `childReclaimTerminal()` gives it back after the exit.
#[napi]
pub const SPAWN_TAKE_TERMINAL: u32 = 32;

/// `stdio`: two bits per fd (fd n at bits 2n), one of these kinds, and for
/// a file, bit 6 + n when it is opened for appending; its path is
/// `extra.stdioPaths[n]`.
#[napi]
pub const STDIO_IGNORE: u32 = 0;
#[napi]
pub const STDIO_INHERIT: u32 = 1;
#[napi]
pub const STDIO_PIPE: u32 = 2;
#[napi]
pub const STDIO_FILE: u32 = 3;
#[napi]
pub const STDIO_APPEND: u32 = 64;

/// What a spawn rarely sets.
#[napi(object)]
pub struct NativeSpawnExtra {
    pub cwd: Option<String>,
    /// The file of each `STDIO_FILE` entry, by fd number.
    pub stdio_paths: Option<Vec<String>>,
    /// A readiness pipe's write end at this fd number (>= 3) in the child.
    pub notify_fd: Option<i32>,
    /// Credentials for the child: integers in 0..=2^32-2, checked again here
    /// (napi's u32 conversion would wrap).
    pub uid: Option<f64>,
    pub gid: Option<f64>,
    /// The child's umask, 0..=0o777 (checked by the JS face).
    pub umask: Option<u32>,
    pub argv0: Option<String>,
    pub cgroup_parent: Option<String>,
    /// The spawn's stop default `killTimeoutMs`: how long its exit may wait
    /// for the cgroup to empty.
    pub kill_timeout_ms: Option<f64>,
    /// Package-internal (a Supervisor's `listen`): listening sockets handed
    /// over at fds 3, 4, … as systemd does (`Command::listen`).
    pub listen_fds: Option<Vec<i32>>,
    pub listen_names: Option<Vec<String>>,
    pub listen_blocking: Option<bool>,
}

/// An environment for children, converted from JS once: the JS side keeps
/// one for `process.env` while it reads the same, so a spawn without `env`
/// where the native side cannot read `environ` itself (Bun, a worker)
/// converts no string at all.
#[napi]
pub struct NativeEnv {
    vars: Arc<[(OsString, OsString)]>,
}

#[napi]
impl NativeEnv {
    /// Pairs `keys[i]`=`values[i]`, already checked by the JS face (and
    /// again by the spawn: no empty key, no `=` in one, no NUL).
    #[napi(constructor)]
    pub fn new(keys: Vec<String>, values: Vec<String>) -> NativeEnv {
        NativeEnv {
            vars: keys
                .into_iter()
                .zip(values)
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }
}

type ExitCallback = ThreadsafeFunction<ExitArgs, (), ExitArgs, Status, false>;

/// How the exit reaches JS: a threadsafe function (from a runtime or
/// waiter thread), or the JS loop itself.
enum Delivery {
    Threadsafe(Arc<Mutex<Option<ExitCallback>>>),
    Loop(js_loop::LoopRef),
}

/// The native side of a `SupervisedProcess`, handed to JS as an external
/// (creating a class instance through N-API cost a tenth of the spawn
/// call); the JS class in `lib/` holds it and calls the `child*` functions
/// below on it.
pub struct NativeChild {
    watched: Arc<Watched>,
    backend: Backend,
    delivery: Delivery,
    /// Parent ends: stdio 0..3, then the notify pipe's read end.
    pipes: Mutex<[Option<spawn::Pipe>; 4]>,
    /// Spawned with `take_terminal`.
    terminal: bool,
}

#[napi]
pub fn child_pid(child: &External<NativeChild>) -> i32 {
    child.watched.pid().as_raw()
}

#[napi]
pub fn child_pgid(child: &External<NativeChild>) -> Option<i32> {
    child.watched.pgid().map(Pid::as_raw)
}

/// The child's own identity, read or remembered (see `Watched::identity`).
#[napi]
pub fn child_identity(env: Env, child: &External<NativeChild>) -> Result<String> {
    throw(
        &env,
        child
            .watched
            .identity()
            .map(|id| id.encode())
            .map_err(info_err),
    )
}

/// How this child's exit is watched: 'pidfd' (on the JS loop),
/// 'pidfd-tokio', 'fallback', 'kqueue' (macOS) or 'job' (Windows).
#[napi]
pub fn child_backend(child: &External<NativeChild>) -> &'static str {
    child.backend.as_str()
}

/// The child's own cgroup (its file-system path) while it lives; null
/// once reaped, or when it is not contained.
#[napi]
pub fn child_cgroup(child: &External<NativeChild>) -> Option<String> {
    child
        .watched
        .cgroup()
        .map(|c| c.path().display().to_string())
}

/// The cgroup's path and id (its inode), for as long as this handle
/// lives: what a state file records.
#[napi]
pub fn child_cgroup_record(child: &External<NativeChild>) -> Option<Vec<String>> {
    child
        .watched
        .cgroup_record()
        .map(|(p, id)| vec![p.display().to_string(), id.to_string()])
}

/// CPU time, memory and pids of the child's cgroup (live, or as last
/// read before its removal); null where a controller is not enabled or
/// the child is not contained.
#[napi]
pub fn child_resource_usage(child: &External<NativeChild>) -> NativeUsage {
    usage(child.watched.usage())
}

/// Signals the child alone; false once it has exited (zombie included).
/// A signal the OS cannot deliver (Windows: all but SIGTERM, SIGKILL,
/// SIGINT, SIGQUIT and a reachable SIGBREAK) is ENOSYS, as for Node.
#[napi]
pub fn child_kill(env: Env, child: &External<NativeChild>, signal: i32) -> Result<bool> {
    throw(
        &env,
        (|| {
            let sig = to_signal(signal)?;
            child
                .watched
                .signal_if_running(sig)
                .map_err(|e| JsErr::os(&e, "kill"))
        })(),
    )
}

/// Whether the exit watch keeps the event loop alive (`ref()`/`unref()`).
#[napi]
pub fn child_set_ref(env: Env, child: &External<NativeChild>, on: bool) -> Result<()> {
    child.set_ref(&env, on)
}

/// Hands the parent's pipe ends to JS (once): fd numbers for stdio 0..3
/// and the notify pipe, -1 where none.
#[napi]
pub fn child_take_pipes(child: &External<NativeChild>) -> Vec<i32> {
    let mut pipes = child.pipes.lock().unwrap_or_else(|e| e.into_inner());
    pipes
        .iter_mut()
        .map(|p| p.take().map_or(-1, spawn::pipe_into_raw))
        .collect()
}

/// After the exit of a child spawned with `takeTerminal`: the terminal
/// on our stdin is ours again if the child's group still had it
/// (true); false otherwise, and always for any other child.
#[napi]
pub fn child_reclaim_terminal(child: &External<NativeChild>) -> bool {
    let Some(pgid) = child.watched.pgid().filter(|_| child.terminal) else {
        return false;
    };
    #[cfg(unix)]
    return crate::sys::reclaim_terminal(pgid).unwrap_or(false);
    #[cfg(windows)]
    {
        let _ = pgid; // Windows has no terminal foreground to give.
        false
    }
}

/// The reaped status, or null while the child has not been reaped.
#[napi]
pub fn child_exit_status(child: &External<NativeChild>) -> Option<NativeExitInfo> {
    child.watched.exit_status().map(exit_info)
}

/// Starts a stop that later callers can escalate through `control`.
/// Bad options throw here, before anything is sent.
#[napi(ts_return_type = "Promise<NativeStopResult>")]
pub fn child_stop<'env>(
    env: &'env Env,
    child: &External<NativeChild>,
    options: NativeStopOptions,
    control: &NativeStopControl,
) -> Result<PromiseRaw<'env, NativeStopResult>> {
    let started = Instant::now();
    let plan = throw(env, stop_plan(&options))?;
    let group = options.group.unwrap_or(child.watched.pgid().is_some());
    let watched = child.watched.clone();
    let escalation = control.escalation.clone();
    promise(env, async move {
        let mut target = ChildTarget::new(watched.clone(), group);
        let report = stop::run(&mut target, &plan, &escalation)
            .await
            .map_err(|e| JsErr::os(&e, "kill"))?;
        Ok(stop_result(report, started, watched.exit_status()))
    })
}

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

fn threadsafe_delivery(
    on_exit: &Function<ExitArgs, ()>,
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
            cb.call(exit_args(status), ThreadsafeFunctionCallMode::NonBlocking);
            // Dropping `cb` releases the threadsafe function: after this
            // last call nothing of ours holds the event loop open.
        }
    });
    Ok((callback, deliver))
}

/// A spawn failure for the JS face, which words it as Node does (see
/// `spawnSupervised` in lib/supervised.js): `info.at` says what failed —
/// "spawn" (finding or executing the program: Node's `spawn <command>
/// <CODE>`), "chdir" (the cwd), "open" (the stdio file of fd `info.fd`) or
/// "setup" (a step of the child between its creation and exec: setuid,
/// setgid, setpgid, ...).
fn start_err(err: StartError) -> JsErr {
    match err {
        StartError::Spawn(SpawnError::Invalid(msg)) => JsErr::coded("ERR_INVALID_ARG_VALUE", msg),
        StartError::Spawn(SpawnError::Unsupported(msg)) => JsErr::coded("ENOTSUP", msg),
        StartError::Spawn(SpawnError::File { fd, err, reason }) => {
            let e = JsErr::os(&err, "open").at("open").fd(fd);
            match reason {
                Some(r) => e.reason(r),
                None => e,
            }
        }
        StartError::Spawn(SpawnError::Os { err, at, syscall }) => {
            JsErr::os(&err, syscall).at(at.as_str())
        }
        StartError::Cgroup(e) => cgroup_err(e),
        StartError::Supervise(err, syscall) => JsErr::os(&err, syscall),
    }
}

/// One fd's entry of the packed `stdio` (see [`STDIO_FILE`]).
fn stdio_spec(stdio: u32, n: usize, extra: Option<&NativeSpawnExtra>) -> Res<Stdio> {
    Ok(match (stdio >> (2 * n)) & 3 {
        STDIO_IGNORE => Stdio::Ignore,
        STDIO_INHERIT => Stdio::Inherit,
        STDIO_PIPE => Stdio::Pipe,
        _ => Stdio::File {
            path: extra
                .and_then(|e| e.stdio_paths.as_ref())
                .and_then(|p| p.get(n))
                .filter(|p| !p.is_empty())
                .ok_or_else(|| {
                    JsErr::coded("ERR_INVALID_ARG_VALUE", format!("stdio[{n}] has no file"))
                })?
                .into(),
            append: stdio & (STDIO_APPEND << n) != 0,
        },
    })
}

/// The packed arguments of `spawnSupervised`, as one value.
struct SpawnArgs<'a> {
    flags: u32,
    stdio: u32,
    death_signal: i32,
    env: Option<&'a NativeEnv>,
    extra: Option<&'a NativeSpawnExtra>,
}

impl SpawnArgs<'_> {
    fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }
}

fn command(command: String, args: Vec<String>, a: &SpawnArgs) -> Res<Command> {
    let extra = a.extra;
    let stdio = |n: usize| stdio_spec(a.stdio, n, extra);
    let listen = extra.and_then(|e| {
        e.listen_fds.as_ref().map(|fds| Listen {
            fds: fds.clone(),
            names: e.listen_names.clone().unwrap_or_default(),
            blocking: e.listen_blocking.unwrap_or(false),
        })
    });
    Ok(Command {
        program: command,
        args,
        env: match a.env {
            Some(env) if !a.has(SPAWN_INHERIT_ENV) => Environment::Set(env.vars.clone()),
            Some(_) => {
                return Err(JsErr::coded(
                    "ERR_INVALID_ARG_VALUE",
                    "an environment given with SPAWN_INHERIT_ENV",
                ))
            }
            None if a.has(SPAWN_INHERIT_ENV) => Environment::Inherit,
            None => Environment::Set(Arc::new([])),
        },
        cwd: extra.and_then(|e| e.cwd.clone()).map(Into::into),
        stdio: [stdio(0)?, stdio(1)?, stdio(2)?],
        process_group: a.has(SPAWN_PROCESS_GROUP),
        death_signal: match a.death_signal {
            0 => None,
            n => Some(to_signal(n)?),
        },
        notify_fd: extra.and_then(|e| e.notify_fd),
        uid: to_id(extra.and_then(|e| e.uid), "uid")?,
        gid: to_id(extra.and_then(|e| e.gid), "gid")?,
        umask: match extra.and_then(|e| e.umask) {
            Some(m) if m > 0o777 => {
                return Err(JsErr::coded(
                    "ERR_OUT_OF_RANGE",
                    format!("umask must be in 0..=0o777, got {m:#o}"),
                ))
            }
            m => m,
        },
        argv0: extra.and_then(|e| e.argv0.clone()),
        new_session: false,
        ignore_stop_signals: false,
        take_terminal: a.has(SPAWN_TAKE_TERMINAL),
        cgroup: None,
        listen,
    })
}

/// Starts `command`: `flags`, `stdio` and `deathSignal` (0: none) as
/// packed above; `env` the child's environment unless `flags` says
/// inherit; `extra` what the spawn rarely sets. The exit comes to `onExit`.
#[napi(ts_return_type = "ExternalObject<NativeChild>")]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn spawn_supervised(
    env: Env,
    command: String,
    args: Vec<String>,
    flags: u32,
    stdio: u32,
    death_signal: i32,
    child_env: Option<&NativeEnv>,
    extra: Option<NativeSpawnExtra>,
    // Spelled out, not `ExitArgs`, for the generated TypeScript declaration.
    on_exit: Function<FnArgs<(Option<i32>, Option<String>)>, ()>,
) -> Result<External<NativeChild>> {
    spawn_trace::mark(spawn_trace::ENTRY);
    let a = SpawnArgs {
        flags,
        stdio,
        death_signal,
        env: child_env,
        extra: extra.as_ref(),
    };
    let cmd = throw(&env, self::command(command, args, &a))?;
    spawn_trace::mark(spawn_trace::COMMAND);
    let bound = match extra.as_ref().and_then(|e| e.kill_timeout_ms) {
        Some(ms) => throw(&env, duration_ms(ms, "stop.killTimeoutMs"))?.as_duration(),
        None => Duration::from_secs(2),
    };
    let containment = a.has(SPAWN_CGROUP).then(|| Containment {
        parent: extra
            .as_ref()
            .and_then(|e| e.cgroup_parent.clone())
            .map(Into::into),
        // Killed by the guardian when this process dies, as the child itself
        // is by its death signal.
        guarded: cmd.death_signal.is_some(),
        bound,
    });
    let started = throw(
        &env,
        exit_watch::start(cmd, a.has(SPAWN_KILL_GROUP_ON_EXIT), containment).map_err(start_err),
    )?;
    spawn_trace::mark(spawn_trace::REGISTERED);
    let watched = started.watched;
    let pipes = Mutex::new(started.pipes);
    let terminal = a.has(SPAWN_TAKE_TERMINAL);
    if a.has(SPAWN_USE_LOOP) {
        if let Some(loop_ref) = js_loop::watch_on_loop(&env, &on_exit, &watched) {
            spawn_trace::mark(spawn_trace::RETURN);
            return Ok(External::new(NativeChild {
                watched,
                backend: Backend::PidfdLoop,
                delivery: Delivery::Loop(loop_ref),
                pipes,
                terminal,
            }));
        }
    }
    let watching = threadsafe_delivery(&on_exit).and_then(|(callback, deliver)| {
        exit_watch::watch(&watched, deliver)
            .map(|backend| (callback, backend))
            .map_err(|e| JsErr::os(&e, exit_watch::WATCH_CALL).into_napi(&env))
    });
    spawn_trace::mark(spawn_trace::RETURN);
    match watching {
        Ok((callback, backend)) => Ok(External::new(NativeChild {
            watched,
            backend,
            delivery: Delivery::Threadsafe(callback),
            pipes,
            terminal,
        })),
        Err(e) => {
            // No watcher could be started: take the child down again so that
            // nothing is left behind, and say why.
            watched.abandon();
            Err(e)
        }
    }
}
