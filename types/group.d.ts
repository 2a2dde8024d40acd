// SupervisorGroup: several daemons from one config (lib/group/).

import { TypedEventEmitter } from './emitter.js'
import type { SupervisedProcess } from './spawn.js'
import type { StopResult } from './stop.js'
import type {
  Supervisor,
  SupervisorExit,
  SupervisorOptions,
  SupervisorRestart,
  SupervisorRunning,
  SupervisorTakeover,
  SupervisorUnhealthy,
} from './supervisor.js'

/**
 * Several daemons, each one `Supervisor` (its own state file, takeover,
 * health, notify, exactly as alone), started in the order of their `after`
 * and stopped in reverse.
 *
 * Everything is checked in the constructor, before anything starts.
 * @throws {TypeError} a cycle in `after` (`daemons: a cycle: a -> b -> a`),
 *   an unknown name in it (`daemons.web.after: unknown daemon 'db'`), a
 *   name that is not one, two daemons with one log or state file, or a bad
 *   option of a daemon (named `daemons.<name>.<field>`); `code:
 *   'ERR_INVALID_ARG_VALUE'` or `'ERR_INVALID_ARG_TYPE'`.
 * @throws {RangeError} a number out of range (`code: 'ERR_OUT_OF_RANGE'`).
 */
export declare class SupervisorGroup extends TypedEventEmitter<SupervisorGroupEvents> {
  constructor(config: GroupConfig)
  /** Each daemon's Supervisor, by its name (its key in `daemons`), in start order. */
  readonly supervisors: ReadonlyMap<string, Supervisor>
  /**
   * Starts each daemon once every daemon in its `after` is ready (its
   * `start()` resolved), independent ones together; resolves once all are
   * ready. A daemon that does not start (its Supervisor gave up or was
   * refused, its log cannot be opened) stops the daemons started,
   * dependents first, and rejects with a `GroupStartError` naming it. A
   * `stop()` before the end rejects it with an `AbortError`. Joins a start
   * under way; after a stop under way, starts once it is done.
   */
  start(): Promise<void>
  /**
   * Stops every daemon, each once the daemons after it have stopped, and
   * closes the log files once the output of the stopped children is in
   * them. Ends a start under way. A second call shares the first; once
   * stopped, resolves at once.
   */
  stop(): Promise<void>
}

/** What `SupervisorGroup.start()` rejects with when a daemon did not start. */
export interface GroupStartError extends Error {
  code: 'ERR_SUPERVISOR_FAILED'
  /** The daemon that did not start. */
  daemon: string
  /** Why: its Supervisor's error (`start()`'s rejection), or its log's. */
  cause: unknown
}

export interface GroupConfig {
  /** Each daemon's state file, unless its `stateFile` says: `<stateDir>/<name>.json` (created, mode 0700, at start). */
  stateDir?: string | undefined
  /**
   * The group is one main process to the service manager that started this
   * process (NOTIFY_SOCKET: a systemd `Type=notify` unit): `READY=1` once
   * every daemon is ready, `STATUS=` counting those running after each
   * daemon's event, `STOPPING=1` when it stops, `WATCHDOG=1` at half
   * `WATCHDOG_USEC`. Taken at the first `start()`, before any spawn (the
   * daemons do not inherit NOTIFY_SOCKET). A daemon with `notify: true`
   * beside it is refused. Default false.
   */
  notify?: boolean | undefined
  /**
   * The daemons by name: letters, digits, `.`, `_` and `-`, not first a
   * `.` or `-`. The name is also the Supervisor's, unless its `name` says.
   */
  daemons: Record<string, GroupDaemonOptions>
}

/** One daemon of a group: its Supervisor's options, and the group's. */
export interface GroupDaemonOptions extends SupervisorOptions {
  /** Start once each of these is ready; stop before them. */
  after?: readonly string[] | undefined
  /**
   * Bytes: a daemon whose tree (its process group; with `spawn.cgroup`, its
   * cgroup) uses more is stopped with its group, as its `spawn.stop` says
   * (SIGTERM, the grace, SIGKILL), and restarted as a crash: `reason:
   * 'memory'` in `'exit'`, `'restart'`'s `lastExit` and the state file's
   * `lastExit` (a crash whatever its exit status; with `restart: 'never'`
   * it fails). Measured as the sum of the tree's resident sets (RSS) from
   * `/proc`, sampled at most every 250 ms off the JS thread: it may pass
   * the limit by what it grows in up to 250 ms and its stop's grace. With
   * `spawn.cgroup` where the memory controller is delegated, the kernel
   * holds it too (`memory.max`, the whole cgroup OOM-killed at it). An
   * adopted daemon (a takeover) is watched from its next spawn. Linux only
   * (elsewhere nothing is measured).
   */
  memoryLimit?: number | undefined
  /**
   * The daemon's stdout and stderr appended to a file (its stdout and
   * stderr are then pipes procward reads: `spawn.stdio` may set stdin only).
   */
  log?: GroupLogOptions | undefined
}

/**
 * A daemon's log file (mode 0600 when created; its directory must exist).
 * Rotated at `maxBytes` to `path.1` … `path.<keep>` (`path.1` the newest)
 * between two writes: the daemon is neither restarted nor paused, nothing
 * is lost or duplicated. Files take whole lines: a line not ended waits for
 * its newline (up to 64 KiB, or the end of its stream), and a rotation cuts
 * at the last newline that fits; a line longer than 64 KiB may be split,
 * one longer than `maxBytes` is. A slow disk slows the daemon's writes (its
 * pipe fills), never grows this process.
 */
export interface GroupLogOptions {
  path: string
  /** A file is rotated before it would grow past this many bytes; default: never rotated. */
  maxBytes?: number | undefined
  /** How many rotated files are kept, 1..=1000; default 5. */
  keep?: number | undefined
}

/** What `'memory'` says of a daemon over its limit. */
export interface GroupMemoryOver {
  /** The daemon's pid (its process group's leader). */
  pid: number
  /** Its tree's RSS at the sample that saw it over. */
  bytes: number
  limit: number
}

/** `{ name }`: the daemon an event of the group is of. */
export interface GroupEventOf {
  name: string
}

/**
 * The events of a `SupervisorGroup`: each of its Supervisors' events,
 * re-emitted with the daemon's name (`SupervisorEvents`: an object's fields
 * spread beside it, anything else under a key). A daemon that gives up
 * while the others run is its `'failed'`: the others keep running.
 */
export interface SupervisorGroupEvents {
  spawn: [event: GroupEventOf & { child: SupervisedProcess }]
  ready: [event: GroupEventOf & { child: SupervisedProcess }]
  exit: [event: GroupEventOf & SupervisorExit]
  unhealthy: [event: GroupEventOf & SupervisorUnhealthy]
  healthy: [event: GroupEventOf & { pid: number; failures: number }]
  restart: [event: GroupEventOf & SupervisorRestart]
  running: [event: GroupEventOf & SupervisorRunning]
  failed: [event: GroupEventOf & { error: Error }]
  takeover: [event: GroupEventOf & SupervisorTakeover]
  stopped: [event: GroupEventOf & { result: StopResult | null }]
  /**
   * A daemon's tree was seen over its `memoryLimit` (`bytes` measured,
   * `limit`): it is being stopped; its `'exit'` follows, `reason: 'memory'`.
   */
  memory: [event: GroupEventOf & GroupMemoryOver]
  /**
   * A line of a daemon's stdout, where its Supervisor has them (a ready
   * check on stdout, as `SupervisorEvents.stdout`). Without a listener of
   * the group's (and without a log), the Supervisor copies the stream to
   * this process's stdout instead, as alone.
   */
  stdout: [event: GroupEventOf & { line: string }]
  /** As `stdout`, for stderr. */
  stderr: [event: GroupEventOf & { line: string }]
}

// Only what is marked `export` is public (the helper types stay private).
// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}
