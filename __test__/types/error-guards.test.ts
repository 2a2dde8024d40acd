// The guards behind the error types (one per family) and the typed statics
// `once`/`on` of procward's emitters, against real processes, real locks
// and (where PROCWARD_TEST_PG_URL names one) a real PostgreSQL server.
import { execFileSync } from 'node:child_process'
import { EventEmitter, on, once } from 'node:events'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  acquireLock,
  cgroupSupport,
  isArgumentError,
  isLockedError,
  isPgError,
  isProcwardError,
  isSupervisorError,
  isUnavailableError,
  SupervisedProcess,
  Supervisor,
  spawnSupervised,
} from '../../index.js'
import { acquirePgLock } from '../../pg.js'
import { nodeAsNobody, PROCWARD, tempDirs, trackProcesses } from '../helpers'
import { PG_URL } from '../pg/pg-helpers'

trackProcesses()
const tempDir = tempDirs('procward-error-guards-')

const rejection = (p: Promise<unknown>) =>
  p.then(
    () => null,
    (e: unknown) => e,
  )
const thrown = (f: () => unknown) => {
  try {
    f()
  } catch (e) {
    return e
  }
  return null
}
const ALL = { isLockedError, isArgumentError, isSupervisorError, isUnavailableError, isPgError }
/** Which of the family guards say true. */
const families = (err: unknown) =>
  Object.entries(ALL)
    .filter(([, guard]) => guard(err))
    .map(([name]) => name)

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as { port: number }
  await new Promise((r) => server.close(r))
  return port
}

describe('error families', () => {
  it('an argument error: spawnSupervised refusing an empty command, a bad duration', () => {
    const empty = thrown(() => spawnSupervised(''))
    expect(empty).toBeInstanceOf(TypeError)
    expect(families(empty)).toEqual(['isArgumentError'])
    const range = thrown(() => spawnSupervised('sleep', ['1'], { stop: { graceMs: -1 } }))
    expect(range).toMatchObject({ code: 'ERR_OUT_OF_RANGE' })
    expect(families(range)).toEqual(['isArgumentError'])
    expect(isProcwardError(range)).toBe(true)
  })

  it("a held file lock's ELOCKED is a locked error with a path", async () => {
    const path = join(tempDir(), 'x.lock')
    const held = await acquireLock(path)
    try {
      const err = await rejection(acquireLock(path))
      expect(families(err)).toEqual(['isLockedError'])
      expect(err).toMatchObject({ code: 'ELOCKED', path })
      expect(err).not.toHaveProperty('key')
    } finally {
      held.release()
    }
  })

  it("a Supervisor's failure is a supervisor error, with the last exit", async () => {
    const sup = new Supervisor({ command: 'sh', args: ['-c', 'exit 3'], restart: 'never', ready: { stdout: 'never' } })
    try {
      const err = await rejection(sup.start())
      expect(families(err)).toEqual(['isSupervisorError'])
      expect(err).toMatchObject({ code: 'ERR_SUPERVISOR_FAILED', lastExit: { code: 3, signal: null } })
    } finally {
      await sup.stop()
    }
  })

  it('containment where it cannot work is an unavailable error', (ctx) => {
    // Where cgroup v2 is usable here, as nobody (root can run a check so):
    // the hierarchy is not delegated to that user.
    const code = `
      const p = require(${JSON.stringify(PROCWARD)})
      try { p.spawnSupervised('true', [], { cgroup: true }); console.log('[]') }
      catch (e) { console.log(JSON.stringify([e.code, p.isUnavailableError(e), p.isArgumentError(e), p.isLockedError(e)])) }`
    let stdout = ''
    if (!cgroupSupport().available) stdout = execFileSync(process.execPath, ['-e', code], { encoding: 'utf8' })
    else if (process.getuid?.() !== 0) return ctx.skip('cgroups are delegated to this user: nothing to refuse')
    else stdout = nodeAsNobody(code)
    if (stdout === '') return ctx.skip('cannot run node as nobody here')
    expect(JSON.parse(stdout)).toEqual(['ERR_CGROUP_UNAVAILABLE', true, false, false])
  })

  it("procward/pg's connection failure is a pg error", async () => {
    const port = await closedPort()
    const err = await rejection(acquirePgLock({ connection: `postgres://procward@127.0.0.1:${port}/x`, key: 'k' }))
    expect(families(err)).toEqual(['isPgError'])
    expect(err).toMatchObject({ code: 'ERR_PROCWARD_PG_CONNECTION' })
  })

  it.skipIf(!PG_URL)("a held PostgreSQL lock's ELOCKED is a locked error with a key, no path", async () => {
    const key = `test:guards:${process.pid}:${Date.now()}`
    const held = await acquirePgLock({ connection: PG_URL, key })
    try {
      const err = await rejection(acquirePgLock({ connection: PG_URL, key }))
      expect(families(err)).toEqual(['isLockedError'])
      expect(err).toMatchObject({ code: 'ELOCKED', key, holderRunning: null })
      expect(err).not.toHaveProperty('path')
    } finally {
      await held.release()
    }
  })

  it('are the same functions from the ESM entry', async () => {
    const esm = (await import('../../index.mjs')) as Record<string, unknown>
    for (const [name, guard] of Object.entries({ ...ALL, isProcwardError })) expect(esm[name]).toBe(guard)
  })

  it('look-alikes are none of them (but a supervisor code is judged by code: those errors carry no brand)', () => {
    for (const code of ['ELOCKED', 'ERR_INVALID_ARG_TYPE', 'ERR_CGROUP_UNAVAILABLE', 'ERR_PROCWARD_PG_QUERY']) {
      const fake = Object.assign(new TypeError(code), { code })
      expect(families(fake)).toEqual([])
      expect(isProcwardError(fake)).toBe(false)
    }
    for (const v of [undefined, null, 'ELOCKED', 0, { code: 'ERR_CRASH_LOOP' }]) expect(families(v)).toEqual([])
  })
})

describe("the emitters' static once and on", () => {
  it("are Node's events.once and events.on", () => {
    expect(Supervisor.once).toBe(EventEmitter.once)
    expect(Supervisor.on).toBe(EventEmitter.on)
    expect(SupervisedProcess.once).toBe(once)
    expect(SupervisedProcess.on).toBe(on)
  })

  it("give a child's exit and a Supervisor's ready, as their event maps say", async () => {
    const p = spawnSupervised('sh', ['-c', 'exit 7'])
    const [info] = await SupervisedProcess.once(p, 'exit')
    expect(info).toEqual({ pid: p.pid, code: 7, signal: null })

    const sup = new Supervisor({ command: 'sh', args: ['-c', 'echo up; exec sleep 60'], ready: { stdout: 'up' } })
    try {
      const lines = Supervisor.on(sup, 'stdout')
      const ready = Supervisor.once(sup, 'ready')
      await sup.start()
      const [child] = await ready
      expect(child).toBe(sup.child)
      // The ready line itself is the first 'stdout' event.
      const first = await lines.next()
      expect(first.value).toEqual(['up'])
      await lines.return?.()
    } finally {
      await sup.stop()
    }
  })
})
