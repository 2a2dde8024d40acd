// procward run as a container's PID 1 (`docker run` without --init): a pid
// namespace of its own (unshare --pid --fork --mount-proc), procward its
// init. The stop docker does, the status it reports, restarts, and the
// orphans the kernel hands an init. The same under tini, where installed.
import { type ChildProcess, spawnSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { CLI, canUnsharePid, NODE, sleep, trackProcesses, waitFor } from '../helpers'
import { Cli } from './cli-process'

const { others } = trackProcesses()
const hasTini = spawnSync('tini', ['--version']).status === 0
/** A daemon that says `up`, then every 100 ms double-forks a grandchild that lives 50 ms, orphaned at once. */
const ORPHAN_MAKER = 'echo up; while :; do (sleep 0.05 &); sleep 0.1; done'

function stat(pid: number): { state: string; ppid: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ')
    return { state: f[0] ?? '', ppid: Number(f[1]) }
  } catch {
    return null
  }
}

/** Whether `pid` has a handler for signal `n` (SigCgt). */
function catches(pid: number, n: number): boolean {
  try {
    const m = /^SigCgt:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'))
    return ((BigInt(`0x${m?.[1] ?? '0'}`) >> BigInt(n - 1)) & 1n) === 1n
  } catch {
    return false
  }
}

/** The host pid of the namespace's init: unshare's one child. */
async function initOf(unsharePid: number): Promise<number> {
  let pid = 0
  await waitFor(
    () => {
      const kids = readdirSync('/proc')
        .map(Number)
        .filter((p) => p > 0 && stat(p)?.ppid === unsharePid)
      pid = kids[0] ?? 0
      return pid > 0
    },
    5000,
    "the namespace's init",
  )
  return pid
}

/** Zombies whose parent is `parent` (host pids). */
function zombiesOf(parent: number): number[] {
  return readdirSync('/proc')
    .map(Number)
    .filter((p) => p > 0)
    .filter((p) => {
      const s = stat(p)
      return s?.ppid === parent && s.state === 'Z'
    })
}

/** procward run as PID 1 of a fresh pid namespace (tini's child there, with `tini`). */
class Run {
  readonly proc: ChildProcess
  out = ''
  err = ''
  readonly done: Promise<{ code: number | null; signal: NodeJS.Signals | null }>

  constructor(args: string[], tini: boolean) {
    const inner = [NODE, CLI, 'run', ...args]
    const cmd = tini ? ['tini', '-s', '--', ...inner] : inner
    this.proc = others.spawn('unshare', ['--pid', '--fork', '--mount-proc', '--kill-child', ...cmd], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    this.proc.stdout?.on('data', (d) => (this.out += d))
    this.proc.stderr?.on('data', (d) => (this.err += d))
    this.done = new Promise((resolve) => this.proc.once('close', (code, signal) => resolve({ code, signal })))
  }

  get pid(): number {
    return this.proc.pid as number
  }
}
const start = (args: string[], tini: boolean) => new Run(args, tini)
const spawned = (c: Run) => /: spawn pid \d+/.test(c.err)

for (const tini of [false, true]) {
  const where = tini ? 'under tini -s (PID 1 tini, procward its child)' : 'as PID 1 itself'
  describe.skipIf(process.platform !== 'linux' || !canUnsharePid() || (tini && !hasTini))(
    `procward run in a container's pid namespace, ${where}`,
    () => {
      // The process that gets the signals a container runtime sends: PID 1.
      const target = async (c: Run) => initOf(c.pid)

      it('SIGTERM from outside (docker stop) stops the daemon and exits 143', async () => {
        const c = start(['--name', 'd', '--', 'sleep', '1000'], tini)
        await waitFor(() => spawned(c), 10_000, 'the spawn')
        process.kill(await target(c), 'SIGTERM')
        const { code } = await c.done
        expect(c.err).toMatch(/stopped/)
        expect(code).toBe(143)
      })

      it.skipIf(tini)(
        'a SIGTERM while Node is still starting (its own handler took it, the kernel dropped the re-raise) is not lost: 143',
        async () => {
          for (let i = 0; i < 3; i++) {
            const c = start(['--name', 'd', '--', 'sleep', '1000'], tini)
            const init = await initOf(c.pid)
            // The first handler seen is Node's own, installed before any JS
            // runs; procward's first line comes some milliseconds later.
            const deadline = Date.now() + 10_000
            while (!catches(init, 15) && Date.now() < deadline) await new Promise((r) => setImmediate(r))
            process.kill(init, 'SIGTERM')
            const { code } = await c.done
            expect(code).toBe(143)
          }
        },
      )

      it('SIGINT exits 130', async () => {
        const c = start(['--name', 'd', '--', 'sleep', '1000'], tini)
        await waitFor(() => spawned(c), 10_000, 'the spawn')
        process.kill(await target(c), 'SIGINT')
        const { code } = await c.done
        expect(code).toBe(130)
      })

      it('SIGUSR1 from outside (docker kill -s USR1) reaches the daemon and opens no inspector; the daemon dying of it: 138, as tini', async () => {
        const c = start(['--name', 'd', '--restart', 'never', '--', 'sleep', '1000'], tini)
        await waitFor(() => spawned(c), 10_000, 'the spawn')
        process.kill(await target(c), 'SIGUSR1')
        const { code } = await c.done
        expect(c.err).toMatch(/killed by SIGUSR1/)
        expect(c.err).not.toMatch(/Debugger listening/)
        expect(code).toBe(138)
      })

      it("docker stop's bound: a daemon that ignores SIGTERM is killed after --grace, and procward still exits 143", async () => {
        const c = start(
          ['--name', 'd', '--grace', '300', '--', 'sh', '-c', 'trap "" TERM; echo up; while :; do sleep 1; done'],
          tini,
        )
        await waitFor(() => c.out.includes('up'), 10_000, 'the daemon')
        const t0 = Date.now()
        process.kill(await target(c), 'SIGTERM')
        const { code } = await c.done
        expect(code).toBe(143)
        expect(c.err).toMatch(/killed/)
        // Within docker's 10 s, well before its SIGKILL would make it 137.
        expect(Date.now() - t0).toBeLessThan(10_000)
      })

      it('a crashing daemon is restarted, its own exit status intact (never taken by the orphan reaping)', async () => {
        const c = start(['--name', 'd', '--', 'sh', '-c', 'sleep 0.3; exit 7'], tini)
        await waitFor(() => /restart attempt 1/.test(c.err), 15_000, 'a restart')
        expect(c.err).toMatch(/exit pid \d+ code 7/)
        process.kill(await target(c), 'SIGTERM')
        expect((await c.done).code).toBe(143)
      })

      it("a daemon's double-forked grandchildren, orphaned to PID 1, leave no zombie", async () => {
        const c = start(['--name', 'd', '--', 'sh', '-c', ORPHAN_MAKER], tini)
        await waitFor(() => c.out.includes('up'), 10_000, 'the daemon')
        const init = await target(c)
        await sleep(3000)
        // ~30 orphans have exited by now; an init that does not reap keeps them all.
        const counts: number[] = []
        for (let i = 0; i < 5; i++) {
          counts.push(zombiesOf(init).length)
          await sleep(100)
        }
        process.kill(init, 'SIGTERM')
        expect((await c.done).code).toBe(143)
        // An orphan that exited a moment ago may wait for the next SIGCHLD's pass.
        expect(Math.min(...counts)).toBeLessThanOrEqual(1)
        expect(Math.max(...counts)).toBeLessThanOrEqual(3)
      })
    },
  )
}

describe.skipIf(process.platform !== 'linux')('procward run --init outside PID 1', () => {
  it('becomes a subreaper: orphaned grandchildren come to it and are reaped', async () => {
    const c = new Cli(others, ['run', '--init', '--name', 'd', '--', 'sh', '-c', ORPHAN_MAKER])
    await waitFor(() => c.out.includes('up'), 10_000, 'the daemon')
    await sleep(2000)
    const counts: number[] = []
    for (let i = 0; i < 5; i++) {
      counts.push(zombiesOf(c.pid).length)
      await sleep(100)
    }
    // The orphans were re-parented to procward (a subreaper), not to init.
    const adopted = readdirSync('/proc')
      .map(Number)
      .filter((p) => p > 0 && stat(p)?.ppid === c.pid).length
    c.proc.kill('SIGTERM')
    // Not PID 1: it dies of the signal itself, as a shell reports 143.
    expect((await c.done).signal).toBe('SIGTERM')
    expect(adopted).toBeGreaterThanOrEqual(1)
    expect(Math.max(...counts)).toBeLessThanOrEqual(3)
  })
})
