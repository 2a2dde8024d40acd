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

// ---- lock ---------------------------------------------------------------------

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
 * the directory must exist), then holds the holder's record as JSON. It is
 * never removed. A lock ends with `release()` or with its process or worker
 * thread, never with a garbage collection.
 *
 * @throws {TypeError} a non-string, empty or NUL-containing path; bad or
 *   unknown options (`code: 'ERR_INVALID_ARG_TYPE' | 'ERR_INVALID_ARG_VALUE'`).
 * @throws {RangeError} `wait` outside 0..2^31−1 ms, `mode` outside 0..0o777.
 * @throws {LockedError} `code: 'ELOCKED'` when held (after `wait` ms, if given).
 * @throws {Error} `name: 'AbortError'` when `signal` aborts first.
 * @throws {Error} `code: 'ELOOP'` (a symlink), `'EISDIR'` / `'EINVAL'` (not a
 *   regular file), `'EPERM'` (owned by another uid, and we are not root),
 *   `'ENOTSUP'` (a network filesystem), `'ENOENT'`, `'EACCES'`… from the OS.
 */
export declare function acquireLock(path: string, options?: AcquireLockOptions): Promise<ProcessLock>

/** Never waits: the lock, or null when another holder has it. Throws as `acquireLock`. */
export declare function tryLock(path: string, options?: TryLockOptions): ProcessLock | null

/**
 * Never takes the lock, never blocks, never creates the file: a missing file
 * is not held. Throws for a symlink or a non-regular file, as `acquireLock`.
 */
export declare function readLock(path: string): LockInfo

export interface TryLockOptions {
  /** Free text stored with the holder, e.g. 'resync alice'. At most 4096 characters. */
  purpose?: string | null
  /** File mode when the file is created, before the umask. Default 0o600. */
  mode?: number
  /**
   * Lock a file on NFS, CIFS/SMB, AFS or 9p anyway. There flock is emulated
   * (NFS maps it to a whole-file lock on the server) and a network partition
   * can leave two holders. Default false: `ENOTSUP`.
   */
  allowNetworkFs?: boolean
}

export interface AcquireLockOptions extends TryLockOptions {
  /**
   * false (default) or 0: reject at once with ELOCKED when held (kept out
   * only by shared locks — a `readLock` probe — it waits those out for up to
   * 100 ms). true: wait until free. A number: wait at most that many ms, then
   * ELOCKED. Waiting
   * blocks in the kernel on a thread of its own: no polling, and the lock
   * is ours within microseconds of its release or its holder's death.
   */
  wait?: boolean | number
  /**
   * Abort while waiting ⇒ AbortError; nothing is left behind and the lock is
   * never taken later. Already aborted ⇒ AbortError, and the file is not touched.
   */
  signal?: AbortSignal
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
  /** A process holds the lock (exclusively) right now. */
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

/** What `acquireLock` rejects with when another process holds the lock. */
export interface LockedError extends Error {
  code: 'ELOCKED'
  path: string
  /** The record in the file (null when the holder wrote none, e.g. flock(1)). */
  holder: LockHolder | null
  holderRunning: boolean | null
}
