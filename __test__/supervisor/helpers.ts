// Helpers for the Supervisor's tests: supervisors stopped after every test,
// the state file's record, supervisors in processes of their own.
import type { ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import { afterEach } from 'vitest'
import { readSupervisorState, Supervisor, type SupervisorOptions } from '../../index.js'
import { FIXTURES, jsonLines, type Spawned, waitFor } from '../helpers'

/** Per test file: `supervisor(options)` makes a Supervisor, SIGKILL-stopped after each test. */
export function trackSupervisors(): (options: SupervisorOptions) => Supervisor {
  const supervisors: Supervisor[] = []
  afterEach(async () => {
    for (const s of supervisors.splice(0)) await s.stop({ signal: 'SIGKILL' }).catch(() => {})
  })
  return (options) => {
    const s = new Supervisor(options)
    supervisors.push(s)
    return s
  }
}

export type StateRecord = NonNullable<ReturnType<typeof readSupervisorState>>

/** The state file's record, once `cond` holds for it (the record it held for). */
export async function recordWhen<R = StateRecord>(
  stateFile: string,
  cond: (r: R) => boolean,
  what: string,
): Promise<R> {
  let r: R | null = null
  await waitFor(
    () => {
      r = readSupervisorState(stateFile) as R | null
      return r !== null && cond(r)
    },
    10_000,
    what,
  )
  return r as unknown as R
}

/** fixtures/supervisor-copy.cjs: a supervisor in a process of its own, its events on fd 3. */
export const SUPERVISOR_COPY = join(FIXTURES, 'supervisor-copy.cjs')

/** A supervisor's options for `sh -c 'echo ready; SCRIPT'`, ready at that first line on its stdout; then `more`. */
export function readyThen(script: string, more: Partial<SupervisorOptions> = {}): SupervisorOptions {
  return { command: 'sh', args: ['-c', `echo ready; ${script}`], ready: { stdout: 'ready' }, ...more }
}

export type EventLine = Record<string, unknown> & { event: string }

/** A supervisor-copy.cjs process's events (JSON lines on its fd 3), as they come. */
export function eventsOf(proc: ChildProcess): EventLine[] {
  return jsonLines<EventLine>(proc.stdio[3] as NodeJS.ReadableStream | null)
}

// python3 holds the master of a new pty and never reads it; its command
// gets the slave as stdout and stderr (and our fd 3 passed on).
const HOLD_PTY = [
  'import os, pty, subprocess, sys',
  'm, s = pty.openpty()',
  'p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=s, stderr=s, pass_fds=(3,))',
  'os.close(s)',
  'sys.exit(p.wait())',
].join('\n')

/**
 * Runs `argv` with a terminal nobody reads as its stdout and stderr (a
 * stalled terminal: once full, a write to it blocks), and a pipe as fd 3.
 * Exits with its command's status (a death by signal N as 256 - N).
 */
export function onStalledTerminal(tracker: Spawned, argv: string[]): ChildProcess {
  return tracker.spawn('python3', ['-c', HOLD_PTY, ...argv], { stdio: ['ignore', 'ignore', 'inherit', 'pipe'] })
}
