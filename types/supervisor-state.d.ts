// A Supervisor's state file, for status and doctor tools (lib/supervisor/state-file.js).

import type { SupervisorExitInfo, SupervisorHealthCheck, SupervisorState } from './supervisor.js'

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
    /**
     * The pid namespace its pids are in (the inode `readlink
     * /proc/self/ns/pid` shows as `pid:[N]`). Read from another namespace
     * (a container's record on the host), nothing the record names can be
     * judged: `running` is false for both, and `distrustSupervisorState`
     * refuses to act on it.
     */
    pidNamespace?: number | null
    /** What SIGHUP does to the supervisor (`handleSignals.hup`): 'reload' lets `procward reload` signal it; null: not handled (absent in older records). */
    hup?: 'stop' | 'forward' | 'reload' | null
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
    /** Its last health check (`options.health`); null before the first (absent in a record written before health checks existed). */
    health?: SupervisorHealthCheck | null
  } | null
  /**
   * A reload's successor while it starts beside `child` (`options.listen`,
   * `reload()`); null otherwise (absent in a record written before reloads
   * existed).
   */
  next?: {
    pid: number
    identity: string
    pgid: number | null
    session: number
    command: string
    args: string[]
    startedAt: string | null
    cgroup: { path: string; id: number } | null
    running: boolean
  } | null
  state: SupervisorState
  restarts: number
  /** The last `reload()`'s outcome (`error`: why it failed); null before one (absent in older records). */
  lastReload?: { at: string; ok: boolean; from: number | null; to: number | null; error: string | null } | null
  /** The last exit, and when it was seen. */
  lastExit: (SupervisorExitInfo & { at: string }) | null
  /** The stop policy (`spawn.stop`), so `procward stop` uses the supervisor's own grace. */
  stop: { graceMs: number; killTimeoutMs: number }
  /** The application's fields (`setMeta`), while the child runs; null otherwise. */
  meta: Record<string, unknown> | null
  updatedAt: string
}

// Only what is marked `export` is public (the helper types stay private).
// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}
