// The restart policy's arithmetic and the transition table, as pure
// functions of plain values: no process, no clock.
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'

const require = createRequire(__filename)

interface Backoff {
  initialMs: number
  stepMs: number
  factor: number
  maxMs: number
  resetAfterMs: number
}
const { backoffDelay, crashWindow, nextAttempt } = require('../../lib/supervisor/backoff.js') as {
  backoffDelay(policy: Backoff, attempt: number): number
  crashWindow(
    times: number[],
    now: number,
    policy: { maxRestarts: number; windowMs: number },
  ): { recent: number[]; exceeded: boolean }
  nextAttempt(policy: Backoff, attempt: number, readyAt: number | null, now: number): number
}
interface Row {
  to: string | undefined
  run: string | undefined
}
const { TABLE, PUBLIC, STATES, SUBSTATES, rowOf } = require('../../lib/supervisor/transitions.js') as {
  TABLE: Record<string, Record<string, Row>>
  PUBLIC: Record<string, string>
  STATES: readonly string[]
  SUBSTATES: readonly string[]
  rowOf(substate: string, event: string): Row | undefined
}

/** The moves a substate's rows make: event → next substate. */
function moves(substate: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [event, row] of Object.entries(TABLE[substate] ?? {})) if (row.to !== undefined) out[event] = row.to
  return out
}

const DEFAULT: Backoff = { initialMs: 0, stepMs: 100, factor: 2, maxMs: 30_000, resetAfterMs: 10_000 }

describe('backoffDelay', () => {
  it('is initialMs first, then stepMs · factor^(n−2), capped at maxMs', () => {
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffDelay(DEFAULT, n))).toEqual([0, 100, 200, 400, 800, 1600])
    expect(backoffDelay(DEFAULT, 100)).toBe(30_000)
    expect(backoffDelay({ ...DEFAULT, initialMs: 50 }, 1)).toBe(50)
  })

  it('stays finite where the factor grows to Infinity, and 0 with a zero step', () => {
    expect(backoffDelay({ ...DEFAULT, factor: 1000 }, 10_000)).toBe(30_000)
    expect(backoffDelay({ ...DEFAULT, stepMs: 0, factor: 1000 }, 10_000)).toBe(0)
  })

  it('is constant with factor 1', () => {
    expect([2, 3, 50].map((n) => backoffDelay({ ...DEFAULT, factor: 1 }, n))).toEqual([100, 100, 100])
  })
})

describe('crashWindow', () => {
  const policy = { maxRestarts: 3, windowMs: 1000 }

  it('keeps the restarts inside the window and says when one more is too many', () => {
    expect(crashWindow([0, 100, 200], 500, policy)).toEqual({ recent: [0, 100, 200], exceeded: true })
    expect(crashWindow([0, 100, 200], 1050, policy)).toEqual({ recent: [100, 200], exceeded: false })
    expect(crashWindow([], 0, policy)).toEqual({ recent: [], exceeded: false })
  })

  it('with maxRestarts 0, any restart is too many', () => {
    expect(crashWindow([], 0, { maxRestarts: 0, windowMs: 1000 }).exceeded).toBe(true)
  })
})

describe('nextAttempt', () => {
  it('counts on, and starts again after a child stayed ready resetAfterMs', () => {
    expect(nextAttempt(DEFAULT, 0, null, 5)).toBe(1)
    expect(nextAttempt(DEFAULT, 3, null, 50_000)).toBe(4)
    expect(nextAttempt(DEFAULT, 3, 1000, 1000 + 9_999)).toBe(4)
    expect(nextAttempt(DEFAULT, 3, 1000, 1000 + 10_000)).toBe(1)
  })
})

describe('the transition table', () => {
  it('leaves stopped and failed only by start, and stopping only by its end', () => {
    expect(moves('stopped')).toEqual({ start: 'booting' })
    expect(moves('failed')).toEqual({ start: 'booting' })
    expect(moves('idle')).toEqual({ start: 'booting' })
    expect(moves('stopping')).toEqual({ stopped: 'stopped' })
  })

  it('leads only to substates it lists, each shown as one of the seven public states', () => {
    for (const sub of SUBSTATES) {
      for (const to of Object.values(moves(sub))) expect(SUBSTATES).toContain(to)
      expect(STATES).toContain(PUBLIC[sub])
    }
    expect(Object.keys(PUBLIC).sort()).toEqual([...SUBSTATES].sort())
    expect(new Set(Object.values(PUBLIC))).toEqual(new Set(STATES))
    expect(SUBSTATES.filter((sub) => PUBLIC[sub] === 'starting')).toEqual([
      'booting',
      'spawning',
      'awaiting-ready',
      'retiring',
    ])
  })

  it('answers every verb in every substate, and a stop leads to stopping wherever something runs', () => {
    for (const sub of SUBSTATES) {
      for (const verb of ['start', 'stop', 'restart'])
        expect(rowOf(sub, verb)?.run, `${sub} ${verb}`).toBeTypeOf('string')
      if (!['idle', 'stopping', 'stopped', 'failed'].includes(sub)) expect(rowOf(sub, 'stop')?.to).toBe('stopping')
    }
  })

  it('drops a late word from an attempt once the machine has moved on', () => {
    for (const sub of ['stopping', 'stopped', 'failed', 'backoff']) {
      for (const event of ['ready', 'ready-failed', 'retired', 'spawn-failed', 'exit', 'booted', 'adopt']) {
        expect(rowOf(sub, event), `${sub} ${event}`).toBeUndefined()
      }
    }
    // What follows an event's listeners is not begun where one of them stopped or restarted it.
    for (const sub of ['stopping', 'stopped', 'failed', 'retiring', 'spawning']) {
      for (const step of ['spawn-heard', 'ready-heard', 'exit-heard', 'restart-heard']) {
        expect(rowOf(sub, step), `${sub} ${step}`).toBeUndefined()
      }
    }
    // An exit we caused (a restart's or a stop's) is not the policy's to decide.
    expect(rowOf('retiring', 'exit')).toBeUndefined()
    expect(rowOf('running', 'booted')).toBeUndefined()
  })

  it('refuses every event it does not list, including inherited names', () => {
    expect(rowOf('idle', 'start')).toEqual({ to: 'booting', run: 'begin' })
    expect(rowOf('stopped', 'ready')).toBeUndefined()
    expect(rowOf('stopping', 'stop')?.to).toBeUndefined()
    expect(rowOf('running', 'toString')).toBeUndefined()
    expect(rowOf('running', '__proto__')).toBeUndefined()
  })

  it('is frozen', () => {
    expect(Object.isFrozen(TABLE)).toBe(true)
    expect(Object.isFrozen(TABLE.running)).toBe(true)
    expect(Object.isFrozen(TABLE.running?.stop)).toBe(true)
    expect(Object.isFrozen(PUBLIC)).toBe(true)
  })
})
