import { spawn as cpSpawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import { beforeAll, describe, expect, it } from 'vitest'
import { getProcessInfo, isProcessRunning, spawnSupervised } from '../../index.js'
import {
  aliveInProcTable,
  announcedWorkers,
  childrenOf,
  FIXTURES,
  fdsLeftSince,
  IS_BUN,
  openFds,
  PROCWARD,
  procState,
  readAll,
  run,
  runFixture,
  runWithFewFds,
  sleep,
  trackProcesses,
  waitFor,
  zombieChildren,
} from '../helpers'

// Bun has no libuv loop to watch a pidfd on: there the default is tokio's.
const EXPECTED_WATCH =
  { fallback: 'fallback', tokio: 'pidfd-tokio' }[process.env.PROCWARD_EXIT_WATCH ?? ''] ??
  (IS_BUN ? 'pidfd-tokio' : 'pidfd')

const { sup, others } = trackProcesses()

describe('exit = reap', () => {
  beforeAll(() => {
    const p = sup('true')
    expect(p.exitWatch).toBe(EXPECTED_WATCH)
  })

  it('reports an exit code, and the pid is gone when exit fires', async () => {
    const p = sup('sh', ['-c', 'exit 7'])
    const fromEvent = new Promise((resolve) => {
      p.on('exit', (info) => resolve({ info, state: procState(p.pid) }))
    })
    const info = await p.exited
    expect(info).toEqual({ pid: p.pid, code: 7, signal: null })
    expect(await fromEvent).toEqual({ info, state: null })
    expect(p.exitInfo).toEqual(info)
    expect(isProcessRunning(p.pid)).toBe(false)
  })

  it('reaps while the event loop is blocked, and delivers the exit once it runs', async () => {
    const p = sup('sh', ['-c', 'exit 3'])
    // Block this thread (no await) and watch the process table: the reap
    // must not wait for the event loop, unlike child_process's.
    const deadline = Date.now() + 5000
    let state = procState(p.pid)
    while (state !== null && Date.now() < deadline) state = procState(p.pid)
    expect(state).toBeNull()
    expect(p.exitInfo).toEqual({ pid: p.pid, code: 3, signal: null })
    expect(await p.exited).toEqual({ pid: p.pid, code: 3, signal: null })
  })

  it('reports an external SIGKILL, and leaves no zombie', async () => {
    const p = sup('sleep', ['100'])
    expect(p.exitInfo).toBeNull()
    process.kill(p.pid, 'SIGKILL')
    const info = await p.exited
    expect(info).toEqual({ pid: p.pid, code: null, signal: 'SIGKILL' })
    expect(procState(p.pid)).toBeNull()
  })

  it('leads its own process group and has the identity getProcessInfo gives', () => {
    const p = sup('sleep', ['100'])
    expect(p.pgid).toBe(p.pid)
    const info = getProcessInfo(p.pid)
    expect(info?.pgid).toBe(p.pid)
    expect(info?.ppid).toBe(process.pid)
    expect(p.identity).toBe(info?.identity)
    expect(isProcessRunning(p.pid, p.identity)).toBe(true)
  })

  it('with processGroup: false stays in our group', () => {
    const p = sup('sleep', ['100'], { processGroup: false })
    expect(p.pgid).toBeNull()
    expect(getProcessInfo(p.pid)?.pgid).toBe(getProcessInfo(process.pid)?.pgid)
  })

  it('reaps a child whose handle was dropped', async () => {
    let pid = 0
    ;(() => {
      pid = spawnSupervised('sh', ['-c', 'exit 0']).pid
    })()
    await waitFor(() => procState(pid) === null, 5000, 'the dropped child to be reaped')
  })

  it('reaps children whose handles were garbage-collected', async () => {
    const { stdout } = await run(process.execPath, ['--expose-gc', join(FIXTURES, 'dropped.cjs'), PROCWARD])
    expect(JSON.parse(stdout).states).toEqual([null, null, null, null, null])
  })

  it('sweeps the group after the leader dies', async () => {
    const p = sup(join(FIXTURES, 'workers.sh'), [], { stdio: ['ignore', 'pipe', 'inherit'] })
    const members = await announcedWorkers(p, others)
    for (const m of members) expect(getProcessInfo(m)?.pgid).toBe(p.pid)
    expect(p.kill('SIGKILL')).toBe(true)
    await p.exited
    // SIGKILLed while the leader was still a zombie; they may linger as
    // zombies until PID 1 reaps them, but none runs.
    for (const m of members) await waitFor(() => !aliveInProcTable(m), 5000, `member ${m} to die`)
  })

  it('leaves the group alone with killGroupOnExit: false', async () => {
    const p = sup(join(FIXTURES, 'workers.sh'), [], { stdio: ['ignore', 'pipe', 'inherit'], killGroupOnExit: false })
    const members = await announcedWorkers(p, others)
    p.kill('SIGKILL')
    await p.exited
    await sleep(50)
    for (const m of members) expect(aliveInProcTable(m)).toBe(true)
  })

  it('kill() takes signal numbers, and rejects 0 and out-of-range ones', async () => {
    const p = sup('sleep', ['100'])
    for (const bad of [0, -1, 65, 1.5, Number.NaN]) expect(() => p.kill(bad)).toThrow(RangeError)
    expect(p.kill(9)).toBe(true)
    expect((await p.exited).signal).toBe('SIGKILL')
  })

  it('kill() signals the child alone, not its group', async () => {
    const p = sup(join(FIXTURES, 'workers.sh'), [], { stdio: ['ignore', 'pipe', 'inherit'], killGroupOnExit: false })
    const members = await announcedWorkers(p, others)
    expect(p.kill('SIGTERM')).toBe(true)
    expect((await p.exited).signal).toBe('SIGTERM')
    for (const m of members) expect(aliveInProcTable(m)).toBe(true)
  })

  it('kill() returns false after exit and rejects unknown signals', async () => {
    const p = sup('sleep', ['100'])
    expect(() => p.kill('SIGNOPE' as NodeJS.Signals)).toThrow(TypeError)
    expect(p.kill('SIGTERM')).toBe(true)
    const info = await p.exited
    expect(info.signal).toBe('SIGTERM')
    expect(p.kill('SIGKILL')).toBe(false)
  })

  it('its children die with the supervisor (parentDeathSignal)', async () => {
    const node = others.spawn(process.execPath, [join(FIXTURES, 'supervisor.cjs'), PROCWARD])
    const line: string = await new Promise((resolve) => node.stdout?.once('data', (d) => resolve(String(d).trim())))
    const [supPid, childPid] = line.split(' ').map(Number) as [number, number]
    others.track(childPid)
    expect(aliveInProcTable(childPid)).toBe(true)
    process.kill(supPid, 'SIGKILL')
    await waitFor(() => !aliveInProcTable(childPid), 5000, 'the orphaned child to die')
  })

  it('never installs a SIGCHLD handler', async () => {
    const { stdout } = await runFixture('sigchld.cjs')
    expect(JSON.parse(stdout)).toEqual({ before: false, during: false, after: false, code: 4 })
  })

  it('falls back to a waiter thread when no fd is left for a pidfd (EMFILE)', async () => {
    const { stdout } = await runWithFewFds('emfile.cjs')
    const res = JSON.parse(stdout)
    expect(res.held).toBeGreaterThan(0)
    expect(res).toMatchObject({ exitWatch: 'fallback', code: 5 })
  })

  it('reaps the children of a worker that was the only user of procward', async () => {
    const { stdout } = await runFixture('worker-only.cjs')
    expect(JSON.parse(stdout)).toEqual([null, null, null, null, null])
  })

  it('reports a throwing exit listener as an uncaught exception, and still reaps', async () => {
    const { stdout } = await runFixture('throwing-listener.cjs')
    const res = JSON.parse(stdout)
    expect(res).toMatchObject({ caught: 'boom from listener', reaped: true, exit: { code: 2, signal: null } })
  })

  it('keeps node alive while ref()ed, and not once unref()ed', async () => {
    const kept = await runFixture('unref.cjs', 'ref')
    const [, exitLine] = kept.stdout.trim().split('\n')
    expect(exitLine).toBe('exit 0')
    const t0 = Date.now()
    const dropped = await runFixture('unref.cjs', 'unref')
    const childPid = Number(dropped.stdout.trim())
    // The child sleeps 30 s; node returned long before, and the child died
    // with it (parentDeathSignal), so nothing is left running.
    expect(Date.now() - t0).toBeLessThan(25_000)
    await waitFor(() => !aliveInProcTable(childPid), 5000, 'the unref()ed child to die with its parent')
  })

  it('works from a worker thread; a child outlives its worker and is still reaped', async () => {
    const worker = new Worker(join(FIXTURES, 'worker.cjs'), { workerData: { procward: PROCWARD } })
    const msg: { quick: { code: number }; long: number } = await new Promise((resolve, reject) => {
      worker.once('message', resolve)
      worker.once('error', reject)
    })
    expect(msg.quick).toMatchObject({ code: 9, signal: null })
    await worker.terminate()
    others.track(msg.long)
    // Spawned on procward's process-wide spawner thread, so the worker's end
    // does not fire its parentDeathSignal.
    await sleep(100)
    expect(aliveInProcTable(msg.long)).toBe(true)
    process.kill(msg.long, 'SIGKILL')
    // Its watcher outlives the worker too: it is reaped, not left a zombie.
    await waitFor(() => procState(msg.long) === null, 5000, 'the worker child to be reaped')
  })
})

describe('many children', () => {
  it('runs 1000 spawn/exit cycles without a zombie or an fd leak', async () => {
    // procward keeps one /dev/null open for 'ignore'; let it be opened first.
    await spawnSupervised('true', [], { stdio: 'ignore' }).exited
    const before = openFds()
    for (let i = 0; i < 1000; i++) {
      const p = spawnSupervised('true', [], { stdio: 'ignore' })
      const info = await p.exited
      if (info.code !== 0) throw new Error(`cycle ${i}: ${JSON.stringify(info)}`)
    }
    expect(zombieChildren()).toEqual([])
    expect(await fdsLeftSince(before)).toEqual([])
    // A bound for a loaded machine (cross builds beside the suite), not a speed target.
  }, 120_000)

  it('reaps 200 children dying at once, each status right', async () => {
    const procs = Array.from({ length: 200 }, (_, i) =>
      spawnSupervised('sh', ['-c', `sleep 0.2; exit ${i % 100}`], { stdio: 'ignore' }),
    )
    const infos = await Promise.all(procs.map((p) => p.exited))
    for (const [i, info] of infos.entries()) expect(info).toEqual({ pid: procs[i]?.pid, code: i % 100, signal: null })
    expect(childrenOf(process.pid).filter((pid) => procs.some((p) => p.pid === pid))).toEqual([])
  })

  it('coexists with child_process: mixed children in random exit order keep their statuses', async () => {
    const ours: Promise<unknown>[] = []
    const theirs: Promise<unknown>[] = []
    for (let i = 0; i < 40; i++) {
      const delay = (Math.random() * 0.2).toFixed(3)
      const code = i + 1
      if (i % 2 === 0) {
        const p = spawnSupervised('sh', ['-c', `sleep ${delay}; exit ${code}`], { stdio: 'ignore' })
        ours.push(p.exited.then((info) => expect(info.code).toBe(code)))
      } else {
        const c = cpSpawn('sh', ['-c', `sleep ${delay}; exit ${code}`], { stdio: 'ignore' })
        theirs.push(new Promise((resolve) => c.once('exit', (got) => resolve(expect(got).toBe(code)))))
      }
    }
    await Promise.all([...ours, ...theirs])
    expect(zombieChildren()).toEqual([])
  })
})

describe('the child starts clean', () => {
  it('has default signal dispositions and an empty mask', async () => {
    const p = sup('sh', ['-c', 'grep -E "^Sig(Ign|Blk):" /proc/self/status'], { stdio: ['ignore', 'pipe', 'inherit'] })
    const out = await readAll(p.stdout)
    // Node ignores SIGPIPE and SIGXFSZ itself; the child must not.
    expect(out).toMatch(/SigBlk:\s+0+\n/)
    expect(out).toMatch(/SigIgn:\s+0+\n/)
  })

  it('inherits no fds beyond its stdio', async () => {
    // Open a few fds of our own that are not close-on-exec... Node's are, so
    // also check through a pipe we hold open while spawning.
    const p = sup('ls', ['/proc/self/fd'], { stdio: ['pipe', 'pipe', 'pipe'] })
    const out = await readAll(p.stdout)
    // 0-2, plus the directory fd ls itself opens to list them.
    expect(out.trim().split('\n').map(Number)).toEqual([0, 1, 2, 3])
  })

  it('keeps pipe ends out of every other child, ours and child_process ones', async () => {
    // cat sees EOF only if no other process holds the write end of its stdin.
    const holder = sup('cat', [], { stdio: ['pipe', 'pipe', 'inherit'] })
    const ours = sup('sleep', ['100'], { stdio: ['pipe', 'pipe', 'pipe'] })
    const theirs = others.spawn('sleep', ['100'], { stdio: 'ignore' })
    holder.stdin?.end('x')
    expect(await readAll(holder.stdout)).toBe('x')
    expect((await holder.exited).code).toBe(0)
    expect(ours.exitInfo).toBeNull()
    expect(theirs.exitCode).toBeNull()
  })

  it('passes args, env and cwd exactly', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'procward-'))
    try {
      // biome-ignore lint/suspicious/noTemplateCurlyInString: shell parameter expansion, not a template
      const p = sup('sh', ['-c', 'printf "%s|%s|%s|%s" "$1" "$FOO" "$(pwd)" "${BAR-unset}"', 'sh', 'a b'], {
        cwd: dir,
        env: { FOO: 'x=y', BAR: undefined, PATH: process.env.PATH },
        stdio: ['ignore', 'pipe', 'inherit'],
      })
      expect(await readAll(p.stdout)).toBe(`a b|x=y|${dir}|unset`)
    } finally {
      rmSync(dir, { recursive: true })
    }
  })

  it('inherits process.env as it is now when no env is given', async () => {
    process.env.PROCWARD_TEST_SET = 'set at runtime'
    process.env.PROCWARD_TEST_DELETED = 'x'
    delete process.env.PROCWARD_TEST_DELETED
    try {
      // biome-ignore lint/suspicious/noTemplateCurlyInString: shell parameter expansion, not a template
      const p = sup('sh', ['-c', 'printf "%s|%s" "$PROCWARD_TEST_SET" "${PROCWARD_TEST_DELETED-unset}"'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      })
      expect(await readAll(p.stdout)).toBe('set at runtime|unset')
    } finally {
      delete process.env.PROCWARD_TEST_SET
    }
  })

  it('sees every change of process.env between spawns (added, set again, deleted)', async () => {
    // On Bun the converted process.env is kept from one spawn to the next:
    // each change here must reach the very next child.
    const seen = async () => {
      // biome-ignore lint/suspicious/noTemplateCurlyInString: shell parameter expansion, not a template
      const p = sup('sh', ['-c', 'printf "%s" "${PROCWARD_TEST_CHANGING-unset}"'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      })
      return readAll(p.stdout)
    }
    try {
      expect(await seen()).toBe('unset')
      expect(await seen()).toBe('unset')
      process.env.PROCWARD_TEST_CHANGING = 'one'
      expect(await seen()).toBe('one')
      process.env.PROCWARD_TEST_CHANGING = 'two'
      expect(await seen()).toBe('two')
      expect(await seen()).toBe('two')
      delete process.env.PROCWARD_TEST_CHANGING
      expect(await seen()).toBe('unset')
    } finally {
      delete process.env.PROCWARD_TEST_CHANGING
    }
  })

  it('passes an inherited environment through byte for byte (not UTF-8 included)', async (ctx) => {
    // Bun's process.env holds strings decoded as UTF-8 and its writes never
    // reach the C environ, so procward hands a child process.env, as Bun's
    // own child_process does: a byte that is not UTF-8 arrives as U+FFFD.
    if (IS_BUN) return ctx.skip("Bun's process.env is UTF-8 strings: a non-UTF-8 byte cannot be inherited")
    const { stdout } = await run('sh', [
      '-c',
      'PROCWARD_RAW="$(printf \'\\377\')" exec "$0" "$@"',
      process.execPath,
      join(FIXTURES, 'raw-env.cjs'),
      PROCWARD,
    ])
    expect(stdout.trim()).toBe('ff')
  })

  it('pipes stdin to stdout and stderr', async () => {
    const p = sup('sh', ['-c', 'cat; echo err >&2'], { stdio: 'pipe' })
    p.stdin?.end('hello')
    const [out, err] = await Promise.all([readAll(p.stdout), readAll(p.stderr)])
    expect(out).toBe('hello')
    expect(err).toBe('err\n')
    expect((await p.exited).code).toBe(0)
  })

  it("gives 'ignore' stdin as /dev/null and no streams", async () => {
    const p = sup('cat', [], { stdio: 'ignore' })
    expect(p.stdin).toBeNull()
    expect(p.stdout).toBeNull()
    expect((await p.exited).code).toBe(0)
  })

  it('writes and appends to files', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'procward-'))
    const file = join(dir, 'out.log')
    try {
      writeFileSync(file, 'old\n')
      await sup('echo', ['one'], { stdio: ['ignore', { file }, 'inherit'] }).exited
      expect(readFileSync(file, 'utf8')).toBe('one\n')
      await sup('echo', ['two'], { stdio: ['ignore', { file, append: true }, 'inherit'] }).exited
      expect(readFileSync(file, 'utf8')).toBe('one\ntwo\n')
      const p = sup('cat', [], { stdio: [{ file }, 'pipe', 'inherit'] })
      expect(await readAll(p.stdout)).toBe('one\ntwo\n')
    } finally {
      rmSync(dir, { recursive: true })
    }
  })
})

describe('bad input', () => {
  function noNewChildren(fn: () => void) {
    const before = childrenOf(process.pid)
    fn()
    expect(childrenOf(process.pid)).toEqual(before)
  }

  it('throws ENOENT for a missing command and leaves nothing behind', () => {
    const fds = openFds()
    noNewChildren(() => {
      try {
        spawnSupervised('procward-no-such-command')
        expect.unreachable()
      } catch (e) {
        expect(e).toBeInstanceOf(Error)
        expect((e as NodeJS.ErrnoException).code).toBe('ENOENT')
        expect((e as NodeJS.ErrnoException).path).toBe('procward-no-such-command')
      }
      expect(() => spawnSupervised('/nonexistent/bin/x')).toThrow(expect.objectContaining({ code: 'ENOENT' }))
    })
    expect(openFds().filter((fd) => !fds.includes(fd))).toEqual([])
  })

  it('throws EACCES for a file that is not executable', () => {
    noNewChildren(() => {
      expect(() => spawnSupervised(join(FIXTURES, 'supervisor.cjs'))).toThrow(
        expect.objectContaining({ code: 'EACCES' }),
      )
    })
  })

  it('throws ENOENT for a missing cwd', () => {
    noNewChildren(() => {
      expect(() => spawnSupervised('true', [], { cwd: '/nonexistent/dir' })).toThrow(
        expect.objectContaining({ code: 'ENOENT' }),
      )
    })
  })

  it.each([
    ['empty command', () => spawnSupervised('')],
    ['non-string command', () => spawnSupervised(42 as unknown as string)],
    ['NUL in command', () => spawnSupervised('tr\0ue')],
    ['NUL in an arg', () => spawnSupervised('true', ['a\0b'])],
    ['non-string arg', () => spawnSupervised('true', [1 as unknown as string])],
    ['args not an array', () => spawnSupervised('true', 'a' as unknown as string[])],
    ['= in an env key', () => spawnSupervised('true', [], { env: { 'A=B': 'x' } })],
    ['NUL in an env value', () => spawnSupervised('true', [], { env: { A: 'x\0' } })],
    ['non-string env value', () => spawnSupervised('true', [], { env: { A: 1 as unknown as string } })],
    ['bad stdio', () => spawnSupervised('true', [], { stdio: 'bogus' as 'pipe' })],
    [
      'two stdio entries',
      () => spawnSupervised('true', [], { stdio: ['pipe', 'pipe'] as unknown as ['pipe', 'pipe', 'pipe'] }),
    ],
    [
      'unknown parentDeathSignal',
      () => spawnSupervised('true', [], { parentDeathSignal: 'SIGNOPE' as NodeJS.Signals }),
    ],
    ['unknown stop signal', () => spawnSupervised('true', [], { stop: { signal: 'SIGNOPE' as NodeJS.Signals } })],
    ['non-AbortSignal signal', () => spawnSupervised('true', [], { signal: {} as AbortSignal })],
  ])('rejects %s with TypeError and spawns nothing', (_, fn) => {
    noNewChildren(() => expect(fn).toThrow(TypeError))
  })

  it('throws AbortError for an already aborted signal and spawns nothing', () => {
    noNewChildren(() => {
      expect(() => spawnSupervised('sleep', ['100'], { signal: AbortSignal.abort() })).toThrow(
        expect.objectContaining({ name: 'AbortError' }),
      )
    })
  })
})
