// Health after ready: a daemon alive but no longer serving (SIGSTOPped, its
// listener closed, answering 500 or too slowly) is stopped with its whole
// group and restarted as after a crash, backoff and crash-loop limits
// included; one that fails a check and recovers is not. The checks never
// overlap nor block the loop, and a late result does nothing. Real daemons
// (fixtures/http-daemon.cjs); bounds on correctness, never on speed.
import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import {
  readSupervisorState,
  type SupervisedProcess,
  type SupervisorExit,
  type SupervisorOptions,
  type SupervisorUnhealthy,
} from '../../index.js'
import { aliveInProcTable, FIXTURES, freePort, tempDirs, thrown, trackProcesses, waitFor } from '../helpers'
import { trackSupervisors } from './helpers'

trackProcesses()
// Before trackSupervisors: after-each hooks run last-registered first, so
// the supervisors are stopped before their state files' dirs are removed
// (a check every 2 ms rewrote a state file into a dir being removed:
// ENOTEMPTY).
const tempDir = tempDirs('procward-health-')
const supervisor = trackSupervisors()
const require = createRequire(__filename)
const { rowOf } = require('../../lib/supervisor/transitions.js') as {
  rowOf(sub: string, event: string): { to?: string; run?: string } | undefined
}
const DAEMON = join(FIXTURES, 'http-daemon.cjs')

/** The live pids whose process group is `pgid`, from /proc (a zombie is dead: its reaper may be slow). */
function groupMembers(pgid: number): number[] {
  const out: number[] = []
  for (const ent of readdirSync('/proc')) {
    if (!/^\d+$/.test(ent)) continue
    try {
      const stat = readFileSync(`/proc/${ent}/stat`, 'latin1')
      const pid = Number(ent)
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) === pgid && aliveInProcTable(pid)) out.push(pid)
    } catch {
      // gone meanwhile
    }
  }
  return out
}

/** A supervised http-daemon.cjs on a free port, with `health`; its events collected. */
async function daemon(health: (port: number) => SupervisorOptions['health'], extra: Partial<SupervisorOptions> = {}) {
  const port = await freePort()
  const { args = [], ...rest } = extra
  const sup = supervisor({
    command: process.execPath,
    args: [DAEMON, '--port', String(port), ...args],
    ready: { port },
    spawn: { stop: { graceMs: 2000 }, stdio: ['ignore', 'ignore', 'inherit'] },
    ...rest,
    health: health(port),
  })
  const exits: SupervisorExit[] = []
  const unhealthy: SupervisorUnhealthy[] = []
  const healthy: { pid: number; failures: number }[] = []
  const order: string[] = []
  sup.on('exit', (e) => {
    exits.push(e)
    order.push('exit')
  })
  sup.on('unhealthy', (u) => {
    unhealthy.push(u)
    order.push('unhealthy')
  })
  sup.on('healthy', (h) => {
    healthy.push(h)
    order.push('healthy')
  })
  return { sup, port, exits, unhealthy, healthy, order }
}

const nextReady = (sup: { once(e: 'ready', l: (c: SupervisedProcess) => void): unknown }) =>
  new Promise<SupervisedProcess>((resolve) => sup.once('ready', resolve))

describe.skipIf(process.platform !== 'linux')('health after ready', () => {
  it('a SIGSTOPped daemon (and its group) is stopped after `failures` failed checks and restarted: reason unhealthy', async () => {
    const stateFile = join(tempDir(), 'web.json')
    const port = await freePort()
    // A worker in the daemon's group: the whole group must go.
    const script = `sleep 1000 & exec "${process.execPath}" "${DAEMON}" --port ${port}`
    const sup = supervisor({
      command: 'sh',
      args: ['-c', script],
      ready: { port },
      stateFile,
      // A daemon that exits 0 on SIGTERM: still a failure, restarted.
      restart: 'on-failure',
      spawn: { stop: { graceMs: 2000 }, stdio: ['ignore', 'ignore', 'inherit'] },
      // Its timeout far above a local answer's time, even on a loaded machine:
      // only the SIGSTOP may fail a check.
      health: { check: { http: `http://127.0.0.1:${port}/` }, intervalMs: 300, timeoutMs: 250, failures: 2 },
    })
    const exits: SupervisorExit[] = []
    const unhealthy: SupervisorUnhealthy[] = []
    sup.on('exit', (e) => exits.push(e))
    sup.on('unhealthy', (u) => unhealthy.push(u))
    await sup.start()
    const first = sup.child as SupervisedProcess
    const pgid = first.pgid as number
    expect(groupMembers(pgid).length).toBe(2)
    const again = nextReady(sup)
    process.kill(-pgid, 'SIGSTOP')
    const second = await again
    expect(second.pid).not.toBe(first.pid)
    // Gone, all of it: the stopped worker too (SIGCONT after the SIGTERM, or
    // SIGKILL at the reap, which it may take a moment to die of).
    await waitFor(() => groupMembers(pgid).length === 0, 5000, 'the group to die')
    expect(exits).toEqual([expect.objectContaining({ pid: first.pid, reason: 'unhealthy', expected: false })])
    expect(unhealthy.map((u) => u.failures)).toEqual([1, 2])
    expect(unhealthy[1]).toMatchObject({ pid: first.pid, limit: 2, error: { code: 'ERR_HEALTH_CHECK_TIMEOUT' } })
    expect(sup.status()).toMatchObject({ state: 'running', restarts: 1, lastExit: { reason: 'unhealthy' } })
    expect(readSupervisorState(stateFile)?.lastExit).toMatchObject({ pid: first.pid, reason: 'unhealthy' })
  })

  it('a daemon that closes its listener but stays alive is restarted (a port check)', async () => {
    const { sup, exits } = await daemon((port) => ({ check: { port }, intervalMs: 50, timeoutMs: 40, failures: 2 }))
    await sup.start()
    const first = sup.child as SupervisedProcess
    const again = nextReady(sup)
    first.kill('SIGUSR1')
    const second = await again
    expect(second.pid).not.toBe(first.pid)
    expect(aliveInProcTable(first.pid)).toBe(false)
    expect(exits).toEqual([expect.objectContaining({ pid: first.pid, reason: 'unhealthy' })])
  })

  it('an http check: a daemon answering 500 is restarted; one answering 200 never is', async () => {
    const bad = await daemon(
      // Its timeout far above a local answer's: the failure is the 500.
      (port) => ({ check: { http: `http://127.0.0.1:${port}/` }, intervalMs: 500, timeoutMs: 450, failures: 2 }),
      {
        args: ['--status', '500'],
      },
    )
    // Its timeout far above a local answer's time, even on a machine so
    // loaded that an answer took more than 450 ms (seen in a CI simulation).
    const good = await daemon((port) => ({
      check: { http: `http://127.0.0.1:${port}/health` },
      intervalMs: 2000,
      timeoutMs: 1900,
    }))
    await Promise.all([bad.sup.start(), good.sup.start()])
    const badPid = bad.sup.child?.pid
    const goodPid = good.sup.child?.pid
    await nextReady(bad.sup)
    expect(bad.exits[0]).toMatchObject({ pid: badPid, reason: 'unhealthy' })
    expect(bad.unhealthy[0]?.error).toMatchObject({ code: 'ERR_HEALTH_CHECK_FAILED' })
    expect(bad.unhealthy[0]?.error.message).toMatch(/answered 500/)
    // Meanwhile the good one passed checks, all of them.
    await waitFor(() => (good.sup.status().health?.ok ?? false) && bad.exits.length >= 2, 20_000, 'more checks')
    expect(good.exits).toEqual([])
    expect(good.unhealthy).toEqual([])
    expect(good.sup.child?.pid).toBe(goodPid)
    expect(good.sup.status().health).toEqual({ ok: true, at: expect.any(String), error: null, failures: 0 })
  })

  it('a status asked for is the one that passes', async () => {
    const { sup, exits } = await daemon(
      (port) => ({ check: { http: `http://127.0.0.1:${port}/`, status: 204 }, intervalMs: 50, failures: 1 }),
      {},
    )
    await sup.start()
    const first = sup.child?.pid
    await nextReady(sup)
    expect(exits[0]).toMatchObject({ pid: first, reason: 'unhealthy' })
  })

  it("one failed check, then passes: not restarted; 'unhealthy' then 'healthy'", async () => {
    const { sup, exits, healthy, order } = await daemon((port) => ({
      check: { http: `http://127.0.0.1:${port}/` },
      // A timeout no loaded machine's local answer reaches: the one failure is the 500.
      intervalMs: 1000,
      timeoutMs: 950,
      failures: 5,
    }))
    await sup.start()
    const child = sup.child as SupervisedProcess
    child.kill('SIGUSR2') // the next answer is a 500
    await waitFor(() => healthy.length > 0, 10_000, "'healthy'")
    expect(order.slice(0, 2)).toEqual(['unhealthy', 'healthy'])
    expect(healthy[0]).toEqual({ pid: child.pid, failures: 1 })
    expect(exits).toEqual([])
    expect(sup.child?.pid).toBe(child.pid)
    expect(sup.status().restarts).toBe(0)
  })

  it('a check slower than its timeout failed (an http answer that comes too late)', async () => {
    const slow = await daemon(
      (port) => ({ check: { http: `http://127.0.0.1:${port}/` }, intervalMs: 100, timeoutMs: 50, failures: 1 }),
      { args: ['--answer-ms', '5000'] },
    )
    // Ready (a port), then every GET waits 5 s.
    await slow.sup.start()
    await nextReady(slow.sup)
    expect(slow.unhealthy[0]?.error).toMatchObject({ code: 'ERR_HEALTH_CHECK_TIMEOUT' })
    expect(slow.unhealthy[0]?.error.message).toMatch(/no answer within 50 ms/)
    expect(slow.exits[0]?.reason).toBe('unhealthy')
  })

  it('checks never overlap, start intervalMs after the previous one ended, and never block the loop', async () => {
    let active = 0
    let most = 0
    const calls: { start: number; end: number | null }[] = []
    const check = (_child: SupervisedProcess | null, signal: AbortSignal) => {
      active++
      most = Math.max(most, active)
      const call = { start: performance.now(), end: null as number | null }
      calls.push(call)
      const end = () => {
        active--
        call.end = performance.now()
      }
      // The first two end with their signal (the timeout); the third never
      // ends at all, ignoring its signal: later ones must not be called beside it.
      if (calls.length <= 2) {
        return new Promise<void>((_, reject) =>
          signal.addEventListener('abort', () => {
            end()
            reject(new Error('hung'))
          }),
        )
      }
      return new Promise<void>(() => {})
    }
    let ticks = 0
    const ticker = setInterval(() => ticks++, 5)
    onTestFinished(() => clearInterval(ticker))
    const { sup, unhealthy, exits } = await daemon(() => ({ check, intervalMs: 60, timeoutMs: 30, failures: 5 }))
    await sup.start()
    const first = sup.child?.pid
    const ticksAtStart = ticks
    await nextReady(sup)
    expect(most).toBe(1)
    // The first calls, the hanging one, then skipped checks, never calls.
    expect(calls.length).toBe(3)
    expect(unhealthy.map((u) => u.error.message)).toEqual([
      expect.stringMatching(/no answer within 30 ms/),
      expect.stringMatching(/no answer within 30 ms/),
      expect.stringMatching(/no answer within 30 ms/),
      expect.stringMatching(/the previous check has not ended/),
      expect.stringMatching(/the previous check has not ended/),
    ])
    expect(exits[0]).toMatchObject({ pid: first, reason: 'unhealthy' })
    // From the end of one to the start of the next: intervalMs at least
    // (less a millisecond a timer may round away).
    const [a, b, c] = calls
    expect((b?.start ?? 0) - (a?.end ?? 0)).toBeGreaterThanOrEqual(59)
    expect((c?.start ?? 0) - (b?.end ?? 0)).toBeGreaterThanOrEqual(59)
    // The loop turned all along: the hanging check is no block.
    expect(ticks).toBeGreaterThan(ticksAtStart)
  })

  it('crash-loop limits apply: a daemon always unhealthy ends failed after maxRestarts', async () => {
    const { sup, exits } = await daemon(
      (port) => ({ check: { http: `http://127.0.0.1:${port}/` }, intervalMs: 20, timeoutMs: 10, failures: 1 }),
      { args: ['--status', '503'], crashLoop: { maxRestarts: 2, windowMs: 60_000 }, backoff: { stepMs: 10 } },
    )
    const failed = new Promise<Error>((resolve) => sup.once('failed', resolve))
    await sup.start()
    const err = (await failed) as Error & { code: string; lastExit: unknown; cause: { code: string } }
    expect(err.code).toBe('ERR_CRASH_LOOP')
    expect(err.message).toMatch(/stopped as unhealthy/)
    expect(err.cause.code).toMatch(/^ERR_HEALTH_CHECK_/)
    expect(err.lastExit).toMatchObject({ reason: 'unhealthy' })
    expect(sup.state).toBe('failed')
    expect(sup.status().restarts).toBe(2)
    expect(exits.map((e) => e.reason)).toEqual(['unhealthy', 'unhealthy', 'unhealthy'])
  })

  it("restart: 'never' ends failed, with the failed check as its cause", async () => {
    const { sup } = await daemon(
      (port) => ({ check: { http: `http://127.0.0.1:${port}/` }, intervalMs: 20, timeoutMs: 10, failures: 1 }),
      { args: ['--status', '500'], restart: 'never' },
    )
    const failed = new Promise<Error>((resolve) => sup.once('failed', resolve))
    await sup.start()
    const err = (await failed) as Error & { code: string; cause: { code: string } }
    expect(err.code).toBe('ERR_SUPERVISOR_FAILED')
    expect(err.message).toMatch(/stopped as unhealthy|health check failed/)
    expect(err.cause.code).toMatch(/^ERR_HEALTH_CHECK_/)
  })

  it('failures within startPeriodMs of ready are not counted', async () => {
    const { sup, unhealthy, exits } = await daemon(
      (port) => ({
        check: { http: `http://127.0.0.1:${port}/` },
        // A timeout far above a local answer's: the failure is the 500.
        intervalMs: 1000,
        timeoutMs: 900,
        failures: 1,
        startPeriodMs: 2_000_000,
      }),
      { args: ['--status', '500'] },
    )
    await sup.start()
    await waitFor(() => sup.status().health !== null, 10_000, 'a check')
    const first = sup.status().health?.at
    await waitFor(() => sup.status().health?.at !== first, 10_000, 'a second check')
    expect(sup.status().health).toMatchObject({ ok: false, failures: 0, error: expect.stringMatching(/answered 500/) })
    expect(unhealthy).toEqual([])
    expect(exits).toEqual([])
  })

  it('a stop during a check: no result heard after it; the table drops a late one', async () => {
    let started!: () => void
    const checking = new Promise<void>((resolve) => {
      started = resolve
    })
    let late!: () => void
    const { sup, unhealthy } = await daemon(() => ({
      check: () =>
        new Promise<void>((_, reject) => {
          late = () => reject(new Error('late'))
          started()
        }),
      intervalMs: 100,
      timeoutMs: 99,
    }))
    await sup.start()
    await checking
    await sup.stop()
    late()
    await new Promise((r) => setTimeout(r, 50))
    expect(unhealthy).toEqual([])
    expect(sup.state).toBe('stopped')
    for (const sub of ['unhealthy', 'exited', 'backoff', 'stopping', 'stopped', 'failed', 'retiring', 'spawning']) {
      for (const event of ['health-checked', 'health-recorded', 'health-failed', 'running-heard']) {
        expect(rowOf(sub, event), `${sub} ${event}`).toBeUndefined()
      }
    }
    expect(rowOf('running', 'health-failed')).toEqual({ to: 'unhealthy', run: 'unhealthy' })
  })
})

describe('health checks that misbehave, and fast ones', () => {
  it('a check rejecting with a value that cannot become text is a failure, and checking goes on', async () => {
    let calls = 0
    const check = () => {
      calls++
      return Promise.reject(Object.create(null))
    }
    const { sup, unhealthy, exits } = await daemon(() => ({ check, intervalMs: 20, timeoutMs: 10, failures: 3 }))
    await sup.start()
    const first = sup.child?.pid
    await waitFor(() => exits.length > 0, 10_000, 'the unhealthy stop')
    expect(calls).toBeGreaterThanOrEqual(3)
    expect(unhealthy.map((u) => u.failures).slice(0, 3)).toEqual([1, 2, 3])
    expect(unhealthy[0]?.error).toMatchObject({ code: 'ERR_HEALTH_CHECK_FAILED', message: /\[object Object\]/ })
    expect(exits[0]).toMatchObject({ pid: first, reason: 'unhealthy' })
  })

  it('a check rejecting with a falsy value: the value is the cause, and the message names it (a newline at its end cut)', async () => {
    const values = [0, '', false, null, undefined, new Error('as OpenSSL words it\n')]
    let calls = 0
    const check = () => Promise.reject(values[calls++ % values.length])
    const { sup, unhealthy } = await daemon(() => ({ check, intervalMs: 20, timeoutMs: 10, failures: 1000 }))
    await sup.start()
    await waitFor(() => unhealthy.length >= values.length, 10_000, 'six failed checks')
    await sup.stop()
    const errors = unhealthy.slice(0, values.length).map((u) => u.error as Error)
    expect(errors.map((e) => e.message.replace(/^.*health check failed: /, ''))).toEqual([
      '0',
      '',
      'false',
      'null',
      'undefined',
      'as OpenSSL words it', // no newline left at its end
    ])
    // A value was rejected with: it is the cause (null and undefined, no value, give none).
    expect(errors.slice(0, 3).map((e) => ({ has: 'cause' in e, cause: e.cause }))).toEqual([
      { has: true, cause: 0 },
      { has: true, cause: '' },
      { has: true, cause: false },
    ])
    expect(errors.slice(3, 5).map((e) => 'cause' in e)).toEqual([false, false])
  })

  it('fast checks with a state file: each event carries its own check, the record says so, the limit holds', async () => {
    const stateFile = join(tempDir(), 'fast.json')
    // Failures, never three in a row: the daemon must never be stopped.
    const pattern = [false, true, false, false, true]
    let n = 0
    const check = async () => {
      if (!pattern[n++ % pattern.length]) throw new Error(`check ${n} failed`)
    }
    const { sup, exits } = await daemon(() => ({ check, intervalMs: 2, timeoutMs: 1, failures: 3 }), { stateFile })
    const odd: string[] = []
    let events = 0
    sup.on('unhealthy', (u) => {
      events++
      const rec = readSupervisorState(stateFile)?.child?.health
      if (u.failures < 1 || rec?.ok !== false || rec?.failures !== u.failures)
        odd.push(`unhealthy ${u.failures}, record ${JSON.stringify(rec)}`)
    })
    sup.on('healthy', () => {
      events++
      const rec = readSupervisorState(stateFile)?.child?.health
      if (rec?.ok !== true) odd.push(`healthy, record ${JSON.stringify(rec)}`)
    })
    await sup.start()
    await waitFor(() => n >= 100, 20_000, '100 checks')
    expect(odd).toEqual([])
    expect(exits).toEqual([])
    expect(events).toBeGreaterThan(50)
  })

  it("an http check's error shows no user, password or query", async () => {
    const { sup, unhealthy } = await daemon(
      (port) => ({
        check: { http: `http://admin:s3cret@127.0.0.1:${port}/health?token=abc` },
        intervalMs: 1000,
        timeoutMs: 900,
        failures: 5,
      }),
      { args: ['--status', '503'] },
    )
    await sup.start()
    await waitFor(() => unhealthy.length > 0, 10_000, 'a failed check')
    const message = unhealthy[0]?.error.message ?? ''
    expect(message).toMatch(/GET http:\/\/127\.0\.0\.1:\d+\/health answered 503/)
    expect(message).not.toMatch(/admin|s3cret|token/)
    expect(sup.status().health?.error).not.toMatch(/s3cret|token/)
  })
})

describe('options.health, refused before anything starts', () => {
  const base = { command: 'sleep', args: ['1000'] }
  const err = (health: unknown) => thrown(() => supervisor({ ...base, health } as SupervisorOptions))
  it('each bad value with its code, naming the option', () => {
    const check = { port: 8080 }
    expect(err({ check, intervalMs: 1000, timeoutMs: 1000 })).toMatchObject({
      code: 'ERR_OUT_OF_RANGE',
      message: expect.stringMatching(/^options\.health\.timeoutMs must be less than options\.health\.intervalMs/),
    })
    expect(err({ check, intervalMs: 1.5 })).toMatchObject({ code: 'ERR_OUT_OF_RANGE', message: /intervalMs/ })
    expect(err({ check, timeoutMs: -1 })).toMatchObject({ code: 'ERR_OUT_OF_RANGE', message: /timeoutMs/ })
    expect(err({ check, failures: 0 })).toMatchObject({ code: 'ERR_OUT_OF_RANGE', message: /failures/ })
    expect(err({ check, startPeriodMs: Number.NaN })).toMatchObject({ code: 'ERR_OUT_OF_RANGE' })
    expect(err({ check, intervalMs: '1000' })).toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' })
    expect(err({ check: { port: 70000 } })).toMatchObject({
      code: 'ERR_OUT_OF_RANGE',
      message: /^options\.health\.check\.port/,
    })
    expect(err({ check: { http: 'ftp://example.com/' } })).toMatchObject({
      code: 'ERR_INVALID_ARG_VALUE',
      message: /^options\.health\.check\.http must be an http: or https: URL/,
    })
    expect(err({ check: { http: 'not a url' } })).toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' })
    expect(err({ check: { port: 80, http: 'http://127.0.0.1/' } })).toMatchObject({
      code: 'ERR_INVALID_ARG_VALUE',
      message: /not both/,
    })
    expect(err({ check: {} })).toMatchObject({ code: 'ERR_INVALID_ARG_VALUE', message: /neither/ })
    expect(err({})).toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' })
    expect(err({ check: 'http://x/' })).toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' })
    expect(err({ check, every: 5 })).toMatchObject({ code: 'ERR_INVALID_ARG_VALUE', message: /every is not an option/ })
    expect(err({ check: { port: 80, status: 200 } })).toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' })
  })

  it('a short interval alone takes a timeout below it', () => {
    const sup = supervisor({ ...base, health: { check: { port: 8080 }, intervalMs: 1000 } })
    expect(sup.state).toBe('idle')
  })
})
