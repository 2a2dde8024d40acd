// A group's daemons start in the order of their `after`, each once what it
// waits for is ready, and stop in reverse; a daemon that does not start
// fails the start and leaves nothing running; a crash is its own daemon's.
import { describe, expect, it } from 'vitest'
import type { SupervisedProcess } from '../../index.js'
import { freePort, trackProcesses } from '../helpers'
import { listener, names, next, record, trackGroups, usr1Listener } from './helpers'

trackProcesses()
const group = trackGroups()

const sleeper = { command: 'sleep', args: ['1000'] }

describe('start', () => {
  it('starts a daemon once every daemon in its after is ready; independent ones together', async () => {
    const [dbPort, cachePort, webPort] = await Promise.all([freePort(), freePort(), freePort()])
    // db is ready only once cache is (the test passes the word on): a
    // group that waited for one before starting the other never gets
    // ready at all.
    const g = group({
      daemons: {
        db: listener(dbPort, 'usr1'),
        cache: listener(cachePort),
        web: { ...listener(webPort), after: ['db', 'cache'] },
        worker: { ...sleeper, after: ['web'] },
      },
    })
    const { seen, first } = record(g)
    Promise.all([usr1Listener(g, 'db'), next(g, 'ready', 'cache')]).then(([db]) => db.kill('SIGUSR1'))
    await g.start()
    for (const name of ['db', 'cache', 'web', 'worker']) expect(g.supervisors.get(name)?.state).toBe('running')
    // Each daemon spawned after the ready of each daemon it waits for (in
    // the order the events came, and by their times).
    for (const [dependent, dependency] of [
      ['web', 'db'],
      ['web', 'cache'],
      ['worker', 'web'],
    ] as const) {
      const spawned = first('spawn', dependent)
      const ready = first('ready', dependency)
      expect(seen.indexOf(spawned)).toBeGreaterThan(seen.indexOf(ready))
      expect(spawned.at).toBeGreaterThanOrEqual(ready.at)
    }
    expect(seen.indexOf(first('spawn', 'db'))).toBeLessThan(seen.indexOf(first('ready', 'cache')))
    expect(seen.filter((s) => s.event === 'spawn')).toHaveLength(4)
  })

  it('a daemon that gives up fails the start, naming it; what started is stopped, dependents first; nothing runs', async () => {
    const [basePort, sidePort, nobodyPort] = await Promise.all([freePort(), freePort(), freePort()])
    const g = group({
      daemons: {
        base: listener(basePort),
        side: listener(sidePort),
        // Ends before its ready check passes, and is not restarted.
        bad: { command: 'sh', args: ['-c', 'exit 3'], restart: 'never', ready: { port: nobodyPort }, after: ['base'] },
        top: { ...sleeper, after: ['bad'] },
      },
    })
    const { seen } = record(g)
    const err = await g.start().then(
      () => null,
      (e: Error & { daemon?: string }) => e,
    )
    expect(err).toMatchObject({
      code: 'ERR_SUPERVISOR_FAILED',
      daemon: 'bad',
      cause: { code: 'ERR_SUPERVISOR_FAILED' },
    })
    expect(err?.message).toMatch(/^bad did not start: /)
    expect(g.supervisors.get('bad')?.state).toBe('failed')
    for (const name of ['base', 'side']) expect(g.supervisors.get(name)?.state).toBe('stopped')
    expect(g.supervisors.get('top')?.state).toBe('idle')
    // top never spawned; base was ready (bad waited for it), then stopped.
    expect(names(seen).filter((s) => s.startsWith('spawn'))).not.toContain('spawn top')
    expect(names(seen)).toContain('ready base')
    expect(names(seen)).toContain('stopped base')
    for (const sup of g.supervisors.values()) expect(sup.child).toBeNull()
  })

  it('a stop() during the start ends it: the start rejects with an AbortError, and nothing runs', async () => {
    const port = await freePort()
    const g = group({ daemons: { db: listener(port, 'usr1'), web: { ...sleeper, after: ['db'] } } })
    const { seen } = record(g)
    const started = g.start()
    await next(g, 'spawn', 'db')
    await g.stop()
    await expect(started).rejects.toMatchObject({ name: 'AbortError' })
    expect(names(seen)).not.toContain('spawn web')
    for (const sup of g.supervisors.values()) expect(sup.child).toBeNull()
  })

  it('a start after a failed one starts each daemon again', async () => {
    const port = await freePort()
    let fail = true
    const g = group({
      daemons: {
        a: listener(port),
        b: {
          ...sleeper,
          restart: 'never',
          after: ['a'],
          ready: async () => {
            if (fail) throw new Error('not yet')
          },
        },
      },
    })
    await expect(g.start()).rejects.toMatchObject({ daemon: 'b', cause: { code: 'ERR_SUPERVISOR_FAILED' } })
    expect(g.supervisors.get('a')?.state).toBe('stopped')
    fail = false
    await g.start()
    for (const sup of g.supervisors.values()) expect(sup.state).toBe('running')
  })
})

describe('stop', () => {
  it('stops in reverse order, each once the daemons after it have stopped; a second stop shares the first', async () => {
    const port = await freePort()
    const g = group({
      daemons: {
        a: listener(port),
        b: { ...sleeper, after: ['a'] },
        c: { ...sleeper, after: ['b'] },
      },
    })
    await g.start()
    const { seen } = record(g)
    const stopping = g.stop()
    expect(g.stop()).toBe(stopping)
    await stopping
    const order = names(seen).filter((s) => s.startsWith('exit') || s.startsWith('stopped'))
    expect(order).toEqual(['exit c', 'stopped c', 'exit b', 'stopped b', 'exit a', 'stopped a'])
    for (const sup of g.supervisors.values()) expect(sup.state).toBe('stopped')
    await g.stop()
    expect(names(seen)).toHaveLength(6)
  })
})

describe('a daemon of a running group', () => {
  it("a dependency's crash restarts it alone: the daemons after it keep running", async () => {
    const [dbPort, webPort] = await Promise.all([freePort(), freePort()])
    const g = group({ daemons: { db: listener(dbPort), web: { ...listener(webPort), after: ['db'] } } })
    const { seen } = record(g)
    const children = new Map<string, SupervisedProcess>()
    g.on('spawn', ({ name, child }) => children.set(name, child))
    await g.start()
    const web = children.get('web')
    const db = children.get('db')
    const readyAgain = next(g, 'ready', 'db')
    db?.kill('SIGKILL')
    await readyAgain
    expect(children.get('db')?.pid).not.toBe(db?.pid)
    expect(g.supervisors.get('db')?.status().restarts).toBe(1)
    expect(g.supervisors.get('web')?.state).toBe('running')
    expect(g.supervisors.get('web')?.child?.pid).toBe(web?.pid)
    expect(names(seen).filter((s) => s.endsWith(' web'))).toEqual(['spawn web', 'ready web', 'running web'])
  })

  it("one that gives up is reported (the group's 'failed'), and the rest keep running", async () => {
    const [xPort, yPort] = await Promise.all([freePort(), freePort()])
    const g = group({ daemons: { x: { ...listener(xPort), restart: 'never' }, y: listener(yPort) } })
    await g.start()
    const y = g.supervisors.get('y')?.child?.pid
    const failed = next(g, 'failed', 'x')
    g.supervisors.get('x')?.child?.kill('SIGKILL')
    const { error } = await failed
    expect(error).toBeInstanceOf(Error)
    expect(g.supervisors.get('x')?.state).toBe('failed')
    expect(g.supervisors.get('y')?.state).toBe('running')
    expect(g.supervisors.get('y')?.child?.pid).toBe(y)
  })

  it("re-emits each Supervisor's events with its name; line events while someone listens", async () => {
    const g = group({
      daemons: {
        talk: { command: 'sh', args: ['-c', 'echo ready; echo more; exec sleep 1000'], ready: { stdout: 'ready' } },
      },
    })
    const lines: unknown[] = []
    const more = next(g, 'stdout', 'talk')
    g.on('stdout', (e) => lines.push(e))
    const running = next(g, 'running', 'talk')
    await g.start()
    expect(await running).toMatchObject({ name: 'talk', adopted: false, pid: g.supervisors.get('talk')?.child?.pid })
    await more
    expect(lines[0]).toEqual({ name: 'talk', line: 'ready' })
  })
})
