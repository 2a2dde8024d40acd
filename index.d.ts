/**
 * procward: own child processes correctly.
 *
 * A zombie is never mistaken for a live process, and a reused pid is told
 * apart by `identity`.
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
 * @throws {TypeError} bad command, args, env, stdio or signal names.
 * @throws {Error} `code: 'ENOENT' | 'EACCES' | 'ENOTDIR' | …` from the OS.
 * @throws {Error} `name: 'AbortError'` when `options.signal` is already aborted.
 */
export declare function spawnSupervised(
  command: string,
  args?: readonly string[],
  options?: SpawnSupervisedOptions,
): SupervisedProcess

export interface SpawnSupervisedOptions {
  cwd?: string
  /** Default: `process.env`. Entries whose value is `undefined` are left out. */
  env?: Record<string, string | undefined>
  /** Default `['ignore', 'inherit', 'inherit']`. */
  stdio?: StdioOption | [StdioOption, StdioOption, StdioOption]
  /** Default true: the child leads a new process group (pgid = pid). */
  processGroup?: boolean
  /** Default true: SIGKILL the group after the leader exits, before it is reaped. */
  killGroupOnExit?: boolean
  /** Linux: the signal the child gets if this process dies. Default 'SIGKILL'. */
  parentDeathSignal?: Signal | false
  /** Abort ⇒ `stop()` with the `stop` defaults. Already aborted ⇒ throws AbortError. */
  signal?: AbortSignal
  /** Defaults for `stop()`. */
  stop?: StopOptions
}

export type StdioOption = 'ignore' | 'inherit' | 'pipe' | { file: string; append?: boolean }

export declare class SupervisedProcess extends EventEmitter {
  private constructor()
  readonly pid: number
  /** The child's process group id (its pid), or null with `processGroup: false`. */
  readonly pgid: number | null
  /** Equal to `getProcessInfo(pid).identity` while the child lives. */
  readonly identity: string
  /** Resolves once, after the child is reaped (and its group swept). Never rejects. */
  readonly exited: Promise<ExitInfo>
  /** null until reaped. */
  readonly exitInfo: ExitInfo | null
  readonly stdin: Writable | null
  readonly stdout: Readable | null
  readonly stderr: Readable | null
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
 * For a `SupervisedProcess`, concurrent calls share one escalation and one
 * result, and `exit` carries the reaped status. For a bare pid (not our
 * child), the process is pinned by a pidfd and, with `identity`, checked to be
 * the same process before anything is sent; a zombie counts as exited.
 *
 * Rejects with TypeError/RangeError on bad input (nothing is signalled), and
 * with `code: 'EPERM'` for a process we may not signal.
 */
export declare function stopSupervisedProcess(
  target: SupervisedProcess | number,
  options?: StopOptions,
): Promise<StopResult>

export interface StopOptions {
  /** Default 'SIGTERM'. */
  signal?: Signal
  /** Default 5000: time to exit after `signal`. */
  graceMs?: number
  /** Default 2000: time to vanish after SIGKILL. */
  killTimeoutMs?: number
  /** Default: true for a group leader we spawned, false for a bare pid. */
  group?: boolean
  /** Bare pid: act only if the pid is still this process. */
  identity?: string
}

export interface StopResult {
  outcome: 'already-exited' | 'exited' | 'killed' | 'unkillable'
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
