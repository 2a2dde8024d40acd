/**
 * procward: own child processes correctly.
 *
 * A zombie is never mistaken for a live process, and a reused pid is told
 * apart by `identity`.
 */

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
