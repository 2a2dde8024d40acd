// Runs bin/procward.js as a real process for the CLI tests.
import type { ChildProcess, SpawnOptions } from 'node:child_process'
import { join } from 'node:path'
import { CLI, FIXTURES, NODE, type Spawned } from '../helpers'

export { CLI, NODE }
export const CLI_FIXTURES = join(__dirname, 'fixtures')
/** The HTTP daemon of the tests (fixtures/http-daemon.cjs): serves its pid and argv on `--port`. */
export const HTTP_DAEMON = join(FIXTURES, 'http-daemon.cjs')

/** `procward run FLAGS --ready-port PORT -- node http-daemon.cjs --port PORT`: the test daemon, ready once it listens. */
export function runDaemon(port: number, flags: string[] = []): string[] {
  return ['run', ...flags, '--ready-port', String(port), '--', NODE, HTTP_DAEMON, '--port', String(port)]
}

/** A running CLI, its output so far, and its end. */
export class Cli {
  readonly proc: ChildProcess
  out = ''
  err = ''
  readonly done: Promise<{ code: number | null; signal: NodeJS.Signals | null }>

  constructor(tracker: Spawned, args: string[], opts: SpawnOptions = {}, bin = CLI) {
    this.proc = tracker.spawn(NODE, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'], ...opts })
    this.proc.stdout?.on('data', (d) => (this.out += d))
    this.proc.stderr?.on('data', (d) => (this.err += d))
    // On 'close': every byte of its output is in.
    this.done = new Promise((resolve) => this.proc.once('close', (code, signal) => resolve({ code, signal })))
  }

  get pid(): number {
    return this.proc.pid as number
  }

  /** The pids of the log lines for `event` ('ready', 'spawn'). */
  pids(event: string): number[] {
    return [...this.err.matchAll(new RegExp(`: ${event} pid (\\d+)`, 'g'))].map((m) => Number(m[1]))
  }
}

/** Runs the CLI to its end. */
export async function cli(
  tracker: Spawned,
  args: string[],
  opts: SpawnOptions = {},
  bin = CLI,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string; err: string }> {
  const c = new Cli(tracker, args, opts, bin)
  const end = await c.done
  return { ...end, out: c.out, err: c.err }
}
