// Supervised spawn: spawnSupervised and the SupervisedProcess it returns (lib/supervised.js,
// lib/spawn-options.js).

import type { Readable, Writable } from 'node:stream'
import type { ResourceUsage } from './cgroup.js'
import { TypedEventEmitter } from './emitter.js'
import type { Signal } from './signal.js'
import type { StopOptions, StopResult } from './stop.js'

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
   * macOS has no such mechanism: accepted there, without effect.
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
   * Linux: the child's file mode creation mask (0..=0o777; write it in
   * octal, `0o022`), set in the child before exec. This process's own
   * umask is unchanged. macOS (`posix_spawn` has no umask action) and
   * Windows: the spawn throws `code: 'ENOTSUP'` and starts nothing.
   *
   * @throws {RangeError} `code: 'ERR_OUT_OF_RANGE'`: not an integer in 0..=0o777.
   */
  umask?: number | undefined
  /**
   * The child's `argv[0]` (what `ps` shows). The program run is still the
   * one `command` names and resolves to, as in `child_process`.
   */
  argv0?: string | undefined
  /** Abort ⇒ `stop()` with the `stop` defaults. Already aborted ⇒ throws AbortError. */
  signal?: AbortSignal | undefined
  /** Defaults for `stop()`; checked here, so a bad one fails the spawn. */
  stop?: StopOptions | undefined
  /**
   * Linux cgroup v2: the child is born in a fresh cgroup of its own (under
   * `parent`, an existing cgroup directory such as
   * `/sys/fs/cgroup/my.slice`; default: a `procward` cgroup below this
   * process's own, inside the subtree its service manager kills), so nothing it starts can escape — not a `setsid`, a
   * double-forking daemon, or one that drops privileges (only a process
   * allowed to write to another cgroup's `cgroup.procs`, such as root, can
   * move itself out). When the leader
   * exits, the whole cgroup is killed and `'exit'` comes once it is empty
   * (or after `stop.killTimeoutMs`); `stop()`'s SIGKILL step kills the
   * cgroup; when this process dies (SIGKILL too) its contained children's
   * cgroups are killed, unless `parentDeathSignal: false`. Default false.
   *
   * @throws {Error} `code: 'ERR_CGROUP_UNAVAILABLE'` (the message says why)
   *   where cgroup v2 is not usable: not Linux, no v2 hierarchy, kernel
   *   before 5.14, a parent not delegated to this user. Never a silent
   *   fallback. See `cgroupSupport()`.
   * @throws {TypeError} `code: 'ERR_INVALID_ARG_VALUE'`: `parent` is not an
   *   absolute path of an existing cgroup v2 directory, or is a threaded
   *   cgroup (nothing is created).
   */
  cgroup?: boolean | { parent?: string | undefined } | undefined
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
export declare class SupervisedProcess<
  T extends SupervisedShape = SupervisedShape,
> extends TypedEventEmitter<SupervisedProcessEvents> {
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
   * 'pidfd-tokio' (delivered by procward's native reaper thread; runtimes
   * without libuv, or PROCWARD_EXIT_WATCH=tokio) or 'fallback' (a waiter
   * thread: no pidfd);
   * on macOS 'kqueue' (EVFILT_PROC on a native runtime task) or 'fallback';
   * on Windows 'job' (a registered wait on the process handle, then the
   * child's Job object is terminated).
   */
  readonly exitWatch: 'pidfd' | 'pidfd-tokio' | 'kqueue' | 'fallback' | 'job'
  /**
   * The child's own cgroup (its path under the cgroup2 mount) while it
   * lives; null once reaped, or without the `cgroup` option.
   */
  readonly cgroup: string | null
  /**
   * CPU time, memory and pids of the child's cgroup: live while it runs,
   * as last read before its removal after that. All null without `cgroup`.
   */
  resourceUsage(): ResourceUsage
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
}

/**
 * The events of a `SupervisedProcess` and their arguments: `on`, `once`,
 * `off`, `emit` and the rest accept only these names and listeners.
 * `'exit'` comes once, after the reap.
 */
export interface SupervisedProcessEvents {
  exit: [info: ExitInfo]
}

export interface ExitInfo {
  pid: number
  /** Exit status, or null when killed by a signal. */
  code: number | null
  signal: NodeJS.Signals | null
}

// Only what is marked `export` is public (the helper types stay private).
// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}
