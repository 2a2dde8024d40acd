// The supervisor's life from start() to its end, where the review found it
// wrong: a spawn that can never succeed, a stop in the spawn window, the
// 'running' event.
import { chmodSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { SupervisedProcess, Supervisor } from '../../index.js'
import { procState, tempDirs, trackProcesses } from '../helpers'
import { trackSupervisors } from './helpers'

trackProcesses()
const tempDir = tempDirs('procward-life-')

const supervisor = trackSupervisors()

type Seen = { event: string; data: unknown }
function record(sup: Supervisor): Seen[] {
  const seen: Seen[] = []
  const events = ['spawn', 'ready', 'running', 'exit', 'restart', 'failed', 'stopped', 'takeover'] as const
  for (const event of events) {
    sup.on(event, (data: unknown) => seen.push({ event, data }))
  }
  return seen
}

describe('a spawn error that cannot heal by itself', () => {
  const cases: [string, () => string][] = [
    ['ENOENT', () => join(tempDir(), 'missing')],
    [
      'EACCES',
      () => {
        const f = join(tempDir(), 'not-executable')
        writeFileSync(f, '#!/bin/sh\nexit 0\n')
        chmodSync(f, 0o644)
        return f
      },
    ],
    [
      'ENOEXEC',
      () => {
        const f = join(tempDir(), 'not-a-program')
        writeFileSync(f, Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 0, 0, 0]))
        chmodSync(f, 0o755)
        return f
      },
    ],
  ]
  for (const [code, command] of cases) {
    it(`${code}: 'failed' at once with the spawn error as cause, no restart`, async () => {
      const sup = supervisor({ command: command(), restart: 'always' })
      const seen = record(sup)
      const err = await sup.start().then(
        () => null,
        (e: Error) => e,
      )
      expect(err).toMatchObject({ code: 'ERR_SUPERVISOR_FAILED', cause: { code } })
      expect(sup.state).toBe('failed')
      expect(sup.status().restarts).toBe(0)
      expect(seen.map((s) => s.event)).toEqual(['failed'])
      expect(seen[0]?.data).toBe(err)
    })
  }
})

describe('start() and a stop() in the spawn window', () => {
  for (const when of ['at once', "in the 'spawn' listener"] as const) {
    it(`${when}: start() settles only once the child is gone (reaped) and the state is stopped`, async () => {
      const sup = supervisor({ command: 'sleep', args: ['100'], ready: () => new Promise(() => {}) })
      let child: SupervisedProcess | null = null
      let stopped: Promise<unknown> | null = null
      sup.once('spawn', (c: SupervisedProcess) => {
        child = c
        if (when !== 'at once') stopped = sup.stop()
      })
      const started = sup.start()
      if (when === 'at once') stopped = sup.stop()
      const err = await started.then(
        () => null,
        (e: Error) => e,
      )
      expect(err?.name).toBe('AbortError')
      const pid = (child as SupervisedProcess | null)?.pid as number
      // Nothing of this run is left: not running, not even a zombie.
      expect({ state: sup.state, proc: procState(pid) }).toEqual({ state: 'stopped', proc: null })
      await stopped
    })
  }
})

describe("'running'", () => {
  it('once per child, after its ready check passed, with pid, identity and adopted false', async () => {
    let pass: () => void = () => {}
    // Passes for every child once opened.
    const gate = new Promise<void>((r) => {
      pass = r
    })
    const sup = supervisor({ command: 'sleep', args: ['100'], ready: () => gate })
    const seen = record(sup)
    const started = sup.start()
    await new Promise((r) => setTimeout(r, 50))
    expect(seen.map((s) => s.event)).toEqual(['spawn'])
    pass()
    await started
    const child = sup.child as SupervisedProcess
    expect(seen.map((s) => s.event)).toEqual(['spawn', 'ready', 'running'])
    expect(seen[2]?.data).toEqual({ pid: child.pid, identity: child.identity, adopted: false })
    const again = new Promise((r) => sup.once('running', r))
    process.kill(child.pid, 'SIGKILL')
    await again
    expect(seen.filter((s) => s.event === 'running')).toHaveLength(2)
  })
})
