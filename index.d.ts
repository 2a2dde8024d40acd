/**
 * procward: own child processes correctly.
 *
 * A zombie is never mistaken for a live process, and a reused pid is told
 * apart by `identity`.
 *
 * Every optional field accepts `undefined` (also under
 * `exactOptionalPropertyTypes`), which means the same as leaving it out.
 *
 * Events are typed by an event map (`SupervisorEvents`,
 * `SupervisedProcessEvents`): a name not in it, or a listener that does not
 * take its arguments, does not compile.
 */

import type { EventEmitter } from 'node:events'
import type { Readable, Writable } from 'node:stream'

export type Signal = NodeJS.Signals | number

// ---- liveness ---------------------------------------------------------------

/**
 * Exists and has not exited. A zombie is NOT running (where
 * `process.kill(pid, 0)` says it is). With `identity`, false when the pid now
 * belongs to a different process (pid reuse). Synchronous; takes microseconds.
 *
 * @throws {TypeError} pid not a number, or identity not a string, or an
 *   identity that no process could have (empty, garbled):
 *   `code: 'ERR_INVALID_ARG_VALUE'`.
 * @throws {RangeError} pid not an integer in 1..=4194304.
 */
export declare function isProcessRunning(pid: number, identity?: string): boolean

/** A snapshot, or null when no such process exists. */
export declare function getProcessInfo(pid: number): ProcessInfo | null

export interface ProcessInfo {
  pid: number
  ppid: number
  pgid: number
  /**
   * 'exiting' (Linux): the main thread has ended while other threads of the
   * process still run (a process being killed, until its last thread is
   * gone); it still runs, as `isProcessRunning` says. 'zombie': it has exited.
   */
  state: 'running' | 'sleeping' | 'disk-sleep' | 'stopped' | 'exiting' | 'zombie' | 'dead' | 'idle' | 'other'
  /**
   * Opaque, stable for the life of this process, different for any later
   * process that reuses the pid (boot id + start time + pidfs inode on Linux).
   * Store it beside the pid in a pidfile or lock.
   */
  identity: string
  name: string
}

// ---- supervised spawn -------------------------------------------------------

/**
 * Starts `command` as a supervised child. Synchronous: when it returns the
 * child has exec'd and `pid` is known; a missing command has thrown an
 * `Error` with `code: 'ENOENT'` (`'EACCES'` when not executable) and left
 * nothing behind.
 *
 * The child's exit is watched natively (pidfd on Linux, or a waiter thread):
 * its group is SIGKILLed while the leader is still unreaped, then it is
 * reaped, then `exited` resolves and `'exit'` fires. This happens even if
 * the handle is dropped or `unref()`ed.
 *
 * The result's types follow `stdio` and `processGroup`, as `child_process`
 * types do: `stdout` is a `Readable` (not `| null`) with `stdio: 'pipe'`,
 * `pgid` a `number` unless `processGroup` may be false.
 *
 * @throws {TypeError} bad command, args, env, stdio or signal names.
 * @throws {RangeError} `code: 'ERR_OUT_OF_RANGE'`: a `stop` duration out of range.
 * @throws {Error} `code: 'ENOENT' | 'EACCES' | 'ENOTDIR' | …` from the OS.
 * @throws {Error} `name: 'AbortError'` when `options.signal` is already aborted.
 */
export declare function spawnSupervised<
  Stdio extends StdioOptions | undefined = undefined,
  Group extends boolean | undefined = undefined,
>(
  command: string,
  args?: readonly string[],
  options?: SpawnSupervisedOptions & { stdio?: Stdio; processGroup?: Group },
): SupervisedProcess<ShapeFrom<Stdio, Group>>

export interface SpawnSupervisedOptions {
  cwd?: string | undefined
  /** Default: `process.env`. Entries whose value is `undefined` are left out. */
  env?: Record<string, string | undefined> | undefined
  /** Default `['ignore', 'inherit', 'inherit']`. */
  stdio?: StdioOptions | undefined
  /** Default true: the child leads a new process group (pgid = pid). */
  processGroup?: boolean | undefined
  /** Default true: SIGKILL the group after the leader exits, before it is reaped. */
  killGroupOnExit?: boolean | undefined
  /**
   * Linux: the signal the child gets if this process dies. Default 'SIGKILL'.
   * The kernel clears it when the child's credentials change: set after the
   * `uid`/`gid` switch, it holds for the program started, but not once that
   * program changes its own uid/gid (a daemon dropping to `nobody` by itself)
   * or execs a set-user-ID/set-group-ID or file-capability binary. Such a
   * child outlives a SIGKILLed supervisor; give it `uid`/`gid` here instead.
   * macOS has no such mechanism: accepted there, without effect.
   */
  parentDeathSignal?: Signal | false | undefined
  /**
   * Run the child as this user id (0..=4294967294): `setuid` in the child
   * before exec, after `chdir`. With `uid` or `gid` the supplementary groups
   * are dropped first (`setgroups` to none; kept where this process may not
   * change them, as in Node). Needs root or CAP_SETUID, else the spawn throws
   * EPERM (`syscall: 'setuid'`). To `stop()` the child this process must
   * still be allowed to signal it.
   */
  uid?: number | undefined
  /** Run the child with this group id (0..=4294967294): `setgid` before `setuid`. */
  gid?: number | undefined
  /**
   * The child's `argv[0]` (what `ps` shows). The program run is still the
   * one `command` names and resolves to, as in `child_process`.
   */
  argv0?: string | undefined
  /** Abort ⇒ `stop()` with the `stop` defaults. Already aborted ⇒ throws AbortError. */
  signal?: AbortSignal | undefined
  /** Defaults for `stop()`; checked here, so a bad one fails the spawn. */
  stop?: StopOptions | undefined
  /**
   * Linux cgroup v2: the child is born in a fresh cgroup of its own (under
   * `parent`, an existing cgroup directory such as
   * `/sys/fs/cgroup/my.slice`; default: a `procward` cgroup below this
   * process's own, inside the subtree its service manager kills), so nothing it starts can escape — not a `setsid`, a
   * double-forking daemon, or one that drops privileges (only a process
   * allowed to write to another cgroup's `cgroup.procs`, such as root, can
   * move itself out). When the leader
   * exits, the whole cgroup is killed and `'exit'` comes once it is empty
   * (or after `stop.killTimeoutMs`); `stop()`'s SIGKILL step kills the
   * cgroup; when this process dies (SIGKILL too) its contained children's
   * cgroups are killed, unless `parentDeathSignal: false`. Default false.
   *
   * @throws {Error} `code: 'ERR_CGROUP_UNAVAILABLE'` (the message says why)
   *   where cgroup v2 is not usable: not Linux, no v2 hierarchy, kernel
   *   before 5.14, a parent not delegated to this user. Never a silent
   *   fallback. See `cgroupSupport()`.
   * @throws {TypeError} `code: 'ERR_INVALID_ARG_VALUE'`: `parent` is not an
   *   absolute path of an existing cgroup v2 directory, or is a threaded
   *   cgroup (nothing is created).
   */
  cgroup?: boolean | { parent?: string | undefined } | undefined
}

/** Resource usage of a contained child's cgroup; null where not known. */
export interface ResourceUsage {
  /** CPU time of every process that ran in the cgroup (`cpu.stat` usage_usec). */
  cpuUsec: number | null
  /** `memory.current`, where the memory controller is enabled for it. */
  memoryBytes: number | null
  /** `pids.current`, where the pids controller is enabled for it. */
  pids: number | null
}

/** What `cgroupSupport()` answers. */
export interface CgroupSupport {
  /** Whether `spawnSupervised(..., { cgroup: true })` can work here. */
  available: boolean
  /** The default parent cgroup's path (made on the first contained spawn). */
  parent: string | null
  /** Why not, when not available. */
  reason: string | null
}

/**
 * Can this process create child cgroups under the default parent (Linux
 * cgroup v2, delegated to this user or root, Linux >= 5.14)? Says why not.
 * No side effects.
 */
export declare function cgroupSupport(): CgroupSupport

export type StdioOption = 'ignore' | 'inherit' | 'pipe' | { file: string; append?: boolean | undefined }

/** One option for stdin, stdout and stderr alike, or one for each. */
export type StdioOptions = StdioOption | readonly [StdioOption, StdioOption, StdioOption]

/**
 * The options a process's types follow: `stdio` and `processGroup` (absent
 * or `undefined`: the defaults).
 */
export interface SpawnShape {
  stdio?: StdioOptions | undefined
  processGroup?: boolean | undefined
}

/** The types of a `SupervisedProcess`'s streams and `pgid`. */
export interface SupervisedShape {
  stdin: Writable | null
  stdout: Readable | null
  stderr: Readable | null
  pgid: number | null
}

type StdioEntry<S, I extends 0 | 1 | 2> = S extends undefined
  ? I extends 0
    ? 'ignore'
    : 'inherit'
  : S extends readonly [infer In, infer Out, infer Err]
    ? [In, Out, Err][I]
    : S
type PipeOf<E, T> = E extends 'pipe' ? T : null
type PgidOf<G> = G extends false ? null : number
type Field<O, K extends keyof SpawnShape> = K extends keyof O ? O[K] : undefined

/** The shape of a process spawned with these `stdio` and `processGroup`. */
type ShapeFrom<Stdio, Group> = {
  stdin: PipeOf<StdioEntry<Stdio, 0>, Writable>
  stdout: PipeOf<StdioEntry<Stdio, 1>, Readable>
  stderr: PipeOf<StdioEntry<Stdio, 2>, Readable>
  pgid: PgidOf<Group>
}

/**
 * The shape of a process spawned with options `O`, e.g.
 * `SupervisedProcess<SpawnedShape<{ stdio: 'pipe' }>>` has three streams and
 * a `number` pgid.
 */
export type SpawnedShape<O extends SpawnShape> = ShapeFrom<Field<O, 'stdio'>, Field<O, 'processGroup'>>

/**
 * A supervised child. `T` types its streams and `pgid` (`spawnSupervised`
 * infers it from the options). Plain `SupervisedProcess` fits any of them:
 * streams `| null`, `pgid: number | null`.
 */
export declare class SupervisedProcess<T extends SupervisedShape = SupervisedShape> extends EventEmitter {
  private constructor()
  readonly pid: number
  /** The child's process group id (its pid), or null with `processGroup: false`. */
  readonly pgid: T['pgid']
  /** Equal to `getProcessInfo(pid).identity` while the child lives. */
  readonly identity: string
  /** Resolves once, after the child is reaped (and its group swept). Never rejects. */
  readonly exited: Promise<ExitInfo>
  /** null until reaped. */
  readonly exitInfo: ExitInfo | null
  /** A stream with `stdio` 'pipe' for stdin, else null. */
  readonly stdin: T['stdin']
  /** A stream with `stdio` 'pipe' for stdout, else null. */
  readonly stdout: T['stdout']
  /** A stream with `stdio` 'pipe' for stderr, else null. */
  readonly stderr: T['stderr']
  /**
   * How the exit is watched: 'pidfd' (polled by this thread's event loop),
   * 'pidfd-tokio' (delivered by procward's native reaper thread; runtimes
   * without libuv, or PROCWARD_EXIT_WATCH=tokio) or 'fallback' (a waiter
   * thread: no pidfd);
   * on macOS 'kqueue' (EVFILT_PROC on a native runtime task) or 'fallback';
   * on Windows 'job' (a registered wait on the process handle, then the
   * child's Job object is terminated).
   */
  readonly exitWatch: 'pidfd' | 'pidfd-tokio' | 'kqueue' | 'fallback' | 'job'
  /**
   * The child's own cgroup (its path under the cgroup2 mount) while it
   * lives; null once reaped, or without the `cgroup` option.
   */
  readonly cgroup: string | null
  /**
   * CPU time, memory and pids of the child's cgroup: live while it runs,
   * as last read before its removal after that. All null without `cgroup`.
   */
  resourceUsage(): ResourceUsage
  /**
   * Signals the child alone, like child_process. false once it has exited
   * (a zombie included); never reaches a process that reused the pid.
   */
  kill(signal?: Signal): boolean
  /** Bounded SIGTERM → SIGKILL escalation; see `stopSupervisedProcess`. */
  stop(options?: StopOptions): Promise<StopResult>
  ref(): this
  /** The child is still reaped natively; only the event loop's hold is dropped. */
  unref(): this
  /** `stop()` */
  [Symbol.asyncDispose](): Promise<void>
  // Only these events, whatever the @types/node: its EventEmitter's own
  // type map takes other names in some releases (26: with `any[]` arguments).
  on<K extends keyof SupervisedProcessEvents>(event: K, listener: (...args: SupervisedProcessEvents[K]) => void): this
  once<K extends keyof SupervisedProcessEvents>(event: K, listener: (...args: SupervisedProcessEvents[K]) => void): this
  off<K extends keyof SupervisedProcessEvents>(event: K, listener: (...args: SupervisedProcessEvents[K]) => void): this
  addListener<K extends keyof SupervisedProcessEvents>(
    event: K,
    listener: (...args: SupervisedProcessEvents[K]) => void,
  ): this
  removeListener<K extends keyof SupervisedProcessEvents>(
    event: K,
    listener: (...args: SupervisedProcessEvents[K]) => void,
  ): this
  prependListener<K extends keyof SupervisedProcessEvents>(
    event: K,
    listener: (...args: SupervisedProcessEvents[K]) => void,
  ): this
  prependOnceListener<K extends keyof SupervisedProcessEvents>(
    event: K,
    listener: (...args: SupervisedProcessEvents[K]) => void,
  ): this
  emit<K extends keyof SupervisedProcessEvents>(event: K, ...args: SupervisedProcessEvents[K]): boolean
  listenerCount<K extends keyof SupervisedProcessEvents>(
    event: K,
    listener?: (...args: SupervisedProcessEvents[K]) => void,
  ): number
}

/**
 * The events of a `SupervisedProcess` and their arguments: `on`, `once`,
 * `off`, `emit` and the rest accept only these names and listeners.
 * `'exit'` comes once, after the reap.
 */
export interface SupervisedProcessEvents {
  exit: [info: ExitInfo]
}

export interface ExitInfo {
  pid: number
  /** Exit status, or null when killed by a signal. */
  code: number | null
  signal: NodeJS.Signals | null
}

// ---- stop with bounded escalation ---------------------------------------------

/**
 * Sends `signal` (SIGTERM), waits up to `graceMs` for the exit, sends SIGKILL,
 * waits up to `killTimeoutMs`, and says what happened. Settles within
 * `graceMs + killTimeoutMs` plus a few milliseconds whatever the target does.
 *
 * Concurrent calls share one escalation and one result. A later call that
 * asks for more — `signal: 'SIGKILL'`, or a `graceMs`/`killTimeoutMs` that
 * ends sooner, counted from that call (defaults included: a plain `stop()`
 * brings in the spawn's `stop` defaults) — escalates the running stop at once
 * (the "second Ctrl-C"), and every caller gets the final result: SIGKILL goes
 * out at the soonest kill time any caller asked for, and the stop ends no
 * later than the soonest bound any caller asked for. A later call's other
 * options (another `signal`, `group`) do not change the running stop, and a
 * later call never delays it. Bare pids share per JS thread when `pid`,
 * `group` and `identity` are the same.
 *
 * For a `SupervisedProcess`, `exit` carries the reaped status. For a bare pid
 * (not our child), the process is pinned by a pidfd and, with `identity`,
 * checked to be the same process before anything is sent; a zombie counts as
 * exited.
 *
 * With `group`, the process group the target led when the stop began is
 * signalled, and the target itself by pid whenever it has left that group
 * (`setpgid`); the group it moved to is never signalled.
 *
 * Rejects with TypeError/RangeError on bad input (nothing is signalled), and
 * with `code: 'EPERM'` for a process we may not signal. A bare pid that is
 * pid 1 (a container's init), this process or one of its ancestors, or —
 * with `group: true` — a member of this process's own group, is refused
 * with a RangeError (`ERR_OUT_OF_RANGE`): nothing is signalled.
 */
export declare function stopSupervisedProcess(
  target: SupervisedProcess | number,
  options?: StopOptions,
): Promise<StopResult>

/**
 * Durations are milliseconds in 0..=2147483647 (2^31−1, as for
 * `setTimeout`); a fraction is rounded up to the next millisecond. Negative,
 * NaN, Infinity or larger: RangeError `ERR_OUT_OF_RANGE`, nothing sent.
 */
export interface StopOptions {
  /** Default 'SIGTERM'. */
  signal?: Signal | undefined
  /** Default 5000: time to exit after `signal`. */
  graceMs?: number | undefined
  /** Default 2000: time to vanish after SIGKILL. */
  killTimeoutMs?: number | undefined
  /** Default: true for a group leader we spawned, false for a bare pid. */
  group?: boolean | undefined
  /** Bare pid: act only if the pid is still this process. */
  identity?: string | undefined
}

export interface StopResult {
  outcome: 'already-exited' | 'exited' | 'killed' | 'unkillable'
  /**
   * True when a bare-pid stop with `identity` found a live process on the pid
   * that is not the one `identity` names (the pid was reused; a malformed
   * `identity` is refused with a TypeError instead): `outcome` is then 'already-exited' and nothing
   * was sent. False otherwise, for our own children always.
   */
  pidReused: boolean
  /** Sent, in order. */
  signals: NodeJS.Signals[]
  elapsedMs: number
  /** The reaped status when the target was ours. */
  exit: ExitInfo | null
}

// ---- waitForExit: the exit of a process that is not our child -----------------

/**
 * Resolves once the process has exited (a zombie counts), or at once when it
 * is not running or `identity` does not match (`pidReused` then says which).
 * Never reaps it: it is not ours. Watched through a pidfd, which pins the
 * process, so a pid recycled meanwhile is never mistaken for it; no polling
 * (where no pidfd can be had, liveness is polled, 1 ms doubling to 50 ms).
 *
 * `exit` is the status where the kernel gives one: from the pidfd once the
 * parent has reaped it (Linux 6.15+), or from a zombie's `/proc` entry; null
 * otherwise (no permission to see it, the polled path, or it was gone
 * before the wait began).
 *
 * An aborted `signal` rejects with an `AbortError` and leaves no fd or task
 * behind (`AbortSignal.timeout(ms)` gives a timeout).
 *
 * @throws {TypeError} pid not a number, identity not a string, unknown option;
 *   a garbled identity (`code: 'ERR_INVALID_ARG_VALUE'`).
 * @throws {RangeError} pid not an integer in 1..=4194304, or this process's own pid.
 */
export declare function waitForExit(pid: number, options?: WaitForExitOptions): Promise<WaitForExitResult>

export interface WaitForExitOptions {
  /** The process's identity (`getProcessInfo`): a different process on the pid resolves at once. */
  identity?: string | undefined
  signal?: AbortSignal | undefined
}

export interface WaitForExitResult {
  pid: number
  /** The pid was held by a different process than `identity` names. */
  pidReused: boolean
  exit: ExitInfo | null
}
// ---- Supervisor: keeps one daemon running -----------------------------------

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
export declare class Supervisor extends EventEmitter implements AsyncDisposable {
  constructor(options: SupervisorOptions)
  readonly name: string
  readonly state: SupervisorState
  /** The running child; null while none runs, and for an adopted orphan. */
  readonly child: SupervisedProcess | null
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
  // Only these events, whatever the @types/node: its EventEmitter's own
  // type map takes other names in some releases (26: with `any[]` arguments).
  on<K extends keyof SupervisorEvents>(event: K, listener: (...args: SupervisorEvents[K]) => void): this
  once<K extends keyof SupervisorEvents>(event: K, listener: (...args: SupervisorEvents[K]) => void): this
  off<K extends keyof SupervisorEvents>(event: K, listener: (...args: SupervisorEvents[K]) => void): this
  addListener<K extends keyof SupervisorEvents>(event: K, listener: (...args: SupervisorEvents[K]) => void): this
  removeListener<K extends keyof SupervisorEvents>(event: K, listener: (...args: SupervisorEvents[K]) => void): this
  prependListener<K extends keyof SupervisorEvents>(event: K, listener: (...args: SupervisorEvents[K]) => void): this
  prependOnceListener<K extends keyof SupervisorEvents>(
    event: K,
    listener: (...args: SupervisorEvents[K]) => void,
  ): this
  emit<K extends keyof SupervisorEvents>(event: K, ...args: SupervisorEvents[K]): boolean
  listenerCount<K extends keyof SupervisorEvents>(event: K, listener?: (...args: SupervisorEvents[K]) => void): number
}

/**
 * The events of a `Supervisor` and their arguments: `on`, `once`, `off`,
 * `emit` and the rest accept only these names and listeners. (`events.once(sup, 'ready')` resolves to `any[]` in Node's own
 * types; this map gives its type: `const [child] = (await once(sup, 'ready'))
 * as SupervisorEvents['ready']`.)
 */
export interface SupervisorEvents {
  /** A child was spawned (not yet ready). */
  spawn: [child: SupervisedProcess]
  /** The child passed its ready check (at once without one). */
  ready: [child: SupervisedProcess]
  /** The child was reaped and its group swept. */
  exit: [info: SupervisorExit]
  /** A restart is scheduled after `delayMs`. */
  restart: [info: SupervisorRestart]
  /** A daemon runs: a spawned child once ready, or an orphan adopted at takeover. */
  running: [info: SupervisorRunning]
  /** The supervisor gave up (`state` is now 'failed'). */
  failed: [error: Error]
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
   * process runs on. Not the faults (SIGSEGV…), SIGUSR1, SIGPROF, SIGPIPE
   * or SIGXFSZ.
   */
  handleSignals?: boolean | { hup?: 'stop' | 'forward' | undefined } | undefined
}

export type SupervisorReady =
  | { port: number; host?: string | undefined }
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

export interface SupervisorExit extends ExitInfo {
  /** Caused by our own stop() or restart(). */
  expected: boolean
}

export interface SupervisorRestart {
  /** n of the backoff schedule. */
  attempt: number
  delayMs: number
  /** null when the child could not be spawned. */
  lastExit: ExitInfo | null
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
  lastExit: ExitInfo | null
  /** When the state last changed (ISO 8601). */
  since: string
  startedAt: string | null
  readyAt: string | null
}

/**
 * The record a supervisor keeps in its stateFile, with liveness judged now,
 * for status and doctor tools. Synchronous; never takes the lock. null when
 * the file is missing or holds no such record.
 */
export declare function readSupervisorState(stateFile: string): SupervisorStateRecord | null

/**
 * Why the running processes that `record` (what `readSupervisorState(stateFile)`
 * returned) names must not be stopped or signalled on its word, or null when
 * they may be. Trusted: a record from a regular file (not a symbolic link)
 * of this process's user that no one else may write — or, for root, another
 * user's file whose running processes are all that user's. Never when it
 * names pid 1, this process, one of its ancestors, or the leader of this
 * process's group or session. Throws the fs error when the file cannot be
 * examined (`ENOENT`, ...), TypeError for bad arguments.
 */
export declare function distrustSupervisorState(stateFile: string, record: SupervisorStateRecord): string | null

/**
 * Kills a cgroup a supervisor recorded (a `SupervisorStateRecord`'s
 * `child.cgroup`) whole, if it is still that cgroup (same id) and one
 * procward made: `cgroup.kill`, then waits up to `killTimeoutMs` (default
 * 2000) for it to empty, and removes it. Resolves true when it was killed;
 * false when it is gone or not procward's (always false where there are no
 * cgroups: every OS but Linux). Rejects with TypeError/RangeError for a
 * value that cannot be a recorded cgroup.
 */
export declare function killRecordedCgroup(
  cgroup: { path: string; id: number },
  killTimeoutMs?: number,
): Promise<boolean>

export interface SupervisorStateRecord {
  version: 1
  name: string
  supervisor: {
    pid: number
    identity: string
    /** Its lock is held now. */
    running: boolean
    /** Carried by every child as PROCWARD_SUPERVISOR_MARK: how a successor finds one the record does not name. */
    mark?: string
    session?: number | null
  }
  child: {
    pid: number
    identity: string
    pgid: number | null
    session: number
    command: string
    args: string[]
    /** When it was spawned; null for a daemon a successor found that the record did not name. */
    startedAt: string | null
    /** Last time seen alive (the last write while it ran). */
    aliveAt: string
    cgroup: { path: string; id: number } | null
    /** Judged now: zombie- and reuse-aware. */
    running: boolean
    /** When it became ready; null before. */
    readyAt: string | null
    /** The child's own status text, where one was recorded (as a notify `STATUS=` line would set it); null otherwise. */
    status: string | null
  } | null
  state: SupervisorState
  restarts: number
  /** The last exit, and when it was seen. */
  lastExit: (ExitInfo & { at: string }) | null
  /** The stop policy (`spawn.stop`), so `procward stop` uses the supervisor's own grace. */
  stop: { graceMs: number; killTimeoutMs: number }
  /** The application's fields (`setMeta`), while the child runs; null otherwise. */
  meta: Record<string, unknown> | null
  updatedAt: string
}

// ---- lock ---------------------------------------------------------------------

/**
 * The lock file for `name` in `dir`: `dir/<name, encoded>.lock`, so a lock
 * per user, per identity (`resync:${identity}`) or per URL needs no
 * file-name encoding of your own. Any non-empty string is a name. The
 * encoding is one to one (two names never share a file) and stable (a lock
 * is found again by the same name in a later release): letters, digits,
 * `-`, `_` and `.` (not leading) stay, every other UTF-8 byte becomes `%xx`;
 * a name longer than 160 encoded characters keeps a readable head and a
 * SHA-256 of the whole. The result never holds a separator or NUL, is never
 * `.`/`..`, and stays within 255 bytes. Nothing is created.
 * @throws {TypeError} `dir` not a non-empty string without NUL; `name` not a
 *   non-empty string, or with a lone surrogate (it has no UTF-8).
 */
export declare function lockPath(dir: string, name: string): string

/**
 * Takes the lock on `path`: an exclusive `flock(2)` on a fresh open of the
 * file, so the kernel judges who holds it and drops it when the holder's
 * descriptor closes — on `release()`, on exit by any cause, on SIGKILL, even
 * while the dead holder is still an unreaped zombie. No heartbeat or mtime:
 * a stalled event loop never loses a live holder its lock. `flock(1)`,
 * Python's `fcntl.flock` and Go's and Rust's file locks take the same lock.
 * Two acquires in one process (one thread or two workers) exclude each other.
 *
 * The file is created if missing (`mode`, default 0o600, before the umask;
 * the directory must exist), then holds the holder's record as JSON. The
 * file is procward's: empty or a record — acquiring overwrites it and
 * `release()` empties it, so never lock a data file itself. It must not be
 * removed or replaced while held: the next acquirer then takes what the path
 * names now, and the old holder's lock no longer counts. A lock ends with `release()` or with its process or worker
 * thread, never with a garbage collection.
 *
 * Linux and macOS take it with `flock`; Windows with `LockFileEx` (an
 * exclusive lock on one byte far past the record, so the record stays
 * readable), where `mode`, `allowNetworkFs` and following a replaced file
 * while waiting do not apply (docs/platforms.md).
 *
 * @throws {TypeError} a non-string, empty or NUL-containing path; bad or
 *   unknown options (`code: 'ERR_INVALID_ARG_TYPE' | 'ERR_INVALID_ARG_VALUE'`).
 * @throws {RangeError} `wait` outside 0..2^31−1 ms, `mode` outside 0..0o777
 *   or without owner read and write (0o600).
 * @throws {LockedError} `code: 'ELOCKED'` when held (after `wait` ms, if given).
 * @throws {Error} `name: 'AbortError'` when `signal` aborts first.
 * @throws {Error} `code: 'ELOOP'` (a symlink), `'EISDIR'` / `'EINVAL'` (not a
 *   regular file, or a file on a kernel pseudo-filesystem: proc, sysfs,
 *   cgroup…; on macOS devfs, fdesc), `'EINVAL'` with `syscall: 'pread'` (not empty and not a
 *   procward record: left untouched), `'EPERM'` (owned by another uid and we
 *   are not root, or more than one hard link), `'ENOTSUP'` (a network
 *   filesystem), `'EAGAIN'` (the file kept being replaced; for a wait: no
 *   free real-time signal on Linux, or 1024 waits in progress), `'ENOENT'`,
 *   `'EACCES'`…
 *   from the OS.
 */
export declare function acquireLock(path: string, options?: AcquireLockOptions): Promise<ProcessLock>

/**
 * Never waits: the lock, or null when another holder has it (also a foreign
 * shared flock). Kept out only by shared locks, it retries for up to 10 ms
 * (a `readLock` probe in the way). Throws as `acquireLock`.
 */
export declare function tryLock(path: string, options?: TryLockOptions): ProcessLock | null

/**
 * Never takes the lock, never blocks, never creates the file: a missing file
 * is not held. Throws for a symlink or a non-regular file, as `acquireLock`.
 */
export declare function readLock(path: string): LockInfo

export interface TryLockOptions {
  /** Free text stored with the holder, e.g. 'resync alice'. At most 4096 characters. */
  purpose?: string | null | undefined
  /**
   * File mode when the file is created, before the umask. Default 0o600;
   * must include owner read and write (0o600).
   */
  mode?: number | undefined
  /**
   * Lock a file on NFS, CIFS/SMB, AFS or 9p (macOS: nfs, smbfs, afpfs,
   * webdav, ftp) anyway. There flock is emulated
   * (NFS maps it to a whole-file lock on the server) and a network partition
   * can leave two holders. Default false: `ENOTSUP`.
   */
  allowNetworkFs?: boolean | undefined
}

export interface AcquireLockOptions extends TryLockOptions {
  /**
   * false (default) or 0: reject at once with ELOCKED when held (kept out
   * only by shared locks — a `readLock` probe — it waits those out for up to
   * 100 ms). true: wait until free. A number: wait at most that many ms, then
   * ELOCKED. Waiting
   * blocks in the kernel on a thread of its own: no polling, and the lock
   * is ours within microseconds of its release or its holder's death. A
   * timeout or an abort interrupts that thread with a signal: on Linux a
   * free real-time signal; on macOS SIGURG, every other SIGURG going on to
   * the handler that was there before (a `process.on('SIGURG')`, a Go
   * library).
   */
  wait?: boolean | number | undefined
  /**
   * Abort while waiting ⇒ AbortError; nothing is left behind and the lock is
   * never taken later. Already aborted ⇒ AbortError, and the file is not touched.
   */
  signal?: AbortSignal | undefined
}

export interface LockHolder {
  pid: number
  /** The holder process's identity, as `getProcessInfo(pid).identity`. */
  identity: string
  hostname: string
  /** ISO 8601. */
  acquiredAt: string
  purpose: string | null
}

export interface LockInfo {
  /**
   * A process holds the lock exclusively right now. Another program's
   * shared flock (`flock -s`) reads as false, yet keeps acquirers out.
   */
  held: boolean
  /** The record in the file: the holder, or one that died without releasing. */
  holder: LockHolder | null
  /** Zombie- and reuse-aware; null when unknowable (another host, no record). */
  holderRunning: boolean | null
}

export declare class ProcessLock {
  private constructor()
  readonly path: string
  /** This process. */
  readonly holder: LockHolder
  /**
   * The record of a previous holder that died (or was killed) without
   * releasing; null after a clean release.
   */
  readonly reclaimedFrom: LockHolder | null
  readonly released: boolean
  /** Truncates the record, then unlocks. Idempotent. */
  release(): void
  /** `release()` */
  [Symbol.dispose](): void
  /** `release()` */
  [Symbol.asyncDispose](): Promise<void>
}

/**
 * What `acquireLock` (and a Supervisor's `start()`, for its `stateFile`)
 * rejects with when another process holds the lock. Tell it apart with
 * `isLockedError(err)`.
 */
export interface LockedError extends Error {
  code: 'ELOCKED'
  path: string
  /** The record in the file (null when the holder wrote none, e.g. flock(1)). */
  holder: LockHolder | null
  holderRunning: boolean | null
}

/**
 * True for the error `acquireLock` rejects with when the lock is held (a
 * `LockedError`: `code: 'ELOCKED'`, `path`, `holder`, `holderRunning`), also
 * when passed on by a Supervisor's `start()` or made by another copy of
 * procward in this process. False for anything else, an error from another
 * library with `code: 'ELOCKED'` included: procward's errors carry a brand.
 */
export declare function isLockedError(err: unknown): err is LockedError

// In a declaration file, this makes only what is marked `export` public (the
// helper types above stay private).
// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}
