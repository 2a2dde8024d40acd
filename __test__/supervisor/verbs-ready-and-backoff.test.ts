import { existsSync, readFileSync } from 'node:fs'
import net from 'node:net'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { readSupervisorState, type SupervisedProcess, Supervisor, type SupervisorOptions } from '../../index.js'
import { aliveInProcTable, FIXTURES, freePort, NODE, PROCWARD, tempDirs, trackProcesses, waitFor } from '../helpers'

const { others } = trackProcesses()

const DAEMON = join(FIXTURES, 'http-daemon.cjs')
const tempDir = tempDirs('procward-hard-sup-')

// ---- ready by port -------------------------------------------------------------------

/** A supervisor of `sh -c script` with a ready check on `port` reaches 'running' (stopped after). */
async function runsOnceListening(port: number, script: string): Promise<void> {
  const s = new Supervisor({ command: 'sh', args: ['-c', script], ready: { port }, readyTimeoutMs: 20_000 })
  try {
    await s.start()
    expect(s.state).toBe('running')
  } finally {
    await s.stop()
  }
}

describe('ready by port', () => {
  it('a stale listener on the port (not the child) never makes the child ready', async () => {
    const port = await freePort()
    // The stale daemon: this test process, listening before the child starts.
    const stale = net.createServer((c) => c.destroy())
    await new Promise<void>((r) => stale.listen(port, '127.0.0.1', r))
    try {
      const s = new Supervisor({
        command: 'sleep',
        args: ['1000'],
        ready: { port },
        readyTimeoutMs: 400,
        restart: 'never',
        spawn: { stop: { graceMs: 100 } },
      })
      const events: string[] = []
      for (const e of ['ready', 'failed'] as const) s.on(e, () => events.push(e))
      await expect(s.start()).rejects.toMatchObject({ code: 'ERR_SUPERVISOR_FAILED' })
      expect(events).toEqual(['failed'])
      expect(s.status().lastExit?.signal).toBe('SIGTERM')
    } finally {
      stale.close()
    }
  })

  it('a listener the child had started outside its group (a proxy, as docker run -p has) counts', async () => {
    const port = await freePort()
    const pidFile = join(tempDir(), 'proxy.pid')
    try {
      // The listener runs in a session of its own, as docker-proxy runs
      // under dockerd: not in the child's group.
      await runsOnceListening(port, `setsid ${NODE} ${DAEMON} --port ${port} & echo $! > ${pidFile}; exec sleep 1000`)
    } finally {
      others.track(Number(readFileSync(pidFile, 'utf8')))
    }
  })

  it("a listener in the child's group (not the leader) counts", async () => {
    const port = await freePort()
    // dash and bash fork for a command followed by another: the daemon is
    // a member of the shell's group, not its leader.
    await runsOnceListening(port, `${NODE} ${DAEMON} --port ${port}; exit 0`)
  })
})

// ---- crash loops ---------------------------------------------------------------------

describe('crash loops', () => {
  it('an exit with code 0 before the ready check passed counts as a crash', async () => {
    const port = await freePort()
    const s = new Supervisor({ command: 'sh', args: ['-c', 'exit 0'], ready: { port }, restart: 'never' })
    await expect(s.start()).rejects.toMatchObject({
      code: 'ERR_SUPERVISOR_FAILED',
      message: 'sh exited with code 0 before it was ready',
    })
    expect(s.state).toBe('failed')
  })

  it('the backoff delay is a number however long the loop (stepMs 0 with a factor that overflows)', async () => {
    const s = new Supervisor({
      command: 'true',
      backoff: { stepMs: 0, factor: 1000, maxMs: 0 },
      crashLoop: { maxRestarts: 120, windowMs: 600_000 },
    })
    const delays: number[] = []
    s.on('restart', (r) => delays.push(r.delayMs))
    const failed = new Promise<Error & { code?: string }>((r) => s.once('failed', r))
    await s.start() // no ready check: running at the first spawn
    expect((await failed).code).toBe('ERR_CRASH_LOOP')
    expect(delays).toHaveLength(120)
    expect(delays.filter((d) => !Number.isFinite(d))).toEqual([])
    expect(s.status().restarts).toBe(120)
  })
})

// ---- races between the verbs -----------------------------------------------------------

describe('verbs racing each other', () => {
  it('after a stop() in backoff, the next stop() still stops (it returned the first stop forever)', async () => {
    const s = new Supervisor({
      command: 'sh',
      args: ['-c', 'sleep 0.05; exit 1'],
      backoff: { initialMs: 60_000 },
      spawn: { stop: { graceMs: 1000 } },
    })
    const inBackoff = new Promise((r) => s.once('restart', r))
    await s.start()
    await inBackoff
    expect(s.state).toBe('backoff')
    expect(await s.stop()).toBeNull()
    expect(s.state).toBe('stopped')

    const s2 = s as Supervisor
    const started = s2.start()
    await started
    const child = s2.child as SupervisedProcess
    expect(child).not.toBeNull()
    const result = await s2.stop()
    expect(s2.state).toBe('stopped')
    expect(result?.outcome).toMatch(/exited|already-exited/)
    expect(child.exitInfo).not.toBeNull()
  })

  it('a stdout line ending in CRLF matches a whole-line RegExp', async () => {
    const s = new Supervisor({
      command: 'sh',
      args: ['-c', 'printf "starting\\r\\nready\\r\\n"; exec sleep 1000'],
      ready: { stdout: /^ready$/ },
      readyTimeoutMs: 5000,
    })
    s.on('stdout', () => {})
    try {
      await s.start()
      expect(s.state).toBe('running')
    } finally {
      await s.stop()
    }
  })

  it("inside an 'exit' listener the state has moved on: never 'running' while no child runs", async () => {
    const s = new Supervisor({
      command: 'sh',
      args: ['-c', 'sleep 0.05; exit 1'],
      backoff: { initialMs: 60_000 },
      crashLoop: { maxRestarts: 1 },
    })
    const seen: string[] = []
    s.on('exit', () => seen.push(`${s.state} ${s.status().pid}`))
    const failed = new Promise((r) => s.once('failed', r))
    await s.start()
    await new Promise((r) => s.once('restart', r))
    // The crash that ends it: failed by the time 'exit' is heard.
    await s.restart().catch(() => {})
    await failed
    expect(seen).toEqual(['backoff null', 'failed null'])
  })

  it("stop({ signal: 'SIGKILL' }) while taking over passes on to the predecessor's orphan (it waited out the whole grace)", async () => {
    const dir = tempDir()
    const termFile = join(dir, 'got-term')
    const options = {
      command: 'sh',
      // Ignores SIGTERM (says so in a file), keeps running.
      args: ['-c', `trap "echo term > ${termFile}" TERM; echo started; while :; do sleep 0.05; done`],
      stateFile: join(dir, 'state.json'),
      spawn: { parentDeathSignal: false, stop: { graceMs: 120_000 } },
    }
    const predecessor = others.spawn(NODE, [
      join(FIXTURES, 'supervisor-process.cjs'),
      PROCWARD,
      JSON.stringify(options),
    ])
    let out = ''
    predecessor.stdout?.on('data', (d) => (out += d))
    await waitFor(() => out.includes('"started"'), 10_000, 'the predecessor to start')
    const orphan = JSON.parse(out.split('\n').find((l) => l.includes('"started"')) as string).status.pid as number
    others.track(orphan)
    await waitFor(() => readSupervisorState(options.stateFile)?.child?.pid === orphan, 10_000, 'the record')
    predecessor.kill('SIGKILL')
    await new Promise((r) => predecessor.once('exit', r))

    const s = new Supervisor(options as SupervisorOptions)
    const starting = s.start().catch((e) => e)
    await waitFor(() => existsSync(termFile), 10_000, 'the takeover to SIGTERM the orphan')
    const result = await s.stop({ signal: 'SIGKILL' })
    expect(result).toBeNull() // no child of its own yet
    expect((await starting).name).toBe('AbortError')
    expect(aliveInProcTable(orphan)).toBe(false)
  })
})
