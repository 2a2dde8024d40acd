// waitForExit: the exit of a process that is not our child (lib/wait.js).

import type { ExitInfo } from './spawn.js'

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

// Only what is marked `export` is public (the helper types stay private).
// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}
