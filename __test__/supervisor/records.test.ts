// What a supervisor keeps in and beside its stateFile: the temp files it
// may clean up (only its own, only a dead writer's), and the record's
// fields an application and a service manager read (meta, readyAt,
// lastExit.at, the stop policy, the child's status).
import { spawnSync } from 'node:child_process'
import { readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { readSupervisorState, Supervisor } from '../../index.js'
import { tempDirs, trackProcesses, waitFor } from '../helpers'
import { recordWhen, trackSupervisors } from './helpers'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-records-')

const supervisor = trackSupervisors()

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

type Rec = NonNullable<ReturnType<typeof readSupervisorState>> & {
  meta?: unknown
  stop?: unknown
  child: { readyAt?: string | null; status?: string | null } | null
  lastExit: { pid: number; at?: string } | null
}

const isoTime = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)

describe('the record a service manager and an application read', () => {
  it('setMeta: meta while the child runs, gone in the record of its exit; readyAt, lastExit.at, the stop policy', async () => {
    const stateFile = join(tempDir(), 'svc.json')
    const sup = supervisor({ command: 'sleep', args: ['100'], stateFile, spawn: { stop: { graceMs: 1234 } } })
    await sup.start()
    const first = sup.status().pid as number
    expect((sup as unknown as { setMeta(m: object): boolean }).setMeta({ port: 4242, tags: ['a'] })).toBe(true)
    let r = await recordWhen<Rec>(stateFile, (r) => r.meta !== null && r.meta !== undefined, 'meta in the record')
    expect(r).toMatchObject({
      meta: { port: 4242, tags: ['a'] },
      child: { pid: first, readyAt: isoTime, status: null },
      stop: { graceMs: 1234, killTimeoutMs: 2000 },
      lastExit: null,
    })

    process.kill(first, 'SIGKILL')
    // The record that reports the exit no longer advertises the meta.
    r = await recordWhen<Rec>(stateFile, (r) => r.lastExit?.pid === first, 'the record of the exit')
    expect(r.meta).toBeNull()
    expect(r.lastExit).toEqual({ pid: first, code: null, signal: 'SIGKILL', at: isoTime })
    // Nor does the record of the next child, until it is set again.
    r = await recordWhen<Rec>(stateFile, (r) => r.state === 'running' && r.child?.pid !== first, 'the next child')
    expect(r.meta).toBeNull()
    expect(Date.parse(r.child?.readyAt as string)).toBeGreaterThanOrEqual(Date.parse(r.lastExit?.at as string))
  })

  it('setMeta: false while no child runs; a TypeError for what is not a JSON object', async () => {
    const sup = supervisor({ command: 'sleep', args: ['100'] }) as Supervisor & { setMeta(m: unknown): boolean }
    expect(sup.setMeta({ a: 1 })).toBe(false)
    await sup.start()
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    for (const bad of [[1], 'port', 5, undefined, cyclic, { n: 1n }]) {
      expect(() => sup.setMeta(bad)).toThrow(TypeError)
    }
    expect(() => sup.setMeta({ big: 'x'.repeat(70_000) })).toThrow(RangeError)
    expect(sup.setMeta({ a: 1 })).toBe(true)
    expect(sup.setMeta(null)).toBe(true)
    await sup.stop()
    expect(sup.setMeta({ a: 1 })).toBe(false)
  })
})

describe('a supervisor that ended on its own', () => {
  it('stop() resolves once the last record is written and the lock released, as after a stop of its own', async () => {
    const dir = tempDir()
    const stateFile = join(dir, 'state.json')
    const sup = supervisor({ command: 'true', stateFile, restart: 'never' })
    // Asked the moment it has ended: its last record may still be on its way.
    const stopped = new Promise<void>((resolve) => sup.once('stopped', () => resolve()))
    await sup.start().catch(() => {})
    await stopped
    await sup.stop()
    expect(readdirSync(dir).filter((n) => n.endsWith('.tmp'))).toEqual([])
    const r = await recordWhen(stateFile, () => true, 'the record')
    expect(r.state).toBe('stopped')
    expect(r.supervisor.running).toBe(false)
  })
})
