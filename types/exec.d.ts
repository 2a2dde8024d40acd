// exec: a command run to completion, its whole tree bounded (lib/exec.js).

import type { Signal } from './signal.js'
import type { SpawnSupervisedOptions } from './spawn.js'
import type { StopResult } from './stop.js'

/**
 * Runs `command` (no shell) to completion and captures its stdout and stderr
 * byte for byte. A `timeout`, an abort of `signal` or an output past
 * `maxBuffer` stops the child's whole process group — with `cgroup: true`
 * everything it started — through the child's own `stop()` (TERM, the
 * `stop` grace, KILL): unlike child_process's and execa's `timeout`, which
 * signal the child alone, nothing it started is left running.
 *
 * Resolves with the result once the child is reaped (its group swept) and
 * its output read to the end. Rejects with an `ExecError` for a non-zero
 * exit, a death by signal, a timeout, an abort or `maxBuffer` (resolves with
 * the result instead with `reject: false`).
 *
 * The result's output types follow `encoding`: strings by default,
 * `Uint8Array` (a `Buffer`) with `encoding: 'buffer'`.
 *
 * @throws {TypeError} (a rejection; nothing started) bad command, args or
 *   options, an option exec does not have (`code: 'ERR_INVALID_ARG_VALUE'`),
 *   an `input` that is neither a string nor a `Uint8Array`.
 * @throws {RangeError} `code: 'ERR_OUT_OF_RANGE'` (a rejection; nothing
 *   started): a negative or fractional `maxBuffer`, a `timeout` that is
 *   negative, NaN or past 2^31−1 ms.
 * @throws {Error} `name: 'AbortError'`, `code: 'ABORT_ERR'` (a rejection;
 *   nothing started): `signal` aborted before the start.
 * @throws {Error} `code: 'ENOENT' | 'EACCES' | …` (a rejection, also with
 *   `reject: false`: there was no run): the command could not be started,
 *   worded as child_process words it (`spawn <command> ENOENT`).
 */
export declare function exec<E extends ExecEncoding | undefined = undefined>(
  command: string,
  args?: readonly string[],
  options?: ExecOptions & { encoding?: E },
): Promise<ExecResult<OutputOf<E>>>

export type ExecEncoding = 'utf8' | 'buffer'
/** Where a stream goes: captured ('pipe'), this process's own, or nowhere. */
export type ExecOutput = 'pipe' | 'inherit' | 'ignore'

type OutputOf<E> = E extends 'buffer' ? Uint8Array : string

/** `spawnSupervised`'s options but `stdio`, and exec's own. */
export interface ExecOptions extends Omit<SpawnSupervisedOptions, 'stdio'> {
  /** Written to the child's stdin, which is then closed. Default: stdin is /dev/null. */
  input?: string | Uint8Array | undefined
  /**
   * Milliseconds (0..=2^31−1) until the child's whole group is stopped and
   * the run rejects with `ERR_EXEC_TIMEOUT`. Default 0: no timeout (as in
   * child_process).
   */
  timeout?: number | undefined
  /** Abort: the same stop as a timeout, then `ABORT_ERR`. Already aborted: nothing starts. */
  signal?: AbortSignal | undefined
  /**
   * Bytes kept per stream (default 64 MiB, `Infinity` for no bound). One
   * byte more: the output is cut at exactly `maxBuffer` bytes, the child's
   * group stopped and the run rejected with `ERR_EXEC_MAX_BUFFER`. Text
   * output is kept to the longest string the runtime can make
   * (`buffer.constants.MAX_STRING_LENGTH`, about 512 MiB) whatever this
   * says; `encoding: 'buffer'` to `buffer.constants.MAX_LENGTH` bytes.
   */
  maxBuffer?: number | undefined
  /** Default 'utf8': the output as strings; 'buffer': as bytes. */
  encoding?: ExecEncoding | undefined
  /** Default 'pipe' (captured into the result). */
  stdout?: ExecOutput | undefined
  /** Default 'pipe' (captured into the result). */
  stderr?: ExecOutput | undefined
  /** Default true: anything but an exit with code 0 rejects with an ExecError. */
  reject?: boolean | undefined
}

export interface ExecResult<Output extends string | Uint8Array = string | Uint8Array> {
  command: string
  args: string[]
  pid: number
  /** The exit code, or null for a death by signal. */
  code: number | null
  signal: Signal | null
  /**
   * Byte-exact as written (nothing stripped); empty unless 'pipe'; cut at
   * `maxBuffer` (a string: before a character the cut would split).
   */
  stdout: Output
  stderr: Output
  /** The `timeout` stopped it. */
  timedOut: boolean
  /** `signal` was aborted while it ran. */
  aborted: boolean
  /** An output went past `maxBuffer` (and was cut there). */
  maxBufferExceeded: boolean
  /** From the start to the end of the output. */
  elapsedMs: number
  /** The stop a timeout, an abort or `maxBuffer` made; null when none was needed. */
  stop: StopResult | null
}

export type ExecErrorCode = 'ERR_EXEC_FAILED' | 'ERR_EXEC_TIMEOUT' | 'ERR_EXEC_MAX_BUFFER' | 'ABORT_ERR'

/**
 * The rejection of a run that did not end with code 0. Carries the result's
 * fields (its exit code as `exitCode`: `code` is the error's), and the whole
 * result as `result`. `name` is 'AbortError' for `ABORT_ERR` (the abort's
 * reason as `cause`), 'ExecError' otherwise.
 */
export declare class ExecError<Output extends string | Uint8Array = string | Uint8Array> extends Error {
  private constructor()
  name: 'ExecError' | 'AbortError'
  code: ExecErrorCode
  exitCode: number | null
  result: ExecResult<Output>
}
/** The result's fields but `code` (merged into the class above). */
export interface ExecError<Output extends string | Uint8Array = string | Uint8Array>
  extends Omit<ExecResult<Output>, 'code'> {}

/** True for the rejection of `exec` (from any copy of procward in this process). */
export declare function isExecError(err: unknown): err is ExecError

// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}
