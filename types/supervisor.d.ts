// Supervisor: keeps one daemon running (lib/supervisor/).

import { TypedEventEmitter } from './emitter.js'
import type { Signal } from './signal.js'
import type { ExitInfo, SpawnSupervisedOptions, SupervisedProcess } from './spawn.js'
import type { StopOptions, StopResult } from './stop.js'

/**
 * Keeps one daemon running: restarts it when it exits (the exit event is the
 * reap, and its group has been swept, so the new child never meets its
 * predecessor's workers on the port), with backoff, and gives up on a crash
 * loop. Checks readiness, records its state in `stateFile` for status tools
 * and successors, and takes over from a predecessor that died.
 *
 * States (every transition there is):
 *
 * | from \ event | start | ready, adopt | crash (restarts) | retry | restart() | stop() | stop done | gives up | clean end |
 * |---|---|---|---|---|---|---|---|---|---|
 * | idle | starting | | | | | | | | |
 * | starting | | running | backoff | | starting | stopping | | failed | stopped |
 * | running | | | backoff | | starting | stopping | | failed | stopped |
 * | backoff | | | | starting | starting | stopping | | | |
 * | stopping | | | | | | | stopped | | |
 * | stopped, failed | starting | | | | | | | | |
 *
 * `stopped` and `failed` are left only by `start()`.
 *
 * @throws {TypeError} bad options (unknown keys: `code: 'ERR_INVALID_ARG_VALUE'`).
 * @throws {RangeError} a duration outside 0..=2^31-1 ms, a bad port or count.
 */
export declare class Supervisor extends TypedEventEmitter<SupervisorEvents> implements AsyncDisposable {
  constructor(options: SupervisorOptions)
  readonly name: string
  readonly state: SupervisorState
  /** The running child; null while none runs, and for an adopted orphan. */
  readonly child: SupervisedProcess | null
  /**
   * The held sockets (`options.listen`) as bound, in order: each one's
   * name and address (the real port of a `port: 0`). Empty before
   * `start()` has bound them and after the supervisor stopped or failed.
   */
  readonly listening: ReadonlyArray<SupervisorListening>
  status(): SupervisorStatus
  /**
   * From idle, stopped or failed: starts (from failed, the crash window and
   * the backoff start afresh). Resolves when the daemon is first ready;
   * rejects when the supervisor ends `failed` (with that error) or `stopped`
   * (an `AbortError` for `stop()`) before that, or with `code: 'ELOCKED'`
   * when another supervisor holds `stateFile`. In starting or backoff it
   * returns the pending promise; running: resolved; stopping: waits, then
   * starts.
   */
  start(): Promise<void>
  /**
   * Terminal until the next `start()`: cancels a pending restart, a ready
   * check, a start or restart in flight, and stops the daemon (with the
   * `spawn.stop` defaults under `options`). Resolves with the daemon's
   * StopResult, or null when none ran. A second call shares the first, and
   * may escalate it (`{ signal: 'SIGKILL' }`).
   */
  stop(options?: StopOptions): Promise<StopResult | null>
  /**
   * Stops the daemon with the stop defaults and starts it again at once (no
   * backoff; not counted in `restarts` or the crash window), with new `args`
   * / `env` if given (they stay for later restarts). Resolves at ready.
   * Concurrent calls share one (the first call's arguments). A `stop()`
   * before it resolves wins: it rejects with an `AbortError`.
   */
  restart(options?: {
    args?: readonly string[] | undefined
    env?: Record<string, string | undefined> | undefined
  }): Promise<void>
  /**
   * A replacement no client sees (`options.listen`): the successor, with
   * new `args` / `env` if given (as `restart()` takes them), starts on the
   * held sockets while the running daemon still serves; once the successor
   * is ready, the old one is stopped with the stop defaults (SIGTERM, its
   * grace: it stops accepting and finishes its requests), and the promise
   * resolves. A successor that fails its ready check or exits first is
   * stopped, the old one serves on, and it rejects (`ERR_READY_TIMEOUT`,
   * `ERR_READY_FAILED` or `ERR_RELOAD_FAILED`); `stop()` or `restart()`
   * during the overlap stop the successor too (`ERR_RELOAD_ABANDONED`). If
   * the old daemon exits first, the successor takes its place and the
   * promise settles at its ready. Concurrent calls share one (the first
   * call's arguments). Where no daemon runs (starting, backoff, stopped),
   * it is `restart()`, its outcome said as a reload's.
   * @throws `code: 'ERR_RELOAD_WITHOUT_LISTEN'` (a rejection) without `options.listen`.
   */
  reload(options?: {
    args?: readonly string[] | undefined
    env?: Record<string, string | undefined> | undefined
  }): Promise<void>
  /** Signals the daemon (SIGHUP to reload, say); false when none runs. An exit by a signal sent here is not a failure. */
  kill(signal: Signal): boolean
  /**
   * Publishes `meta` (a JSON object, at most 64 KiB as JSON; null clears)
   * with the running daemon: the stateFile's `meta` holds it until the child
   * exits, and not a moment longer (a daemon's port is never advertised
   * after a crash). false when no child runs (nothing is set).
   * @throws {TypeError} not an object, an array, or not JSON (a cycle, a BigInt).
   * @throws {RangeError} more than 64 KiB as JSON.
   */
  setMeta(meta: Record<string, unknown> | null): boolean
  /** `stop()` */
  [Symbol.asyncDispose](): Promise<void>
}

/**
 * The events of a `Supervisor` and their arguments: `on`, `once`, `off`,
 * `emit` and the rest accept only these names and listeners, and the
 * statics `Supervisor.once(sup, 'ready')` / `Supervisor.on(sup, 'stdout')`
 * (Node's `events.once` / `events.on`) resolve to them. Node's own
 * `import { once } from 'node:events'` gives `any[]` whatever the emitter:
 * `(await once(sup, 'ready')) as SupervisorEvents['ready']`.
 */
export interface SupervisorEvents {
  /** A child was spawned (not yet ready). */
  spawn: [child: SupervisedProcess]
  /** The child passed its ready check (at once without one). */
  ready: [child: SupervisedProcess]
  /** The child was reaped and its group swept. */
  exit: [info: SupervisorExit]
  /**
   * A health check of the running daemon failed (`options.health`; not
   * within `startPeriodMs` of ready). At `failures` of `limit`, it is
   * stopped, and its `'exit'` has `reason: 'unhealthy'`.
   */
  unhealthy: [info: SupervisorUnhealthy]
  /** A health check passed after `failures` failed in a row (fewer than the limit). */
  healthy: [info: { pid: number; failures: number }]
  /** A restart is scheduled after `delayMs`. */
  restart: [info: SupervisorRestart]
  /** A daemon runs: a spawned child once ready, or an orphan adopted at takeover. */
  running: [info: SupervisorRunning]
  /** The supervisor gave up (`state` is now 'failed'). */
  failed: [error: Error]
  /**
   * A `reload()` ended: `ok` when the successor `to` is the running daemon
   * (and `from` is being stopped), else `error` says why, and `from` serves
   * on.
   */
  reload: [info: SupervisorReload]
  /** A predecessor's child was found at start and stopped or adopted. */
  takeover: [info: SupervisorTakeover]
  /** The supervisor ended `stopped`: the daemon's StopResult, or null when none ran. */
  stopped: [result: StopResult | null]
  /**
   * A line of the child's stdout, when a ready check pipes it: UTF-8, without
   * its "\n" (or "\r\n"); a line longer than 64 KiB comes in pieces of at most
   * 64 KiB. With no listener the stream is copied byte for byte to this
   * process's stdout instead.
   */
  stdout: [line: string]
  /** As `stdout`, for the child's stderr (copied to this process's stderr when no one listens). */
  stderr: [line: string]
}

/** A daemon runs: a spawned child once ready, or an orphan adopted at takeover. */
export interface SupervisorRunning {
  pid: number
  identity: string
  adopted: boolean
}

export type SupervisorState = 'idle' | 'starting' | 'running' | 'backoff' | 'stopping' | 'stopped' | 'failed'

export interface SupervisorOptions {
  command: string
  args?: readonly string[] | undefined
  /** Default: the basename of `command`. */
  name?: string | undefined
  /** Passed to `spawnSupervised` for every child (not `signal`: stop the supervisor instead). */
  spawn?: Omit<SpawnSupervisedOptions, 'signal'> | undefined
  /**
   * Default 'always'. 'on-failure' restarts on a non-zero code, a failed
   * ready check, or a signal not sent through `kill()`; 'never' does not.
   * An exit not restarted ends `stopped` (code 0, or a signal we sent) or
   * `failed` (anything else).
   */
  restart?: 'always' | 'on-failure' | 'never' | undefined
  /**
   * Delay before restart n: the first `initialMs` (0: in the same
   * event-loop turn as the exit), then `min(maxMs, stepMs * factor^(n-2))`
   * (100 ms, ×2, 30 s). Counted afresh once a child stayed ready
   * `resetAfterMs` (10 s).
   */
  backoff?:
    | {
        initialMs?: number | undefined
        stepMs?: number | undefined
        factor?: number | undefined
        maxMs?: number | undefined
        resetAfterMs?: number | undefined
      }
    | undefined
  /** More than `maxRestarts` (5) restarts within `windowMs` (60 s): `failed` (`code: 'ERR_CRASH_LOOP'`). */
  crashLoop?: { maxRestarts?: number | undefined; windowMs?: number | undefined } | undefined
  /**
   * When a new child counts as ready (else at once): something accepts a
   * connection on `port` (`host` default '127.0.0.1'); a whole line on its
   * stdout/stderr contains the string or matches the RegExp (that stream is
   * piped, and keeps flowing after ready as 'stdout'/'stderr' events, or to
   * this process's own stream when no one listens); the child writes a
   * newline to fd `notifyFd` (s6 style: the write end of a pipe sits at
   * that fd in the child); the child sends `READY=1` (`notify: true`,
   * sd_notify); or the function resolves (its signal aborts when
   * the check is given up). Failing or timing out counts as a crash.
   */
  ready?: SupervisorReady | undefined
  /** Default 30000; false waits forever. */
  readyTimeoutMs?: number | false | undefined
  /**
   * Health after ready: the running daemon (a spawned child once ready, or
   * an adopted orphan) is checked every `intervalMs`, and one that fails
   * `failures` checks in a row is stopped with its group (the stop
   * defaults; SIGCONT after the SIGTERM, so a SIGSTOPped daemon acts on it)
   * and restarted as after a crash (backoff and crash-loop limits apply).
   * @throws {TypeError} a check that is neither form, or both; an URL that
   *   is not http: or https: (`code: 'ERR_INVALID_ARG_VALUE'`).
   * @throws {RangeError} a port, count or duration out of range, or
   *   `timeoutMs >= intervalMs` (`code: 'ERR_OUT_OF_RANGE'`).
   */
  health?: SupervisorHealth | undefined
  /**
   * Listening sockets held for the daemon (Linux): bound at `start()` (a
   * failure rejects it with the address and the errno's `code`, e.g.
   * `EADDRINUSE`, nothing spawned), held across every restart, crash and
   * backoff (a connection waits in the backlog meanwhile instead of being
   * refused), closed when the supervisor stops or fails, and handed to each
   * daemon as fds 3, 4, … (see `SupervisorListen`). Enables `reload()`.
   * @throws {TypeError} an empty list, a relative path, a name with `:`, a
   *   host that is not an IP address, `takeover: 'adopt'`, or a `ready` /
   *   health `{ port }` on a held port (`code: 'ERR_INVALID_ARG_VALUE'`).
   */
  listen?: ReadonlyArray<SupervisorListen> | undefined
  /**
   * Where the supervisor records its state (`SupervisorStateRecord` as JSON,
   * mode 0600, replaced atomically). It holds a lock on `<stateFile>.lock`
   * while running: a second supervisor's `start()` rejects with ELOCKED.
   */
  stateFile?: string | undefined
  /**
   * At start, a still-running child recorded by a dead predecessor is
   * stopped with its group ('stop', default) or kept and watched ('adopt').
   * Either way, proven members of its group that outlived their leader are
   * SIGKILLed; other processes with that pgid are reported as suspects.
   */
  takeover?: 'stop' | 'adopt' | undefined
  /**
   * Main thread only. Every signal whose default action would end the
   * process (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, SIGUSR2, SIGALRM,
   * SIGVTALRM, SIGXCPU, SIGIO, SIGPWR, SIGSTKFLT where the platform has them; Windows:
   * SIGBREAK, SIGHUP) stops the daemons of every supervisor that opted in,
   * with their groups; then the process dies of that same signal (status
   * 128 + n). A signal the application listens for is its own: SIGTERM and
   * SIGINT still stop the daemons, but the process does not die; any other
   * is left alone, as is one a native module catches or ignores (Linux). A
   * second signal while stopping SIGKILLs the daemons at once.
   * `hup: 'stop'` stops them on SIGHUP even when the application listens;
   * `hup: 'forward'` passes SIGHUP on to the daemons (a reload), and the
   * process runs on; `hup: 'reload'` calls `reload()` (needs `listen`:
   * `ExecReload=kill -HUP $MAINPID` replaces the daemon without a gap).
   * Not the faults (SIGSEGV…), SIGUSR1, SIGPROF, SIGPIPE
   * or SIGXFSZ.
   */
  handleSignals?: boolean | { hup?: 'stop' | 'forward' | 'reload' | undefined } | undefined
  /**
   * Speak sd_notify(3) to the service manager that started this process
   * (systemd `Type=notify`: NOTIFY_SOCKET set), as `procward run` does:
   * `READY=1` once the daemon is ready (a daemon without a ready check:
   * once it has run 1 s), again after each restart's ready; `STATUS=` on
   * each event; `STOPPING=1` when a stop begins; `WATCHDOG=1` at half
   * `WATCHDOG_USEC` from `start()` to the end, in every state, from a timer
   * on this loop (a stuck loop sends nothing: the manager's watchdog sees
   * it). The manager's variables are taken out of `process.env` at the first
   * `start()`, so no child speaks to the manager as this process.
   * Without NOTIFY_SOCKET nothing is sent. One supervisor per process:
   * constructing a second while the first has not stopped or failed throws
   * `ERR_INVALID_ARG_VALUE`, naming the first. Default false.
   */
  notify?: boolean | undefined
  /**
   * Published for every child once it runs, as `setMeta()` does for one:
   * in the record that first reads `running` (a spawned child once ready,
   * an orphan adopted at takeover), before `'ready'` / `'running'` fire, and
   * gone with that child. A function gets what `'running'` will carry (`{
   * pid, identity, adopted }`) and returns the child's meta (checked as
   * `setMeta()`'s; one that throws or returns no JSON object is an uncaught
   * exception, as a throwing listener is, and that child runs without); an
   * object is checked now and published for every child.
   * @throws {TypeError} at construction: neither an object nor a function.
   */
  meta?: Record<string, unknown> | ((child: SupervisorRunning) => Record<string, unknown> | null) | undefined
}

export type SupervisorReady =
  /** A port check: not on a port of `options.listen` (a held port always accepts). */
  | { port: number; host?: string | undefined }
  /**
   * Ready at the first answer to a GET of `http` (an http: or https: URL)
   * with `status` (any 2xx without). On a held socket the request waits in
   * the backlog until the daemon accepts it; otherwise a refused connect
   * is tried again.
   */
  | { http: string; status?: number | undefined }
  | { stdout: string | RegExp }
  | { stderr: string | RegExp }
  | { notifyFd: number }
  /**
   * sd_notify(3) (Linux): the child gets a `NOTIFY_SOCKET` of the
   * supervisor's own (an abstract unix datagram socket, one per attempt,
   * closed when the attempt ends) and is ready at the first `READY=1` sent by
   * the child, a member of the process group it leads, or (with
   * `spawn.cgroup`) a process in its cgroup — judged by the sender's
   * credentials (`SCM_CREDENTIALS`); other senders are ignored (a warning,
   * once per process: `PROCWARD_NOTIFY_REFUSED`). Its `STATUS=` lines are
   * the state record's `child.status`. Daemons that speak sd_notify, or a
   * wrapper script's `systemd-notify --ready`, need no port or log-line
   * check. Elsewhere the constructor throws `ERR_NOTIFY_UNAVAILABLE`.
   */
  | { notify: true }
  | ((child: SupervisedProcess, signal: AbortSignal) => Promise<void>)

/**
 * `options.listen`: a listening socket the supervisor binds at `start()`,
 * holds across every restart and closes at `stop()`, handed to each daemon
 * as systemd hands a socket unit's (`sd_listen_fds(3)`): fds 3, 4, … in
 * order, `LISTEN_FDS`, `LISTEN_FDNAMES` (the names joined by `:`) and
 * `LISTEN_PID` (the daemon's own pid). Linux only.
 */
export type SupervisorListen =
  | {
      /** 1..65535, or 0: any free port (see `listening`). */
      port: number
      /** An IP address; default '127.0.0.1' ('0.0.0.0' or '::' for every interface). */
      host?: string | undefined
      /** Its name in LISTEN_FDNAMES (no `:`); default `tcp-PORT`. */
      name?: string | undefined
      /** The listen queue; default 511 (capped by the kernel's somaxconn). */
      backlog?: number | undefined
    }
  | {
      /** A unix stream socket at this absolute path (a stale socket file is replaced; the file is removed at stop). */
      path: string
      /** Its name in LISTEN_FDNAMES (no `:`); default the path's basename. */
      name?: string | undefined
      /** The file's mode (e.g. 0o660), set before anyone can connect; default from the umask. */
      mode?: number | undefined
      backlog?: number | undefined
    }

/** A held socket as bound (`supervisor.listening`). */
export interface SupervisorListening {
  name: string
  host?: string
  port?: number
  path?: string
}

/** The `'reload'` event. */
export interface SupervisorReload {
  /** The daemon it replaces. */
  from: number | null
  /** The successor; null when it could not be spawned. */
  to: number | null
  ok: boolean
  /** Why the reload failed; null when `ok`. */
  error: Error | null
}

export interface SupervisorExit extends SupervisorExitInfo {
  /** Caused by our own stop() or restart(). */
  expected: boolean
}

/**
 * An exit as the supervisor saw it: `reason: 'unhealthy'` when failed
 * health checks had it stopped; `'memory'` when a SupervisorGroup stopped
 * it over its `memoryLimit`.
 */
export interface SupervisorExitInfo extends ExitInfo {
  reason?: 'unhealthy' | 'memory' | undefined
}

/** `options.health`. */
export interface SupervisorHealth {
  /**
   * Passed when something accepts a connection on `port` (`host` default
   * '127.0.0.1'); when a GET of `http` (an http: or https: URL, not
   * followed if redirected) answers 2xx, or `status`; or when the function
   * resolves. Its `signal` aborts at `timeoutMs` (or when the child is
   * stopped); `child` is null for an adopted orphan (no child of ours).
   * A port check sees a listener gone, not a hung daemon: the kernel
   * accepts connections for a process that never takes them.
   */
  check:
    | { port: number; host?: string | undefined }
    | { http: string; status?: number | undefined }
    | ((child: SupervisedProcess | null, signal: AbortSignal) => Promise<void>)
  /** From the end of one check to the start of the next; default 10000. */
  intervalMs?: number | undefined
  /** A check not passed within it failed; default 5000 (or half `intervalMs` when less); less than `intervalMs`. */
  timeoutMs?: number | undefined
  /** Failed checks in a row that stop the daemon; default 3. */
  failures?: number | undefined
  /** Failures within this long of ready are not counted (or announced); default 0. */
  startPeriodMs?: number | undefined
}

/** A health check of the running daemon failed. */
export interface SupervisorUnhealthy {
  pid: number
  /** Failed in a row, this one included. */
  failures: number
  /** `options.health.failures`: at this many, the daemon is stopped. */
  limit: number
  /** `code: 'ERR_HEALTH_CHECK_FAILED'` (the check's own error as its `cause`) or `'ERR_HEALTH_CHECK_TIMEOUT'`. */
  error: Error & { code: 'ERR_HEALTH_CHECK_FAILED' | 'ERR_HEALTH_CHECK_TIMEOUT' }
}

/** The running daemon's last health check. */
export interface SupervisorHealthCheck {
  ok: boolean
  /** When it ended (ISO 8601). */
  at: string
  /** The failed check's message; null when it passed. */
  error: string | null
  /** Failed in a row (0 after a pass). */
  failures: number
}

export interface SupervisorRestart {
  /** n of the backoff schedule. */
  attempt: number
  delayMs: number
  /** null when the child could not be spawned. */
  lastExit: SupervisorExitInfo | null
}

export interface SupervisorTakeover {
  pid: number
  identity: string
  action: 'stopped' | 'adopted'
  /** The predecessor's child's stop; null when it was adopted or already gone. */
  result: StopResult | null
  /** Processes with the recorded pgid that were not proven members: never signalled. */
  suspects: number[]
}

export interface SupervisorStatus {
  name: string
  state: SupervisorState
  pid: number | null
  identity: string | null
  adopted: boolean
  restarts: number
  lastExit: SupervisorExitInfo | null
  /** When the state last changed (ISO 8601). */
  since: string
  startedAt: string | null
  readyAt: string | null
  /** The running daemon's last health check; null before the first, without `options.health`, or while none runs. */
  health: SupervisorHealthCheck | null
  /** A reload's successor while it starts beside the running daemon; null otherwise. */
  next: { pid: number; identity: string } | null
}

// Only what is marked `export` is public (the helper types stay private).
// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}

/**
 * Sends `fields` to the service manager that started this process
 * (sd_notify(3), NOTIFY_SOCKET), as one message: an application's own
 * states, e.g. `{ STATUS: 'resyncing' }`. Returns false when no manager
 * started it, or its socket would not take the message now (never waits).
 * A supervisor with `notify: true` speaks for itself; this is for what it
 * does not know.
 * @throws {TypeError} `ERR_INVALID_ARG_VALUE`: a field name that is not
 * upper-case letters, digits and `_`, a value with a newline, or no field.
 */
export declare function notifyServiceManager(fields: Readonly<Record<string, string>>): boolean
