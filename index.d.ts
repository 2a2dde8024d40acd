/**
 * procward: own child processes correctly.
 *
 * A zombie is never mistaken for a live process, and a reused pid is told
 * apart by `identity`.
 *
 * Every optional field accepts `undefined` (also under
 * `exactOptionalPropertyTypes`), which means the same as leaving it out.
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
 * @throws {TypeError} pid not a number, or identity not a string.
 * @throws {RangeError} pid not an integer in 1..=4194304.
 */
export declare function isProcessRunning(pid: number, identity?: string): boolean

/** A snapshot, or null when no such process exists. */
export declare function getProcessInfo(pid: number): ProcessInfo | null

export interface ProcessInfo {
  pid: number
  ppid: number
  pgid: number
  state: 'running' | 'sleeping' | 'disk-sleep' | 'stopped' | 'zombie' | 'dead' | 'idle' | 'other'
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
}

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
   * 'pidfd-tokio' (a native runtime task; runtimes without libuv, or
   * PROCWARD_EXIT_WATCH=tokio) or 'fallback' (a waiter thread: no pidfd).
   */
  readonly exitWatch: 'pidfd' | 'pidfd-tokio' | 'fallback'
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
  on(event: 'exit', listener: (info: ExitInfo) => void): this
  once(event: 'exit', listener: (info: ExitInfo) => void): this
  off(event: 'exit', listener: (info: ExitInfo) => void): this
  addListener(event: 'exit', listener: (info: ExitInfo) => void): this
  removeListener(event: 'exit', listener: (info: ExitInfo) => void): this
  emit(event: 'exit', info: ExitInfo): boolean
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
 * with `code: 'EPERM'` for a process we may not signal.
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
   * `identity` counts too): `outcome` is then 'already-exited' and nothing
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
 * @throws {TypeError} pid not a number, identity not a string, unknown option.
 * @throws {RangeError} pid not an integer in 1..=4194304, or this process's own pid.
 */
export declare function waitForExit(pid: number, options?: WaitForExitOptions): Promise<WaitForExitResult>

export interface WaitForExitOptions {
  /** The process's identity (`getProcessInfo`): a different process on the pid resolves at once. */
  identity?: string
  signal?: AbortSignal
}

export interface WaitForExitResult {
  pid: number
  /** The pid was held by a different process than `identity` names. */
  pidReused: boolean
  exit: ExitInfo | null
}
// In a declaration file, this makes only what is marked `export` public (the
// helper types above stay private).
// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}
