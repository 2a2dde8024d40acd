// procward's errors and how to tell them apart (lib/errors.js,
// lib/error-guards.js): the codes, one type and one guard per family.

import type { LockHolder } from './lock.js'
import type { ExitInfo } from './spawn.js'

/** Bad input, refused before anything is done (`TypeError` or `RangeError`). */
export type ArgumentErrorCode =
  | 'ERR_INVALID_ARG_TYPE'
  | 'ERR_INVALID_ARG_VALUE'
  | 'ERR_OUT_OF_RANGE'
  | 'ERR_UNKNOWN_SIGNAL'
  | 'ERR_INVALID_URL'
  | 'ERR_ILLEGAL_CONSTRUCTOR'

/** A `Supervisor` gave up, or a start or ready check did not get the daemon ready. */
export type SupervisorErrorCode =
  | 'ERR_CRASH_LOOP'
  | 'ERR_SUPERVISOR_FAILED'
  | 'ERR_SUPERVISOR_STOPPED'
  | 'ERR_READY_FAILED'
  | 'ERR_READY_TIMEOUT'
  | 'ERR_HEALTH_CHECK_FAILED'
  | 'ERR_HEALTH_CHECK_TIMEOUT'
  /** `reload()` without `listen`; a successor that exited before it was ready; a reload ended by `stop()` / `restart()`. */
  | 'ERR_RELOAD_WITHOUT_LISTEN'
  | 'ERR_RELOAD_FAILED'
  | 'ERR_RELOAD_ABANDONED'

/** A mechanism asked for that this system cannot give (the message says why). */
export type UnavailableErrorCode = 'ERR_CGROUP_UNAVAILABLE' | 'ERR_NOTIFY_UNAVAILABLE'

/** `procward/pg`: the driver, the server, the session, the lock's end. */
export type PgErrorCode =
  | 'ERR_PROCWARD_PG_MISSING'
  | 'ERR_PROCWARD_PG_CONNECTION'
  | 'ERR_PROCWARD_PG_QUERY'
  | 'ERR_PROCWARD_PG_NOT_A_SESSION'
  | 'ERR_PROCWARD_PG_LOCK_LOST'
  | 'ERR_PROCWARD_LOCK_LOST'
  | 'ERR_PROCWARD_PG_LOCK_RELEASED'

/** Thrown by `require('procward')` itself: no binary for this platform (docs/platforms.md). */
export type PlatformErrorCode =
  | 'ERR_PROCWARD_UNSUPPORTED_PLATFORM'
  | 'ERR_PROCWARD_BINARY_NOT_FOUND'
  | 'ERR_PROCWARD_BINARY_NOT_PACKAGED'
  | 'ERR_PROCWARD_BINARY_VERSION_MISMATCH'

/** Every `code` of procward's own (an OS failure carries the OS's: `'ENOENT'`, `'EPERM'`…). */
export type ProcwardErrorCode =
  | ArgumentErrorCode
  | 'ELOCKED'
  | SupervisorErrorCode
  | UnavailableErrorCode
  | PgErrorCode
  | PlatformErrorCode

/**
 * Any error procward made: one of its own codes, `'ABORT_ERR'` (an
 * `AbortError`), or an OS error's code (`'ENOENT'`, `'EACCES'`…, with
 * `errno` and `syscall`).
 */
export interface ProcwardError extends Error {
  code: ProcwardErrorCode | 'ABORT_ERR' | `E${string}`
  errno?: number | undefined
  syscall?: string | undefined
  path?: string | undefined
}

/** Bad input: a `TypeError` or `RangeError`, nothing done. */
export type ArgumentError = (TypeError | RangeError) & { code: ArgumentErrorCode }

/**
 * What a `Supervisor`'s `start()` / `restart()` reject with, and `'failed'`
 * gives: `lastExit` for a daemon that exited, the ready check's own error as
 * `cause`.
 */
export interface SupervisorError extends Error {
  code: SupervisorErrorCode
  lastExit?: ExitInfo | null | undefined
}

/** `cgroup` or `ready: { notify: true }` asked for where it cannot work. */
export interface UnavailableError extends Error {
  code: UnavailableErrorCode
}

/** An error of `procward/pg` other than `ELOCKED`: pg's own error as `cause` where there is one. */
export interface PgError extends Error {
  code: PgErrorCode
  /** The lock's key, for a lost or released lock (`lock.signal.reason`). */
  key?: string | undefined
}

/**
 * What `acquireLock` (and a Supervisor's `start()`, for its `stateFile`)
 * rejects with when another process holds the file lock.
 */
export interface FileLockedError extends Error {
  code: 'ELOCKED'
  path: string
  /** The record in the file (null when the holder wrote none, e.g. flock(1)). */
  holder: LockHolder | null
  holderRunning: boolean | null
}

/** What `acquirePgLock` (procward/pg) rejects with when another session holds the lock. */
export interface PgLockedError extends Error {
  code: 'ELOCKED'
  key: string
  /** The procward holder's record, while its session holds the lock; else null. */
  holder: LockHolder | null
  /** Always null: a holder on another host cannot be judged from here. */
  holderRunning: null
}

/**
 * The `ELOCKED` of a held lock: a file lock's (`path`) or a PostgreSQL
 * lock's (`key`). Tell them apart with `'path' in err` / `'key' in err`.
 */
export type LockedError = FileLockedError | PgLockedError

/**
 * True for the error `acquireLock` or `acquirePgLock` rejects with when the
 * lock is held (also when passed on by a Supervisor's `start()` or made by
 * another copy of procward in this process). False for anything else, an
 * error from another library with `code: 'ELOCKED'` included: procward's
 * errors carry a brand.
 */
export declare function isLockedError(err: unknown): err is LockedError

/** True for any error procward made (by its brand, from any copy of procward in this process). */
export declare function isProcwardError(err: unknown): err is ProcwardError

/** True for procward's refusal of bad input (`ArgumentErrorCode`). */
export declare function isArgumentError(err: unknown): err is ArgumentError

/**
 * True for a Supervisor's own errors (`SupervisorErrorCode`), judged by code
 * and class: they carry no brand.
 */
export declare function isSupervisorError(err: unknown): err is SupervisorError

/** True for `ERR_CGROUP_UNAVAILABLE` and `ERR_NOTIFY_UNAVAILABLE`. */
export declare function isUnavailableError(err: unknown): err is UnavailableError

/** True for the errors of `procward/pg` (`PgErrorCode`) other than `ELOCKED`, `ERR_PROCWARD_PG_MISSING` included. */
export declare function isPgError(err: unknown): err is PgError

// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}
