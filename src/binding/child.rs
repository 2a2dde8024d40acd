//! `spawnSupervised` and the native side of a `SupervisedProcess`
//! (`NativeChild`), the same on every OS: what differs (how a child is
//! started and watched, which signals reach it, whether it has pipes or a
//! cgroup) is the core's to say (`exit_watch`, `spawn`, `stop::targets`).
//!
//! The exit reaches JS through a threadsafe function, or, under Node on
//! Linux, on the JS thread's own event loop (`js_loop`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use napi::bindgen_prelude::{Function, PromiseRaw};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Result, Status};
use napi_derive::napi;

use super::cgroup::{cgroup_err, usage, NativeUsage};
use super::convert::{duration_ms, exit_info, info_err, to_id, to_signal, NativeExitInfo};
use super::errors::{promise, throw, JsErr, Res};
use super::js_loop;
use super::stop::{stop_plan, stop_result, NativeStopControl, NativeStopOptions, NativeStopResult};
use crate::exit_watch::{self, Backend, Containment, StartError, Watched};
use crate::pid::Pid;
use crate::spawn::{self, Command, Environment, Listen, SpawnError, Stdio};
use crate::spawn_trace;
use crate::stop::{self, targets::ChildTarget};

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
    /// The child's umask, 0..=0o777 (checked by the JS face).
    pub umask: Option<u32>,
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
    /// Package-internal (`procward run`): the child takes the foreground of
    /// the terminal on its stdin, if our group has it (`Command::take_terminal`),
    /// and `reclaimTerminal()` gives it back after the exit.
    pub take_terminal: Option<bool>,
    /// Package-internal (a Supervisor's `listen`): listening sockets handed
    /// over at fds 3, 4, … as systemd does (`Command::listen`).
    pub listen_fds: Option<Vec<i32>>,
    pub listen_names: Option<Vec<String>>,
    pub listen_blocking: Option<bool>,
}

type ExitCallback = ThreadsafeFunction<NativeExitInfo, (), NativeExitInfo, Status, false>;

/// How the exit reaches JS: a threadsafe function (from a runtime or
/// waiter thread), or the JS loop itself.
enum Delivery {
    Threadsafe(Arc<Mutex<Option<ExitCallback>>>),
    Loop(js_loop::LoopRef),
}

/// The native side of a `SupervisedProcess`. The JS class in `lib/` wraps it.
#[napi]
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
    pub fn identity(&self, env: Env) -> Result<String> {
        throw(
            &env,
            self.watched
                .identity()
                .map(|id| id.encode())
                .map_err(info_err),
        )
    }

    /// How this child's exit is watched: 'pidfd' (on the JS loop),
    /// 'pidfd-tokio', 'fallback', 'kqueue' (macOS) or 'job' (Windows).
    #[napi(getter)]
    pub fn backend(&self) -> &'static str {
        self.backend.as_str()
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
    pub fn resource_usage(&self) -> NativeUsage {
        usage(self.watched.usage())
    }

    /// Signals the child alone; false once it has exited (zombie included).
    /// A signal the OS cannot deliver (Windows: all but SIGTERM, SIGKILL,
    /// SIGINT, SIGQUIT and a reachable SIGBREAK) is ENOSYS, as for Node.
    #[napi]
    pub fn kill(&self, env: Env, signal: i32) -> Result<bool> {
        throw(
            &env,
            (|| {
                let sig = to_signal(signal)?;
                self.watched
                    .signal_if_running(sig)
                    .map_err(|e| JsErr::os(&e, "kill"))
            })(),
        )
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
            .map(|p| p.take().map_or(-1, spawn::pipe_into_raw))
            .collect()
    }

    /// After the exit of a child spawned with `takeTerminal`: the terminal
    /// on our stdin is ours again if the child's group still had it
    /// (true); false otherwise, and always for any other child.
    #[napi]
    pub fn reclaim_terminal(&self) -> bool {
        let Some(pgid) = self.watched.pgid().filter(|_| self.terminal) else {
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
        let plan = throw(env, stop_plan(&options))?;
        let group = options.group.unwrap_or(self.watched.pgid().is_some());
        let watched = self.watched.clone();
        let escalation = control.escalation.clone();
        promise(env, async move {
            let mut target = ChildTarget::new(watched.clone(), group);
            let report = stop::run(&mut target, &plan, &escalation)
                .await
                .map_err(|e| JsErr::os(&e, "kill"))?;
            Ok(stop_result(report, started, watched.exit_status()))
        })
    }
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

fn stdio_spec(s: Option<&NativeStdio>) -> Res<Stdio> {
    let s = s.ok_or_else(|| JsErr::coded("ERR_INVALID_ARG_VALUE", "stdio needs three entries"))?;
    Ok(match s.kind.as_str() {
        "ignore" => Stdio::Ignore,
        "inherit" => Stdio::Inherit,
        "pipe" => Stdio::Pipe,
        "file" => Stdio::File {
            path: s.path.clone().unwrap_or_default().into(),
            append: s.append.unwrap_or(false),
        },
        other => {
            return Err(JsErr::coded(
                "ERR_INVALID_ARG_VALUE",
                format!("bad stdio {other:?}"),
            ))
        }
    })
}

fn command(command: String, args: Vec<String>, options: &NativeSpawnOptions) -> Res<Command> {
    let stdio = |i: usize| stdio_spec(options.stdio.get(i));
    Ok(Command {
        program: command,
        args,
        env: if options.inherit_env {
            Environment::Inherit
        } else {
            Environment::Set(
                options
                    .env_keys
                    .iter()
                    .zip(options.env_values.iter())
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
            )
        },
        cwd: options.cwd.clone().map(Into::into),
        stdio: [stdio(0)?, stdio(1)?, stdio(2)?],
        process_group: options.process_group,
        death_signal: match options.death_signal {
            0 => None,
            n => Some(to_signal(n)?),
        },
        notify_fd: options.notify_fd,
        uid: to_id(options.uid, "uid")?,
        gid: to_id(options.gid, "gid")?,
        umask: match options.umask {
            Some(m) if m > 0o777 => {
                return Err(JsErr::coded(
                    "ERR_OUT_OF_RANGE",
                    format!("umask must be in 0..=0o777, got {m:#o}"),
                ))
            }
            m => m,
        },
        argv0: options.argv0.clone(),
        new_session: false,
        ignore_stop_signals: false,
        take_terminal: options.take_terminal.unwrap_or(false),
        cgroup: None,
        listen: options.listen_fds.as_ref().map(|fds| Listen {
            fds: fds.clone(),
            names: options.listen_names.clone().unwrap_or_default(),
            blocking: options.listen_blocking.unwrap_or(false),
        }),
    })
}

#[napi]
pub fn spawn_supervised(
    env: Env,
    command: String,
    args: Vec<String>,
    options: NativeSpawnOptions,
    on_exit: Function<NativeExitInfo, ()>,
) -> Result<NativeChild> {
    spawn_trace::mark(spawn_trace::ENTRY);
    let cmd = throw(&env, self::command(command, args, &options))?;
    spawn_trace::mark(spawn_trace::COMMAND);
    let bound = match options.kill_timeout_ms {
        Some(ms) => throw(&env, duration_ms(ms, "stop.killTimeoutMs"))?.as_duration(),
        None => Duration::from_secs(2),
    };
    let containment = options.cgroup.then(|| Containment {
        parent: options.cgroup_parent.clone().map(Into::into),
        // Killed by the guardian when this process dies, as the child itself
        // is by its death signal.
        guarded: cmd.death_signal.is_some(),
        bound,
    });
    let started = throw(
        &env,
        exit_watch::start(cmd, options.kill_group_on_exit, containment).map_err(start_err),
    )?;
    spawn_trace::mark(spawn_trace::REGISTERED);
    let watched = started.watched;
    let pipes = Mutex::new(started.pipes);
    let terminal = options.take_terminal.unwrap_or(false);
    if options.use_loop {
        if let Some(loop_ref) = js_loop::watch_on_loop(&env, &on_exit, &watched) {
            spawn_trace::mark(spawn_trace::RETURN);
            return Ok(NativeChild {
                watched,
                backend: Backend::PidfdLoop,
                delivery: Delivery::Loop(loop_ref),
                pipes,
                terminal,
            });
        }
    }
    let watching = threadsafe_delivery(&on_exit).and_then(|(callback, deliver)| {
        exit_watch::watch(&watched, deliver)
            .map(|backend| (callback, backend))
            .map_err(|e| JsErr::os(&e, exit_watch::WATCH_CALL).into_napi(&env))
    });
    spawn_trace::mark(spawn_trace::RETURN);
    match watching {
        Ok((callback, backend)) => Ok(NativeChild {
            watched,
            backend,
            delivery: Delivery::Threadsafe(callback),
            pipes,
            terminal,
        }),
        Err(e) => {
            // No watcher could be started: take the child down again so that
            // nothing is left behind, and say why.
            watched.abandon();
            Err(e)
        }
    }
}
