// Type tests of exec, checked by `tsc -p tsconfig.json` (with
// exactOptionalPropertyTypes), never run: each line either compiles or
// carries @ts-expect-error, which fails the check when the line compiles.
import {
  type ExecError,
  type ExecErrorCode,
  type ExecOptions,
  type ExecResult,
  exec,
  isExecError,
  isProcwardError,
  type Signal,
  type StopResult,
} from '../../index.js'

/** True only when A and B are the same type. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
function assertType<T extends true>(_: T = true as T): void {}

export async function outputFollowsEncoding(options: ExecOptions): Promise<void> {
  const text = await exec('git', ['fetch'])
  assertType<Equal<typeof text, ExecResult<string>>>()
  assertType<Equal<typeof text.stdout, string>>()
  const utf8 = await exec('git', [], { encoding: 'utf8' })
  assertType<Equal<typeof utf8.stderr, string>>()
  const bytes = await exec('git', [], { encoding: 'buffer' })
  assertType<Equal<typeof bytes.stdout, Uint8Array>>()
  // Options not known statically: either.
  const either = await exec('git', [], options)
  assertType<Equal<typeof either.stdout, string | Uint8Array>>()
  assertType<Equal<typeof text.code, number | null>>()
  assertType<Equal<typeof text.signal, Signal | null>>()
  assertType<Equal<typeof text.stop, StopResult | null>>()
  assertType<Equal<typeof text.timedOut, boolean>>()
  // No args, no options.
  void exec('true')
}

export function optionsAreTyped(): void {
  const all: ExecOptions = {
    input: undefined,
    timeout: undefined,
    signal: undefined,
    stop: undefined,
    maxBuffer: undefined,
    encoding: undefined,
    stdout: undefined,
    stderr: undefined,
    reject: undefined,
    cwd: undefined,
    env: undefined,
    cgroup: undefined,
  }
  const given: ExecOptions = {
    input: new Uint8Array([1]),
    timeout: 1000,
    signal: AbortSignal.timeout(5000),
    stop: { graceMs: 500 },
    maxBuffer: 1 << 20,
    stdout: 'inherit',
    stderr: 'ignore',
    reject: false,
    cgroup: true,
  }
  void [all, given, { input: 'text' } satisfies ExecOptions]
  // @ts-expect-error exec's stdin is `input`: no stdio
  void exec('true', [], { stdio: 'pipe' })
  // @ts-expect-error not an encoding of exec's
  void exec('true', [], { encoding: 'latin1' })
  // @ts-expect-error input is a string or bytes
  void exec('true', [], { input: 42 })
  // @ts-expect-error stdout is 'pipe' | 'inherit' | 'ignore'
  void exec('true', [], { stdout: { file: '/tmp/x' } })
  // @ts-expect-error args are strings
  void exec('true', [1])
}

export function errorsAreTyped(err: unknown): void {
  if (isExecError(err)) {
    assertType<Equal<typeof err.code, ExecErrorCode>>()
    assertType<Equal<typeof err.exitCode, number | null>>()
    assertType<Equal<typeof err.result, ExecResult>>()
    assertType<Equal<typeof err.stdout, string | Uint8Array>>()
    assertType<Equal<typeof err.name, 'ExecError' | 'AbortError'>>()
    const e: Error = err
    void e
  }
  const code: ExecErrorCode = 'ERR_EXEC_MAX_BUFFER'
  // @ts-expect-error not a code of exec's
  const other: ExecErrorCode = 'ERR_EXEC_OTHER'
  void [code, other]
  // An ExecError is made by exec only.
  // @ts-expect-error private constructor
  void new (null as unknown as typeof ExecError)('x')
  // And procward's brand covers it.
  if (isExecError(err) && isProcwardError(err)) void err.code
}
