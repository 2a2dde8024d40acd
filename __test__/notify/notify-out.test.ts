// procward run under a service manager: a stand-in NOTIFY_SOCKET (made
// with procward's own binding) hears READY=1, STATUS=, STOPPING=1 and
// WATCHDOG=1 from the CLI's own pid, as systemd would.
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Supervisor, type SupervisorOptions } from '../../index.js'
import { Cli, cli, NODE } from '../cli/cli-process'
import { freePort, PROCWARD, sleep, tempDirs, trackProcesses, waitFor } from '../helpers'
import { environOf, native, StandIn } from './manager'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-notify-out-')

const SEND = join(__dirname, 'fixtures', 'sd-notify.py')
const BLOCKING_CLI = join(__dirname, 'fixtures', 'blocking-cli.cjs')
const send = (...args: string[]) => `python3 ${SEND} ${args.map((a) => `'${a}'`).join(' ')}`

const standIns: StandIn[] = []
function standIn(path: string | null = null, read = true): StandIn {
  const s = new StandIn(path, read)
  standIns.push(s)
  return s
}
afterEach(() => {
  for (const s of standIns.splice(0)) s.close()
})

/** What systemd sets that tells procward whether it is the unit's main process. */
const SYSTEMD_VARS = ['INVOCATION_ID', 'SYSTEMD_EXEC_PID']

/** How notify-out says a problem with the manager (package-internal: procward run's log lines use it). */
const { reportWith } = require('../../lib/supervisor/notify-out.js') as {
  reportWith(say: (text: string) => void): void
}

/** Runs `body` with this process's environment holding `vars` (and no SYSTEMD_VARS), restored after. */
async function withManagerEnv<T>(vars: Record<string, string>, body: () => Promise<T>): Promise<T> {
  const saved = { ...process.env }
  for (const k of SYSTEMD_VARS) delete process.env[k]
  Object.assign(process.env, vars)
  try {
    return await body()
  } finally {
    for (const k of ['NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID', ...SYSTEMD_VARS]) {
      if (saved[k] === undefined) delete process.env[k]
      else process.env[k] = saved[k]
    }
  }
}

/** This process's environment without SYSTEMD_VARS (the tests may run in a systemd unit of their own). */
function ownEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env }
  for (const k of SYSTEMD_VARS) delete env[k]
  return env
}

/** The environment of a CLI under `manager`. */
function under(manager: StandIn, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...ownEnv(), NOTIFY_SOCKET: manager.address, ...extra }
}

/** The child's pid from the CLI's log ('spawn pid N'). */
async function spawnedPid(c: Cli, n = 1): Promise<number> {
  await waitFor(() => c.pids('spawn').length >= n, 10_000, `spawn #${n}`)
  return c.pids('spawn')[n - 1] as number
}

describe.skipIf(!native.notifySupported())('procward run under a service manager', () => {
  it('sends READY=1 only once the child is ready, from its own pid, with STATUS=', async () => {
    const manager = standIn()
    const go = join(tempDir(), 'go')
    const c = new Cli(
      others,
      ['run', '--ready-notify', '--', 'sh', '-c', `${send('READY=1', '--trigger', go)}; exec sleep 100`],
      { env: under(manager) },
    )
    await spawnedPid(c)
    await manager.waitFor('STATUS')
    // Not ready: the child has said nothing yet, whatever the time.
    await sleep(500)
    expect(manager.with('READY')).toEqual([])
    writeFileSync(go, '')
    const ready = await manager.waitFor('READY', '1')
    expect(ready.pid).toBe(c.pid) // the main pid: no MAINPID= needed
    expect(ready.text).toMatch(/^READY=1\nSTATUS=sh running, pid \d+$/)
    expect(manager.messages.every((m) => m.pid === c.pid)).toBe(true)
    c.proc.kill('SIGTERM')
    await c.done
  })

  it("passes the child's own STATUS= (notify in) on to the manager", async () => {
    const manager = standIn()
    const script = `${send('STATUS=warming up')}; ${send('READY=1\\nSTATUS=serving 3 clients')}; exec sleep 100`
    const c = new Cli(others, ['run', '--ready-notify', '--', 'sh', '-c', script], { env: under(manager) })
    await manager.waitFor('STATUS', 'serving 3 clients')
    const texts = manager.texts()
    expect(texts.indexOf('STATUS=warming up')).toBeGreaterThanOrEqual(0)
    expect(texts.indexOf('STATUS=warming up')).toBeLessThan(texts.indexOf('STATUS=serving 3 clients'))
    c.proc.kill('SIGTERM')
    await c.done
  })

  it('with a port check, READY=1 comes when the port answers', async () => {
    const manager = standIn()
    const port = await freePort()
    const daemon = join(__dirname, '..', 'fixtures', 'http-daemon.cjs')
    const c = new Cli(
      others,
      ['run', '--ready-port', String(port), '--', NODE, daemon, '--port', String(port), '--delay-ms', '300'],
      { env: under(manager) },
    )
    await manager.waitFor('READY', '1')
    // Ready means it listens now.
    const res = await fetch(`http://127.0.0.1:${port}/`)
    expect(res.ok).toBe(true)
    await res.text()
    c.proc.kill('SIGTERM')
    await c.done
  })

  it('sends STOPPING=1 when SIGTERM begins the stop, and STATUS= for each event', async () => {
    const manager = standIn()
    const c = new Cli(others, ['run', '--', 'sleep', '100'], { env: under(manager) })
    const pid = await spawnedPid(c)
    // Without a ready check: READY=1 once it has run a while (1 s).
    await manager.waitFor('READY', '1')
    c.proc.kill('SIGTERM')
    const end = await c.done
    expect(end.signal).toBe('SIGTERM')
    const texts = manager.texts()
    const stopping = texts.findIndex((t) => t.startsWith('STOPPING=1'))
    expect(stopping).toBeGreaterThan(texts.findIndex((t) => t.startsWith('READY=1')))
    expect(texts).toContain(`STATUS=sleep starting, pid ${pid}`)
    expect(texts[stopping]).toBe('STOPPING=1\nSTATUS=sleep stopping')
    expect(texts.slice(stopping)).toContain(`STATUS=sleep pid ${pid} was killed by SIGTERM`)
    expect(texts.at(-1)).toBe('STATUS=sleep stopped')
    // Once only.
    expect(manager.with('STOPPING').length).toBe(1)
  })

  it('never reports a crash-looping daemon ready (with and without a ready check)', async () => {
    const port = await freePort()
    for (const args of [
      ['--max-restarts', '2', '--', 'sh', '-c', 'exit 1'],
      ['--max-restarts', '2', '--', 'sh', '-c', 'sleep 0.2; exit 1'],
      ['--max-restarts', '2', '--ready-port', String(port), '--', 'sh', '-c', 'sleep 0.1; exit 3'],
      ['--max-restarts', '1', '--ready-notify', '--', 'sh', '-c', 'exit 1'],
    ]) {
      const manager = standIn()
      const r = await cli(others, ['run', ...args], { env: under(manager) })
      expect(r.code, r.err).toBe(1)
      expect(r.err).toMatch(/given up after/)
      // Every message sent before the exit has been read once a last one is.
      const tx = native.NotifySender.open(manager.address)
      tx.send('X-END=1')
      tx.close()
      await manager.waitFor('X-END')
      expect(manager.with('READY'), args.join(' ')).toEqual([])
      expect(manager.with('STATUS').length).toBeGreaterThan(0)
      expect(manager.texts()).toContainEqual(expect.stringMatching(/^STOPPING=1\nSTATUS=sh failed: /))
    }
  })

  it('sends READY=1 again after each restart is ready', async () => {
    const manager = standIn()
    const c = new Cli(others, ['run', '--ready-notify', '--', 'sh', '-c', `${send('READY=1')}; exec sleep 100`], {
      env: under(manager),
    })
    const first = await spawnedPid(c)
    await manager.waitFor('READY', '1')
    process.kill(first, 'SIGKILL')
    const second = await spawnedPid(c, 2)
    await waitFor(() => manager.with('READY', '1').length === 2, 10_000, 'the second READY=1')
    expect(manager.with('READY', '1')[1]?.text).toBe(`READY=1\nSTATUS=sh running, pid ${second}`)
    expect(manager.texts()).toContain(`STATUS=sh pid ${first} was killed by SIGKILL`)
    expect(manager.texts()).toContainEqual(expect.stringMatching(/^STATUS=sh restarting in \d+ ms \(attempt 1\)$/))
    c.proc.kill('SIGTERM')
    await c.done
  })

  it("passes on none of the manager's variables, unless --ready-notify gives the child its own socket", async () => {
    const manager = standIn()
    const extra = { WATCHDOG_USEC: '5000000', WATCHDOG_PID: '1' }
    const plain = new Cli(others, ['run', '--', 'sleep', '100'], { env: under(manager, extra) })
    const env = await environOf(await spawnedPid(plain))
    for (const k of ['NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID']) expect(env.has(k), k).toBe(false)
    plain.proc.kill('SIGTERM')
    await plain.done

    const notify = new Cli(others, ['run', '--ready-notify', '--', 'sh', '-c', `${send('READY=1')}; exec sleep 100`], {
      env: under(manager, { WATCHDOG_USEC: '5000000' }),
    })
    await waitFor(() => notify.pids('ready').length === 1, 10_000, 'ready')
    const own = await environOf(notify.pids('ready')[0] as number)
    expect(own.get('NOTIFY_SOCKET')).toMatch(/^@procward\/notify\//)
    expect(own.get('NOTIFY_SOCKET')).not.toBe(manager.address)
    expect(own.has('WATCHDOG_USEC')).toBe(false)
    notify.proc.kill('SIGTERM')
    await notify.done
  })

  it('speaks to a socket file too (a path NOTIFY_SOCKET)', async () => {
    const path = join(tempDir(), 'notify')
    const manager = standIn(path)
    const c = new Cli(others, ['run', '--', 'sleep', '100'], { env: under(manager) })
    expect(manager.address).toBe(path)
    await manager.waitFor('READY', '1')
    c.proc.kill('SIGTERM')
    await c.done
  })

  it('says once, and runs on, when NOTIFY_SOCKET names no socket or the manager is gone', async () => {
    const bad = await cli(others, ['run', '--restart', 'never', '--', 'true'], {
      env: { ...process.env, NOTIFY_SOCKET: 'relative/notify' },
    })
    expect(bad.code).toBe(0)
    expect(bad.err).toMatch(/notify NOTIFY_SOCKET not used: .*names no socket/)

    const gone = await cli(others, ['run', '--restart', 'never', '--', 'sh', '-c', 'sleep 0.3'], {
      env: { ...process.env, NOTIFY_SOCKET: '@procward/notify/nobody-listens-here' },
    })
    expect(gone.code).toBe(0)
    expect(gone.err.match(/could not notify the service manager/g)?.length).toBe(1)
    expect(gone.err).toMatch(/ECONNREFUSED/)
  })

  it('drops what a full socket cannot take, and says so once', async () => {
    // Bound, never read: its queue fills with 1 ms watchdog pings.
    const manager = standIn(null, false)
    const c = new Cli(others, ['run', '--', 'sleep', '100'], { env: under(manager, { WATCHDOG_USEC: '2000' }) })
    await waitFor(() => /notify socket is full/.test(c.err), 20_000, 'the full socket to be said')
    await sleep(500)
    expect(c.err.match(/notify socket is full/g)?.length).toBe(1)
    c.proc.kill('SIGTERM')
    const end = await c.done
    expect(end.signal).toBe('SIGTERM') // the stop was not held up by the full socket
  })

  it('pings WATCHDOG=1 at half WATCHDOG_USEC while the child runs, and not while its loop is blocked', async () => {
    const manager = standIn()
    const dir = tempDir()
    const files = {
      BLOCK_FILE: join(dir, 'block'),
      BLOCKED_FILE: join(dir, 'blocked'),
      RELEASE_FILE: join(dir, 'release'),
    }
    const c = new Cli(
      others,
      ['run', '--', 'sleep', '100'],
      { env: under(manager, { WATCHDOG_USEC: '200000', ...files }) },
      BLOCKING_CLI,
    )
    const pings = () => manager.with('WATCHDOG', '1').length
    await waitFor(() => pings() >= 5, 10_000, 'pings')
    // About every 100 ms: far more than one per 200 ms period, never a burst.
    const t0 = Date.now()
    const n0 = pings()
    await sleep(1000)
    const rate = (pings() - n0) / ((Date.now() - t0) / 1000)
    expect(rate).toBeGreaterThan(2) // bounds of correctness, not of speed: 10/s expected
    expect(rate).toBeLessThan(40)

    writeFileSync(files.BLOCK_FILE, '')
    await waitFor(() => existsSync(files.BLOCKED_FILE), 10_000, 'the loop to block')
    // A ping already sent when it blocked may still be on its way.
    await sleep(200)
    const atBlock = pings()
    await sleep(1500) // 15 periods
    expect(pings() - atBlock).toBe(0)

    writeFileSync(files.RELEASE_FILE, '')
    await waitFor(() => pings() >= atBlock + 3, 10_000, 'pings to resume')
    c.proc.kill('SIGTERM')
    await c.done
    expect(readFileSync(files.BLOCKED_FILE, 'utf8')).not.toBe('')
  })

  const NOT_MAIN =
    /: notify .*make procward the main process: ExecStart=<app>\/node_modules\/\.bin\/procward run .* with WorkingDirectory=<app> \(never npx/g

  it('sends no watchdog pings when WATCHDOG_PID names another process, and says once what to change', async () => {
    const manager = standIn()
    const other = new Cli(others, ['run', '--', 'sleep', '100'], {
      env: under(manager, { WATCHDOG_USEC: '20000', WATCHDOG_PID: '1' }),
    })
    await manager.waitFor('READY', '1')
    await sleep(300) // 30 periods
    expect(manager.with('WATCHDOG')).toEqual([])
    other.proc.kill('SIGTERM')
    await other.done
    expect(other.err.match(NOT_MAIN)).toHaveLength(1)
    expect(other.err).toMatch(/WATCHDOG_PID=1 names another process, not procward \(pid \d+\)/)
  })

  it("says once when the manager started another process (SYSTEMD_EXEC_PID, or under systemd a parent that is not it), never when it is procward's", async () => {
    const manager = standIn()
    const runs = [
      { SYSTEMD_EXEC_PID: '1' },
      { INVOCATION_ID: '0123456789abcdef0123456789abcdef' }, // our parent: this test, not systemd
      {}, // no sign of systemd: a container runtime, a stand-in
    ]
    const errs: string[] = []
    for (const extra of runs) {
      const c = new Cli(others, ['run', '--', 'sleep', '100'], { env: under(manager, extra) })
      await waitFor(() => c.pids('spawn').length === 1, 10_000, 'the spawn')
      c.proc.kill('SIGTERM')
      await c.done
      errs.push(c.err)
    }
    expect(errs.map((e) => e.match(NOT_MAIN)?.length ?? 0)).toEqual([1, 1, 0])
    expect(errs[0]).toMatch(/the service manager started pid 1, not procward/)
    expect(errs[1]).toMatch(/procward's parent is pid \d+ \([^)]+\), not the service manager/)
  })

  /** A Supervisor with `notify: true` under `manager`, its watchdog at `usec`; `said`: the problems it reported. */
  async function underManager<T>(
    manager: StandIn,
    usec: string,
    options: SupervisorOptions,
    body: (sup: Supervisor, said: string[]) => Promise<T>,
  ): Promise<T> {
    const said: string[] = []
    reportWith((t) => said.push(t))
    return await withManagerEnv({ NOTIFY_SOCKET: manager.address, WATCHDOG_USEC: usec }, async () => {
      const sup = new Supervisor({ ...options, notify: true })
      try {
        const result = await body(sup, said)
        // The manager's variables were taken from this process's environment at start().
        expect(process.env.NOTIFY_SOCKET).toBeUndefined()
        expect(process.env.WATCHDOG_USEC).toBeUndefined()
        return result
      } finally {
        await sup.stop({ signal: 'SIGKILL' }).catch(() => {})
      }
    })
  }

  /** The pings `manager` hears over `ms` while `sup` stays in `state` throughout. */
  async function pingsIn(manager: StandIn, sup: Supervisor, state: string, ms: number): Promise<number> {
    await waitFor(() => sup.state === state, 10_000, `the ${state} state (${sup.state})`)
    const n = manager.with('WATCHDOG', '1').length
    await sleep(ms)
    expect(sup.state).toBe(state)
    return manager.with('WATCHDOG', '1').length - n
  }

  it('pings WATCHDOG=1 in a backoff longer than half the watchdog (a crash loop is no stuck loop)', async () => {
    const manager = standIn()
    // 100 ms pings; every backoff is 1500 ms, 15 periods.
    const options = { command: 'sh', args: ['-c', 'exit 1'], backoff: { initialMs: 1500, stepMs: 1500, factor: 1 } }
    await underManager(manager, '200000', options, async (sup, said) => {
      const restarts: number[] = []
      sup.on('restart', ({ attempt }) => restarts.push(attempt))
      sup.start().catch(() => {})
      for (let i = 1; i <= 2; i++) {
        await waitFor(() => restarts.length === i, 10_000, `restart ${i} (${sup.state})`)
        expect(await pingsIn(manager, sup, 'backoff', 1000)).toBeGreaterThanOrEqual(3)
      }
      expect(manager.texts()).toContainEqual(expect.stringMatching(/^STATUS=sh restarting in 1500 ms \(attempt 1\)$/))
      expect(said).toEqual([])
    })
    await manager.waitFor('STOPPING', '1')
  })

  it('pings WATCHDOG=1 while starting (a ready check under way) and while stopping (a daemon that ignores SIGTERM)', async () => {
    const manager = standIn()
    const port = await freePort()
    const options = {
      command: 'sh',
      args: ['-c', 'trap "" TERM; sleep 100 & wait; sleep 100'],
      ready: { port },
      readyTimeoutMs: 60_000,
      spawn: { stop: { graceMs: 1500 } },
    }
    await underManager(manager, '200000', options, async (sup) => {
      sup.start().catch(() => {})
      expect(await pingsIn(manager, sup, 'starting', 1000)).toBeGreaterThanOrEqual(3)
      const stopped = sup.stop()
      expect(await pingsIn(manager, sup, 'stopping', 1000)).toBeGreaterThanOrEqual(3)
      await stopped
    })
  })
})

describe.skipIf(!native.notifySupported())('notify: true (an app that embeds a Supervisor)', () => {
  /** Sends `text` to `manager` from this process, and waits until it is heard: what came before it has been heard too. */
  async function mark(manager: StandIn, text: string): Promise<number> {
    const tx = native.NotifySender.open(manager.address)
    expect(tx.send(text)).toBe(true)
    tx.close()
    await waitFor(() => manager.texts().includes(text), 10_000, text)
    return manager.texts().indexOf(text)
  }

  it('one per process: a second throws naming the first until the first has stopped; without a manager alike', async () => {
    for (const socket of [standIn().address, undefined]) {
      const vars: Record<string, string> = socket === undefined ? {} : { NOTIFY_SOCKET: socket }
      await withManagerEnv(vars, async () => {
        if (socket === undefined) delete process.env.NOTIFY_SOCKET
        const first = new Supervisor({ command: 'sleep', args: ['100'], name: 'first', notify: true })
        let refused: unknown
        try {
          new Supervisor({ command: 'true', name: 'second', notify: true })
        } catch (err) {
          refused = err
        }
        expect(refused).toBeInstanceOf(TypeError)
        expect(refused).toMatchObject({
          code: 'ERR_INVALID_ARG_VALUE',
          message: expect.stringMatching(
            /^options\.notify: first speaks to the service manager already, until it stops/,
          ),
        })
        // Without notify, any number.
        new Supervisor({ command: 'true', name: 'third' })
        await first.start()
        await first.stop()
        const second = new Supervisor({ command: 'sleep', args: ['100'], name: 'second', notify: true })
        await second.start()
        await second.stop()
      })
    }
  })

  it('says nothing of a stop before a run began; pings from start() to the end, none after', async () => {
    const manager = standIn()
    const said: string[] = []
    reportWith((t) => said.push(t))
    // 10 ms pings.
    await withManagerEnv({ NOTIFY_SOCKET: manager.address, WATCHDOG_USEC: '20000' }, async () => {
      const sup = new Supervisor({ command: 'sleep', args: ['100'], notify: true })
      await sup.stop()
      await mark(manager, 'X-MARK=before')
      expect(manager.with('STOPPING')).toEqual([])
      expect(manager.with('WATCHDOG')).toEqual([])
      await sup.start()
      await manager.waitFor('WATCHDOG', '1')
      await manager.waitFor('READY', '1')
      await sup.stop()
      await manager.waitFor('STOPPING', '1')
      const stopped = await mark(manager, 'X-MARK=stopped')
      await sleep(200) // 20 periods
      const later = await mark(manager, 'X-MARK=later')
      expect(manager.texts().slice(stopped + 1, later)).toEqual([])
      expect(said).toEqual([])
    })
  })

  it("notifyServiceManager sends an app's own fields as one message; false without a manager; bad fields refused", async () => {
    const { notifyServiceManager } = await import('../../index.js')
    const manager = standIn()
    await withManagerEnv({ NOTIFY_SOCKET: manager.address }, async () => {
      expect(notifyServiceManager({ STATUS: 'resyncing', X_APP: 'a=b' })).toBe(true)
      await waitFor(() => manager.texts().includes('STATUS=resyncing\nX_APP=a=b'), 10_000, 'the message')
    })
    for (const bad of [{}, { status: 'x' }, { STATUS: 'two\nlines' }, { 'A=B': 'x' }]) {
      expect(() => notifyServiceManager(bad)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }))
    }
    expect(() => notifyServiceManager({ STATUS: 1 } as never)).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }),
    )
    expect(() => notifyServiceManager(null as never)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }))
    // A process no manager started: false, nothing thrown.
    const alone = execFileSync(
      NODE,
      ['-p', `require(${JSON.stringify(PROCWARD)}).notifyServiceManager({ STATUS: 'x' })`],
      {
        env: ownEnv(),
        encoding: 'utf8',
      },
    )
    expect(alone.trim()).toBe('false')
  })
})
