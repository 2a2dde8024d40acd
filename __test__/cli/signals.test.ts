// Signals: `procward run` ends with its child's whole group stopped, of
// whatever signal would have ended it; `procward lock` passes SIGINT on as
// it does SIGTERM and SIGHUP; handleSignals leaves an application's own
// signals alone.
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { getProcessInfo, isProcessRunning } from '../../index.js'
import { aliveInProcTable, FIXTURES, PROCWARD, tempDirs, trackProcesses, waitFor } from '../helpers'
import { CLI, CLI_FIXTURES, Cli, NODE } from './cli-process'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-cli-signals-')
const WORKERS = join(FIXTURES, 'workers.sh')

/** `procward run` of a master with two workers in its group, once it said so. */
async function runWorkers(extra: string[] = []) {
  // A temporary cwd: a SIGQUIT re-raised may leave a core file.
  const c = new Cli(others, ['run', ...extra, '--', 'sh', WORKERS], { cwd: tempDir() })
  await waitFor(() => /ready \d+ \d+\n/.test(c.out) && c.pids('spawn').length > 0, 10_000, 'the workers')
  const [, a, b] = (/ready (\d+) (\d+)/.exec(c.out) as RegExpExecArray).map(Number)
  const leader = c.pids('spawn')[0] as number
  for (const pid of [leader, a, b] as number[]) others.track(pid)
  // Identities too: pids wrap fast here (pid_max 32768), and a pid checked
  // after the run may already be someone else's.
  const ids = new Map([leader, a, b].map((pid) => [pid as number, getProcessInfo(pid as number)?.identity ?? '']))
  const gone = (pid: number) => !isProcessRunning(pid, ids.get(pid) || undefined)
  return {
    c,
    group: [leader, a, b] as number[],
    /**
     * Every member gone. The sweep SIGKILLs the group before procward dies;
     * a member still on its way out of the kernel (a busy machine) gets a
     * bounded moment: one never signalled runs on, and fails this.
     */
    allGone: async () => {
      await waitFor(() => [leader, a, b].every((pid) => gone(pid as number)), 5000, 'the group').catch(() => {})
      for (const pid of [leader, a, b] as number[]) expect(gone(pid), `pid ${pid}`).toBe(true)
    },
  }
}

describe('procward run: a signal that would end it stops the whole group first', () => {
  for (const sig of ['SIGHUP', 'SIGQUIT', 'SIGUSR2', 'SIGALRM', 'SIGTERM', 'SIGINT'] as const) {
    it(`${sig}: the master and its workers are gone, procward dies of ${sig}`, async () => {
      const { c, allGone } = await runWorkers()
      c.proc.kill(sig)
      const end = await c.done
      expect(end.signal).toBe(sig)
      await allGone()
      expect(c.err).toMatch(/: stopped /)
    })
  }

  it('--hup forward: SIGHUP reaches the child, which runs on; SIGTERM then ends all', async () => {
    const script = 'trap "echo hup" HUP; echo up; while :; do sleep 0.1; done'
    const c = new Cli(others, ['run', '--hup', 'forward', '--', 'sh', '-c', script])
    await waitFor(() => c.out.includes('up\n') && c.pids('spawn').length > 0, 10_000, 'the child')
    const child = c.pids('spawn')[0] as number
    c.proc.kill('SIGHUP')
    await waitFor(() => c.out.includes('hup\n'), 10_000, 'the forwarded SIGHUP')
    expect(c.proc.exitCode).toBeNull()
    expect(aliveInProcTable(child)).toBe(true)
    c.proc.kill('SIGTERM')
    expect((await c.done).signal).toBe('SIGTERM')
    expect(aliveInProcTable(child)).toBe(false)
  })

  it('a service manager stop: SIGTERM to every process at once leaves nothing', async () => {
    for (let i = 0; i < 3; i++) {
      const { c, group, allGone } = await runWorkers()
      for (const pid of [c.pid, ...group]) {
        // As a manager does: one already gone (procward stopped the group
        // between two kills) is no error.
        try {
          process.kill(pid, 'SIGTERM')
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err
        }
      }
      const end = await c.done
      expect(end.signal).toBe('SIGTERM')
      await allGone()
    }
  })

  it('SIGTERM at every instant of the start: procward dies of it, nothing is left', async () => {
    // Before node listens, at its first output (the spawn), once the workers run.
    for (const when of ['at once', 'spawn', 'workers'] as const) {
      const c = new Cli(others, ['run', '--', 'sh', WORKERS])
      if (when === 'spawn') await waitFor(() => c.err.length > 0 || c.proc.exitCode !== null, 10_000, 'output')
      if (when === 'workers') {
        await waitFor(() => c.out.includes('ready') && c.pids('spawn').length > 0, 10_000, 'the workers')
      }
      for (const pid of c.pids('spawn')) others.track(pid)
      c.proc.kill('SIGTERM')
      const end = await c.done
      expect(end.signal, when).toBe('SIGTERM')
      for (const pid of c.pids('spawn')) expect(aliveInProcTable(pid)).toBe(false)
      // The tagged-process check after the test finds any worker left.
    }
  })

  it('--prefix: what the child writes as it stops is all out before procward dies of the signal', async () => {
    const script = 'trap "echo bye-out; echo bye-err >&2; exit 0" TERM; echo up; while :; do sleep 0.1; done'
    const c = new Cli(others, ['run', '--prefix', '--name', 'web', '--', 'sh', '-c', script])
    await waitFor(() => c.out.includes('web: up\n'), 10_000, 'the child')
    c.proc.kill('SIGTERM')
    expect((await c.done).signal).toBe('SIGTERM')
    expect(c.out).toMatch(/web: bye-out\n$/)
    expect(c.err).toMatch(/web: bye-err\n/)
  })
})

describe('handleSignals and the application', () => {
  const daemon = { command: 'sleep', args: ['1000'] }

  it("a signal the application listens for is the application's: the daemon runs on", async () => {
    const p = others.spawn(NODE, [
      join(CLI_FIXTURES, 'app-signals.cjs'),
      PROCWARD,
      JSON.stringify({ ...daemon, handleSignals: true }),
      'SIGUSR2,SIGHUP',
    ])
    let out = ''
    p.stdout?.on('data', (d) => (out += d))
    await waitFor(() => out.includes('"ready"'), 10_000, 'ready')
    const pid = JSON.parse(out.split('\n')[0] as string).pid as number
    others.track(pid)
    p.kill('SIGUSR2')
    await waitFor(() => out.includes('"SIGUSR2"'), 10_000, "the app's listener")
    p.kill('SIGHUP')
    await waitFor(() => out.includes('"SIGHUP"'), 10_000, "the app's listener")
    expect(aliveInProcTable(pid)).toBe(true)
    expect(out).not.toContain('stopped')
    const end = new Promise<NodeJS.Signals | null>((r) => p.once('exit', (_c, s) => r(s)))
    p.kill('SIGTERM')
    expect(await end).toBe('SIGTERM')
    expect(aliveInProcTable(pid)).toBe(false)
  })

  it('with no listener of its own, SIGUSR2 (or SIGHUP) stops the daemon before the process dies of it', async () => {
    for (const sig of ['SIGUSR2', 'SIGHUP'] as const) {
      const p = others.spawn(NODE, [
        join(CLI_FIXTURES, 'app-signals.cjs'),
        PROCWARD,
        JSON.stringify({ ...daemon, handleSignals: true }),
      ])
      let out = ''
      p.stdout?.on('data', (d) => (out += d))
      await waitFor(() => out.includes('"ready"'), 10_000, 'ready')
      const pid = JSON.parse(out.split('\n')[0] as string).pid as number
      others.track(pid)
      const end = new Promise<NodeJS.Signals | null>((r) => p.once('exit', (_c, s) => r(s)))
      p.kill(sig)
      expect(await end).toBe(sig)
      expect(out).toContain('"stopped"')
      expect(aliveInProcTable(pid)).toBe(false)
    }
  })
})

describe('procward lock: signals', () => {
  it('a SIGINT sent with kill (timeout -s INT, a container stop) reaches the command', async () => {
    const file = join(tempDir(), 'job.lock')
    const script = 'trap "echo got-int; exit 5" INT; echo locked; while :; do sleep 0.1; done'
    // A session of its own: no terminal whose Ctrl-C could have sent it.
    const c = new Cli(others, ['lock', file, '--', 'sh', '-c', script], { detached: true })
    await waitFor(() => c.out.includes('locked'), 10_000, 'the holder')
    c.proc.kill('SIGINT')
    const end = await c.done
    expect(c.out).toContain('got-int')
    expect(end.code).toBe(5)
  })

  it('SIGTERM and SIGHUP are passed on too; the lock is held until the command has exited', async () => {
    for (const sig of ['SIGTERM', 'SIGHUP'] as const) {
      const file = join(tempDir(), 'job.lock')
      const script = `trap "echo got; sleep 0.3; exit 6" ${sig.slice(3)}; echo locked; while :; do sleep 0.1; done`
      const c = new Cli(others, ['lock', file, '--', 'sh', '-c', script], { detached: true })
      await waitFor(() => c.out.includes('locked'), 10_000, 'the holder')
      c.proc.kill(sig)
      await waitFor(() => c.out.includes('got'), 10_000, 'the command to get it')
      expect(c.proc.exitCode).toBeNull()
      expect((await c.done).code).toBe(6)
    }
  })
})

/** util-linux script(1), to run the CLI at a terminal of its own. */
const hasScript = (() => {
  try {
    execFileSync('script', ['--version'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
})()

describe.skipIf(!hasScript)('procward lock at a terminal', () => {
  // The terminal's SIGINT and a forwarded copy would arrive together and
  // merge (a pending signal is not queued twice), so this cannot tell one
  // from two: it holds that Ctrl-C at a terminal still works.
  it('Ctrl-C reaches the command, which ends with its own status', async () => {
    const file = join(tempDir(), 'job.lock')
    // Counts its SIGINTs; says how many once a line comes in.
    const counter =
      'let n=0; process.on("SIGINT",()=>{n++; console.log("int "+n)}); console.log("locked");' +
      'process.stdin.on("data",()=>{console.log("ints="+n); process.exit(n)})'
    const q = (s: string) => `'${s.replace(/'/g, "'\\''")}'`
    // script(1) runs it with `$SHELL -c`; dash (Debian's sh, script's
    // default with no SHELL) does not exec a lone command and would die of
    // the Ctrl-C itself: exec, so that procward is what the terminal runs.
    const inner = `exec ${[NODE, CLI, 'lock', file, '--', NODE, '-e', counter].map(q).join(' ')}`
    const p = others.spawn('script', ['-qfec', inner, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'] })
    let out = ''
    p.stdout?.on('data', (d) => (out += d))
    const end = new Promise<number | null>((r) => p.once('exit', (c) => r(c)))
    await waitFor(() => out.includes('locked'), 10_000, 'the holder')
    p.stdin?.write('\x03')
    await waitFor(() => out.includes('int 1'), 10_000, 'the SIGINT from the terminal')
    p.stdin?.write('done\n')
    await waitFor(() => /ints=\d/.test(out), 10_000, 'the count')
    expect(out).toMatch(/ints=1\b/)
    expect(await end).toBe(1)
  })
})
