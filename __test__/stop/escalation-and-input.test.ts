// Stop-side hardening: a child that left its process group, out-of-range
// durations, escalating a running stop, `pidReused`, and `undefined` in
// optional fields.
import { join } from 'node:path'
import { beforeEach, describe, expect, it } from 'vitest'
import { getProcessInfo, isProcessRunning, spawnSupervised, stopSupervisedProcess } from '../../index.js'
import {
  aliveInProcTable,
  FIXTURES,
  firstLine,
  firstLineOf,
  hasFreezer,
  isRoot,
  procState,
  reusePid,
  trackProcesses,
  waitFor,
  withFreezer,
  zombieChildren,
} from '../helpers'

const { sup, others } = trackProcesses()
const HOP = join(FIXTURES, 'group-hop.pl')

/** A process in this test process's own group: any signal to that group hits it. */
function sentinelInOurGroup(): number {
  const s = others.spawn('sleep', ['100'])
  const pid = s.pid as number
  expect(getProcessInfo(pid)?.pgid).toBe(getProcessInfo(process.pid)?.pgid)
  return pid
}

describe('a child that left its process group', () => {
  beforeEach((ctx) => {
    // In a pid namespace whose group leader lives outside it, our pgid
    // reads 0 and no child can join our group.
    if (getProcessInfo(process.pid)?.pgid === 0) ctx.skip("this process's group is outside its pid namespace")
  })
  it('is signalled by pid when its group is empty (it joined our group)', async () => {
    const sentinel = sentinelInOurGroup()
    const p = sup(HOP, ['now'], { stdio: ['ignore', 'pipe', 'inherit'] })
    await firstLineOf(p)
    expect(p.pgid).toBe(p.pid)
    expect(getProcessInfo(p.pid)?.pgid).toBe(getProcessInfo(process.pid)?.pgid)
    const r = await p.stop({ graceMs: 5000 })
    expect(r).toMatchObject({ outcome: 'exited', signals: ['SIGTERM'], exit: { signal: 'SIGTERM' } })
    expect(procState(p.pid)).toBeNull()
    // Nothing reached our own group: this process runs on, and so does the sentinel.
    expect(aliveInProcTable(sentinel)).toBe(true)
  })

  it('is signalled by pid, and its old group too, when members stayed behind', async () => {
    const sentinel = sentinelInOurGroup()
    const p = sup(HOP, ['member'], { stdio: ['ignore', 'pipe', 'inherit'], killGroupOnExit: false })
    const member = Number((await firstLineOf(p)).split(' ')[1])
    others.track(member)
    expect(getProcessInfo(member)?.pgid).toBe(p.pid)
    const r = await p.stop({ graceMs: 5000 })
    expect(r).toMatchObject({ outcome: 'exited', signals: ['SIGTERM'], exit: { signal: 'SIGTERM' } })
    await waitFor(() => !aliveInProcTable(member), 5000, 'the member left in the old group to die')
    expect(aliveInProcTable(sentinel)).toBe(true)
  })

  it('gets the SIGKILL by pid when it hopped groups on SIGTERM', async () => {
    const sentinel = sentinelInOurGroup()
    const p = sup(HOP, ['on-term'], { stdio: ['ignore', 'pipe', 'inherit'] })
    await firstLineOf(p)
    const r = await p.stop({ graceMs: 200 })
    expect(r).toMatchObject({ outcome: 'killed', signals: ['SIGTERM', 'SIGKILL'], exit: { signal: 'SIGKILL' } })
    expect(procState(p.pid)).toBeNull()
    expect(aliveInProcTable(sentinel)).toBe(true)
  })

  it('bare pid with group: true: the leader gets the SIGKILL by pid after hopping groups', async () => {
    const launcher = others.spawn('setsid', [HOP, 'daemon'])
    const pid = Number((await firstLine(launcher)).split(' ')[0])
    others.track(pid)
    expect(getProcessInfo(pid)?.pgid).toBe(pid)
    const r = await stopSupervisedProcess(pid, { group: true, graceMs: 200 })
    expect(r).toMatchObject({ outcome: 'killed', signals: ['SIGTERM', 'SIGKILL'] })
    await waitFor(() => !aliveInProcTable(pid), 2000, 'the daemon to die')
    expect(aliveInProcTable(launcher.pid as number)).toBe(true)
  })
})

describe('durations', () => {
  const MAX = 2 ** 31 - 1
  it.each([
    ['graceMs 1e23', { graceMs: 1e23 }],
    ['graceMs Number.MAX_VALUE', { graceMs: Number.MAX_VALUE }],
    ['graceMs 2^31', { graceMs: 2 ** 31 }],
    ['killTimeoutMs 2^31 - 0.5', { killTimeoutMs: MAX + 0.5 }],
    ['killTimeoutMs 1e300', { killTimeoutMs: 1e300 }],
    ['graceMs -0.5', { graceMs: -0.5 }],
  ])('rejects %s with ERR_OUT_OF_RANGE and signals nothing', async (_, options) => {
    const own = sup('sleep', ['100'])
    await expect(own.stop(options)).rejects.toMatchObject({ name: 'RangeError', code: 'ERR_OUT_OF_RANGE' })
    const bare = others.spawn('sleep', ['100'])
    await expect(stopSupervisedProcess(bare.pid as number, options)).rejects.toMatchObject({
      name: 'RangeError',
      code: 'ERR_OUT_OF_RANGE',
    })
    await new Promise((r) => setTimeout(r, 20))
    expect(own.exitInfo).toBeNull()
    expect(aliveInProcTable(bare.pid as number)).toBe(true)
  })

  it('rejects an out-of-range stop default at spawn, starting nothing', () => {
    for (const stop of [{ graceMs: 1e300 }, { killTimeoutMs: 2 ** 31 }]) {
      expect(() => spawnSupervised('sleep', ['100'], { stop })).toThrow(
        expect.objectContaining({ name: 'RangeError', code: 'ERR_OUT_OF_RANGE' }),
      )
    }
  })

  it('accepts 2^31 - 1 ms and fractions', async () => {
    const p = sup('sleep', ['100'], { stop: { graceMs: MAX, killTimeoutMs: MAX } })
    expect((await p.stop()).outcome).toBe('exited')
    const q = sup('sleep', ['100'])
    // Half a millisecond of grace: on a loaded machine sleep may not have
    // died of the SIGTERM by then, and gets the SIGKILL. Either way it is gone.
    const r = await q.stop({ graceMs: 0.5, killTimeoutMs: MAX - 0.5 })
    expect(['exited', 'killed']).toContain(r.outcome)
    expect(procState(q.pid)).toBeNull()
  })

  it('the native layer refuses what slipped past JS, without a panic', async () => {
    const native = require('../../binding.js')
    const bare = others.spawn('sleep', ['100'])
    for (const bad of [1e300, Number.MAX_VALUE, 2 ** 31, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      const opts = { signal: 15, graceMs: bad, killTimeoutMs: 0 }
      let err: unknown
      try {
        await native.stopPid(bare.pid, opts, undefined, new native.NativeStopControl())
      } catch (e) {
        err = e
      }
      // The native layer's own error object: a RangeError with its code.
      expect(err).toBeInstanceOf(RangeError)
      expect(err).toMatchObject({ code: 'ERR_OUT_OF_RANGE', message: expect.stringMatching(/^graceMs /) })
      let thrown: unknown
      try {
        new native.NativeStopControl().escalate(opts)
      } catch (e) {
        thrown = e
      }
      expect(thrown).toMatchObject({ name: 'RangeError', code: 'ERR_OUT_OF_RANGE' })
    }
    expect(aliveInProcTable(bare.pid as number)).toBe(true)
  })
})

describe('escalating a running stop', () => {
  it('a later SIGKILL escalates at once, and every caller gets the final result', async () => {
    const p = sup(join(FIXTURES, 'ignore-term.sh'), [], { stdio: ['ignore', 'pipe', 'inherit'] })
    await firstLineOf(p)
    const first = p.stop({ graceMs: 20_000 })
    await new Promise((r) => setTimeout(r, 50))
    const second = stopSupervisedProcess(p, { signal: 'SIGKILL' })
    const [a, b] = await Promise.all([first, second])
    expect(a).toBe(b)
    expect(a).toMatchObject({ outcome: 'killed', signals: ['SIGTERM', 'SIGKILL'], exit: { signal: 'SIGKILL' } })
    // Well before the first caller's grace ran out: the escalation did it.
    expect(a.elapsedMs).toBeLessThan(20_000)
  })

  it('a later call with a sooner deadline escalates too; a later one does not delay', async () => {
    const p = sup(join(FIXTURES, 'ignore-term.sh'), [], { stdio: ['ignore', 'pipe', 'inherit'] })
    await firstLineOf(p)
    const first = p.stop({ graceMs: 20_000 })
    const sooner = p.stop({ graceMs: 100 })
    const later = p.stop({ graceMs: 25_000, killTimeoutMs: 25_000 })
    const [a, b, c] = await Promise.all([first, sooner, later])
    expect(a).toBe(b)
    expect(a).toBe(c)
    expect(a).toMatchObject({ outcome: 'killed', signals: ['SIGTERM', 'SIGKILL'] })
    expect(a.elapsedMs).toBeGreaterThanOrEqual(100)
    expect(a.elapsedMs).toBeLessThan(20_000)
  })

  it('a later call with a sooner bound ends the wait after SIGKILL sooner (unkillable)', async (ctx) => {
    // Frozen by the cgroup-v1 freezer, the child outlives SIGKILL until thawed.
    if (!hasFreezer()) return ctx.skip('needs root and the cgroup-v1 freezer')
    await withFreezer(async (freezer) => {
      const p = sup('sleep', ['100'])
      await freezer.freeze(p.pid)
      const first = p.stop({ graceMs: 50, killTimeoutMs: 20_000 })
      await new Promise((r) => setTimeout(r, 200))
      const second = p.stop({ signal: 'SIGKILL', killTimeoutMs: 100 })
      const [a, b] = await Promise.all([first, second])
      expect(a).toBe(b)
      expect(a).toMatchObject({ outcome: 'unkillable', signals: ['SIGTERM', 'SIGKILL'], exit: null })
      expect(a.elapsedMs).toBeGreaterThanOrEqual(300)
      expect(a.elapsedMs).toBeLessThan(20_000)
      freezer.thaw()
      await p.exited
      expect(procState(p.pid)).toBeNull()
    })
  })

  it('an escalating call with bad options rejects alone; the running stop goes on', async () => {
    const p = sup(join(FIXTURES, 'ignore-term.sh'), [], { stdio: ['ignore', 'pipe', 'inherit'] })
    await firstLineOf(p)
    const first = p.stop({ graceMs: 100 })
    await expect(p.stop({ graceMs: -1 })).rejects.toBeInstanceOf(RangeError)
    expect((await first).outcome).toBe('killed')
  })

  it('bare pids: concurrent stops of the same pid share, and a later SIGKILL escalates', async () => {
    const launcher = others.spawn(join(FIXTURES, 'daemon.sh'), ['stubborn'])
    const pid = Number(await firstLine(launcher))
    others.track(pid)
    await waitFor(() => getProcessInfo(pid)?.ppid !== launcher.pid, 5000, 'the daemon to be orphaned')
    const first = stopSupervisedProcess(pid, { graceMs: 20_000 })
    await new Promise((r) => setTimeout(r, 50))
    const second = stopSupervisedProcess(pid, { signal: 'SIGKILL' })
    const [a, b] = await Promise.all([first, second])
    expect(a).toBe(b)
    expect(a).toMatchObject({ outcome: 'killed', signals: ['SIGTERM', 'SIGKILL'], pidReused: false })
    expect(a.elapsedMs).toBeLessThan(20_000)
    expect(aliveInProcTable(pid)).toBe(false)
  })
})

describe('pidReused', () => {
  it('is true when a bare pid now holds another process', async (ctx) => {
    if (!isRoot) return ctx.skip('forcing pid reuse needs root (/proc/sys/kernel/ns_last_pid)')
    const { pid, oldIdentity: identity, newcomer } = await reusePid(others)
    const r = await stopSupervisedProcess(pid, { identity, graceMs: 100, killTimeoutMs: 100 })
    expect(r).toEqual({ outcome: 'already-exited', pidReused: true, signals: [], elapsedMs: r.elapsedMs, exit: null })
    expect(newcomer.signalCode).toBeNull()
    expect(aliveInProcTable(pid)).toBe(true)
  })

  it('is false for a gone pid, a zombie, a match, no identity, and our own children', async () => {
    const sleeper = others.spawn('sleep', ['100'])
    const pid = sleeper.pid as number
    const identity = getProcessInfo(pid)?.identity as string
    const noIdentity = await stopSupervisedProcess(pid, { graceMs: 1000 })
    expect(noIdentity).toMatchObject({ outcome: 'exited', pidReused: false })
    if (sleeper.exitCode === null && sleeper.signalCode === null) await new Promise((r) => sleeper.once('exit', r))
    expect(await stopSupervisedProcess(pid, { identity })).toMatchObject({
      outcome: 'already-exited',
      pidReused: false,
    })

    const parent = others.spawn(join(FIXTURES, 'zombie-parent.sh'), [])
    const zombie = Number(await firstLine(parent))
    await waitFor(() => procState(zombie) === 'Z', 5000, 'the zombie')
    expect(
      await stopSupervisedProcess(zombie, { identity: getProcessInfo(process.pid)?.identity as string }),
    ).toMatchObject({
      outcome: 'already-exited',
      pidReused: false,
    })

    const match = others.spawn('sleep', ['100'])
    const matchId = getProcessInfo(match.pid as number)?.identity as string
    expect(await stopSupervisedProcess(match.pid as number, { identity: matchId })).toMatchObject({
      outcome: 'exited',
      pidReused: false,
    })

    const own = sup('sleep', ['100'])
    const r = await own.stop()
    expect(r).toEqual({
      outcome: 'exited',
      pidReused: false,
      signals: ['SIGTERM'],
      elapsedMs: r.elapsedMs,
      exit: r.exit,
    })
    expect(await own.stop()).toMatchObject({ outcome: 'already-exited', pidReused: false })
  })

  it('a malformed identity is refused before anything is sent, and the process is left alone', async () => {
    const target = others.spawn('sleep', ['100'])
    for (const identity of ['garbage', '']) {
      await expect(stopSupervisedProcess(target.pid as number, { identity })).rejects.toMatchObject({
        name: 'TypeError',
        code: 'ERR_INVALID_ARG_VALUE',
      })
    }
    expect(aliveInProcTable(target.pid as number)).toBe(true)
  })
})

describe('undefined in optional fields', () => {
  it('means "not given": the spawn stop defaults still apply', async () => {
    const p = sup(join(FIXTURES, 'ignore-term.sh'), [], {
      stdio: ['ignore', 'pipe', 'inherit'],
      stop: { signal: 'SIGKILL', graceMs: undefined },
      cwd: undefined,
      env: undefined,
      processGroup: undefined,
      signal: undefined,
    })
    await firstLineOf(p)
    expect(p.pgid).toBe(p.pid)
    const r = await p.stop({ signal: undefined, graceMs: undefined, killTimeoutMs: undefined, group: undefined })
    expect(r).toMatchObject({ outcome: 'killed', signals: ['SIGKILL'] })
  })

  it('in a bare-pid stop too', async () => {
    const target = others.spawn('sleep', ['100'])
    const r = await stopSupervisedProcess(target.pid as number, {
      signal: undefined,
      graceMs: undefined,
      killTimeoutMs: undefined,
      group: undefined,
      identity: undefined,
    })
    expect(r).toMatchObject({ outcome: 'exited', signals: ['SIGTERM'] })
  })
})

describe('unknown stop options', () => {
  it('are refused by name, in stop() and in a spawn’s stop defaults, before anything is sent', async () => {
    const p = sup('sleep', ['100'])
    await expect(p.stop({ grace: 10 } as never)).rejects.toMatchObject({
      name: 'TypeError',
      code: 'ERR_INVALID_ARG_VALUE',
      message: expect.stringContaining('options.grace '),
    })
    await expect(stopSupervisedProcess(p.pid, { timeout: 10 } as never)).rejects.toMatchObject({
      code: 'ERR_INVALID_ARG_VALUE',
    })
    expect(aliveInProcTable(p.pid)).toBe(true)
    expect(() => spawnSupervised('sleep', ['100'], { stop: { graceMS: 10 } as never })).toThrow(
      expect.objectContaining({
        code: 'ERR_INVALID_ARG_VALUE',
        message: expect.stringContaining('options.stop.graceMS'),
      }),
    )
    expect(() => spawnSupervised('sleep', ['100'], { stop: { graceMs: 1e300 } })).toThrow(
      expect.objectContaining({ code: 'ERR_OUT_OF_RANGE', message: expect.stringContaining('options.stop.graceMs') }),
    )
  })
})

describe('a stop of a child that has exited but is not reaped yet', () => {
  it('waits for the reap: the result carries the exit and the pid is gone', async () => {
    for (let i = 0; i < 20; i++) {
      const p = sup('true', [])
      // Catch the window between the exit and the native reap (the loop has
      // not run yet; the reaper beside it waits a moment for the loop).
      while (procState(p.pid) !== 'Z' && p.exitInfo === null) {
        // spin: the JS thread must not yield here
      }
      const r = await p.stop()
      expect(r.outcome).toBe('already-exited')
      expect(r.signals).toEqual([])
      expect(r.exit).toMatchObject({ pid: p.pid, code: 0 })
      // Reaped: no zombie of ours at that pid. (A busy machine may already
      // have given the pid to another process, so its state alone says
      // nothing.)
      expect(zombieChildren()).not.toContain(p.pid)
      expect(isProcessRunning(p.pid, p.identity)).toBe(false)
    }
  })
})
