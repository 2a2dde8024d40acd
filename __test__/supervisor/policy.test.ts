// The exit policy as a pure function: facts, options, the crash window and
// a monotonic now in; crash (with its delay), fail or finish out. No
// process, no clock: the real ends are proved in the supervisor suites.
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'

const require = createRequire(__filename)

interface Exit {
  pid: number
  code: number | null
  signal: string | null
  reason?: 'unhealthy'
}
interface Facts {
  exit: Exit | null
  spawnError: (Error & { code?: string }) | undefined
  readyFailure: Error | null
  healthFailure: Error | null
  sent: Set<string>
  readyAt: number | null
  adopted: boolean
  attempt: number
}
interface Options {
  name: string
  restart: 'always' | 'on-failure' | 'never'
  ready: object | null
  backoff: { initialMs: number; stepMs: number; factor: number; maxMs: number; resetAfterMs: number }
  crashLoop: { maxRestarts: number; windowMs: number }
}
type Verdict =
  | { kind: 'crash'; delayMs: number; attempt: number; window: number[] }
  | { kind: 'fail'; error: Error & { code: string; lastExit: Exit | null; cause?: unknown } }
  | { kind: 'finish' }
const { decideExit, spawnFailure } = require('../../lib/supervisor/policy.js') as {
  decideExit(facts: Facts, options: Options, window: number[], now: number): Verdict
  spawnFailure(err: Error & { code?: string }, name: string): (Error & { code: string; cause?: unknown }) | null
}

const OPTIONS: Options = {
  name: 'web',
  restart: 'on-failure',
  ready: null,
  backoff: { initialMs: 0, stepMs: 100, factor: 2, maxMs: 30_000, resetAfterMs: 10_000 },
  crashLoop: { maxRestarts: 5, windowMs: 60_000 },
}

const exited = (code: number | null, signal: string | null = null): Exit => ({ pid: 42, code, signal })

function facts(over: Partial<Facts> = {}): Facts {
  return {
    exit: exited(1),
    spawnError: undefined,
    readyFailure: null,
    healthFailure: null,
    sent: new Set(),
    readyAt: 1_000,
    adopted: false,
    attempt: 0,
    ...over,
  }
}

function error(v: Verdict) {
  if (v.kind !== 'fail') throw new Error(`expected a failure, got ${v.kind}`)
  return v.error
}

describe('decideExit: restart or not', () => {
  it('restarts a failure under on-failure and always, and fails under never', () => {
    for (const restart of ['on-failure', 'always'] as const) {
      expect(decideExit(facts(), { ...OPTIONS, restart }, [], 5_000).kind).toBe('crash')
    }
    const err = error(decideExit(facts(), { ...OPTIONS, restart: 'never' }, [], 5_000))
    expect(err.code).toBe('ERR_SUPERVISOR_FAILED')
    expect(err.message).toBe('web exited with code 1')
    expect(err.lastExit).toEqual(exited(1))
  })

  it('finishes a clean exit under on-failure and never, and restarts it under always', () => {
    expect(decideExit(facts({ exit: exited(0) }), OPTIONS, [], 5_000)).toEqual({ kind: 'finish' })
    expect(decideExit(facts({ exit: exited(0) }), { ...OPTIONS, restart: 'never' }, [], 5_000).kind).toBe('finish')
    expect(decideExit(facts({ exit: exited(0) }), { ...OPTIONS, restart: 'always' }, [], 5_000).kind).toBe('crash')
  })

  it('takes a death by a signal sent through kill() for a clean end, and any other signal for a failure', () => {
    const killed = facts({ exit: exited(null, 'SIGTERM'), sent: new Set(['SIGTERM']) })
    expect(decideExit(killed, OPTIONS, [], 5_000).kind).toBe('finish')
    const foreign = facts({ exit: exited(null, 'SIGKILL'), sent: new Set(['SIGTERM']) })
    expect(decideExit(foreign, OPTIONS, [], 5_000).kind).toBe('crash')
    expect(error(decideExit(foreign, { ...OPTIONS, restart: 'never' }, [], 5_000)).message).toBe(
      'web was killed by SIGKILL',
    )
  })

  it('counts an exit 0 before the ready check passed as a failure, but not an adopted orphan', () => {
    const early = facts({ exit: exited(0), readyAt: null })
    const ready = { ...OPTIONS, ready: { kind: 'port' } }
    expect(decideExit(early, ready, [], 5_000).kind).toBe('crash')
    expect(error(decideExit(early, { ...ready, restart: 'never' }, [], 5_000)).message).toBe(
      'web exited with code 0 before it was ready',
    )
    expect(decideExit(early, OPTIONS, [], 5_000).kind).toBe('finish') // no ready check: no "before"
    expect(decideExit({ ...early, adopted: true }, ready, [], 5_000).kind).toBe('finish')
  })

  it('counts an adopted orphan of unknown status as failed: it is restarted on failure', () => {
    const unknown = facts({ exit: exited(null), adopted: true })
    expect(decideExit(unknown, OPTIONS, [], 5_000).kind).toBe('crash')
    expect(error(decideExit(unknown, { ...OPTIONS, restart: 'never' }, [], 5_000)).message).toBe(
      'web exited (status unknown)',
    )
  })

  it('counts a ready or health failure as a failure whatever the exit, and names it as the cause', () => {
    const readyFailure = new Error("web's ready check failed: refused")
    const r = error(decideExit(facts({ exit: exited(0), readyFailure }), { ...OPTIONS, restart: 'never' }, [], 5))
    // Its message names the supervisor already: not "web web's …".
    expect(r.message).toBe("web's ready check failed: refused")
    expect(r.cause).toBe(readyFailure)
    const healthFailure = new Error('no answer')
    const h = error(decideExit(facts({ exit: exited(0), healthFailure }), { ...OPTIONS, restart: 'never' }, [], 5))
    expect(h.message).toBe('web no answer')
    expect(h.cause).toBe(healthFailure)
    expect(decideExit(facts({ exit: exited(0), healthFailure }), OPTIONS, [], 5).kind).toBe('crash')
  })

  it('counts a spawn that failed (no exit) as a failure, its error the cause', () => {
    const spawnError = Object.assign(new Error('spawn EAGAIN'), { code: 'EAGAIN' })
    expect(decideExit(facts({ exit: null, spawnError }), OPTIONS, [], 5_000).kind).toBe('crash')
    const err = error(decideExit(facts({ exit: null, spawnError }), { ...OPTIONS, restart: 'never' }, [], 5_000))
    expect(err.message).toBe('web spawn EAGAIN')
    expect(err.lastExit).toBeNull()
  })
})

describe('decideExit: the backoff and the crash window', () => {
  it('grows the delay attempt by attempt: initialMs, then stepMs · factor^(n−2) up to maxMs', () => {
    const delays: number[] = []
    let attempt = 0
    let window: number[] = []
    for (let now = 1; now <= 5; now++) {
      const v = decideExit(facts({ attempt, readyAt: null }), OPTIONS, window, now)
      if (v.kind !== 'crash') throw new Error(v.kind)
      delays.push(v.delayMs)
      ;({ attempt, window } = v)
    }
    expect(delays).toEqual([0, 100, 200, 400, 800])
    expect(attempt).toBe(5)
    expect(window).toEqual([1, 2, 3, 4, 5])
    const capped = decideExit(facts({ attempt: 30 }), OPTIONS, [], 9)
    expect(capped.kind === 'crash' && capped.delayMs).toBe(30_000)
  })

  it('counts again from 1 after a child that stayed ready resetAfterMs', () => {
    const stayed = decideExit(facts({ attempt: 4, readyAt: 1_000 }), OPTIONS, [], 11_000)
    expect(stayed).toMatchObject({ kind: 'crash', attempt: 1, delayMs: 0 })
    const short = decideExit(facts({ attempt: 4, readyAt: 1_000 }), OPTIONS, [], 10_999)
    expect(short).toMatchObject({ kind: 'crash', attempt: 5, delayMs: 800 })
  })

  it('gives up once maxRestarts restarts fall within windowMs, and forgets those that left it', () => {
    const full = [0, 10_000, 20_000, 30_000, 40_000]
    const err = error(decideExit(facts({ attempt: 5 }), OPTIONS, full, 50_000))
    expect(err.code).toBe('ERR_CRASH_LOOP')
    expect(err.message).toBe('web exited with code 1; given up after 5 restarts within 60000 ms')
    expect(err.lastExit).toEqual(exited(1))
    // At 60 001 the restart at 0 has left the window: four remain, one more is allowed.
    const later = decideExit(facts({ attempt: 5 }), OPTIONS, full, 60_001)
    expect(later).toMatchObject({ kind: 'crash', window: [10_000, 20_000, 30_000, 40_000, 60_001] })
  })

  it('leaves the window it is given as it was (the machine applies the verdict)', () => {
    const window = Object.freeze([1, 2])
    expect(decideExit(facts(), OPTIONS, window as number[], 3)).toMatchObject({ window: [1, 2, 3] })
    expect(window).toEqual([1, 2])
  })

  it('never restarts under a crash loop of maxRestarts 0, and names a cause where there is one', () => {
    const spawnError = Object.assign(new Error('spawn EAGAIN'), { code: 'EAGAIN' })
    const v = decideExit(
      facts({ exit: null, spawnError }),
      { ...OPTIONS, crashLoop: { maxRestarts: 0, windowMs: 1 } },
      [],
      0,
    )
    const err = error(v)
    expect(err.code).toBe('ERR_CRASH_LOOP')
    expect(err.message).toBe('web could not be started; given up after 0 restarts within 1 ms')
    expect(err.cause).toBe(spawnError)
  })
})

describe('spawnFailure', () => {
  it('fails at once where no wait can heal: a missing or forbidden program, or no containment', () => {
    const missing = Object.assign(new Error('spawn nope ENOENT'), { code: 'ENOENT' })
    const err = spawnFailure(missing, 'web')
    expect(err?.code).toBe('ERR_SUPERVISOR_FAILED')
    expect(err?.message).toBe('web could not be started: spawn nope ENOENT')
    expect(err?.cause).toBe(missing)
    const cgroup = Object.assign(new Error('no cgroups'), { code: 'ERR_CGROUP_UNAVAILABLE' })
    expect(spawnFailure(cgroup, 'web')).toBe(cgroup)
  })

  it('leaves anything else to the exit policy, as a crash', () => {
    expect(spawnFailure(Object.assign(new Error('try again'), { code: 'EAGAIN' }), 'web')).toBeNull()
    expect(spawnFailure(new Error('no code'), 'web')).toBeNull()
  })
})
