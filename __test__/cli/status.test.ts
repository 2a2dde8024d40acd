// procward status tells the truth now, as systemctl status words it;
// procward stop stops with the supervisor's own grace; procward run's log
// lines carry the time unless the journal does, and --prefix copies the
// child's bytes exactly.
import { readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { cgroupSupport } from '../../index.js'
import {
  aliveInProcTable,
  canUnsharePid,
  FIXTURES,
  freePort,
  PROCWARD,
  pidNamespaceShell,
  tempDirs,
  trackProcesses,
  waitFor,
} from '../helpers'
import { recordWhen } from '../supervisor/helpers'
import { CLI, Cli, NODE, cli as runCli } from './cli-process'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-cli-status-')
const cli = (args: string[]) => runCli(others, args)
const SUPERVISOR_PROCESS = join(FIXTURES, 'supervisor-process.cjs')

/** A supervisor in its own process, SIGKILLed once its child runs: the child outlives it. */
async function orphanedChild(command: string, args: string[]) {
  const stateFile = join(tempDir(), 'svc.json')
  const p = others.spawn(NODE, [
    SUPERVISOR_PROCESS,
    PROCWARD,
    JSON.stringify({ command, args, stateFile, spawn: { parentDeathSignal: false } }),
  ])
  const r = await recordWhen(stateFile, (r) => r.state === 'running', 'the running record')
  const child = r.child?.pid as number
  others.track(child)
  p.kill('SIGKILL')
  await new Promise((res) => p.once('exit', res))
  return { stateFile, child }
}

/** Rewrites a record as its supervisor would: mode 0600, replaced atomically. */
function patchRecord(file: string, patch: (r: { [k: string]: unknown }) => void) {
  const r = JSON.parse(readFileSync(file, 'utf8'))
  patch(r)
  writeFileSync(`${file}.tmp`, JSON.stringify(r), { mode: 0o600 })
  renameSync(`${file}.tmp`, file)
}

describe('procward status: true now', () => {
  it('a SIGKILLed supervisor, then its child stopped: inactive (dead), not running (exit 3)', async () => {
    const { stateFile, child } = await orphanedChild('sleep', ['1000'])
    const orphaned = await cli(['status', stateFile])
    expect(orphaned.code).toBe(3)
    expect(orphaned.out).toMatch(/Active: failed \(supervisor gone, child running unsupervised\)/)
    expect(orphaned.out).toMatch(new RegExp(`Main PID: ${child}: sleep 1000`))

    const stop = await cli(['stop', stateFile])
    expect(stop.code).toBe(0)
    expect(aliveInProcTable(child)).toBe(false)
    const st = await cli(['status', stateFile])
    expect(st.code).toBe(3)
    expect(st.out).toMatch(/Active: inactive \(dead\)/)
    expect(st.out).not.toMatch(/running \(|active \(running/)
    expect(st.out).toMatch(/the supervisor died while running/)
    expect(st.out).toMatch(new RegExp(`Main PID: ${child} \\(gone\\)`))
    const json = JSON.parse((await cli(['status', '--json', stateFile])).out)
    expect(json.judgement).toMatchObject({ active: 'inactive', sub: 'dead', exitCode: 3 })
    expect(json.child).toMatchObject({ pid: child, running: false })
  })

  it('activating while not yet ready; failed with its result; inactive once stopped', async () => {
    const dir = tempDir()
    const port = await freePort()
    const starting = join(dir, 'starting.json')
    // Never ready: nothing listens on the port.
    const c = new Cli(others, ['run', '--state-file', starting, '--ready-port', String(port), '--', 'sleep', '1000'])
    const r = await recordWhen(starting, (r) => r.state === 'starting' && r.child !== null, 'the starting record')
    others.track(r.child?.pid as number)
    const st = await cli(['status', starting])
    expect(st.code).toBe(3)
    expect(st.out).toMatch(/Active: activating \(start\) since /)
    c.proc.kill('SIGTERM')
    await c.done
    const stopped = await cli(['status', starting])
    expect(stopped.code).toBe(3)
    expect(stopped.out).toMatch(/Active: inactive \(dead\) since /)

    const failed = join(dir, 'failed.json')
    expect((await cli(['run', '--restart', 'never', '--state-file', failed, '--', 'sh', '-c', 'exit 3'])).code).toBe(3)
    const f = await cli(['status', failed])
    expect(f.code).toBe(3)
    expect(f.out).toMatch(/Active: failed \(Result: exit-code\)/)
    expect(f.out).toMatch(/Last exit: pid \d+, code 3/)
  })

  it("shows what the record carries: ready time, last exit time, the child's status text, meta", async () => {
    const { stateFile, child } = await orphanedChild('sleep', ['1000'])
    const at = new Date(Date.now() - 65_000).toISOString()
    patchRecord(stateFile, (r) => {
      const c = r.child as { [k: string]: unknown }
      c.readyAt = at
      c.status = 'serving 3 clients'
      r.meta = { port: 8080 }
      r.lastExit = { pid: 12345, code: 1, signal: null, at }
      r.restarts = 2
    })
    const st = await cli(['status', stateFile])
    expect(st.out).toMatch(new RegExp(`Ready: ${at}; 1min \\d+s ago`))
    expect(st.out).toMatch(/Status: "serving 3 clients"/)
    expect(st.out).toMatch(/Meta: \{"port":8080\}/)
    expect(st.out).toMatch(new RegExp(`Last exit: pid 12345, code 1, at ${at} \\(1min \\d+s ago\\)`))
    expect(st.out).toMatch(/Restarts: 2/)
    expect((await cli(['stop', stateFile])).code).toBe(0)
    expect(aliveInProcTable(child)).toBe(false)
  })

  it.skipIf(!cgroupSupport().available)('with a cgroup: its tasks and CPU', async () => {
    const stateFile = join(tempDir(), 'cg.json')
    const c = new Cli(others, ['run', '--cgroup', '--state-file', stateFile, '--', 'sh', '-c', 'sleep 1000 & wait'])
    const r = await recordWhen(stateFile, (r) => r.state === 'running', 'the running record')
    // Running is recorded at the spawn: the shell's fork may come a moment later.
    const procs = join(r.child?.cgroup?.path ?? '/nonexistent', 'cgroup.procs')
    await waitFor(() => readFileSync(procs, 'utf8').trim().split('\n').length === 2, 5000, 'the two tasks')
    const st = await cli(['status', stateFile])
    expect(st.code).toBe(0)
    expect(st.out).toMatch(/Tasks: 2\n/)
    expect(st.out).toMatch(/CPU: \d+\.\d{3}s/)
    expect(st.out).toContain(`CGroup: ${r.child?.cgroup?.path}`)
    const json = JSON.parse((await cli(['status', '--json', stateFile])).out)
    expect(json.judgement.resources).toMatchObject({ tasks: 2 })
    c.proc.kill('SIGTERM')
    expect((await c.done).signal).toBe('SIGTERM')
  })
})

describe("procward stop: the supervisor's own grace", () => {
  it("uses the record's stop.graceMs; an explicit --grace wins", async () => {
    for (const [recorded, args] of [
      [100, []],
      [600_000, ['--grace', '100']],
    ] as const) {
      // A child that ignores SIGTERM: only the grace decides when it is killed.
      const { stateFile, child } = await orphanedChild('sh', [join(FIXTURES, 'ignore-term.sh')])
      patchRecord(stateFile, (r) => {
        r.stop = { graceMs: recorded, killTimeoutMs: 2000 }
      })
      const t0 = Date.now()
      const stop = await cli(['stop', stateFile, ...args])
      expect(stop.err).toContain(`child pid ${child}: killed`)
      // Far below the default grace (5 s) and the recorded 600 s.
      expect(Date.now() - t0).toBeLessThan(5000)
      expect(aliveInProcTable(child)).toBe(false)
    }
  })
})

describe('procward run: log lines and --prefix', () => {
  /** Runs the CLI with JOURNAL_STREAM naming its stderr, as systemd sets it, or another stream. */
  async function underJournal(args: string[], matching: boolean) {
    const stream = matching ? '$(stat -L -c %d:%i /proc/self/fd/2)' : '1:1'
    const p = others.spawn('sh', ['-c', `JOURNAL_STREAM=${stream} exec "$0" "$@"`, NODE, CLI, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const out: Buffer[] = []
    let err = ''
    p.stdout?.on('data', (d) => out.push(d))
    p.stderr?.on('data', (d) => (err += d))
    const code = await new Promise<number | null>((r) => p.once('close', (c) => r(c)))
    return { code, out: Buffer.concat(out), err }
  }

  it('timestamps unless stderr is the journal', async () => {
    const args = ['run', '--restart', 'never', '--', 'true']
    const plain = await underJournal(args, false)
    expect(plain.err).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z procward: true: spawn pid/)
    const journal = await underJournal(args, true)
    expect(journal.err).toMatch(/^procward: true: spawn pid/)
    expect(journal.err).not.toMatch(/\d{4}-\d\d-\d\dT/)
  })

  it('--prefix: every line prefixed, the bytes otherwise exact (CR, invalid UTF-8, no final newline)', async () => {
    const script = "printf 'a\\r\\nb\\377c\\n\\nlast'; printf 'e1\\ne2' >&2"
    const r = await underJournal(
      ['run', '--prefix', '--name', 'w', '--restart', 'never', '--', 'sh', '-c', script],
      true,
    )
    expect(r.code).toBe(0)
    expect(r.out.equals(Buffer.from('w: a\r\nw: b\xffc\nw: \nw: last', 'latin1'))).toBe(true)
    expect(r.err).toContain('w: e1\nw: e2')
  })

  it('--prefix: a large output arrives whole, line for line', async () => {
    const lines = 20_000
    const script = `i=0; while [ $i -lt ${lines} ]; do echo "line $i xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"; i=$((i+1)); done`
    const r = await underJournal(
      ['run', '--prefix', '--name', 'w', '--restart', 'never', '--', 'sh', '-c', script],
      true,
    )
    expect(r.code).toBe(0)
    const got = r.out.toString().split('\n')
    expect(got.pop()).toBe('')
    expect(got).toHaveLength(lines)
    got.forEach((l, i) => {
      if (l !== `w: line ${i} xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx`) throw new Error(`line ${i}: ${l}`)
    })
  })
})

// A container's record read from the host: its pids are the container's
// (pid 1 the supervisor), which name other processes here, or none.
describe.skipIf(!canUnsharePid())('procward status of a record written in another pid namespace', () => {
  it('says it cannot judge (exit 4) from outside, and judges it inside; procward stop refuses from outside', async () => {
    const dir = tempDir()
    const stateFile = join(dir, 'api.json')
    // procward run as PID 1 of a new pid namespace, as a container's entrypoint.
    const [cmd, args] = pidNamespaceShell(
      'exec "$@"',
      NODE,
      CLI,
      'run',
      '--name',
      'api',
      '--state-file',
      stateFile,
      '--',
      'sleep',
      '1000',
    )
    const ns = others.spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] })
    const r = await recordWhen(stateFile, (r) => r.state === 'running', 'the running record')
    expect(r.supervisor.pid).toBe(1)
    const here = await cli(['status', stateFile])
    expect(here.code).toBe(4)
    expect(here.out).toMatch(/Active: unknown \(recorded in another pid namespace\)/)
    expect(here.out).toMatch(
      /Note: recorded in pid:\[\d+\], read from pid:\[\d+\]: .*run it inside, e\.g\. docker exec/,
    )
    expect(here.out).toMatch(/Supervisor: pid 1, not judged/)
    expect(here.out).not.toMatch(/gone|inactive/)
    const json = JSON.parse((await cli(['status', '--json', stateFile])).out)
    expect(json.judgement).toMatchObject({ active: 'unknown', exitCode: 4 })
    expect(json.supervisor).toMatchObject({ pid: 1, running: false })
    // Nothing is signalled on its word from here.
    const stop = await cli(['stop', stateFile])
    expect(stop.code).not.toBe(0)
    expect(stop.err).toMatch(/another pid namespace/)
    // Inside the namespace (its /proc), the same record is judged: running.
    const nsPid = ns.pid as number
    const innerPid = Number(readFileSync(`/proc/${nsPid}/task/${nsPid}/children`, 'utf8').trim().split(' ')[0])
    const entered = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const p = others.spawn('nsenter', ['-t', String(innerPid), '-p', '-m', NODE, CLI, 'status', stateFile])
      let out = ''
      p.stdout?.on('data', (d) => (out += d))
      p.once('close', (code) => resolve({ code, out }))
    })
    expect(entered.out).toMatch(/Active: active \(running\)/)
    expect(entered.code).toBe(0)
    // The namespace's PID 1 stops its daemon and ends (unshare ignores SIGTERM while it waits).
    const ended = new Promise((res) => ns.once('exit', res))
    process.kill(innerPid, 'SIGTERM')
    await ended
  })
})
