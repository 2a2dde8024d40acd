// Held sockets (options.listen) and reload(): the supervisor binds the
// sockets once and hands them to every daemon as systemd does, so a kill -9
// restart refuses no connection and a reload fails no request. Real
// daemons (fixtures/listen-daemon.cjs), a real client on loopback counting
// what it sees; bounds on correctness (refused: 0), never on speed.
import { existsSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { readSupervisorState, type Supervisor, type SupervisorOptions } from '../../index.js'
import {
  aliveInProcTable,
  DAEMON_NODE,
  FIXTURES,
  getJson,
  NODE,
  PROCWARD,
  sleep,
  tempDirs,
  thrown,
  trackProcesses,
  waitFor,
} from '../helpers'
import { trackSupervisors } from './helpers'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-held-')
const supervisor = trackSupervisors()
const DAEMON = join(FIXTURES, 'listen-daemon.cjs')

type Answer = { pid: number; [k: string]: unknown }

/** A client sending requests back to back (a new connection each), counting what it sees, until stop(). */
function clientLoop(port: number) {
  const seen = { ok: 0, refused: 0, other: [] as string[], pids: new Set<number>() }
  let running = true
  const done = (async () => {
    while (running) {
      try {
        const a = await getJson<Answer>(port)
        seen.ok++
        seen.pids.add(a.pid)
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code ?? String(err)
        if (code === 'ECONNREFUSED') seen.refused++
        else seen.other.push(code)
      }
    }
  })()
  return {
    seen,
    stop: async () => {
      running = false
      await done
      return seen
    },
  }
}

function daemon(more: Partial<SupervisorOptions> = {}, args: string[] = []): SupervisorOptions {
  return {
    command: DAEMON_NODE,
    args: [DAEMON, ...args],
    listen: [{ port: 0 }],
    ready: { stdout: 'serving' },
    backoff: { initialMs: 0, stepMs: 0 },
    crashLoop: { maxRestarts: 1000 },
    ...more,
  }
}

async function started(o: SupervisorOptions): Promise<[Supervisor, number]> {
  const s = supervisor(o)
  await s.start()
  const port = s.listening[0]?.port as number
  return [s, port]
}

function refusedNow(port: number): Promise<string> {
  return new Promise((resolve) => {
    const c = net.connect({ host: '127.0.0.1', port })
    c.once('connect', () => {
      c.destroy()
      resolve('connected')
    })
    c.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? String(err)))
  })
}

describe('held sockets: bound once, handed over as systemd does', () => {
  it('port 0 gets a real port; the child has LISTEN_FDS, LISTEN_FDNAMES and its own LISTEN_PID', async () => {
    const [s, port] = await started(daemon({ listen: [{ port: 0 }, { port: 0, name: 'admin' }] }))
    expect(port).toBeGreaterThan(0)
    expect(s.listening).toEqual([
      { name: `tcp-${port}`, host: '127.0.0.1', port },
      { name: 'admin', host: '127.0.0.1', port: s.listening[1]?.port },
    ])
    const a = await getJson<Answer>(port, '/env')
    expect(a.pid).toBe(s.child?.pid)
    expect(a.env).toEqual({ LISTEN_FDS: '2', LISTEN_FDNAMES: `tcp-${port}:admin`, LISTEN_PID: String(a.pid) })
    // The second socket is served too, by the same daemon.
    expect((await getJson<Answer>(s.listening[1]?.port as number)).pid).toBe(a.pid)
  })

  it('nothing else of the supervisor reaches the child: its fds are 0, 1, 2 and the sockets', async () => {
    const dir = tempDir()
    // Read from outside, once the program (sleep, which opens nothing) runs.
    const s = supervisor({
      command: 'sh',
      args: ['-c', 'echo ready; exec sleep 60'],
      listen: [{ port: 0 }, { path: join(dir, 's.sock') }],
      ready: { stdout: 'ready' },
    })
    await s.start()
    const pid = s.child?.pid as number
    // Once sleep sleeps (its loader opens libc.so for an instant after the
    // exec), its fd table is what it inherited.
    const list = () =>
      readdirSync(`/proc/${pid}/fd`)
        .map(Number)
        .sort((a, b) => a - b)
    const sleeping = () => {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      return readFileSync(`/proc/${pid}/comm`, 'utf8') === 'sleep\n' && stat.slice(stat.lastIndexOf(')') + 2)[0] === 'S'
    }
    let fds: number[] = []
    await waitFor(
      () => {
        fds = list()
        return sleeping() && String(fds) === String(list())
      },
      5000,
      'sleep asleep',
    )
    const what = fds.map((fd) => `${fd} ${readlinkSync(`/proc/${pid}/fd/${fd}`)}`)
    expect(fds, what.join('\n')).toEqual([0, 1, 2, 3, 4])
    expect(what[3]).toMatch(/^3 socket:\[\d+\]$/)
    expect(what[4]).toMatch(/^4 socket:\[\d+\]$/)
  })

  it('a unix socket: its mode set before anyone can connect, served, and its file removed by stop()', async () => {
    const dir = tempDir()
    const path = join(dir, 'd.sock')
    const s = supervisor(daemon({ listen: [{ path, mode: 0o600, name: 'web' }] }))
    await s.start()
    expect(s.listening).toEqual([{ name: 'web', path }])
    expect(statSync(path).mode & 0o777).toBe(0o600)
    const answer = await new Promise<Answer>((resolve, reject) => {
      http
        .get({ socketPath: path, path: '/', agent: false }, (res) => {
          let b = ''
          res.on('data', (d) => {
            b += d
          })
          res.on('end', () => resolve(JSON.parse(b)))
        })
        .on('error', reject)
    })
    expect(answer.pid).toBe(s.child?.pid)
    await s.stop()
    expect(existsSync(path)).toBe(false)
  })

  it('across 20 kill -9s, a client sending requests back to back is refused no connection', async () => {
    const [s, port] = await started(daemon())
    const client = clientLoop(port)
    const pids = new Set<number>()
    for (let i = 0; i < 20; i++) {
      const child = s.child
      if (child === null) throw new Error('no child running')
      pids.add(child.pid)
      const next = new Promise<void>((r) => s.once('running', () => r()))
      child.kill('SIGKILL')
      await next
      await sleep(20)
    }
    const seen = await client.stop()
    expect(pids.size).toBe(20)
    expect(seen.refused).toBe(0)
    expect(seen.ok).toBeGreaterThan(0)
    // A request the killed daemon had accepted is lost (as under systemd):
    // reset, never refused.
    for (const code of seen.other) expect(['ECONNRESET', 'socket hang up']).toContain(code)
  })

  it('after stop() the socket is closed: a connect is refused', async () => {
    const [s, port] = await started(daemon())
    expect((await getJson<Answer>(port)).pid).toBe(s.child?.pid)
    await s.stop()
    expect(await refusedNow(port)).toBe('ECONNREFUSED')
  })

  it('a port in use rejects start() with the address and EADDRINUSE, nothing spawned', async () => {
    const taken = net.createServer()
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r))
    const port = (taken.address() as net.AddressInfo).port
    try {
      const s = supervisor(daemon({ listen: [{ port }] }))
      let spawned = 0
      s.on('spawn', () => spawned++)
      const err = await s.start().then(
        () => null,
        (e) => e,
      )
      expect(err?.code).toBe('EADDRINUSE')
      expect(err?.message).toContain(`127.0.0.1:${port}`)
      expect(err?.port).toBe(port)
      expect(s.state).toBe('failed')
      expect(spawned).toBe(0)
    } finally {
      taken.close()
    }
  })
})

describe('reload(): a replacement no request sees', () => {
  it('10 reloads fail no request; a slow request in flight is finished by the old daemon', async () => {
    const [s, port] = await started(daemon())
    const client = clientLoop(port)
    const events: Array<{ from: number | null; to: number | null; ok: boolean }> = []
    s.on('reload', (e) => events.push(e))
    for (let i = 0; i < 10; i++) {
      const old = s.child?.pid
      const slow = getJson<Answer>(port, '/slow?ms=400')
      await sleep(50) // accepted by the old daemon
      await s.reload()
      const a = await slow
      expect(a.pid).toBe(old)
      expect(s.child?.pid).not.toBe(old)
      await waitFor(() => old !== undefined && !aliveInProcTable(old), 5000, 'the old daemon gone')
    }
    const seen = await client.stop()
    expect(seen.refused).toBe(0)
    expect(seen.other).toEqual([])
    expect(seen.ok).toBeGreaterThan(0)
    expect(events).toHaveLength(10)
    expect(events.every((e) => e.ok && e.from !== e.to)).toBe(true)
  })

  it('reload() takes new args, as restart() does', async () => {
    const [s, port] = await started(daemon())
    const old = s.child?.pid as number
    await s.reload({ args: [DAEMON, '--delay-ms', '10'] })
    // The old one may accept a last connection before its SIGTERM is handled.
    await waitFor(() => !aliveInProcTable(old), 5000, 'the old daemon gone')
    const a = await getJson<Answer>(port)
    expect(a.pid).toBe(s.child?.pid)
    expect(a.pid).not.toBe(old)
    expect(a.args).toEqual(['--delay-ms', '10'])
  })

  it('a successor that never gets ready is stopped; reload() rejects and the old one serves on', async () => {
    const o = daemon({ readyTimeoutMs: 500 })
    const [s, port] = await started(o)
    const old = s.child?.pid as number
    let spawned = 0
    s.on('spawn', (c) => {
      spawned = c.pid
    })
    const events: Array<{ ok: boolean; error: Error | null }> = []
    s.on('reload', (e) => events.push(e))
    const err = await s.reload({ args: [DAEMON, '--never'] }).then(
      () => null,
      (e) => e,
    )
    expect(err?.code).toBe('ERR_READY_TIMEOUT')
    expect(events).toHaveLength(1)
    expect(events[0]?.ok).toBe(false)
    expect(s.state).toBe('running')
    expect(s.child?.pid).toBe(old)
    expect((await getJson<Answer>(port)).pid).toBe(old)
    expect(spawned).not.toBe(0)
    expect(aliveInProcTable(spawned)).toBe(false)
    expect(s.status().next).toBe(null)
  })

  it('ready { http } on the held port: an answer from the old daemon does not make the successor ready', async () => {
    const s = supervisor(daemon({ ready: undefined, readyTimeoutMs: 1500 }))
    await s.start()
    const port = s.listening[0]?.port as number
    const old = s.child?.pid as number
    const t = supervisor(
      // Room for a loaded machine: the successor must win one accept from the warm daemon beside it.
      daemon({ listen: [{ port }], ready: { http: `http://127.0.0.1:${port}/` }, readyTimeoutMs: 5000 }),
    )
    await s.stop()
    await t.start()
    const serving = t.child?.pid as number
    expect(serving).not.toBe(old)
    // The successor never accepts; the old one answers every GET.
    const err = await t.reload({ args: [DAEMON, '--never'] }).then(
      () => null,
      (e) => e,
    )
    expect(err?.code).toBe('ERR_READY_TIMEOUT')
    expect(t.child?.pid).toBe(serving)
    // One that does accept, later than the old one answers, is ready once it answers.
    await t.reload({ args: [DAEMON, '--delay-ms', '300'] })
    await waitFor(() => !aliveInProcTable(serving), 5000, 'the old daemon gone')
    expect((await getJson<Answer>(port)).pid).toBe(t.child?.pid)
  })

  it('a successor that crashes before it is ready: reload() rejects, the old one serves on', async () => {
    const [s, port] = await started(daemon())
    const old = s.child?.pid as number
    const err = await s.reload({ args: ['-e', 'process.exit(7)'] }).then(
      () => null,
      (e) => e,
    )
    expect(err?.code).toBe('ERR_RELOAD_FAILED')
    expect(err?.message).toContain('exited with code 7')
    expect(s.child?.pid).toBe(old)
    expect((await getJson<Answer>(port)).pid).toBe(old)
  })

  it('during the overlap the record and status() name both; a second reload() joins the first', async () => {
    const dir = tempDir()
    const stateFile = join(dir, 'state.json')
    const [s] = await started(daemon({ stateFile }))
    const old = s.child?.pid as number
    const spawns: number[] = []
    s.on('spawn', (c) => spawns.push(c.pid))
    const first = s.reload({ args: [DAEMON, '--delay-ms', '2000'] })
    const second = s.reload()
    await waitFor(() => spawns.length === 1, 5000, 'the successor spawned')
    const next = spawns[0]
    expect(s.status().pid).toBe(old)
    expect(s.status().next?.pid).toBe(next)
    await waitFor(() => readSupervisorState(stateFile)?.next?.pid === next, 5000, 'the record naming next')
    expect(readSupervisorState(stateFile)?.child?.pid).toBe(old)
    await Promise.all([first, second])
    expect(spawns).toEqual([next])
    expect(s.child?.pid).toBe(next)
    await waitFor(() => readSupervisorState(stateFile)?.next === null, 5000, 'the record without next')
  })

  it('stop() during the overlap ends both daemons and rejects the reload', async () => {
    const [s, port] = await started(daemon())
    const old = s.child?.pid as number
    let next = 0
    s.on('spawn', (c) => {
      next = c.pid
    })
    const reloading = s.reload({ args: [DAEMON, '--delay-ms', '2000'] }).then(
      () => null,
      (e) => e,
    )
    await waitFor(() => next !== 0, 5000, 'the successor spawned')
    await s.stop()
    expect((await reloading)?.code).toBe('ERR_RELOAD_ABANDONED')
    expect(aliveInProcTable(old)).toBe(false)
    expect(aliveInProcTable(next)).toBe(false)
    expect(await refusedNow(port)).toBe('ECONNREFUSED')
  })

  it('stop() right after a reload waits for the old daemon, still finishing its requests, too', async () => {
    const [s, port] = await started(daemon())
    const old = s.child?.pid as number
    // A request the old daemon is serving holds its SIGTERM'd exit back.
    const slow = getJson<Answer>(port, '/slow?ms=1500').catch((e) => e)
    await sleep(50)
    await s.reload()
    const next = s.child?.pid as number
    expect(aliveInProcTable(old)).toBe(true)
    await s.stop()
    expect(aliveInProcTable(old)).toBe(false)
    expect(aliveInProcTable(next)).toBe(false)
    expect(((await slow) as Answer).pid).toBe(old)
  })

  it('the old daemon crashing during the overlap: the successor takes over, one daemon serves', async () => {
    const [s, port] = await started(daemon())
    const old = s.child?.pid as number
    let next = 0
    s.on('spawn', (c) => {
      next = c.pid
    })
    const reloading = s.reload({ args: [DAEMON, '--delay-ms', '500'] })
    await waitFor(() => next !== 0, 5000, 'the successor spawned')
    process.kill(old, 'SIGKILL')
    await reloading
    expect(s.child?.pid).toBe(next)
    expect(s.state).toBe('running')
    expect((await getJson<Answer>(port)).pid).toBe(next)
    expect(aliveInProcTable(old)).toBe(false)
  })

  it('restart() during the overlap: both stopped before the new one starts, which alone serves', async () => {
    const [s, port] = await started(daemon())
    const old = s.child?.pid as number
    const spawns: number[] = []
    s.on('spawn', (c) => spawns.push(c.pid))
    const reloading = s.reload({ args: [DAEMON, '--delay-ms', '2000'] }).then(
      () => null,
      (e) => e,
    )
    await waitFor(() => spawns.length === 1, 5000, 'the successor spawned')
    await s.restart({ args: [DAEMON] })
    expect((await reloading)?.code).toBe('ERR_RELOAD_ABANDONED')
    expect(spawns).toHaveLength(2)
    expect(aliveInProcTable(old)).toBe(false)
    expect(aliveInProcTable(spawns[0] as number)).toBe(false)
    expect((await getJson<Answer>(port)).pid).toBe(spawns[1])
  })

  it('a supervisor SIGKILLed during the overlap leaves neither daemon running', async () => {
    const script = `
      const { Supervisor } = require(${JSON.stringify(PROCWARD)})
      const s = new Supervisor({ command: process.execPath, args: [${JSON.stringify(DAEMON)}], listen: [{ port: 0 }], ready: { stdout: 'serving' } })
      s.on('spawn', (c) => console.log('spawn ' + c.pid))
      s.start().then(() => { s.reload({ args: [${JSON.stringify(DAEMON)}, '--delay-ms', '5000'] }).catch(() => {}) })`
    const p = others.spawn(NODE, ['-e', script])
    const pids: number[] = []
    p.stdout?.on('data', (d) => {
      for (const m of String(d).matchAll(/spawn (\d+)/g)) pids.push(Number(m[1]))
    })
    await waitFor(() => pids.length === 2, 10_000, 'both daemons spawned')
    const reaped = new Promise((r) => p.once('exit', r))
    p.kill('SIGKILL')
    await reaped
    for (const pid of pids) await waitFor(() => !aliveInProcTable(pid), 5000, `daemon ${pid} gone`)
  })

  it('without listen, reload() is refused with a clear error', async () => {
    const s = supervisor({ command: 'sleep', args: ['60'] })
    await s.start()
    const err = await s.reload().then(
      () => null,
      (e) => e,
    )
    expect(err?.code).toBe('ERR_RELOAD_WITHOUT_LISTEN')
    expect(err?.message).toContain('restart()')
  })
})

describe('bad input starts nothing', () => {
  it.each([
    [{ listen: [] }, 'ERR_INVALID_ARG_VALUE', 'options.listen must name 1 to'],
    [{ listen: [{ port: 70000 }] }, 'ERR_OUT_OF_RANGE', 'options.listen[0].port'],
    [{ listen: [{ port: -1 }] }, 'ERR_OUT_OF_RANGE', 'options.listen[0].port'],
    [{ listen: [{ path: 'rel.sock' }] }, 'ERR_INVALID_ARG_VALUE', 'must be an absolute path'],
    [{ listen: [{ port: 0, name: 'a:b' }] }, 'ERR_INVALID_ARG_VALUE', "must not contain ':'"],
    [{ listen: [{ port: 8080, host: 'localhost' }] }, 'ERR_INVALID_ARG_VALUE', 'must be an IP address'],
    [{ listen: [{ host: '127.0.0.1' }] }, 'ERR_INVALID_ARG_VALUE', 'neither a port nor a path'],
    [{ listen: [{ port: 8080, path: '/x' }] }, 'ERR_INVALID_ARG_VALUE', 'options.listen[0]'],
    [{ listen: [{ port: 8080 }], ready: { port: 8080 } }, 'ERR_INVALID_ARG_VALUE', 'always succeeds'],
    [
      { listen: [{ port: 8080, host: '0.0.0.0' }], health: { check: { port: 8080 } } },
      'ERR_INVALID_ARG_VALUE',
      'always succeeds',
    ],
    [{ listen: [{ port: 8080 }], takeover: 'adopt', stateFile: '/tmp/x.json' }, 'ERR_INVALID_ARG_VALUE', "'adopt'"],
    [{ listen: 8080 }, 'ERR_INVALID_ARG_TYPE', 'options.listen must be an array'],
  ])('%j → %s', (extra, code, text) => {
    const err = thrown(() => supervisor({ command: 'true', ...(extra as Partial<SupervisorOptions>) }))
    expect(err.code).toBe(code)
    expect(String(err.message)).toContain(text)
  })

  it('a ready http check is accepted and works on a held port', async () => {
    const s = supervisor(daemon({ listen: [{ port: 0 }], ready: undefined }))
    await s.start()
    const port = s.listening[0]?.port as number
    await s.stop()
    const t = supervisor(daemon({ listen: [{ port }], ready: { http: `http://127.0.0.1:${port}/` } }))
    await t.start()
    expect((await getJson<Answer>(port)).pid).toBe(t.child?.pid)
  })
})
