// Liveness: zombie-aware, reuse-aware (lib/ and src/proc_info).

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
   * 'exiting' (Linux): every thread of it has begun to exit (killed, or a
   * last exit): its files and locks are closing, it is not a zombie yet, and
   * it no longer runs (`isProcessRunning` is false, as a lock's
   * `holderRunning`). A process whose main thread alone has ended runs on,
   * with the state of a thread that still runs. 'zombie': it has exited.
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

// Only what is marked `export` is public (the helper types stay private).
// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}
