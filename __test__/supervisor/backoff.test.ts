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
const { TRANSITIONS, STATES, next } = require('../../lib/supervisor/transitions.js') as {
  TRANSITIONS: Record<string, Record<string, string>>
  STATES: readonly string[]
  next(state: string, event: string): string | undefined
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
    expect(TRANSITIONS.stopped).toEqual({ start: 'starting' })
    expect(TRANSITIONS.failed).toEqual({ start: 'starting' })
    expect(TRANSITIONS.stopping).toEqual({ stopped: 'stopped' })
  })

  it('leads only to states it lists', () => {
    for (const moves of Object.values(TRANSITIONS)) {
      for (const to of Object.values(moves)) expect(STATES).toContain(to)
    }
  })

  it('refuses every move it does not list, including inherited names', () => {
    expect(next('idle', 'start')).toBe('starting')
    expect(next('stopped', 'ready')).toBeUndefined()
    expect(next('stopping', 'stop')).toBeUndefined()
    expect(next('running', 'toString')).toBeUndefined()
    expect(next('running', '__proto__')).toBeUndefined()
  })

  it('is frozen', () => {
    expect(Object.isFrozen(TRANSITIONS)).toBe(true)
    expect(Object.isFrozen(TRANSITIONS.running)).toBe(true)
  })
})
