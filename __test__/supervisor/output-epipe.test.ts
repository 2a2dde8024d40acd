// A reader of our stdout/stderr that goes away (a log shipper restarted,
// `| head`) ends the copy of a ready check's stream, and `procward run`'s
// log, never the supervisor: Node raises EPIPE as an 'error' on
// process.stdout/stderr, which uncaught would kill it (and leave the
// daemon's workers behind). With 'inherit' only the child would have seen
// EPIPE/SIGPIPE.
import type { ChildProcess } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { CLI, NODE, PROCWARD, trackProcesses, waitFor } from '../helpers'
import { eventsOf, readyThen, SUPERVISOR_COPY } from './helpers'

const { others } = trackProcesses()

const exitOf = (proc: ChildProcess) =>
  new Promise<{ code: number | null; signal: string | null }>((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) resolve({ code: proc.exitCode, signal: proc.signalCode })
    else proc.once('exit', (code, signal) => resolve({ code, signal }))
  })

describe('EPIPE on our own stdout/stderr', () => {
  it("a supervisor survives when its stdout's reader goes away while it copies a child's output", async () => {
    const options = readyThen('while :; do echo tick; sleep 0.02; done', { restart: 'never' })
    const proc = others.spawn(NODE, [SUPERVISOR_COPY, PROCWARD, JSON.stringify(options)], {
      stdio: ['ignore', 'pipe', 'ignore', 'pipe'],
    })
    const lines = eventsOf(proc)
    let exited: { code: number | null; signal: string | null } | null = null
    exitOf(proc).then((e) => (exited = e))
    await waitFor(() => lines.some((l) => l.event === 'started'), 10_000, 'the supervisor to start')
    // The reader goes away: the supervisor's fd 1 is now a pipe with no reader.
    proc.stdout?.destroy()
    const ticksAt = lines.filter((l) => l.event === 'tick').length
    // Forty more turns of its loop (the child writes every 20 ms meanwhile),
    // or its death.
    await waitFor(
      () => exited !== null || lines.filter((l) => l.event === 'tick').length >= ticksAt + 40,
      20_000,
      'the supervisor to die or keep turning',
    )
    expect(exited).toBeNull()
  })

  it('`procward run` survives when its stderr (its log) reader goes away', async () => {
    const proc = others.spawn(NODE, [CLI, 'run', '--max-restarts', '1000', '--', 'sh', '-c', 'sleep 0.05; exit 1'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    let exited: { code: number | null; signal: string | null } | null = null
    exitOf(proc).then((e) => (exited = e))
    let err = ''
    proc.stderr?.on('data', (d) => (err += d))
    await waitFor(() => /spawn pid/.test(err), 10_000, 'the first spawn')
    proc.stderr?.destroy()
    // Restarts keep logging lines; a supervisor that heard EPIPE on its log
    // as an uncaught error is dead within a few of them.
    await new Promise((r) => setTimeout(r, 3000))
    expect(exited).toBeNull()
    proc.kill('SIGTERM')
    expect(await exitOf(proc)).toEqual({ code: null, signal: 'SIGTERM' })
  })
})
