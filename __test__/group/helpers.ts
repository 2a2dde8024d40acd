// Helpers for the SupervisorGroup's tests: groups stopped after every test,
// their events in the order they came, the fixtures.
import { join } from 'node:path'
import { afterEach } from 'vitest'
import { type GroupConfig, type SupervisedProcess, SupervisorGroup, type SupervisorGroupEvents } from '../../index.js'

export const GROUP_FIXTURES = join(__dirname, 'fixtures')

/**
 * `node fixtures/listen.cjs PORT WHEN`: listens at once, after WHEN ms, or
 * (`usr1`) at SIGUSR1; then its stdout is piped, and it says "waiting" once
 * SIGUSR1 may be sent (see usr1Listener).
 */
export function listener(port: number, when: number | 'usr1' = 0) {
  return {
    command: process.execPath,
    args: [join(GROUP_FIXTURES, 'listen.cjs'), String(port), String(when)],
    ready: { port },
    ...(when === 'usr1' ? { spawn: { stdio: ['ignore', 'pipe', 'inherit'] as const } } : {}),
  }
}

/** The next child of daemon `name` (a `listener(port, 'usr1')`), once it may be sent its SIGUSR1. */
export function usr1Listener(group: SupervisorGroup, name: string): Promise<SupervisedProcess> {
  return next(group, 'spawn', name).then(
    ({ child }) =>
      new Promise((resolve) => {
        let text = ''
        child.stdout?.on('data', (chunk: Buffer) => {
          text += chunk.toString()
          if (text.includes('waiting\n')) resolve(child)
        })
      }),
  )
}

/** Per test file: `group(config)` makes a SupervisorGroup, stopped after each test. */
export function trackGroups(): (config: GroupConfig) => SupervisorGroup {
  const groups: SupervisorGroup[] = []
  afterEach(async () => {
    for (const g of groups.splice(0)) await g.stop().catch(() => {})
  })
  return (config) => {
    const g = new SupervisorGroup(config)
    groups.push(g)
    return g
  }
}

const EVENTS = ['spawn', 'ready', 'exit', 'restart', 'running', 'failed', 'stopped'] as const
type Recorded = (typeof EVENTS)[number]

export interface Seen {
  event: Recorded
  name: string
  /** performance.now() when it was emitted. */
  at: number
  data: SupervisorGroupEvents[Recorded][0]
}

/** The group's events as they come (`seen`), and the index of the first `event` of `name` (-1: none). */
export function record(group: SupervisorGroup): { seen: Seen[]; first: (event: Recorded, name: string) => Seen } {
  const seen: Seen[] = []
  for (const event of EVENTS) {
    group.on(event, (data: SupervisorGroupEvents[Recorded][0]) =>
      seen.push({ event, name: data.name, at: performance.now(), data }),
    )
  }
  const first = (event: Recorded, name: string): Seen => {
    const s = seen.find((x) => x.event === event && x.name === name)
    if (s === undefined) throw new Error(`no '${event}' of ${name} in ${JSON.stringify(names(seen))}`)
    return s
  }
  return { seen, first }
}

/** `event name` of each event seen, in order. */
export function names(seen: Seen[]): string[] {
  return seen.map((s) => `${s.event} ${s.name}`)
}

/** The next `event` of daemon `name`. */
export function next<K extends keyof SupervisorGroupEvents>(
  group: SupervisorGroup,
  event: K,
  name: string,
): Promise<SupervisorGroupEvents[K][0]> {
  return new Promise((resolve) => {
    const on = (data: SupervisorGroupEvents[K][0]) => {
      if (data.name !== name) return
      group.off(event, on as never)
      resolve(data)
    }
    group.on(event, on as never)
  })
}
