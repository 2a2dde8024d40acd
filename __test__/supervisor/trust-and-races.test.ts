// Adversarial cases of the supervisor layer (Supervisor, waitForExit's
// users, the CLI): each test here failed before the fix it names.

import { execFileSync, spawnSync } from 'node:child_process'
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  ftruncateSync,
  lstatSync,
  openSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import net from 'node:net'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  getProcessInfo,
  readSupervisorState,
  type SupervisedProcess,
  Supervisor,
  type SupervisorOptions,
} from '../../index.js'
import {
  aliveInProcTable,
  CLI,
  canUnsharePid,
  FIXTURES,
  freePort,
  isRoot,
  NODE,
  outputLines,
  PROCWARD,
  pidNamespaceShell,
  tempDirs,
  trackProcesses,
  waitFor,
} from '../helpers'

const { sup, others } = trackProcesses()

const DAEMON = join(FIXTURES, 'http-daemon.cjs')
const tempDir = tempDirs('procward-hard-sup-')

// ---- pid 1 ------------------------------------------------------------------------

/**
 * Runs fixtures/pid-one.cjs `mode` in a new pid namespace whose pid 1 (a
 * shell) leads its own group and session, beside a victim in another
 * session. A kill(-1) there reaches the victim and nothing outside. Returns
 * the fixture's JSON line and whether the victim survived.
 */
async function inPidNamespace(...args: string[]): Promise<{ said: Record<string, unknown>; victim: string }> {
  const script = [
    'setsid sleep 30 & V=$!',
    'sleep 0.05',
    'setsid "$@"',
    'if kill -0 $V 2>/dev/null; then echo victim-alive; else echo victim-killed; fi',
    'kill -9 $V 2>/dev/null; wait',
  ].join('\n')
  const lines = await outputLines(
    others,
    ...pidNamespaceShell(script, 'sh', NODE, join(FIXTURES, 'pid-one.cjs'), PROCWARD, ...args),
  )
  return { said: JSON.parse(lines[0] ?? 'null'), victim: lines[lines.length - 1] ?? '' }
}

describe('pid 1', () => {
  it.skipIf(!canUnsharePid())(
    'stopSupervisedProcess(1, { group: true }) is refused: killpg(1) is kill(-1)',
    async () => {
      const { said, victim } = await inPidNamespace('stop')
      // Refused as pid 1 (init), group or not, before any signal.
      expect(said).toEqual({ error: 'ERR_OUT_OF_RANGE' })
      expect(victim).toBe('victim-alive')
    },
  )

  it.skipIf(!canUnsharePid())('a stateFile record naming pid 1 is never acted on; the supervisor serves', async () => {
    const { said, victim } = await inPidNamespace('supervisor', join(tempDir(), 'state.json'))
    // Warned (not 'takeover'), and serving with its own child.
    expect((said.events as string[]).sort()).toEqual(['spawn', 'warning PROCWARD_STATE_FILE'])
    expect(victim).toBe('victim-alive')
  })

  it.skipIf(!canUnsharePid())('procward stop on a state file naming pid 1 refuses, exit 1', async () => {
    const { said, victim } = await inPidNamespace('cli-stop', join(tempDir(), 'state.json'), CLI)
    expect(said).toMatchObject({ status: 1, stderr: expect.stringContaining('pid 1') })
    expect(victim).toBe('victim-alive')
  })
})

// ---- a stateFile someone else wrote --------------------------------------------------

/** A record that names `victim` (true identity, group and session) as the daemon. */
function forgedRecord(victim: SupervisedProcess): string {
  const info = getProcessInfo(victim.pid)
  const stat = readFileSync(`/proc/${victim.pid}/stat`, 'latin1')
  const session = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3])
  const now = new Date().toISOString()
  return JSON.stringify({
    version: 1,
    name: 'sleep',
    supervisor: { pid: victim.pid, identity: info?.identity, running: true },
    child: {
      pid: victim.pid,
      identity: info?.identity,
      pgid: info?.pgid,
      session,
      command: 'sleep',
      args: ['1000'],
      startedAt: now,
      aliveAt: now,
      cgroup: null,
      running: true,
    },
    state: 'running',
    restarts: 0,
    lastExit: null,
    updatedAt: now,
  })
}

function warnings(): { seen: string[]; done: () => void } {
  const seen: string[] = []
  const on = (w: Error & { code?: string }) => seen.push(`${w.code}: ${w.message}`)
  process.on('warning', on)
  return { seen, done: () => process.off('warning', on) }
}

describe('a stateFile someone else could have written', () => {
  const cases: [string, (file: string, text: string) => void][] = [
    [
      'a symlink to a record',
      (file, text) => {
        writeFileSync(`${file}.real`, text)
        symlinkSync(`${file}.real`, file)
      },
    ],
    [
      "another user's file",
      (file, text) => {
        writeFileSync(file, text)
        chownSync(file, 65534, 65534)
      },
    ],
    [
      'a world-writable file',
      (file, text) => {
        writeFileSync(file, text)
        chmodSync(file, 0o666)
      },
    ],
  ]
  for (const [what, make] of cases) {
    it.skipIf(!isRoot && what.includes('user'))(`${what}: its record is not acted on, and is replaced`, async () => {
      const victim = sup('sleep', ['1000'])
      const file = join(tempDir(), 'state.json')
      make(file, forgedRecord(victim))
      const w = warnings()
      const s = new Supervisor({ command: 'sleep', args: ['1000'], stateFile: file })
      const takeovers: unknown[] = []
      s.on('takeover', (t) => takeovers.push(t))
      try {
        await s.start()
        await s.stop()
      } finally {
        w.done()
      }
      expect(takeovers).toEqual([])
      expect(w.seen.join('\n')).toMatch(/PROCWARD_STATE_FILE: procward: not taking over from/)
      expect(victim.exitInfo).toBeNull()
      expect(aliveInProcTable(victim.pid)).toBe(true)
      // Ours now: a regular file of our own, with our record.
      expect(lstatSync(file).isSymbolicLink()).toBe(false)
      expect(readSupervisorState(file)?.name).toBe('sleep')
      expect(readSupervisorState(file)?.state).toBe('stopped')
    })
  }

  it.skipIf(!isRoot)(
    "procward stop as root: another user's file naming a root process is refused, exit 1",
    async () => {
      const victim = sup('sleep', ['1000'])
      const file = join(tempDir(), 'state.json')
      writeFileSync(file, forgedRecord(victim))
      chownSync(file, 65534, 65534)
      const r = spawnSync(NODE, [CLI, 'stop', file, '--grace', '100'], { encoding: 'utf8' })
      expect(r.status).toBe(1)
      expect(r.stderr).toMatch(/not acting on this record: it is owned by uid 65534/)
      expect(victim.exitInfo).toBeNull()
      expect(aliveInProcTable(victim.pid)).toBe(true)
    },
  )
})

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

describe('readSupervisorState on what is not a record', () => {
  it('a FIFO at the path is null at once (reading it would block the thread until a writer came)', () => {
    const file = join(tempDir(), 'state.json')
    execFileSync('mkfifo', [file])
    expect(readSupervisorState(file)).toBeNull()
  })

  it('a huge file is null, unread', () => {
    const file = join(tempDir(), 'state.json')
    const fd = openSync(file, 'w')
    ftruncateSync(fd, 2 ** 31)
    closeSync(fd)
    expect(readSupervisorState(file)).toBeNull()
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

describe('stateFile writes that fail', () => {
  it.skipIf(!canUnsharePid())('ENOSPC: warned once, and the record catches up once there is room again', async () => {
    const dir = tempDir()
    const p = others.spawn('unshare', [
      '--mount',
      'sh',
      '-c',
      'mount -t tmpfs -o size=64k tmpfs "$1" && exec "$2" "$3" "$4" "$1"',
      'sh',
      dir,
      NODE,
      join(FIXTURES, 'full-disk.cjs'),
      PROCWARD,
    ])
    let out = ''
    p.stdout?.on('data', (d) => (out += d))
    await new Promise((r) => p.once('exit', r))
    const r = JSON.parse(out.trim())
    expect(r.warnings).toEqual(['PROCWARD_STATE_FILE'])
    // While the disk was full the record still named the old child...
    expect(r.during).toBe(r.first)
    // ...and once there was room it named the running one, with no state change to prompt it.
    expect(r.after).toBe(r.second)
  })
})
