import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { readSupervisorState } from '../../index.js'
import {
  aliveInProcTable,
  askDaemon,
  FIXTURES,
  freePort,
  NODE,
  PROCWARD,
  sleep,
  tempDirs,
  trackProcesses,
  waitFor,
} from '../helpers'
import { Cli as CliProcess, HTTP_DAEMON, cli as runCli, runDaemon } from './cli-process'

const { others } = trackProcesses()

const SUPERVISOR_PROCESS = join(FIXTURES, 'supervisor-process.cjs')
const Cli = CliProcess

const tempDir = tempDirs('procward-cli-')

const cli = (args: string[]) => runCli(others, args)

/** `procward lock FILE -- sh -c SCRIPT`, running. */
const lockHolder = (file: string, script: string) => new Cli(others, ['lock', file, '--', 'sh', '-c', script])

describe('procward run', () => {
  it('serves, restarts a kill -9ed child, and exits cleanly on SIGTERM leaving no child', async () => {
    const port = await freePort()
    const c = new Cli(others, runDaemon(port))
    await waitFor(() => c.pids('ready').length === 1, 10_000, 'ready')
    const first = c.pids('ready')[0] as number
    expect((await askDaemon(port))?.pid).toBe(first)
    process.kill(first, 'SIGKILL')
    await waitFor(() => c.pids('ready').length === 2, 10_000, 'ready again')
    const second = c.pids('ready')[1] as number
    expect((await askDaemon(port))?.pid).toBe(second)
    expect(c.err).toMatch(new RegExp(`exit pid ${first} killed by SIGKILL \\(unexpected\\)`))
    expect(c.err).toMatch(/restart attempt 1 in 0 ms/)

    c.proc.kill('SIGTERM')
    const end = await c.done
    // It stopped its child, then died of the signal itself (status 143).
    expect(end.signal).toBe('SIGTERM')
    expect(aliveInProcTable(second)).toBe(false)
    expect(await askDaemon(port)).toBeNull()
  })

  it('--json: one JSON object per event; --restart never: the child exit status', async () => {
    const r = await cli(['run', '--json', '--restart', 'never', '--name', 'seven', '--', 'sh', '-c', 'exit 7'])
    expect(r.code).toBe(7)
    const events = r.err
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(events.map((e) => e.event)).toEqual(['spawn', 'ready', 'exit', 'failed'])
    expect(events[2]).toMatchObject({ name: 'seven', code: 7, signal: null, expected: false })
    const killed = await cli(['run', '--restart', 'never', '--', 'sh', '-c', 'kill -9 $$'])
    expect(killed.code).toBe(128 + 9)
    // Its 0 before it was ready is a failure all the same: 1, not 0.
    const port = await freePort()
    const early = await cli(['run', '--restart', 'never', '--ready-port', String(port), '--', 'true'])
    expect(early.code).toBe(1)
    expect(early.err).toMatch(/failed .*exited with code 0 before it was ready/)
  })
})

describe('procward status and stop', () => {
  it('on a live state file: status 0, stop ends supervisor and child, then status 3', async () => {
    const port = await freePort()
    const stateFile = join(tempDir(), 'web.json')
    const c = new Cli(others, runDaemon(port, ['--state-file', stateFile]))
    await waitFor(() => c.pids('ready').length === 1, 10_000, 'ready')
    const child = c.pids('ready')[0] as number
    await waitFor(() => readSupervisorState(stateFile)?.state === 'running', 5000, 'the running record')

    const st = await cli(['status', stateFile])
    expect(st.code).toBe(0)
    expect(st.out).toMatch(/Active: active \(running\) since /)
    expect(st.out).toMatch(new RegExp(`Main PID: ${child}: `))
    const json = await cli(['status', stateFile, '--json'])
    expect(JSON.parse(json.out)).toMatchObject({
      state: 'running',
      child: { pid: child, running: true },
      judgement: { active: 'active', sub: 'running', exitCode: 0 },
    })

    const stop = await cli(['stop', stateFile])
    expect(stop.code).toBe(0)
    expect((await c.done).signal).toBe('SIGTERM')
    expect(aliveInProcTable(child)).toBe(false)
    expect((await cli(['status', stateFile])).code).toBe(3)
  })

  it('on a dead supervisor: stop stops the recorded child directly', async () => {
    const port = await freePort()
    const stateFile = join(tempDir(), 'orphan.json')
    const p = others.spawn(NODE, [
      SUPERVISOR_PROCESS,
      PROCWARD,
      JSON.stringify({
        command: NODE,
        args: [HTTP_DAEMON, '--port', String(port)],
        ready: { port },
        stateFile,
        spawn: { parentDeathSignal: false },
      }),
    ])
    await waitFor(() => readSupervisorState(stateFile)?.state === 'running', 10_000, 'the running record')
    const orphan = readSupervisorState(stateFile)?.child?.pid as number
    others.track(orphan)
    p.kill('SIGKILL')
    await new Promise((r) => p.once('exit', r))
    expect((await askDaemon(port))?.pid).toBe(orphan)
    // The supervisor is dead, its child is not: not running as a service.
    expect((await cli(['status', stateFile])).code).toBe(3)

    const stop = await cli(['stop', stateFile, '--grace', '2000'])
    expect(stop.code).toBe(0)
    expect(stop.err).toContain(`child pid ${orphan}: exited`)
    expect(aliveInProcTable(orphan)).toBe(false)
  })

  it('status of a missing or foreign file: 4 (unknown)', async () => {
    expect((await cli(['status', join(tempDir(), 'none.json')])).code).toBe(4)
  })
})

describe('procward lock', () => {
  it('excludes a second holder (75), --wait waits, and the command status is passed on', async () => {
    const dir = tempDir()
    const file = join(dir, 'job.lock')
    const go = join(dir, 'go')
    // Holds the lock until the test says so: nothing here hangs on timing.
    const holder = lockHolder(file, `echo locked; while [ ! -e ${go} ]; do sleep 0.02; done`)
    await waitFor(() => holder.out.includes('locked'), 5000, 'the first holder')

    const second = await cli(['lock', file, '--', 'sh', '-c', 'echo ran'])
    expect(second.code).toBe(75)
    expect(second.out).toBe('')
    expect(second.err).toMatch(/locked by pid \d+/)

    let waitedEnded = false
    const waiting = cli(['lock', file, '--wait', '--', 'sh', '-c', 'echo ran; exit 7']).finally(() => {
      waitedEnded = true
    })
    await sleep(300)
    expect(waitedEnded).toBe(false) // still waiting: the lock is held
    writeFileSync(go, '')
    const waited = await waiting
    expect(waited.out).toBe('ran\n')
    expect(waited.code).toBe(7)
    expect((await holder.done).code).toBe(0)

    const bounded = lockHolder(file, 'echo locked; exec sleep 5')
    await waitFor(() => bounded.out.includes('locked'), 5000, 'the bounded holder')
    const timedOut = await cli(['lock', file, '--wait=100', '--', 'true'])
    expect(timedOut.code).toBe(75)
    bounded.proc.kill('SIGTERM')
    // SIGTERM is passed on to the command, whose status is ours.
    expect((await bounded.done).code).toBe(128 + 15)
  })
})

describe('usage', () => {
  for (const args of [
    [],
    ['frob'],
    ['run'],
    ['run', '--restart', 'sometimes', '--', 'true'],
    ['run', '--ready-port', 'eighty', '--', 'true'],
    ['run', '--bogus', '--', 'true'],
    ['status'],
    ['status', 'a', 'b'],
    ['stop'],
    ['lock', 'file'],
    ['lock', '--wait=soon', 'file', '--', 'true'],
    ['run', '--name', '', '--', 'true'],
    ['run', '--state-file', '', '--', 'true'],
  ]) {
    it(`procward ${args.join(' ')}: one line and a hint on stderr, exit 2`, async () => {
      const r = await cli(args)
      expect(r.code).toBe(2)
      // One line, and a hint: not the whole usage.
      const lines = r.err.trimEnd().split('\n')
      expect(lines).toHaveLength(2)
      expect(lines[0]).toMatch(/^procward( \w+)?: /)
      expect(lines[1]).toMatch(/^try 'procward( \w+)? --help'$/)
      expect(r.out).toBe('')
    })
  }

  it('--help prints the usage on stdout and exits 0', async () => {
    for (const cmd of ['run', 'status', 'stop', 'lock']) {
      const r = await cli([cmd, '--help'])
      expect(r.code).toBe(0)
      expect(r.out).toContain(`usage: procward ${cmd}`)
    }
    expect((await cli(['--help'])).out).toContain('commands:')
  })
})

describe('hardening', () => {
  it("without `--`, the command's own options are its own, not procward's", async () => {
    const r = await cli(['run', '--restart', 'never', 'sh', '-c', 'exit 3', '--foo'])
    expect(r.code).toBe(3)
    const file = join(tempDir(), 'job.lock')
    const l = await cli(['lock', file, 'echo', '--hello'])
    expect(l.code).toBe(0)
    expect(l.out).toBe('--hello\n')
  })

  it('lock: a command that ignores signals keeps the lock on the first SIGTERM, and is SIGKILLed on the second', async () => {
    const file = join(tempDir(), 'job.lock')
    // SIG_IGN survives exec: sleep itself ignores them.
    const holder = lockHolder(file, 'trap "" TERM INT HUP; echo locked; exec sleep 1000')
    await waitFor(() => holder.out.includes('locked'), 5000, 'the holder')
    holder.proc.kill('SIGTERM')
    await sleep(200)
    // Still running, so still holding the lock: the exclusion holds.
    expect(holder.proc.exitCode).toBeNull()
    expect((await cli(['lock', file, '--', 'true'])).code).toBe(75)
    holder.proc.kill('SIGTERM')
    let ended = false
    holder.done.then(() => (ended = true))
    await waitFor(() => ended, 5000, 'the second SIGTERM to end it')
    expect((await holder.done).code).toBe(128 + 9)
    expect((await cli(['lock', file, '--', 'true'])).code).toBe(0)
  })

  it('stop on a stale state file (nothing runs): says so, exit 0, signals nothing', async () => {
    const file = join(tempDir(), 'state.json')
    const run = await cli(['run', '--restart', 'never', '--state-file', file, '--', 'sh', '-c', 'exit 0'])
    expect(run.code).toBe(0)
    const r = await cli(['stop', file])
    expect(r.code).toBe(0)
    expect(r.err).toMatch(/nothing running \(sh: stopped\)/)
  })
})
