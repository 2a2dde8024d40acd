// `procward status` reads the record as found: a child.cgroup that is not
// { path: string, id } still gets an LSB answer (0/3/4), never a JS
// TypeError; a start time the record does not hold (an adopted daemon's
// startedAt is null) is left out, never printed as "null"/"undefined".
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { getProcessInfo } from '../../index.js'
import { cli } from '../cli/cli-process'
import { tempDirs, trackProcesses } from '../helpers'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-status-odd-')

function record(child: { pid: number; identity: string }, extra: object): object {
  const now = new Date().toISOString()
  return {
    version: 1,
    name: 'svc',
    state: 'running',
    // A supervisor that is gone (its lock is not held).
    supervisor: { pid: 4194304, identity: '' },
    child: {
      pid: child.pid,
      identity: child.identity,
      pgid: null,
      session: null,
      command: 'sleep',
      args: ['1000'],
      aliveAt: now,
      ...extra,
    },
    restarts: 0,
    lastExit: null,
    updatedAt: now,
  }
}

async function liveChild(): Promise<{ pid: number; identity: string }> {
  const p = others.spawn('sleep', ['1000'], { stdio: 'ignore' })
  const pid = p.pid as number
  const identity = getProcessInfo(pid)?.identity as string
  return { pid, identity }
}

describe('procward status on odd records', () => {
  for (const cgroup of [{ path: 5, id: 1 }, 'x', {}]) {
    it(`a child.cgroup of ${JSON.stringify(cgroup)} is an LSB answer, not a crash`, async () => {
      const child = await liveChild()
      const file = join(tempDir(), 'state.json')
      writeFileSync(file, JSON.stringify(record(child, { cgroup })), { mode: 0o600 })
      const r = await cli(others, ['status', file])
      expect(r.err).not.toMatch(/is not a function|Cannot read properties/)
      expect([0, 3, 4]).toContain(r.code)
    })
  }

  it('an adopted daemon with no recorded start prints no "null"/"undefined"', async () => {
    const child = await liveChild()
    const file = join(tempDir(), 'state.json')
    writeFileSync(file, JSON.stringify(record(child, { startedAt: null, cgroup: null })), { mode: 0o600 })
    const r = await cli(others, ['status', file])
    expect(r.code).toBe(3)
    expect(r.out).not.toMatch(/\bnull\b|\bundefined\b/)
  })
})
