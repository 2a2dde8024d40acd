import type { ChildProcess } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import { basename, join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  getProcessInfo,
  readSupervisorState,
  type SupervisedProcess,
  Supervisor,
  type SupervisorEvents,
  type SupervisorOptions,
  spawnSupervised,
} from '../../index.js'
import {
  aliveInProcTable,
  askDaemon,
  FIXTURES,
  freePort,
  NODE,
  PROCWARD,
  procState,
  sleep,
  taggedProcesses,
  tempDirs,
  thrown,
  trackProcesses,
  waitFor,
} from '../helpers'
import { recordWhen, trackSupervisors } from './helpers'

const { others } = trackProcesses()

const DAEMON = join(FIXTURES, 'http-daemon.cjs')
const SUPERVISOR_PROCESS = join(FIXTURES, 'supervisor-process.cjs')

// ---- helpers --------------------------------------------------------------------

const tempDir = tempDirs('procward-sup-')
/** Every supervisor a test makes is stopped after it (before the leak check). */
const supervisor = trackSupervisors()

function daemon(port: number, ...extra: string[]): Pick<SupervisorOptions, 'command' | 'args'> {
  return { command: NODE, args: [DAEMON, '--port', String(port), ...extra] }
}

type Seen = { event: string; at: number; data: unknown }

/** Records the lifecycle events of a supervisor, in order. */
function record(sup: Supervisor): Seen[] {
  const seen: Seen[] = []
  for (const event of ['spawn', 'ready', 'exit', 'restart', 'failed', 'stopped', 'takeover'] as const) {
    sup.on(event, (data: unknown) => seen.push({ event, at: performance.now(), data }))
  }
  return seen
}

const names = (seen: Seen[]) => seen.map((s) => s.event)

function nextEvent(sup: Supervisor, event: keyof SupervisorEvents): Promise<unknown> {
  return new Promise((resolve) => sup.once(event, resolve))
}

/** A supervisor in a process of its own, with its event lines. */
class SupervisorProcess {
  readonly lines: Record<string, unknown>[] = []
  readonly proc: ChildProcess
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; status: number | null }>
  private buf = ''

  constructor(options: object, viaShell = false) {
    const argv = [SUPERVISOR_PROCESS, PROCWARD, JSON.stringify(options)]
    // Through a shell, to see the exit status as a shell reports it.
    this.proc = viaShell
      ? others.spawn('sh', ['-c', '"$@"; echo "status $?"', 'sh', NODE, ...argv])
      : others.spawn(NODE, argv)
    this.proc.stdout?.on('data', (d) => {
      this.buf += d
      let nl = this.buf.indexOf('\n')
      while (nl >= 0) {
        const line = this.buf.slice(0, nl)
        this.buf = this.buf.slice(nl + 1)
        try {
          this.lines.push(JSON.parse(line))
        } catch {
          this.lines.push({ event: 'text', line })
        }
        nl = this.buf.indexOf('\n')
      }
    })
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => {
        const statusLine = this.lines.find((l) => l.event === 'text' && String(l.line).startsWith('status '))
        resolve({ code, signal, status: statusLine ? Number(String(statusLine.line).slice(7)) : null })
      })
    })
  }

  async waitFor(event: string, timeoutMs = 10_000): Promise<Record<string, unknown>> {
    await waitFor(() => this.lines.some((l) => l.event === event), timeoutMs, `'${event}' from the supervisor process`)
    return this.lines.find((l) => l.event === event) as Record<string, unknown>
  }
}

// ---- restart on crash ---------------------------------------------------------------

describe('restart on crash', () => {
  it('kill -9 of the daemon: exit, restart, ready in that order; the old pid reaped; served again', async () => {
    const port = await freePort()
    const sup = supervisor({ ...daemon(port), ready: { port } })
    const seen = record(sup)
    let reapedAtExit: string | null = 'not seen'
    sup.on('exit', (e: { pid: number }) => {
      reapedAtExit = procState(e.pid)
    })
    await sup.start()
    const first = sup.child?.pid as number
    expect((await askDaemon(port))?.pid).toBe(first)

    process.kill(first, 'SIGKILL')
    const ready = nextEvent(sup, 'ready')
    await ready
    expect(names(seen)).toEqual(['spawn', 'ready', 'exit', 'restart', 'spawn', 'ready'])
    expect(seen[2]?.data).toEqual({ pid: first, code: null, signal: 'SIGKILL', expected: false })
    expect(seen[3]?.data).toEqual({ attempt: 1, delayMs: 0, lastExit: { pid: first, code: null, signal: 'SIGKILL' } })
    // The exit event is the reap: the old pid was already gone then.
    expect(reapedAtExit).toBeNull()
    const second = sup.child?.pid as number
    expect(second).not.toBe(first)
    expect((await askDaemon(port))?.pid).toBe(second)
    expect(sup.status()).toMatchObject({ state: 'running', pid: second, restarts: 1, adopted: false })
    expect(sup.status().lastExit).toEqual({ pid: first, code: null, signal: 'SIGKILL' })
  })

  it('crash loop: exactly maxRestarts restarts on the backoff schedule, then failed', async () => {
    const sup = supervisor({
      command: 'sh',
      args: ['-c', 'exit 3'],
      backoff: { stepMs: 20, factor: 2 },
      crashLoop: { maxRestarts: 4 },
    })
    const seen = record(sup)
    const failed = nextEvent(sup, 'failed')
    // No ready check: each child counts as running at once.
    await sup.start()
    const err = await failed
    expect(err).toMatchObject({ code: 'ERR_CRASH_LOOP', lastExit: { code: 3, signal: null } })
    expect(sup.state).toBe('failed')
    const restarts = seen
      .filter((s) => s.event === 'restart')
      .map((s) => s.data as { attempt: number; delayMs: number })
    expect(restarts.map((r) => r.attempt)).toEqual([1, 2, 3, 4])
    expect(restarts.map((r) => r.delayMs)).toEqual([0, 20, 40, 80])
    expect(names(seen).filter((n) => n === 'spawn')).toHaveLength(5)
    expect(names(seen).filter((n) => n === 'failed')).toHaveLength(1)
    // Each spawn came no earlier than its restart's delay after the exit.
    for (let i = 0; i < seen.length; i++) {
      const r = seen[i] as Seen
      if (r.event !== 'restart') continue
      const delay = (r.data as { delayMs: number }).delayMs
      const spawn = seen.slice(i).find((s) => s.event === 'spawn') as Seen
      expect(spawn.at - r.at).toBeGreaterThanOrEqual(delay - 1)
    }
    expect(sup.status().restarts).toBe(4)
  })

  it("restart 'never': a clean exit ends stopped, a failing one failed", async () => {
    const clean = supervisor({ command: 'sh', args: ['-c', 'sleep 0.05'], restart: 'never' })
    const stopped = nextEvent(clean, 'stopped')
    await clean.start()
    expect(await stopped).toBeNull()
    expect(clean.state).toBe('stopped')

    const failing = supervisor({ command: 'sh', args: ['-c', 'sleep 0.05; exit 2'], restart: 'on-failure' })
    const failed = nextEvent(failing, 'failed')
    failing.start()
    await failed
    // on-failure restarts it: it ends only in the crash loop.
    expect(failing.state).toBe('failed')
    expect(failing.status().restarts).toBe(5)
  })
})

// ---- ready checks -------------------------------------------------------------------

describe('ready', () => {
  it('by a stdout line; a daemon that keeps writing after ready never blocks on the pipe', async () => {
    const port = await freePort()
    const sup = supervisor({ ...daemon(port, '--chatty'), ready: { stdout: /^listening \d+$/g } })
    let lines = 0
    sup.on('stdout', () => lines++)
    await sup.start()
    expect(sup.state).toBe('running')
    // Far more than a pipe holds (64 KiB): written synchronously by the
    // daemon, so a pipe nobody drained would have stopped it dead.
    await waitFor(() => lines > 2000, 10_000, 'lines to keep flowing')
    expect((await askDaemon(port))?.pid).toBe(sup.child?.pid)
  })

  it('by notifyFd', async () => {
    const port = await freePort()
    const sup = supervisor({ ...daemon(port, '--notify-fd', '3'), ready: { notifyFd: 3 } })
    await sup.start()
    // The daemon notifies once it listens: serving at the moment of ready.
    expect((await askDaemon(port))?.pid).toBe(sup.child?.pid)
  })

  it('by a function, which gets the child and an AbortSignal', async () => {
    const port = await freePort()
    let got: SupervisedProcess | null = null
    const sup = supervisor({
      ...daemon(port, '--delay-ms', '100'),
      ready: async (child, signal) => {
        got = child
        expect(signal).toBeInstanceOf(AbortSignal)
        while ((await askDaemon(port)) === null) await sleep(5)
      },
    })
    await sup.start()
    expect(got).toBe(sup.child)
    expect((await askDaemon(port))?.pid).toBe(sup.child?.pid)
  })

  it('a child that never gets ready times out, and that counts as a crash', async () => {
    const sup = supervisor({
      command: 'sleep',
      args: ['100'],
      ready: { stdout: 'never printed' },
      readyTimeoutMs: 150,
      crashLoop: { maxRestarts: 1 },
      backoff: { initialMs: 0 },
    })
    const seen = record(sup)
    const err = await sup.start().then(
      () => null,
      (e) => e,
    )
    expect(err).toMatchObject({ code: 'ERR_CRASH_LOOP' })
    expect(err.cause).toMatchObject({ code: 'ERR_READY_TIMEOUT' })
    expect(names(seen)).toEqual(['spawn', 'exit', 'restart', 'spawn', 'exit', 'failed'])
    expect(seen[1]?.data).toMatchObject({ signal: 'SIGTERM', expected: false })
    // With restart 'never', the failure is the timeout's, named once.
    const once = supervisor({
      name: 'slow',
      command: 'sleep',
      args: ['100'],
      ready: { stdout: 'never printed' },
      readyTimeoutMs: 150,
      restart: 'never',
    })
    const failed = await once.start().then(
      () => null,
      (e) => e,
    )
    expect(failed).toMatchObject({ code: 'ERR_SUPERVISOR_FAILED', message: 'slow was not ready within 150 ms' })
  })

  it('a rejecting ready function counts as a crash', async () => {
    const sup = supervisor({
      command: 'sleep',
      args: ['100'],
      ready: async () => {
        throw new Error('not today')
      },
      restart: 'on-failure',
      crashLoop: { maxRestarts: 0 },
    })
    const err = await sup.start().then(
      () => null,
      (e) => e,
    )
    expect(err).toMatchObject({ code: 'ERR_CRASH_LOOP' })
    expect(err.cause).toMatchObject({ code: 'ERR_READY_FAILED' })
    expect(err.cause.cause.message).toBe('not today')
  })
})

// ---- restart() and stop() -----------------------------------------------------------

describe('restart() and stop()', () => {
  it('restart({ args }) serves with the new arguments and is not counted as a crash', async () => {
    const port = await freePort()
    const sup = supervisor({ ...daemon(port, 'first'), ready: { port } })
    const seen = record(sup)
    await sup.start()
    const old = sup.child?.pid as number
    await sup.restart({ args: [DAEMON, '--port', String(port), 'second'] })
    const now = await askDaemon(port)
    expect(now?.pid).not.toBe(old)
    expect(now?.args).toContain('second')
    expect(procState(old)).toBeNull()
    expect(sup.status().restarts).toBe(0)
    const exit = seen.find((s) => s.event === 'exit')
    // Its SIGTERM handler exits 0.
    expect(exit?.data).toEqual({ pid: old, code: 0, signal: null, expected: true })
    expect(names(seen)).not.toContain('restart')
    // Concurrent calls share one restart.
    const a = sup.restart()
    const b = sup.restart()
    expect(a).toBe(b)
    await a
  })

  it('stop() racing restart() wins: restart rejects with AbortError, nothing runs, nothing restarts', async () => {
    const port = await freePort()
    const sup = supervisor({ ...daemon(port), ready: { port } })
    const seen = record(sup)
    await sup.start()
    const old = sup.child?.pid as number
    const restarting = sup.restart({ args: [DAEMON, '--port', String(port), 'never'] })
    const stopping = sup.stop()
    await expect(restarting).rejects.toMatchObject({ name: 'AbortError' })
    const r = await stopping
    expect(r).toMatchObject({ outcome: 'exited', exit: { pid: old } })
    expect(sup.state).toBe('stopped')
    expect(sup.child).toBeNull()
    await sleep(300)
    expect(names(seen).filter((n) => n === 'spawn')).toHaveLength(1)
    expect(await askDaemon(port)).toBeNull()
  })

  it('stop() while starting: start() rejects, the child is gone, no restart later', async () => {
    const port = await freePort()
    const sup = supervisor({ ...daemon(port, '--delay-ms', '10000'), ready: { port } })
    const seen = record(sup)
    // Without a stateFile the child is spawned within start().
    const starting = sup.start()
    starting.catch(() => {}) // asserted below
    expect(sup.state).toBe('starting')
    const pid = sup.child?.pid as number
    const r = await sup.stop()
    await expect(starting).rejects.toMatchObject({ name: 'AbortError' })
    expect(r?.outcome).toBe('exited')
    expect(procState(pid)).toBeNull()
    expect(sup.state).toBe('stopped')
    await sleep(200)
    expect(names(seen)).toEqual(['spawn', 'exit', 'stopped'])
    expect(seen[1]?.data).toMatchObject({ expected: true })
  })

  it('stop() in backoff cancels the pending restart', async () => {
    const sup = supervisor({ command: 'sh', args: ['-c', 'exit 1'], backoff: { initialMs: 5000 } })
    const seen = record(sup)
    sup.start().catch(() => {})
    await nextEvent(sup, 'restart')
    expect(sup.state).toBe('backoff')
    expect(sup.child).toBeNull()
    expect(sup.kill('SIGTERM')).toBe(false)
    expect(await sup.stop()).toBeNull()
    expect(sup.state).toBe('stopped')
    await sleep(200)
    expect(names(seen).filter((n) => n === 'spawn')).toHaveLength(1)
  })

  it('stop() during a ready check aborts the check', async () => {
    let aborted = false
    const sup = supervisor({
      command: 'sleep',
      args: ['100'],
      ready: (_child, signal) =>
        new Promise((_resolve, reject) => {
          signal.addEventListener('abort', () => {
            aborted = true
            reject(new Error('aborted'))
          })
        }),
    })
    const starting = sup.start()
    starting.catch(() => {}) // asserted below
    const pid = sup.child?.pid as number
    await sleep(50)
    await sup.stop()
    await expect(starting).rejects.toMatchObject({ name: 'AbortError' })
    expect(aborted).toBe(true)
    expect(procState(pid)).toBeNull()
    expect(sup.state).toBe('stopped')
    // Stopped stays stopped; a second stop is a no-op.
    expect(await sup.stop()).toBeNull()
    await sleep(100)
    expect(sup.state).toBe('stopped')
  })

  it('start() after stop() starts again; kill() signals the daemon', async () => {
    const sup = supervisor({ command: 'sleep', args: ['100'], restart: 'on-failure' })
    await sup.start()
    await sup.stop()
    await sup.start()
    expect(sup.state).toBe('running')
    const pid = sup.child?.pid as number
    const stopped = nextEvent(sup, 'stopped')
    // A signal we sent is not a failure: on-failure does not restart it.
    expect(sup.kill('SIGTERM')).toBe(true)
    expect(await stopped).toBeNull()
    expect(sup.state).toBe('stopped')
    expect(procState(pid)).toBeNull()
    expect(sup.kill('SIGTERM')).toBe(false)
  })

  it("stop() after the daemon's exit was reaped but not yet heard resolves after 'exit' is emitted", async () => {
    const sup = supervisor({ command: 'sleep', args: ['100'] })
    await sup.start()
    const child = sup.child as NonNullable<typeof sup.child>
    const order: string[] = []
    sup.on('exit', (info) => order.push(`exit ${info.signal}`))
    child.kill('SIGKILL')
    const until = Date.now() + 5000
    while (child.exitInfo === null && Date.now() < until) {} // reaped natively; the loop held
    expect(order).toEqual([])
    const r = await sup.stop()
    order.push(`stop ${r?.outcome}`)
    expect(order).toEqual(['exit SIGKILL', 'stop already-exited'])
    expect(sup.state).toBe('stopped')
  })
})

// ---- options ------------------------------------------------------------------------

describe('options', () => {
  it('rejects bad options with TypeError/RangeError and starts nothing', () => {
    const bad: [unknown, string, string][] = [
      [undefined, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
      [{}, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
      [{ command: '' }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
      [{ command: 'sleep', bogus: 1 }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
      [{ command: 'sleep', args: [1] }, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
      [{ command: 'sleep', restart: 'sometimes' }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
      [{ command: 'sleep', backoff: { stepMs: -1 } }, 'RangeError', 'ERR_OUT_OF_RANGE'],
      [{ command: 'sleep', backoff: { maxMs: 2 ** 31 } }, 'RangeError', 'ERR_OUT_OF_RANGE'],
      [{ command: 'sleep', backoff: { initialMs: Number.NaN } }, 'RangeError', 'ERR_OUT_OF_RANGE'],
      [{ command: 'sleep', backoff: { factor: 0.5 } }, 'RangeError', 'ERR_OUT_OF_RANGE'],
      [{ command: 'sleep', backoff: { jitter: 1 } }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
      [{ command: 'sleep', crashLoop: { maxRestarts: 1.5 } }, 'RangeError', 'ERR_OUT_OF_RANGE'],
      [{ command: 'sleep', crashLoop: { windowMs: Number.POSITIVE_INFINITY } }, 'RangeError', 'ERR_OUT_OF_RANGE'],
      [{ command: 'sleep', readyTimeoutMs: -5 }, 'RangeError', 'ERR_OUT_OF_RANGE'],
      [{ command: 'sleep', readyTimeoutMs: true }, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
      [{ command: 'sleep', ready: { port: 0 } }, 'RangeError', 'ERR_OUT_OF_RANGE'],
      [{ command: 'sleep', ready: { port: 80, path: '/' } }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
      [{ command: 'sleep', ready: { notifyFd: 1 } }, 'RangeError', 'ERR_OUT_OF_RANGE'],
      [{ command: 'sleep', ready: { stdout: 5 } }, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
      [{ command: 'sleep', ready: { socket: '/x' } }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
      [{ command: 'sleep', takeover: 'kill' }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
      [{ command: 'sleep', stateFile: '' }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
      [{ command: 'sleep', handleSignals: { hup: 'ignore' } }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
      [{ command: 'sleep', spawn: { signal: new AbortController().signal } }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
      [{ command: 'sleep', spawn: { detached: true } }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
      [{ command: 'sleep', spawn: { stdio: 'bogus' } }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
      [{ command: 'sleep', spawn: { stop: { graceMs: -1 } } }, 'RangeError', 'ERR_OUT_OF_RANGE'],
      [{ command: 'sleep', spawn: { stop: { signal: 'SIGNOPE' } } }, 'TypeError', 'ERR_UNKNOWN_SIGNAL'],
    ]
    const before = taggedProcesses(others.tag).length
    for (const [options, name, code] of bad) {
      const err = thrown(() => new Supervisor(options as SupervisorOptions))
      expect(err, JSON.stringify(options)).toMatchObject({ name, code })
    }
    expect(taggedProcesses(others.tag).length).toBe(before)
  })

  it('bad arguments to stop(), restart() and kill()', async () => {
    const sup = supervisor({ command: 'sleep', args: ['100'] })
    await sup.start()
    await expect(sup.stop({ graceMs: -1 })).rejects.toMatchObject({ name: 'RangeError' })
    await expect(sup.stop({ bogus: 1 } as never)).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' })
    await expect(sup.restart({ args: 'x' } as never)).rejects.toMatchObject({ name: 'TypeError' })
    await expect(sup.restart({ cwd: '/' } as never)).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' })
    expect(() => sup.kill('SIGNOPE' as never)).toThrow(TypeError)
    expect(sup.state).toBe('running')
  })

  it('name defaults to the basename of the command', () => {
    expect(new Supervisor({ command: '/usr/bin/sleep' }).name).toBe('sleep')
    expect(new Supervisor({ command: 'sleep', name: 'nap' }).name).toBe('nap')
  })
})

// ---- handleSignals ------------------------------------------------------------------

describe('handleSignals', () => {
  for (const [sig, status] of [
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ] as const) {
    it(`${sig}: the daemon's TERM handler runs, the daemon is gone, the supervisor dies of ${sig}`, async () => {
      const port = await freePort()
      const termFile = join(tempDir(), 'term')
      const p = new SupervisorProcess(
        { ...daemon(port, '--term-file', termFile), ready: { port }, handleSignals: true },
        true,
      )
      const started = await p.waitFor('started')
      const daemonPid = (started.status as { pid: number }).pid
      process.kill(started.pid as number, sig)
      const end = await p.exited
      expect(end.status).toBe(status)
      expect(readFileSync(termFile, 'utf8').trim()).toBe(String(daemonPid))
      expect(aliveInProcTable(daemonPid)).toBe(false)
      expect(p.lines.map((l) => l.event)).toContain('stopped')
    })
  }

  it('a second SIGINT during a slow stop: SIGKILL at once', async () => {
    const port = await freePort()
    const p = new SupervisorProcess(
      {
        ...daemon(port, '--term-ms', '20000'),
        ready: { port },
        handleSignals: true,
        spawn: { stop: { graceMs: 20000 } },
      },
      true,
    )
    const started = await p.waitFor('started')
    const daemonPid = (started.status as { pid: number }).pid
    const t0 = Date.now()
    process.kill(started.pid as number, 'SIGINT')
    await sleep(300)
    expect(aliveInProcTable(daemonPid)).toBe(true) // still in its 20 s TERM handler
    process.kill(started.pid as number, 'SIGINT')
    const end = await p.exited
    expect(Date.now() - t0).toBeLessThan(10_000)
    expect(end.status).toBe(130)
    expect(aliveInProcTable(daemonPid)).toBe(false)
    const exit = p.lines.find((l) => l.event === 'exit')
    expect(exit).toMatchObject({ pid: daemonPid, signal: 'SIGKILL', expected: true })
  })
})

// ---- the state file, exclusivity, takeover -----------------------------------------

/**
 * SIGKILLs the supervisor process once its record was rewritten `ms` after
 * the child started (its aliveAt then vouches for the workers started
 * before). The leader dies with it (parentDeathSignal); its workers do not.
 */
async function killedOnceRecorded(
  p: SupervisorProcess,
  stateFile: string,
  ms: number,
  leader: number,
  workers: number[],
): Promise<void> {
  await recordWhen(
    stateFile,
    (r) => Date.parse(r.child?.aliveAt ?? '') - Date.parse(r.child?.startedAt ?? '') >= ms,
    'the refreshed record',
  )
  p.proc.kill('SIGKILL')
  await p.exited
  await waitFor(() => !aliveInProcTable(leader), 5000, 'the leader to die with its supervisor')
  for (const w of workers) expect(aliveInProcTable(w)).toBe(true)
}

/** Starts a supervisor process, waits until it is ready, SIGKILLs it. Returns its last status. */
async function predecessorDies(options: object): Promise<{ pid: number; child: number }> {
  const p = new SupervisorProcess(options)
  const started = await p.waitFor('started')
  const status = started.status as { pid: number }
  p.proc.kill('SIGKILL')
  await p.exited
  return { pid: started.pid as number, child: status.pid }
}

describe('stateFile', () => {
  it('records the daemon (mode 0600), follows restarts, and keeps the last exit after stop()', async () => {
    const port = await freePort()
    const dir = tempDir()
    const stateFile = join(dir, 'daemon.json')
    const sup = supervisor({ ...daemon(port, 'secret-arg'), ready: { port }, stateFile })
    await sup.start()
    const first = sup.child as SupervisedProcess
    let r = await recordWhen(stateFile, (r) => r.state === 'running', 'the running record')
    expect(r).toMatchObject({
      version: 1,
      // The command's name: 'node', or 'bun' under `bun --bun`.
      name: basename(NODE),
      supervisor: { pid: process.pid, identity: getProcessInfo(process.pid)?.identity, running: true },
      child: {
        pid: first.pid,
        identity: first.identity,
        pgid: first.pid,
        command: NODE,
        args: [DAEMON, '--port', String(port), 'secret-arg'],
        cgroup: null,
        running: true,
      },
      restarts: 0,
      lastExit: null,
    })
    expect(Date.parse(r.child?.aliveAt as string)).toBeGreaterThanOrEqual(Date.parse(r.child?.startedAt as string))
    expect(statSync(stateFile).mode & 0o777).toBe(0o600)

    process.kill(first.pid, 'SIGKILL')
    r = await recordWhen(stateFile, (r) => r.restarts === 1 && r.state === 'running', 'the record after a restart')
    expect(r.child?.pid).toBe(sup.child?.pid)
    expect(r.lastExit).toEqual({ pid: first.pid, code: null, signal: 'SIGKILL', at: expect.any(String) })

    const second = sup.child?.pid
    await sup.stop()
    r = readSupervisorState(stateFile) as NonNullable<typeof r>
    expect(r).toMatchObject({ state: 'stopped', child: null, lastExit: { pid: second, code: 0 } })
    expect(r.supervisor.running).toBe(false)
    // Every temp file was renamed into place.
    expect(readdirSync(dir).sort()).toEqual(['daemon.json', 'daemon.json.lock'])
  })

  it('readSupervisorState: null for a missing file or a foreign one', () => {
    const dir = tempDir()
    expect(readSupervisorState(join(dir, 'none.json'))).toBeNull()
    writeFileSync(join(dir, 'x.json'), '{"version":2}')
    expect(readSupervisorState(join(dir, 'x.json'))).toBeNull()
    expect(() => readSupervisorState(5 as never)).toThrow(TypeError)
  })

  it('one supervisor per stateFile: the second gets ELOCKED naming the first, then starts once it is SIGKILLed', async () => {
    const port = await freePort()
    const stateFile = join(tempDir(), 'one.json')
    const first = new SupervisorProcess({ ...daemon(port), ready: { port }, stateFile })
    const started = await first.waitFor('started')
    const second = supervisor({ ...daemon(port), ready: { port }, stateFile })
    const err = await second.start().then(
      () => null,
      (e) => e,
    )
    expect(err).toMatchObject({ code: 'ELOCKED', holder: { pid: started.pid } })
    expect(second.state).toBe('failed')
    first.proc.kill('SIGKILL')
    await first.exited
    // Free at once: no waiting for a timeout or a heartbeat.
    await second.start()
    expect(second.state).toBe('running')
    expect((await askDaemon(port))?.pid).toBe(second.child?.pid)
  })
})

describe('takeover', () => {
  it("'stop': the successor stops the orphan (identity checked) and serves with its own child", async () => {
    const port = await freePort()
    const stateFile = join(tempDir(), 'takeover.json')
    const options = { ...daemon(port), ready: { port }, stateFile, spawn: { parentDeathSignal: false } }
    const { child: orphan } = await predecessorDies(options)
    others.track(orphan)
    // The orphan outlived its supervisor and still serves.
    expect((await askDaemon(port))?.pid).toBe(orphan)

    const sup = supervisor(options as SupervisorOptions)
    const seen = record(sup)
    await sup.start()
    expect(names(seen)).toEqual(['takeover', 'spawn', 'ready'])
    expect(seen[0]?.data).toMatchObject({
      pid: orphan,
      action: 'stopped',
      result: { outcome: 'exited', pidReused: false },
      suspects: [],
    })
    expect(aliveInProcTable(orphan)).toBe(false)
    expect((await askDaemon(port))?.pid).toBe(sup.child?.pid)
  })

  it('a record naming a pid now held by an unrelated process leaves that process untouched', async () => {
    const stateFile = join(tempDir(), 'stale.json')
    const before = new Date(Date.now() - 60_000).toISOString()
    await sleep(20)
    // Unrelated: leads its own group, in our session, started after the record's aliveAt.
    const unrelated = spawnSupervised('sleep', ['1000'])
    const identity = getProcessInfo(unrelated.pid)?.identity as string
    const staleIdentity = identity.replace(/^(p1:[0-9a-f]+):\d+:\d*$/, '$1:1:')
    const own = readFileSync(`/proc/${process.pid}/stat`, 'latin1')
    const session = Number(own.slice(own.lastIndexOf(')') + 2).split(' ')[3])
    writeFileSync(
      stateFile,
      JSON.stringify({
        version: 1,
        name: 'sleep',
        supervisor: { pid: 999999, identity: '', running: true },
        child: {
          pid: unrelated.pid,
          identity: staleIdentity,
          pgid: unrelated.pid,
          session,
          command: 'sleep',
          args: ['1000'],
          startedAt: before,
          aliveAt: before,
          cgroup: null,
          running: true,
        },
        state: 'running',
        restarts: 0,
        lastExit: null,
        updatedAt: before,
      }),
    )
    const sup = supervisor({ command: 'sleep', args: ['1000'], stateFile })
    const seen = record(sup)
    await sup.start()
    const takeover = seen.find((s) => s.event === 'takeover')
    // Same pgid, same session, but started after aliveAt: a suspect, never signalled.
    expect(takeover?.data).toMatchObject({
      pid: unrelated.pid,
      action: 'stopped',
      result: null,
      suspects: [unrelated.pid],
    })
    expect(aliveInProcTable(unrelated.pid)).toBe(true)
    expect(unrelated.exitInfo).toBeNull()
    await unrelated.stop({ signal: 'SIGKILL' })
  })

  it("'adopt': the successor keeps the orphan, and restarts the daemon when the orphan is killed", async () => {
    const port = await freePort()
    const stateFile = join(tempDir(), 'adopt.json')
    const options = {
      ...daemon(port),
      ready: { port },
      stateFile,
      takeover: 'adopt',
      spawn: { parentDeathSignal: false },
    }
    const { child: orphan } = await predecessorDies(options)
    others.track(orphan)
    const sup = supervisor(options as SupervisorOptions)
    const seen = record(sup)
    await sup.start()
    expect(names(seen)).toEqual(['takeover'])
    expect(seen[0]?.data).toMatchObject({ pid: orphan, action: 'adopted', result: null, suspects: [] })
    expect(sup.state).toBe('running')
    expect(sup.child).toBeNull()
    expect(sup.status()).toMatchObject({ pid: orphan, adopted: true })
    expect((await askDaemon(port))?.pid).toBe(orphan)
    // Ours now (the predecessor's record named the same child).
    const r = await recordWhen(stateFile, (r) => r.supervisor.pid === process.pid, 'the adopted record')
    expect(r).toMatchObject({ state: 'running', child: { pid: orphan, running: true } })

    const ready = nextEvent(sup, 'ready')
    // kill() reaches the adopted orphan (through a pidfd checked against its identity).
    expect(sup.kill('SIGKILL')).toBe(true)
    await ready
    const exit = seen.find((s) => s.event === 'exit')
    // Not our child: the status is read from the zombie (or the pidfd once
    // reaped), where the kernel gives it.
    expect(exit?.data).toMatchObject({ pid: orphan, expected: false })
    expect(names(seen)).toEqual(['takeover', 'exit', 'restart', 'spawn', 'ready'])
    expect((await askDaemon(port))?.pid).toBe(sup.child?.pid)
    expect(sup.status().adopted).toBe(false)
  })

  it('nginx: workers orphaned when the master died with its supervisor are swept by the successor', async (ctx) => {
    const nginx = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => existsSync(p))
    if (nginx === undefined) ctx.skip('nginx is not installed (Debian: apt-get install nginx-light)')
    const port = await freePort()
    const dir = tempDir()
    const conf = join(dir, 'nginx.conf')
    const temps = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
    writeFileSync(
      conf,
      `daemon off;
master_process on;
worker_processes 2;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log;
events { worker_connections 64; }
http {
  access_log off;
  ${temps.map((t) => `${t}_temp_path ${dir}/${t};`).join('\n  ')}
  server { listen 127.0.0.1:${port}; location / { return 200 "ok"; } }
}
`,
    )
    const options = {
      command: nginx as string,
      args: ['-p', dir, '-c', conf, '-e', join(dir, 'error.log')],
      ready: { port },
      stateFile: join(dir, 'nginx.json'),
      backoff: { resetAfterMs: 100 },
    }
    const p = new SupervisorProcess(options)
    const master = ((await p.waitFor('started')).status as { pid: number }).pid
    // nginx clears its workers' environment: they are tracked by pid.
    const workersOf = (pgid: number) =>
      readdirSync('/proc')
        .filter((e) => /^\d+$/.test(e))
        .map(Number)
        .filter((pid) => pid !== pgid && getProcessInfo(pid)?.pgid === pgid && aliveInProcTable(pid))
    await waitFor(() => workersOf(master).length === 2, 5000, 'two nginx workers')
    const workers = workersOf(master)
    for (const w of workers) others.track(w)
    await killedOnceRecorded(p, options.stateFile, 100, master, workers)

    const sup = supervisor(options)
    const seen = record(sup)
    await sup.start()
    expect(seen[0]?.data).toMatchObject({ pid: master, action: 'stopped', result: null, suspects: [] })
    // Swept with their group: dead a moment after, on a loaded machine.
    await waitFor(() => workers.every((w) => !aliveInProcTable(w)), 5000, 'the old workers to die')
    await waitFor(() => workersOf(sup.child?.pid as number).length === 2, 5000, 'two new workers')
    const served = await new Promise<number | null>((resolve) => {
      http
        .get({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
          res.resume()
          resolve(res.statusCode ?? null)
        })
        .on('error', () => resolve(null))
    })
    expect(served).toBe(200)
    const newWorkers = workersOf(sup.child?.pid as number)
    await sup.stop()
    await waitFor(() => newWorkers.every((w) => !aliveInProcTable(w)), 5000, 'the workers to die')
  })

  it('sweeps the workers a dead leader left in its group; a same-named process outside it is untouched', async () => {
    const stateFile = join(tempDir(), 'strays.json')
    const options = {
      command: join(FIXTURES, 'workers.sh'),
      ready: { stdout: 'ready' },
      stateFile,
      // The record is rewritten this long after ready: its aliveAt then
      // vouches for the workers started before.
      backoff: { resetAfterMs: 50 },
    }
    const p = new SupervisorProcess(options)
    const started = await p.waitFor('started')
    const leader = (started.status as { pid: number }).pid
    // Its stdout is copied to the supervisor process's own.
    const readyLine = await waitFor(
      () => p.lines.some((l) => String(l.line).startsWith('ready ')),
      5000,
      "the workers' pids",
    ).then(() => String(p.lines.find((l) => String(l.line).startsWith('ready '))?.line))
    const workers = readyLine.split(' ').slice(1).map(Number)
    for (const w of workers) expect(getProcessInfo(w)?.pgid).toBe(leader)
    expect(workers).toHaveLength(2)
    for (const w of workers) others.track(w)
    const sameName = others.spawn('sleep', ['1000'])
    await killedOnceRecorded(p, stateFile, 50, leader, workers)

    const sup = supervisor(options as SupervisorOptions)
    const seen = record(sup)
    sup.on('stdout', () => {})
    await sup.start()
    expect(seen[0]?.data).toMatchObject({ pid: leader, action: 'stopped', result: null, suspects: [] })
    await waitFor(() => workers.every((w) => !aliveInProcTable(w)), 5000, 'the swept workers to die')
    expect(aliveInProcTable(sameName.pid as number)).toBe(true)
  })
})
