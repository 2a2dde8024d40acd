// procward's own EMFILE (its fd table full) is procward's trouble: never
// counted against the daemon, never an uncaught exception, and never a
// child left running. Each fixture runs in a node of its own under a low
// RLIMIT_NOFILE (runWithFewFds) and fills its fd table itself.
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { FIXTURES, freePort, runningWithArgv, runWithFewFds, trackProcesses } from '../helpers'

trackProcesses()
const DAEMON = join(FIXTURES, 'http-daemon.cjs')

describe.skipIf(process.platform !== 'linux')("procward's own EMFILE", () => {
  it.each(['http', 'port'])(
    'a %s health check that meets it is not made: not counted against the daemon, said once',
    async (kind) => {
      const port = await freePort()
      const { stdout } = await runWithFewFds('health-emfile.cjs', DAEMON, String(port), kind)
      const r = JSON.parse(stdout)
      expect(r.filled).toBeGreaterThan(0)
      // Ten intervals out of fds: no failure counted, no stop; then checks
      // pass again, the daemon the same.
      expect(r).toMatchObject({ unhealthy: [], exits: 0, after: true, samePid: true })
      expect(r.warnings).toHaveLength(1)
      expect(r.warnings[0]).toMatchObject({ code: 'PROCWARD_HEALTH_CHECK_NOT_MADE' })
    },
  )

  it('a start with 0 to 7 fds to spare: started, or failed with EMFILE; nothing uncaught, no child left', async () => {
    const seconds = String(5_000_000 + (process.pid % 1_000_000))
    const { stdout } = await runWithFewFds('supervisor-emfile.cjs', seconds)
    const r = JSON.parse(stdout) as {
      runs: { spare: number; outcome: string; spawned: number[] }[]
      uncaught: string[]
    }
    expect(r.uncaught).toEqual([])
    expect(r.runs).toHaveLength(8)
    for (const run of r.runs) {
      expect(run.outcome).toMatch(/^(started|rejected ERR_SUPERVISOR_FAILED: .*EMFILE)/)
      expect(run.spawned).toHaveLength(run.outcome === 'started' ? 1 : 0)
    }
    // With a few to spare it starts (the first ones show the way there).
    expect(r.runs.at(-1)?.outcome).toBe('started')
    // Each daemon was stopped, and one spawned then refused (its identity
    // unreadable) was killed: none is left.
    expect(runningWithArgv(['sleep', seconds])).toEqual([])
  })
})
