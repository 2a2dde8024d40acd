// Stop with bounded escalation (lib/supervised.js).

import type { Signal } from './signal.js'
import type { ExitInfo, SupervisedProcess } from './spawn.js'

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

// Only what is marked `export` is public (the helper types stay private).
// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}
