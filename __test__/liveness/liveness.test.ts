import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { getProcessInfo, isProcessRunning } from '../../index.js'
import {
  AS_NOBODY,
  FIXTURES,
  firstLine,
  isRoot,
  killZeroSaysAlive,
  leaderExited,
  nodeThroughSetpriv,
  PROCWARD,
  procState,
  reusePid,
  runWithFewFds,
  threadChurn,
  trackProcesses,
  waitFor,
} from '../helpers'

const { others: spawned } = trackProcesses()

describe('isProcessRunning', () => {
  it('is true for this process and for a live child', async () => {
    expect(isProcessRunning(process.pid)).toBe(true)
    const child = spawned.spawn('sleep', ['100'])
    const pid = child.pid as number
    expect(isProcessRunning(pid)).toBe(true)
    // A repeated check (served from the cached stat fd) agrees.
    expect(isProcessRunning(pid)).toBe(true)
  })

  it('is false once the process has exited and been reaped', async () => {
    const child = spawned.spawn('sleep', ['100'])
    const pid = child.pid as number
    expect(isProcessRunning(pid)).toBe(true)
    child.kill('SIGKILL')
    await new Promise((r) => child.once('exit', r))
    expect(procState(pid)).toBeNull()
    expect(isProcessRunning(pid)).toBe(false)
    expect(getProcessInfo(pid)).toBeNull()
  })

  it('calls our own unreaped child dead once it is a zombie', async () => {
    // The zombie is held by blocking this thread: libuv cannot reap it while
    // the loop is stuck in this synchronous section.
    const child = spawned.spawn('sh', ['-c', 'exit 3'])
    const pid = child.pid as number
    const deadline = Date.now() + 5000
    while (procState(pid) !== 'Z' && Date.now() < deadline) {
      // busy-wait on purpose: yielding would let libuv reap it
    }
    expect(procState(pid)).toBe('Z')
    expect(killZeroSaysAlive(pid)).toBe(true)
    expect(isProcessRunning(pid)).toBe(false)
    expect(getProcessInfo(pid)?.state).toBe('zombie')
  })

  it('calls a zombie that is not our child dead, where kill(pid, 0) says alive', async () => {
    const parent = spawned.spawn(join(FIXTURES, 'zombie-parent.sh'), [])
    const zombie = Number(await firstLine(parent))
    await waitFor(() => procState(zombie) === 'Z', 5000, 'the fixture child to become a zombie')
    expect(killZeroSaysAlive(zombie)).toBe(true)
    expect(isProcessRunning(zombie)).toBe(false)
    const info = getProcessInfo(zombie)
    expect(info).not.toBeNull()
    expect(info?.state).toBe('zombie')
    expect(info?.ppid).toBe(parent.pid)
    // The identity of a zombie is still its own, and it is not running.
    expect(isProcessRunning(zombie, info?.identity)).toBe(false)
    // Its parent (which never waits) is fine.
    expect(isProcessRunning(parent.pid as number)).toBe(true)
  })

  it('calls an orphan zombie awaiting PID 1 dead', async (ctx) => {
    const launcher = spawned.spawn(join(FIXTURES, 'orphan.sh'), ['0.2'])
    const orphan = Number(await firstLine(launcher))
    spawned.track(orphan)
    expect(isProcessRunning(orphan)).toBe(true)
    // Catch it in the window between its exit and PID 1's reap.
    let sawZombie = false
    const deadline = Date.now() + 5000
    while (Date.now() < deadline) {
      const s = procState(orphan)
      if (s === 'Z') {
        const killZero = killZeroSaysAlive(orphan)
        const running = isProcessRunning(orphan)
        const info = getProcessInfo(orphan)
        // Reaped between these reads (an init that reaps at once): the
        // window closed before all three could be asked.
        if (info === null) break
        sawZombie = true
        expect(info.state).toBe('zombie')
        expect(killZero).toBe(true)
        expect(running).toBe(false)
        break
      }
      if (s === null) break
      await new Promise((r) => setTimeout(r, 1))
    }
    if (!sawZombie) ctx.skip('PID 1 reaped the orphan before it could be seen as a zombie')
  })

  it('reads a process that named itself with ")", spaces and Z correctly', async () => {
    const name = 'a) Z 1 (b'
    const child = spawned.spawn(join(FIXTURES, 'renamed.sh'), [name], { detached: true })
    const pid = Number(await firstLine(child))
    expect(pid).toBe(child.pid)
    const info = getProcessInfo(pid)
    expect(info?.name).toBe(name)
    // Alive; the shell may be caught mid-fork (disk-sleep while its vfork child execs).
    expect(['running', 'sleeping', 'disk-sleep']).toContain(info?.state)
    expect(info?.ppid).toBe(process.pid)
    expect(info?.pgid).toBe(pid)
    expect(isProcessRunning(pid)).toBe(true)
  })

  it('runs under another user: a process we may not signal is still running', async (ctx) => {
    if (!isRoot) return ctx.skip('needs root to start a process as nobody')
    // A root-owned sleeper, checked from a node process running as nobody:
    // there kill(pid, 0) answers EPERM.
    const target = spawned.spawn('sleep', ['100'])
    const script = `
      const p = require(${JSON.stringify(PROCWARD)});
      let k; try { process.kill(${target.pid}, 0); k = 'ok' } catch (e) { k = e.code }
      console.log(JSON.stringify({ uid: process.getuid(), kill0: k, running: p.isProcessRunning(${target.pid}),
        info: p.getProcessInfo(${target.pid}) }))`
    const out = await nodeThroughSetpriv(ctx, AS_NOBODY, ['-e', script])
    const res = JSON.parse(out)
    expect(res.uid).toBe(65534)
    expect(res.kill0).toBe('EPERM')
    expect(res.running).toBe(true)
    expect(res.info.pid).toBe(target.pid)
    expect(res.info.identity).toBe(getProcessInfo(target.pid as number)?.identity)
  })

  it('stays zombie-aware where /proc hides other users (hidepid=2)', async (ctx) => {
    if (!isRoot) return ctx.skip('needs root for a private /proc mount and a caller as nobody')
    const live = spawned.spawn('sleep', ['100']).pid as number
    const parent = spawned.spawn(join(FIXTURES, 'zombie-parent.sh'), [])
    const zombie = Number(await firstLine(parent))
    await waitFor(() => procState(zombie) === 'Z', 5000, 'the zombie')
    const script = `
      const p = require(${JSON.stringify(PROCWARD)});
      const fs = require('fs');
      let info; try { info = p.getProcessInfo(${live}) } catch (e) { info = e.code }
      console.log(JSON.stringify({ uid: process.getuid(), visible: fs.existsSync('/proc/${live}'),
        live: p.isProcessRunning(${live}), zombie: p.isProcessRunning(${zombie}), info }))`
    let out: string
    try {
      out = execFileSync(
        'unshare',
        [
          '-m',
          'sh',
          '-c',
          'mount -t proc -o hidepid=2 proc /proc && exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"',
          'sh',
          process.execPath,
          '-e',
          script,
        ],
        { encoding: 'utf8' },
      )
    } catch (e) {
      return ctx.skip(`no private hidepid /proc here: ${(e as Error).message.split('\n')[0]}`)
    }
    const res = JSON.parse(out)
    expect(res).toEqual({ uid: 65534, visible: false, live: true, zombie: false, info: 'EACCES' })
  })
})

describe('identity', () => {
  it('is stable for the life of a process and matches it', () => {
    const child = spawned.spawn('sleep', ['100'])
    const pid = child.pid as number
    const a = getProcessInfo(pid)
    const b = getProcessInfo(pid)
    expect(a?.identity).toBeTypeOf('string')
    expect(a?.identity).toBe(b?.identity)
    expect(isProcessRunning(pid, a?.identity)).toBe(true)
    expect(a).toMatchObject({ pid, ppid: process.pid, name: 'sleep' })
  })

  it('differs between processes; a foreign identity does not match, a garbled one is refused', () => {
    const x = spawned.spawn('sleep', ['100']).pid as number
    const y = spawned.spawn('sleep', ['100']).pid as number
    const ix = getProcessInfo(x)?.identity as string
    const iy = getProcessInfo(y)?.identity as string
    expect(ix).not.toBe(iy)
    expect(isProcessRunning(x, iy)).toBe(false)
    // An empty or garbled identity is the caller's bug (a truncated pidfile):
    // "not running" would hide it, so it throws, naming the value.
    for (const bad of ['', 'not an identity', 'p1:', 'p1:abc:12', `${ix}:extra`]) {
      expect(() => isProcessRunning(x, bad)).toThrow(
        expect.objectContaining({ name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE' }),
      )
    }
    // Another boot's identity for the same process never matches.
    const otherBoot = ix.replace(/^p1:[0-9a-f]+:/, 'p1:00000000000000000000000000000000:')
    expect(otherBoot).not.toBe(ix)
    expect(isProcessRunning(x, otherBoot)).toBe(false)
  })

  it('tells a reused pid apart (pid reuse forced through ns_last_pid)', async (ctx) => {
    if (!isRoot) return ctx.skip('forcing pid reuse needs root (/proc/sys/kernel/ns_last_pid)')
    const { pid, oldIdentity, newcomer: second } = await reusePid(spawned)
    expect(second.pid).toBe(pid)
    expect(isProcessRunning(pid)).toBe(true)
    expect(isProcessRunning(pid, oldIdentity)).toBe(false)
    const newIdentity = getProcessInfo(pid)?.identity
    expect(newIdentity).not.toBe(oldIdentity)
    expect(isProcessRunning(pid, newIdentity)).toBe(true)
  })
})

describe('bad input', () => {
  const badPids: unknown[] = [
    0,
    -1,
    -0,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
    1.5,
    2 ** 31,
    4194305,
    2 ** 53,
  ]
  const wrongTypes: unknown[] = ['1', '', null, undefined, 1n, {}, [], [1], true, () => 1, Symbol('x')]

  it.each(badPids)('rejects pid %s with RangeError', (pid) => {
    expect(() => isProcessRunning(pid as number)).toThrow(RangeError)
    expect(() => getProcessInfo(pid as number)).toThrow(RangeError)
    expect(() => isProcessRunning(pid as number, 'x')).toThrow(RangeError)
  })

  it.each(wrongTypes.map((v) => [v]))('rejects pid of wrong type %s with TypeError', (pid) => {
    expect(() => isProcessRunning(pid as number)).toThrow(TypeError)
    expect(() => getProcessInfo(pid as number)).toThrow(TypeError)
  })

  it('gives errors a stable code', () => {
    try {
      isProcessRunning(-1)
      expect.unreachable()
    } catch (e) {
      expect((e as NodeJS.ErrnoException).code).toBe('ERR_OUT_OF_RANGE')
    }
    try {
      isProcessRunning('1' as unknown as number)
      expect.unreachable()
    } catch (e) {
      expect((e as NodeJS.ErrnoException).code).toBe('ERR_INVALID_ARG_TYPE')
    }
  })

  it('accepts the extremes of the range', () => {
    expect(isProcessRunning(1)).toBe(true)
    expect(isProcessRunning(4194304)).toBe(false)
    expect(getProcessInfo(4194304)).toBeNull()
  })

  it.each([1, null, {}, 1n, true])('rejects a non-string identity %s with TypeError', (id) => {
    expect(() => isProcessRunning(process.pid, id as unknown as string)).toThrow(TypeError)
  })
})

const scratch = () => {
  const dir = mkdtempSync(join(tmpdir(), 'procward-liveness-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** fixtures/leader-exits.c in `dir`, its identity taken while its main thread ran. */
async function leaderExitedIn(dir: string): Promise<{ pid: number; identity: string } | null> {
  let identity = ''
  const pid = await leaderExited(spawned, join(dir, 'lock'), dir, (pid) => {
    identity = getProcessInfo(pid)?.identity as string
  })
  return pid === null ? null : { pid, identity }
}

/**
 * Checks a killed process (the loop held: it stays an unreaped zombie) until
 * 3000 checks after the first that calls it stopped, by any of
 * `isProcessRunning` with and without its identity and `getProcessInfo`.
 * Returns every later check that calls it running again (none is right).
 */
function runningAgainAfterStopped(pid: number, identity: string): string[] {
  const again: string[] = []
  let firstStopped = -1
  for (let k = 0; k < 1_000_000 && (firstStopped < 0 || k < firstStopped + 3000); k++) {
    const plain = isProcessRunning(pid)
    const as = isProcessRunning(pid, identity)
    const state = getProcessInfo(pid)?.state ?? 'gone'
    const runs = ['running', 'sleeping', 'disk-sleep'].includes(state)
    if (firstStopped >= 0 && (plain || as || runs))
      again.push(`check ${k}: plain ${plain}, with identity ${as}, ${state}`)
    if (firstStopped < 0 && (!plain || !as || !runs)) firstStopped = k
  }
  if (firstStopped < 0) again.push('never seen stopped in 1 000 000 checks')
  return again
}

describe('a process whose main thread has ended while others run', () => {
  it("runs on, with a live thread's state, in agreement, until it is killed", async (ctx) => {
    const exited = await leaderExitedIn(scratch())
    if (exited === null) return ctx.skip('needs cc to build fixtures/leader-exits.c')
    const { pid, identity } = exited
    expect(procState(pid)).toBe('Z')
    expect(getProcessInfo(pid)).toMatchObject({ pid, identity })
    expect(['running', 'sleeping', 'disk-sleep']).toContain(getProcessInfo(pid)?.state)
    expect(isProcessRunning(pid)).toBe(true)
    expect(isProcessRunning(pid, identity)).toBe(true)
    // Killed: once it no longer runs, no state says it does.
    process.kill(pid, 'SIGKILL')
    await waitFor(() => !isProcessRunning(pid), 5000, 'it to exit')
    // 'exiting' (its threads on their way out), a zombie, or gone.
    expect(['exiting', 'zombie', 'dead', 'gone']).toContain(getProcessInfo(pid)?.state ?? 'gone')
    expect(isProcessRunning(pid, identity)).toBe(false)
  })

  // Checked again and again while its main thread ran, the check reads a
  // kept statm fd (the size of the leader's memory map): the leader's end
  // empties that, and the check then looks at the threads, which run on.
  it('checked again and again before its main thread ended, is still running after', async (ctx) => {
    let before: boolean[] = []
    const pid = await leaderExited(spawned, join(scratch(), 'lock'), scratch(), (pid) => {
      before = Array.from({ length: 8 }, () => isProcessRunning(pid))
    })
    if (pid === null) return ctx.skip('needs cc to build fixtures/leader-exits.c')
    expect(before).toEqual(Array(8).fill(true))
    expect(procState(pid)).toBe('Z')
    for (let i = 0; i < 8; i++) expect(isProcessRunning(pid)).toBe(true)
    process.kill(pid, 'SIGKILL')
    await waitFor(() => !isProcessRunning(pid), 5000, 'it to exit')
    for (let i = 0; i < 8; i++) expect(isProcessRunning(pid)).toBe(false)
  })

  // Its last thread ends between the pidfd's "alive" and the stat read: the
  // leader, a zombie for long, is then alone. That is not running (before
  // the fix, 77 of 200 kills were seen running again after not running).
  it('once seen not running after a kill, is never seen running again (10 kills)', async (ctx) => {
    for (let trial = 0; trial < 10; trial++) {
      const exited = await leaderExitedIn(scratch())
      if (exited === null) return ctx.skip('needs cc to build fixtures/leader-exits.c')
      const { pid, identity } = exited
      process.kill(pid, 'SIGKILL')
      expect(runningAgainAfterStopped(pid, identity), `trial ${trial}`).toEqual([])
    }
  })
})

/**
 * fixtures/many-threads.c in `dir`: `threads` idle threads and a stdin
 * reader (listed last), its main thread ended. Null without cc.
 */
async function manyThreadsIn(dir: string, threads: number) {
  const exe = join(dir, 'many-threads')
  if (spawnSync('cc', ['-O', '-pthread', '-o', exe, join(FIXTURES, 'many-threads.c')]).status !== 0) return null
  const child = spawned.spawn(exe, [String(threads)], { stdio: ['pipe', 'pipe', 'inherit'] })
  const pid = Number(await firstLine(child))
  await waitFor(
    () => procState(pid) === 'Z' && readdirSync(`/proc/${pid}/task`).length === threads + 2,
    10_000,
    'its main thread to end while the others run',
  )
  return { child, pid, identity: getProcessInfo(pid)?.identity as string }
}

// A check of such a process first reads a few of its threads, and lists
// them all only when none of those runs: both must say what the threads say.
describe('a process of 1000 threads whose main thread has ended', () => {
  it('runs while they run, and while only its last thread does, and not once it exits', async (ctx) => {
    const started = await manyThreadsIn(scratch(), 1000)
    if (started === null) return ctx.skip('needs cc to build fixtures/many-threads.c')
    const { child, pid, identity } = started
    expect(identity).toMatch(/^p1:/)
    expect(isProcessRunning(pid)).toBe(true)
    expect(isProcessRunning(pid, identity)).toBe(true)
    expect(['running', 'sleeping', 'disk-sleep']).toContain(getProcessInfo(pid)?.state)
    // Every idle thread ends; the stdin reader, listed last, runs on.
    child.stdin?.write('thin\n')
    await waitFor(() => readdirSync(`/proc/${pid}/task`).length === 2, 10_000, 'all threads but one to end')
    expect(procState(pid)).toBe('Z')
    expect(isProcessRunning(pid)).toBe(true)
    expect(isProcessRunning(pid, identity)).toBe(true)
    expect(['running', 'sleeping', 'disk-sleep']).toContain(getProcessInfo(pid)?.state)
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.stdin?.end()
    expect(await exited).toBe(0)
    expect(isProcessRunning(pid, identity)).toBe(false)
    expect(isProcessRunning(pid)).toBe(false)
    expect(getProcessInfo(pid)).toBeNull()
  })

  it('once seen not running after a kill, is never seen running again (5 kills)', async (ctx) => {
    for (let trial = 0; trial < 5; trial++) {
      const started = await manyThreadsIn(scratch(), 1000)
      if (started === null) return ctx.skip('needs cc to build fixtures/many-threads.c')
      const { pid, identity } = started
      process.kill(pid, 'SIGKILL')
      expect(runningAgainAfterStopped(pid, identity), `trial ${trial}`).toEqual([])
    }
  })
})

// A thread's exec, a relay of threads, and a full fd table: what a check
// reads of a process's threads is no snapshot, and may fail to be read at
// all. Before the fix, about 1 check in 300 with exec, 1 in 40 with relay,
// and every check with 0 or 1 free fds called a live process not running.
// A relay of threads that live only to start the next is still called
// stopped about once in 50 000 checks (see CHANGELOG): that is not asserted.
describe('a process whose threads come and go', () => {
  it('is running at every check while a thread of it execs, again and again (1.5 s)', async (ctx) => {
    const mode = 'exec'

    const dir = scratch()
    const pid = await threadChurn(spawned, mode, dir)
    if (pid === null) return ctx.skip('needs cc to build fixtures/thread-churn.c')
    const identity = getProcessInfo(pid)?.identity as string
    expect(identity).toMatch(/^p1:/)
    const wrong: string[] = []
    let checks = 0
    for (const end = Date.now() + 1500; Date.now() < end; checks++) {
      const plain = isProcessRunning(pid)
      const as = isProcessRunning(pid, identity)
      const state = getProcessInfo(pid)?.state ?? 'gone'
      if (!plain || !as || !['running', 'sleeping', 'disk-sleep'].includes(state)) {
        wrong.push(`check ${checks}: plain ${plain}, with identity ${as}, state ${state}`)
      }
    }
    expect(checks).toBeGreaterThan(100)
    expect(wrong.slice(0, 5), `${wrong.length} of ${checks} checks`).toEqual([])
  })

  it.for(['exec', 'relay'] as const)(
    'once seen stopped after a kill while it %ss, is never seen running again (10 kills)',
    async (mode, ctx) => {
      const dir = scratch()
      for (let trial = 0; trial < 10; trial++) {
        const pid = await threadChurn(spawned, mode, dir)
        if (pid === null) return ctx.skip('needs cc to build fixtures/thread-churn.c')
        const identity = getProcessInfo(pid)?.identity as string
        process.kill(pid, 'SIGKILL')
        expect(runningAgainAfterStopped(pid, identity), `trial ${trial}`).toEqual([])
      }
    },
  )
})

describe('a process whose main thread has ended, asked with a full fd table', () => {
  it.for([0, 1, 2, 3])('is running or an EMFILE, never stopped, with %i free fds', async (spare, ctx) => {
    const exited = await leaderExitedIn(scratch())
    if (exited === null) return ctx.skip('needs cc to build fixtures/leader-exits.c')
    const { pid, identity } = exited
    for (const cache of ['cold', 'warm']) {
      const { stdout } = await runWithFewFds('liveness-emfile.cjs', String(pid), identity, String(spare), cache)
      const res = JSON.parse(stdout)
      expect(res.held).toBeGreaterThan(0)
      if (cache === 'warm') expect(res.warm).toEqual({ plain: true, identity: true, info: 'sleeping' })
      for (const answer of res.full) {
        for (const [what, got] of Object.entries(answer)) {
          const ok = got === true || got === 'sleeping' || (got as { error?: string })?.error === 'EMFILE'
          expect(ok, `${cache} ${what}: ${JSON.stringify(got)}`).toBe(true)
        }
      }
    }
    expect(isProcessRunning(pid, identity)).toBe(true)
  })

  // Killed, and held on its way out (its other thread a traced zombie that
  // hold-exits.c never waits for): "stopped" with a free table, and never
  // "running" with a full one (before the fix: running with 0 free fds, as
  // its pidfd said, its leader's line read through the kept stat fd).
  it('once killed and stopped, is never called running for want of an fd', async (ctx) => {
    const dir = scratch()
    const exited = await leaderExitedIn(dir)
    if (exited === null) return ctx.skip('needs cc to build fixtures/leader-exits.c')
    const { pid, identity } = exited
    const holder = join(dir, 'hold-exits')
    if (spawnSync('cc', ['-O', '-o', holder, join(FIXTURES, 'hold-exits.c')]).status !== 0) {
      return ctx.skip('needs cc to build fixtures/hold-exits.c')
    }
    const hold = spawned.spawn(holder, [String(pid)], { stdio: ['pipe', 'pipe', 'inherit'] })
    onTestFinished(() => {
      hold.stdin?.end()
    })
    if (Number(await firstLine(hold)) !== 1) return ctx.skip('ptrace is not permitted here')
    process.kill(pid, 'SIGKILL')
    await waitFor(() => getProcessInfo(pid)?.state === 'exiting', 5000, 'it to be on its way out, held')
    const { stdout } = await runWithFewFds('liveness-killed-emfile.cjs', String(pid), identity)
    const [free, ...full] = JSON.parse(stdout)
    expect(free).toEqual([false, false, 'exiting'])
    for (const answers of full) {
      for (const got of answers) {
        const ok = got === false || got === 'exiting' || (got as { error?: string })?.error === 'EMFILE'
        expect(ok, JSON.stringify(full)).toBe(true)
      }
    }
  })
})
