// Issue 23 item 3: a service manager's stop signals procward and its daemon
// at once (systemd's default KillMode). When procward hears of the daemon's
// death before its own SIGTERM, that death is no crash: no new daemon may
// be started once a stop signal has reached procward.
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { Cli } from '../cli/cli-process'
import { aliveInProcTable, FIXTURES, jsonLines, NODE, PROCWARD, procState, trackProcesses, waitFor } from '../helpers'

const { others } = trackProcesses()

const TRIALS = 12

/** A daemon that dies of SIGTERM. */
const SLEEPER = ['sleep', '100']
/** A daemon that handles SIGTERM and exits 0 (its end is an exit with a code, not a death by a signal). */
const GRACEFUL = ['sh', '-c', 'trap "exit 0" TERM; sleep 100 & wait $!']

/** A `procward run` with its daemon spawned: the CLI and the daemon's pid. */
async function started(daemonCommand = SLEEPER): Promise<{ c: Cli; daemon: number }> {
  const c = new Cli(others, ['run', '--restart', 'always', '--', ...daemonCommand])
  await waitFor(() => c.pids('spawn').length >= 1, 10_000, 'the spawn')
  const daemon = c.pids('spawn')[0] as number
  await waitFor(() => procState(daemon) === 'S', 10_000, 'the daemon to sleep')
  return { c, daemon }
}

/**
 * SIGTERM to the daemon, which may be gone already: on a loaded machine
 * this process can be descheduled between the two kills, and procward,
 * having heard its own SIGTERM, stops and reaps the daemon first. That
 * trial still counts: no new daemon may follow either way.
 */
function killDaemon(daemon: number): void {
  try {
    process.kill(daemon, 'SIGTERM')
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e
  }
}

async function spawnsAfter(c: Cli): Promise<number> {
  const end = await c.done
  expect(end.signal).toBe('SIGTERM')
  return c.pids('spawn').length
}

describe.skipIf(process.platform !== 'linux')('a stop signal sent to procward and its daemon at once', () => {
  it('starts no new daemon: SIGTERM to procward, then at once to the daemon', async () => {
    const spawns: number[] = []
    for (let i = 0; i < TRIALS; i++) {
      const { c, daemon } = await started()
      process.kill(c.pid, 'SIGTERM')
      killDaemon(daemon)
      spawns.push(await spawnsAfter(c))
    }
    expect(spawns).toEqual(Array(TRIALS).fill(1))
  }, 120_000)

  it.each([
    ['dies of SIGTERM', SLEEPER],
    ['handles SIGTERM and exits 0 (seen in a real systemd)', GRACEFUL],
  ])(
    'starts no new daemon when procward was stopped (SIGSTOP) while both were signalled: a daemon that %s',
    async (_, command) => {
      const spawns: number[] = []
      for (let i = 0; i < TRIALS; i++) {
        const { c, daemon } = await started(command)
        process.kill(c.pid, 'SIGSTOP')
        await waitFor(() => procState(c.pid) === 'T', 10_000, 'procward to stop')
        process.kill(c.pid, 'SIGTERM')
        process.kill(daemon, 'SIGTERM')
        // The daemon's death is waiting for procward when it resumes, beside its own SIGTERM.
        await waitFor(() => !aliveInProcTable(daemon) || procState(daemon) === 'Z', 10_000, 'the daemon to die')
        process.kill(c.pid, 'SIGCONT')
        spawns.push(await spawnsAfter(c))
      }
      expect(spawns).toEqual(Array(TRIALS).fill(1))
    },
    120_000,
  )

  // The same race for an application that stops its supervisor from a
  // SIGTERM handler of its own (handleSignals off, the default): the
  // daemon's end must wait for that handler too.
  const OWN_HANDLER = join(FIXTURES, 'own-stop-handler.cjs')

  it.each([
    ['dies of SIGTERM', SLEEPER],
    ['handles SIGTERM and exits 0', GRACEFUL],
  ])(
    "starts no new daemon when the application's own SIGTERM handler stops the supervisor: a daemon that %s",
    async (_, [command, ...args]) => {
      const spawns: number[] = []
      for (let i = 0; i < TRIALS; i++) {
        const options = { command, args, restart: 'always' }
        const app = others.spawn(NODE, [OWN_HANDLER, PROCWARD, JSON.stringify(options)])
        const events = jsonLines<{ event: string; pid?: number }>(app.stdout)
        const exited = new Promise<number | null>((r) => app.once('exit', (code) => r(code)))
        await waitFor(() => events.length >= 1, 10_000, 'the spawn')
        const daemon = events[0]?.pid as number
        await waitFor(() => procState(daemon) === 'S', 10_000, 'the daemon to sleep')
        const pid = app.pid as number
        process.kill(pid, 'SIGSTOP')
        await waitFor(() => procState(pid) === 'T', 10_000, 'the application to stop')
        process.kill(pid, 'SIGTERM')
        process.kill(daemon, 'SIGTERM')
        await waitFor(() => !aliveInProcTable(daemon) || procState(daemon) === 'Z', 10_000, 'the daemon to die')
        process.kill(pid, 'SIGCONT')
        expect(await exited).toBe(0)
        expect(events.at(-1)?.event).toBe('stopped')
        spawns.push(events.filter((e) => e.event === 'spawn').length)
      }
      expect(spawns).toEqual(Array(TRIALS).fill(1))
    },
    120_000,
  )
})
