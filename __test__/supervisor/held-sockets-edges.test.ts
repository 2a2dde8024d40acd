// Held sockets and reload() where users run them, from an adversarial
// review: a listener whose queue is full, a reload in backoff (its outcome
// still said, to procward reload too), a port check naming a held port in
// another way, socket activation, fd leaks across many reloads, IPv6, a
// successor that exits 0, a symlinked path, start() after stop(), few fds,
// a forged record. Real processes; bounds on correctness, never on speed.
import { type ChildProcess, execFile } from 'node:child_process'
import { readFileSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { readSupervisorState, type Supervisor, type SupervisorOptions } from '../../index.js'
import { cli as runCli } from '../cli/cli-process'
import {
  aliveInProcTable,
  CLI,
  DAEMON_NODE,
  FIXTURES,
  fdsLeftSince,
  freePort,
  getJson,
  hasPython,
  NODE,
  openFds,
  PROCWARD,
  runWithFewFds,
  tempDirs,
  thrown,
  trackProcesses,
  waitFor,
} from '../helpers'
import { eventsOf, recordWhen, SUPERVISOR_COPY, trackSupervisors } from './helpers'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-held-edges-')
const supervisor = trackSupervisors()
const cli = (args: string[]) => runCli(others, args)
const DAEMON = join(FIXTURES, 'listen-daemon.cjs')
const execFileP = promisify(execFile)

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

/** The first line of `proc`'s stdout. */
function firstStdoutLine(proc: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = ''
    proc.stdout?.on('data', (d) => {
      out += d
      const nl = out.indexOf('\n')
      if (nl >= 0) resolve(out.slice(0, nl))
    })
    proc.once('exit', () => reject(new Error(`exited before a line: ${out}`)))
  })
}

// A socket unit, as python plays it: a listening socket on 127.0.0.1:PORT
// (argv[1]; 'file': a plain file instead) at fd 3, LISTEN_FDS=1,
// LISTEN_FDNAMES=web and LISTEN_PID = its own pid, which the exec keeps.
const ACTIVATE = `
import os, socket, sys
if sys.argv[1] == 'file':
    fd = os.open('/dev/null', os.O_RDONLY)
else:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(16); fd = s.fileno()
os.dup2(fd, 3); os.set_inheritable(3, True)
os.environ.update(LISTEN_FDS='1', LISTEN_FDNAMES='web', LISTEN_PID=str(os.getpid()))
os.execv(sys.argv[2], sys.argv[2:])
`

describe.skipIf(process.platform !== 'linux')('held sockets: what an adversarial review found', () => {
  it.skipIf(!hasPython())(
    'a unix path whose live listener has a full backlog: start() rejects EADDRINUSE, it does not hang the process',
    async () => {
      // The stale-socket probe (held_sockets.rs has_listener) connects with a
      // blocking socket: on a full backlog a unix connect waits, on the JS
      // thread, for as long as the other side does not accept.
      const path = join(tempDir(), 'full.sock')
      const holder = others.spawn('python3', [
        '-c',
        `import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(0)
cs = []
for i in range(4):
    c = socket.socket(socket.AF_UNIX); c.setblocking(False)
    try: c.connect(sys.argv[1])
    except BlockingIOError: pass
    cs.append(c)
print('full', flush=True)
time.sleep(600)`,
        path,
      ])
      expect(await firstStdoutLine(holder)).toBe('full')
      const script = `
        const { Supervisor } = require(${JSON.stringify(PROCWARD)})
        const s = new Supervisor({ command: 'sleep', args: ['60'], listen: [{ path: ${JSON.stringify(path)} }] })
        s.start().then(() => { console.log('started'); return s.stop() }, (e) => console.log('rejected ' + e.code))`
      // A hang is only seen by a deadline: a generous one, not a speed bound.
      const out = await execFileP(NODE, ['-e', script], { timeout: 20_000, killSignal: 'SIGKILL' }).then(
        (r) => r.stdout.trim(),
        (e) => `hung or died (${e.signal ?? e.code})`,
      )
      expect(out).toBe('rejected EADDRINUSE')
    },
  )

  it('reload() of a supervisor in backoff is reported as a reload: the event and the record', async () => {
    // procward reload (and Type=notify-reload) wait for the record's
    // lastReload; a reload that became a restart must still say its outcome.
    const dir = tempDir()
    const flag = join(dir, 'fail')
    const stateFile = join(dir, 'web.json')
    const s = supervisor(daemon({ stateFile, backoff: { initialMs: 60_000, stepMs: 0 } }, ['--fail-if', flag]))
    await s.start()
    writeFileSync(flag, '')
    const events: Array<{ ok: boolean }> = []
    s.on('reload', (e) => events.push(e))
    process.kill(s.child?.pid as number, 'SIGKILL')
    await waitFor(() => s.state === 'backoff', 10_000, 'backoff')
    unlinkSync(flag)
    await s.reload()
    expect(s.state).toBe('running')
    expect(events).toHaveLength(1)
    expect(events[0]?.ok).toBe(true)
    // Said in the record once the restart standing for it is ready.
    const r = await recordWhen(stateFile, (r) => r.state === 'running' && r.lastReload != null, 'the outcome recorded')
    expect(r.lastReload?.ok).toBe(true)
    expect(r.lastReload?.to).toBe(s.child?.pid)
  })

  it('procward reload of a supervisor in backoff: exit 0 once its daemon serves, not a wait for its timeout', async () => {
    const dir = tempDir()
    const flag = join(dir, 'fail')
    const stateFile = join(dir, 'web.json')
    const options = daemon({ stateFile, backoff: { initialMs: 60_000, stepMs: 0 }, handleSignals: { hup: 'reload' } }, [
      '--fail-if',
      flag,
    ])
    const sup = others.spawn(NODE, [SUPERVISOR_COPY, PROCWARD, JSON.stringify(options)], {
      stdio: ['ignore', 'ignore', 'ignore', 'pipe'],
    })
    const events = eventsOf(sup)
    const r = await recordWhen(stateFile, (r) => r.state === 'running', 'running')
    writeFileSync(flag, '')
    process.kill(r.child?.pid as number, 'SIGKILL')
    await recordWhen(stateFile, (r) => r.state === 'backoff', 'backoff')
    unlinkSync(flag)
    const out = await cli(['reload', stateFile, '--timeout', '15000'])
    expect(out.err).not.toContain('no outcome')
    expect(out.code).toBe(0)
    expect(events.some((e) => e.event === 'ready')).toBe(true)
  })

  it.each([
    ['localhost', 'a name for the held address'],
    ['::ffff:127.0.0.1', 'the held IPv4 address as IPv6'],
  ])('ready { port, host: %j } on a held port (%s) is refused as 127.0.0.1 is', async (host) => {
    const port = await freePort()
    const e = thrown(
      () =>
        supervisor({
          command: 'sleep',
          args: ['60'],
          listen: [{ port }],
          ready: { port, host },
          readyTimeoutMs: 3000,
        }) as Supervisor | undefined,
    )
    expect(e?.code).toBe('ERR_INVALID_ARG_VALUE')
  })

  it.skipIf(!hasPython())(
    'under socket activation, --ready-port on the handed socket is refused as with --listen (sleep is never "ready")',
    async () => {
      const port = await freePort()
      const p = others.spawn(
        'python3',
        ['-c', ACTIVATE, String(port), NODE, CLI, 'run', '--json', '--ready-port', String(port), '--', 'sleep', '60'],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      )
      // The --json events and the errors both go to stderr.
      let err = ''
      const code = await new Promise<number | string>((resolve) => {
        p.once('exit', (c, s) => resolve(c ?? String(s)))
        p.stderr?.on('data', (d) => {
          err += d
          if (err.includes('"event":"ready"')) resolve('ready')
        })
      })
      expect(err).not.toContain('"event":"ready"')
      expect(code).not.toBe('ready')
      expect(code).not.toBe(0)
      expect(err).toContain('port')
    },
  )
})

describe.skipIf(process.platform !== 'linux')('held sockets: attacks that held', () => {
  it('10 reloads, 5 restarts and 5 kill -9s leave no fd of the supervisor open and no daemon alive after stop()', async () => {
    // A first life, so that what Node and libuv open once (an epoll fd of
    // a thread, /dev/null for ignored stdio) is in `before`.
    const warm = supervisor(daemon())
    await warm.start()
    await warm.reload()
    await getJson(warm.listening[0]?.port as number)
    await warm.stop()
    const before = openFds()
    const s = supervisor(daemon())
    const pids: number[] = []
    s.on('spawn', (c) => pids.push(c.pid))
    await s.start()
    const port = s.listening[0]?.port as number
    for (let i = 0; i < 10; i++) await s.reload()
    for (let i = 0; i < 5; i++) await s.restart()
    for (let i = 0; i < 5; i++) {
      const old = s.child?.pid as number
      process.kill(old, 'SIGKILL')
      await waitFor(
        () => s.state === 'running' && typeof s.child?.pid === 'number' && s.child.pid !== old,
        10_000,
        'a new daemon',
      )
    }
    expect((await getJson(port)).pid).toBe(s.child?.pid)
    await s.stop()
    expect(pids).toHaveLength(21)
    for (const pid of pids) await waitFor(() => !aliveInProcTable(pid), 5000, `daemon ${pid} gone`)
    expect(await fdsLeftSince(before, 5000)).toEqual([])
  })

  it('IPv6 ::1: bound, served and reloaded on it, the name tcp-PORT', async () => {
    const s = supervisor(daemon({ listen: [{ port: 0, host: '::1' }] }))
    await s.start()
    const l = s.listening[0]
    expect(l?.host).toBe('::1')
    expect(l?.name).toBe(`tcp-${l?.port}`)
    const old = s.child?.pid
    expect((await getJson(l?.port as number, '/', '::1')).pid).toBe(old)
    await s.reload()
    await waitFor(() => old !== undefined && !aliveInProcTable(old), 5000, 'the old daemon gone')
    expect((await getJson(l?.port as number, '/', '::1')).pid).toBe(s.child?.pid)
  })

  it('a successor that exits 0 at once: reload() rejects ERR_RELOAD_FAILED, the old one serves on', async () => {
    const s = supervisor(daemon())
    await s.start()
    const port = s.listening[0]?.port as number
    const old = s.child?.pid
    const err = await s.reload({ args: ['-e', 'process.exit(0)'] }).then(
      () => null,
      (e) => e,
    )
    expect(err?.code).toBe('ERR_RELOAD_FAILED')
    expect(s.state).toBe('running')
    expect(s.child?.pid).toBe(old)
    expect((await getJson(port)).pid).toBe(old)
  })

  it('a unix path that is a symlink: EADDRINUSE, the link and its target left as they were', async () => {
    const dir = tempDir()
    const target = join(dir, 'target')
    writeFileSync(target, 'keep')
    const link = join(dir, 'web.sock')
    symlinkSync(target, link)
    const s = supervisor({ command: 'sleep', args: ['60'], listen: [{ path: link }] })
    const spawned: number[] = []
    s.on('spawn', (c) => spawned.push(c.pid))
    const err = await s.start().then(
      () => null,
      (e) => e,
    )
    expect(err?.code).toBe('EADDRINUSE')
    expect(err?.message).toContain(link)
    expect(spawned).toEqual([])
    expect(readFileSync(link, 'utf8')).toBe('keep')
  })

  it('start() after stop(): listening is empty while stopped, then a port again, served', async () => {
    const s = supervisor(daemon())
    await s.start()
    const first = s.listening[0]?.port as number
    await s.stop()
    expect(s.listening).toEqual([])
    await new Promise<void>((resolve) => {
      const c = net.connect({ host: '127.0.0.1', port: first })
      c.once('error', () => resolve())
      c.once('connect', () => {
        c.destroy()
        resolve()
      })
    })
    await s.start()
    const second = s.listening[0]?.port as number
    expect(second).toBeGreaterThan(0)
    expect((await getJson(second)).pid).toBe(s.child?.pid)
  })

  it("procward's own EMFILE at bind, spawn and reload: rejected with a code, nothing uncaught, no daemon left", async () => {
    const { stdout } = await runWithFewFds('listen-emfile.cjs', DAEMON)
    const r = JSON.parse(stdout.trim().split('\n').at(-1) as string) as {
      runs: { spare: number; start: string; reload: string | null; spawned: number[]; alive: number[] }[]
      uncaught: string[]
    }
    expect(r.uncaught).toEqual([])
    for (const run of r.runs) {
      expect(run.start).toMatch(/^(started|rejected (EMFILE: listen 127\.0\.0\.1:0|ERR_SUPERVISOR_FAILED: .*EMFILE))/)
      if (run.start === 'started') expect(run.reload).toMatch(/^(reloaded|rejected \S+: .*EMFILE)/)
      expect(run.alive).toEqual([])
    }
    expect(r.runs[0]?.start).toMatch(/EMFILE: listen/)
    expect(r.runs.at(-1)?.start).toBe('started')
  })

  it.skipIf(!hasPython())('socket activation with a non-socket fd 3: exit 1 saying so, no daemon started', async () => {
    const { stdout, stderr, code } = await execFileP(
      'python3',
      ['-c', ACTIVATE, 'file', NODE, CLI, 'run', '--', 'sh', '-c', 'echo daemon-ran'],
      { timeout: 20_000 },
    ).then(
      (r) => ({ ...r, code: 0 }),
      (e) => ({ stdout: String(e.stdout), stderr: String(e.stderr), code: e.code as number }),
    )
    expect(code).toBe(1)
    expect(stderr).toContain('not a socket')
    expect(stdout).not.toContain('daemon-ran')
  })

  it('procward reload against a record whose supervisor pid was replaced by another process: refused, nothing signalled', async () => {
    const dir = tempDir()
    const stateFile = join(dir, 'web.json')
    const options = daemon({ stateFile, handleSignals: { hup: 'reload' } })
    const sup = others.spawn(NODE, [SUPERVISOR_COPY, PROCWARD, JSON.stringify(options)], {
      stdio: ['ignore', 'ignore', 'ignore', 'pipe'],
    })
    eventsOf(sup)
    const r = await recordWhen(stateFile, (r) => r.state === 'running', 'running')
    // The supervisor dies (its daemon with it); a sleep stands where the
    // record's pid was, the record forged to name it.
    const gone = new Promise((res) => sup.once('exit', res))
    sup.kill('SIGKILL')
    await gone
    const sleeper = others.spawn('sleep', ['600'])
    const forged = JSON.parse(readFileSync(stateFile, 'utf8'))
    forged.supervisor.pid = sleeper.pid
    writeFileSync(stateFile, JSON.stringify(forged))
    expect(readSupervisorState(stateFile)?.supervisor.pid).toBe(sleeper.pid)
    const out = await cli(['reload', stateFile, '--timeout', '5000'])
    expect(out.code).toBe(1)
    expect(aliveInProcTable(sleeper.pid as number)).toBe(true)
    expect(r.supervisor.pid).not.toBe(sleeper.pid)
  })
})
