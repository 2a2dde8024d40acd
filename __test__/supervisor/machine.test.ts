// The machine at the bottom of the Supervisor: dispatch() runs what the
// transition table says, and the phases' actions are checked against the
// table at load. Plain objects, no process.
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'

const require = createRequire(__filename)

type Action = (m: Machine, ...args: unknown[]) => unknown
interface Machine {
  sub: string
  since: string
  records: null
  actions: Record<string, Action>
}
const { actionTable, dispatch } = require('../../lib/supervisor/machine.js') as {
  actionTable(...phases: Record<string, Action>[]): Record<string, Action>
  dispatch(m: Machine, event: string, ...args: unknown[]): unknown
}
const { TABLE } = require('../../lib/supervisor/transitions.js') as {
  TABLE: Record<string, Record<string, { to?: string; run?: string }>>
}

/** Every action the table names, each recording its call in `calls`. */
function recorder(calls: unknown[][]): Record<string, Action> {
  const actions: Record<string, Action> = {}
  for (const rows of Object.values(TABLE)) {
    for (const row of Object.values(rows)) {
      const name = row.run
      if (name === undefined) continue
      actions[name] = (_m, ...args) => {
        calls.push([name, ...args])
      }
    }
  }
  return actions
}

function machine(sub: string, actions: Record<string, Action>): Machine {
  return { sub, since: 'then', records: null, actions }
}

describe('dispatch', () => {
  it("moves to the row's substate and runs its action with the event's arguments, its value the answer", () => {
    const calls: unknown[][] = []
    const m = machine('running', { ...recorder(calls), retire: (_m, o) => `retiring with ${o}` })
    expect(dispatch(m, 'restart', 'args')).toBe('retiring with args')
    expect(m.sub).toBe('retiring')
    expect(dispatch(m, 'health-checked', 1)).toBeUndefined() // no row in retiring: dropped
    expect(m.sub).toBe('retiring')
    expect(dispatch(m, 'retired', 'run')).toBeUndefined()
    expect(calls).toEqual([['spawn', 'run']])
    expect(m.sub).toBe('spawning')
  })

  it('resets since where the public state changes, or a restart begins it again, and nowhere else', () => {
    const m = machine('running', recorder([]))
    dispatch(m, 'health-failed') // running → unhealthy: still 'running'
    expect(m.since).toBe('then')
    dispatch(m, 'died') // → exited, shown as backoff
    expect(m.since).not.toBe('then')
    const backoff = machine('backoff', recorder([]))
    dispatch(backoff, 'restart') // → spawning, shown as starting
    expect(backoff.since).not.toBe('then')
    const exited = machine('exited', recorder([]))
    dispatch(exited, 'crash') // exited → backoff: both shown as backoff
    expect(exited.since).toBe('then')
  })
})

describe('actionTable', () => {
  it('takes the phases whose actions are exactly those the table names', () => {
    const all = recorder([])
    const [first, ...rest] = Object.keys(all)
    const table = actionTable(
      { [first as string]: all[first as string] as Action },
      Object.fromEntries(rest.map((n) => [n, all[n] as Action])),
    )
    expect(Object.keys(table).sort()).toEqual(Object.keys(all).sort())
    expect(Object.isFrozen(table)).toBe(true)
  })

  it('refuses an action a row names but no phase gives, one no row names, and one two phases give', () => {
    const { spawn, ...withoutSpawn } = recorder([])
    expect(() => actionTable(withoutSpawn)).toThrow(/names no action spawn/)
    expect(() => actionTable(recorder([]), { spwan: () => {} })).toThrow(/no row names the action spwan/)
    expect(() => actionTable(recorder([]), { spawn: spawn as Action })).toThrow(/two phases give the action spawn/)
  })
})
