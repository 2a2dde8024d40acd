// A supervisor's state file as an attacker or an accident leaves it: a
// record naming pid 1, a file others could write, what is not a record, a
// write that fails. Each test here failed before the fix it names.

import { execFileSync, spawnSync } from 'node:child_process'
import {
  chmodSync,
  chownSync,
  closeSync,
  ftruncateSync,
  lstatSync,
  openSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { getProcessInfo, readSupervisorState, type SupervisedProcess, Supervisor } from '../../index.js'
import {
  aliveInProcTable,
  CLI,
  canUnsharePid,
  FIXTURES,
  isRoot,
  NODE,
  outputLines,
  PROCWARD,
  pidNamespaceShell,
  tempDirs,
  trackProcesses,
} from '../helpers'

const { sup, others } = trackProcesses()

const _DAEMON = join(FIXTURES, 'http-daemon.cjs')
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
