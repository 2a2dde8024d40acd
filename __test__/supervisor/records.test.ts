// What a supervisor keeps in and beside its stateFile: the temp files it
// may clean up (only its own, only a dead writer's), and the record's
// fields an application and a service manager read (meta, readyAt,
// lastExit.at, the stop policy, the child's status).
import { spawnSync } from 'node:child_process'
import { readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { readSupervisorState, Supervisor, type SupervisorOptions } from '../../index.js'
import { tempDirs, trackProcesses, waitFor } from '../helpers'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-records-')

const supervisors: Supervisor[] = []
afterEach(async () => {
  for (const s of supervisors.splice(0)) await s.stop({ signal: 'SIGKILL' }).catch(() => {})
})

function supervisor(options: SupervisorOptions): Supervisor {
  const s = new Supervisor(options)
  supervisors.push(s)
  return s
}

/** A pid that ran and has exited (reaped). */
function deadPid(): number {
  const r = spawnSync('sh', ['-c', 'echo $$'], { encoding: 'utf8' })
  return Number(r.stdout.trim())
}

describe('temp files beside the stateFile', () => {
  it("removes only its own file's temp files whose writer is dead", async () => {
    const dir = tempDir()
    const stateFile = join(dir, 'svc')
    const live = others.spawn('sleep', ['100']).pid as number
    const dead = deadPid()
    const names = {
      // Another supervisor's in-flight write (stateFile "svc.v2"): not ours.
      othersInFlight: `.svc.v2.${live}.1.tmp`,
      // Another supervisor's, of a stateFile named "svc.5", writer dead: not ours either.
      othersStale: `.svc.5.${dead}.1.tmp`,
      // A user's file.
      users: '.svc.notes.tmp',
      // Ours in form, but its writer runs: left alone.
      ownLive: `.svc.${live}.2.tmp`,
      // Ours, its writer dead: the only one to go.
      ownStale: `.svc.${dead}.3.tmp`,
    }
    for (const n of Object.values(names)) writeFileSync(join(dir, n), 'x')
    const sup = supervisor({ command: 'sleep', args: ['100'], stateFile })
    await sup.start()
    const expected = [names.othersInFlight, names.othersStale, names.users, names.ownLive, 'svc', 'svc.lock'].sort()
    // (Our own write may still be in flight a moment after start().)
    const written = () => {
      const now = readdirSync(dir)
      return now.includes('svc') && !now.some((n) => n.startsWith(`.svc.${process.pid}.`))
    }
    await waitFor(written, 5000, 'our own write').catch(() => {})
    expect(readdirSync(dir).sort()).toEqual(expected)
  })
})
