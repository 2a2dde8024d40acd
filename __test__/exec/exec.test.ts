// exec against real processes: what it captures, and that a timeout, an
// abort or maxBuffer leaves nothing of the child's tree (read from /proc).
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { cgroupSupport, ExecError, exec, isArgumentError, isExecError, isProcwardError } from '../../index.js'
import { aliveInProcTable, fdsLeftSince, openFds, tempDirs, trackProcesses, waitFor } from '../helpers'

// Every process a test starts carries PROCWARD_TEST_TAG (the leak check
// after each test); each run below carries a marker of its own too.
trackProcesses()
const tempDir = tempDirs('procward-exec-')
const CHAIN = join(__dirname, 'fixtures', 'helper-chain.sh')

let runs = 0
/** Options whose env marks every process of this one run (its whole tree). */
function marked(): { marker: string; env: Record<string, string | undefined> } {
  const marker = `exec-${process.pid}-${++runs}`
  return { marker, env: { ...process.env, PROCWARD_EXEC_RUN: marker } }
}

/** Live processes (zombies excluded) whose environment carries `marker`. */
function live(marker: string): number[] {
  const needle = Buffer.from(`PROCWARD_EXEC_RUN=${marker}\0`)
  const out: number[] = []
  for (const ent of readdirSync('/proc')) {
    if (!/^\d+$/.test(ent)) continue
    try {
      if (readFileSync(`/proc/${ent}/environ`).includes(needle) && aliveInProcTable(Number(ent))) out.push(Number(ent))
    } catch {
      // gone, or not ours to read
    }
  }
  return out
}

/** This process's children now (every thread's). */
function ownChildren(): Set<number> {
  const out = new Set<number>()
  for (const task of readdirSync('/proc/self/task')) {
    for (const kid of readFileSync(`/proc/self/task/${task}/children`, 'utf8').split(' ').filter(Boolean)) {
      out.add(Number(kid))
    }
  }
  return out
}

/** Whether `pid` has exited (a zombie, or reaped already: procward's reaper takes it while the loop is busy). */
function hasExited(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1')
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')
  } catch {
    return true
  }
}

/** Starts `start()` (a call that spawns one child at once) and gives its child's pid. */
function withChild<T>(start: () => T): { result: T; pid: number } {
  const before = ownChildren()
  const result = start()
  const pid = [...ownChildren()].find((p) => !before.has(p))
  if (pid === undefined) throw new Error('no child was spawned')
  return { result, pid }
}

/**
 * Waits until `n` processes of the run are up (so a stop has a tree to
 * stop), then returns them. The runs' timeouts are long enough for that.
 */
async function treeOf(marker: string, n: number): Promise<number[]> {
  await waitFor(() => live(marker).length >= n, 10_000, `${n} processes of run ${marker}`)
  return live(marker)
}

/** The run's rejection (it must reject). */
async function rejection(p: Promise<unknown>): Promise<ExecError> {
  const err = await p.then(
    () => {
      throw new Error('exec resolved; a rejection was expected')
    },
    (e: unknown) => e,
  )
  if (!isExecError(err)) throw err
  return err
}

/**
 * Whatever a stop left is gone: the tree's processes are dead (as zombies
 * of PID 1, which reaps them late, at most). Bounded by the tree's own
 * `sleep 100`: a survivor outlives any wait here.
 */
async function nothingLeft(marker: string, tree: number[]): Promise<void> {
  // Both: a process in its exit has no environment left to find it by, yet is not a zombie.
  const gone = () => live(marker).length === 0 && tree.filter(aliveInProcTable).length === 0
  await waitFor(gone, 5000, `the processes of run ${marker} to die`).catch(() => {})
  expect(live(marker)).toEqual([])
  expect(tree.filter(aliveInProcTable)).toEqual([])
}

describe('a run to completion', () => {
  it('resolves with the exit, both outputs byte-exact (nothing stripped) and no stop', async () => {
    const r = await exec('sh', ['-c', 'printf "out\\n\\n"; printf "err" >&2'])
    expect(r).toMatchObject({
      command: 'sh',
      code: 0,
      signal: null,
      stdout: 'out\n\n',
      stderr: 'err',
      timedOut: false,
      aborted: false,
      maxBufferExceeded: false,
      stop: null,
    })
    expect(r.args).toEqual(['-c', 'printf "out\\n\\n"; printf "err" >&2'])
    expect(r.pid).toBeGreaterThan(0)
    expect(r.elapsedMs).toBeGreaterThan(0)
  })

  it('keeps bytes that are not UTF-8 with encoding "buffer" (and replaces them as utf8)', async () => {
    const bytes = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0x41, 0xc3])
    const script = `printf '${[...bytes].map((b) => `\\${b.toString(8).padStart(3, '0')}`).join('')}'`
    const raw = await exec('sh', ['-c', script], { encoding: 'buffer' })
    expect(raw.stdout).toBeInstanceOf(Uint8Array)
    expect(Buffer.from(raw.stdout).equals(bytes)).toBe(true)
    const text = await exec('sh', ['-c', script])
    expect(text.stdout).toBe(bytes.toString('utf8'))
    expect(text.stdout).toContain('\ufffd')
  })

  it('writes input to stdin and closes it: a string, and 1 MiB of every byte value through cat', async () => {
    expect((await exec('cat', [], { input: 'hello\n' })).stdout).toBe('hello\n')
    const bytes = Buffer.alloc(1 << 20, 0)
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) % 256
    const r = await exec('cat', [], { input: new Uint8Array(bytes), encoding: 'buffer' })
    expect(Buffer.from(r.stdout).equals(bytes)).toBe(true)
    // Without input stdin is /dev/null: cat ends at once.
    expect((await exec('cat')).stdout).toBe('')
  })

  it('a child that does not read its input still completes', async () => {
    const r = await exec('true', [], { input: Buffer.alloc(4 << 20) })
    expect(r.code).toBe(0)
  })

  it('stdout/stderr "ignore" capture nothing, and the other stream still', async () => {
    const r = await exec('sh', ['-c', 'echo out; echo err >&2'], { stdout: 'ignore' })
    expect(r.stdout).toBe('')
    expect(r.stderr).toBe('err\n')
    const b = await exec('sh', ['-c', 'echo out; echo err >&2'], { stderr: 'ignore', encoding: 'buffer' })
    expect(Buffer.from(b.stdout).toString()).toBe('out\n')
    expect(b.stderr.length).toBe(0)
  })

  it('a non-zero exit rejects with ERR_EXEC_FAILED carrying the result; reject: false resolves it', async () => {
    const err = await rejection(exec('sh', ['-c', 'echo partial; echo why >&2; exit 3']))
    expect(err).toBeInstanceOf(ExecError)
    expect(err).toBeInstanceOf(Error)
    expect(isProcwardError(err)).toBe(true)
    expect(err).toMatchObject({
      name: 'ExecError',
      code: 'ERR_EXEC_FAILED',
      exitCode: 3,
      signal: null,
      stdout: 'partial\n',
      stderr: 'why\n',
      timedOut: false,
      stop: null,
    })
    expect(err.message).toContain('exit code 3')
    expect(err.result.code).toBe(3)
    const r = await exec('sh', ['-c', 'exit 3'], { reject: false })
    expect(r.code).toBe(3)
    expect(isExecError(r)).toBe(false)
  })

  it('a death by signal rejects with ERR_EXEC_FAILED and the signal', async () => {
    const err = await rejection(exec('sh', ['-c', 'kill -KILL $$']))
    expect(err).toMatchObject({ code: 'ERR_EXEC_FAILED', exitCode: null, signal: 'SIGKILL' })
  })

  it('an ENOENT command rejects with the spawn error (also with reject: false): there was no run', async () => {
    for (const reject of [true, false]) {
      const err = (await exec('procward-no-such-command', ['x'], { reject }).catch((e: unknown) => e)) as Record<
        string,
        unknown
      >
      expect(err).toBeInstanceOf(Error)
      expect(err).toMatchObject({
        code: 'ENOENT',
        syscall: 'spawn procward-no-such-command',
        path: 'procward-no-such-command',
        spawnargs: ['x'],
      })
      expect(isExecError(err)).toBe(false)
    }
  })
})

describe('a timeout stops the whole tree', () => {
  it("sh -c 'sleep 100 & sleep 100': both sleeps go (child_process's timeout would leave the background one)", async () => {
    const { marker, env } = marked()
    const run = exec('sh', ['-c', 'sleep 100 & sleep 100'], { env, timeout: 3000 })
    const tree = await treeOf(marker, 3)
    const err = await rejection(run)
    expect(err).toMatchObject({ code: 'ERR_EXEC_TIMEOUT', timedOut: true, exitCode: null, signal: 'SIGTERM' })
    expect(err.message).toContain('timed out after 3000 ms')
    expect(err.stop).toMatchObject({ outcome: 'exited', signals: ['SIGTERM'] })
    await nothingLeft(marker, tree)
  })

  it('a git-like helper chain (a helper that starts a helper): none left', async () => {
    const { marker, env } = marked()
    const run = exec(CHAIN, [], { env, timeout: 3000 })
    const tree = await treeOf(marker, 3) // the "git", its helper, the helper's helper
    const err = await rejection(run)
    expect(err).toMatchObject({ code: 'ERR_EXEC_TIMEOUT', timedOut: true })
    await nothingLeft(marker, tree)
  })

  it('`stop` sets the escalation: a TERM-ignoring tree is KILLed after its grace', async () => {
    const { marker, env } = marked()
    const run = exec('sh', ['-c', 'trap "" TERM; sleep 100 & sleep 100'], {
      env,
      timeout: 3000,
      stop: { graceMs: 200 },
    })
    const tree = await treeOf(marker, 3)
    const err = await rejection(run)
    expect(err).toMatchObject({ code: 'ERR_EXEC_TIMEOUT', signal: 'SIGKILL' })
    expect(err.stop).toMatchObject({ outcome: 'killed', signals: ['SIGTERM', 'SIGKILL'] })
    await nothingLeft(marker, tree)
  })

  it.skipIf(!cgroupSupport().available)(
    'with cgroup: true, a helper that left the group with setsid goes too',
    async () => {
      const { marker, env } = marked()
      const run = exec('sh', ['-c', 'setsid sleep 100 & sleep 100'], { env, timeout: 3000, cgroup: true })
      const tree = await treeOf(marker, 3)
      const err = await rejection(run)
      expect(err).toMatchObject({ code: 'ERR_EXEC_TIMEOUT', timedOut: true })
      await nothingLeft(marker, tree)
    },
  )

  it('without a cgroup, a setsid helper escapes the group (the limit cgroup: true lifts); exec still settles', async () => {
    const { marker, env } = marked()
    const run = exec('sh', ['-c', 'setsid sleep 100 & echo started; sleep 100'], { env, timeout: 3000, reject: false })
    await treeOf(marker, 3)
    // The escaped sleep holds the stdout pipe open: exec stops waiting for
    // it once the stop is over, with what was written.
    const r = await run
    expect(r).toMatchObject({ timedOut: true, stdout: 'started\n' })
    // The group's sleep was sent SIGKILL at the reap: it may take a moment
    // to die on a loaded machine; the escaped one lives on.
    await waitFor(() => live(marker).length <= 1, 5000, 'the group to die')
    const escaped = live(marker)
    expect(escaped.length).toBe(1)
    for (const pid of escaped) process.kill(pid, 'SIGKILL')
    await nothingLeft(marker, escaped)
  })

  it('a timeout due after the exit, the loop busy meanwhile: stops nothing, keeps what was written', async () => {
    const started = Date.now()
    const { result: run, pid } = withChild(() =>
      exec('sh', ['-c', 'printf "result-line\\n"; sleep 0.2'], { timeout: 3000 }),
    )
    // The child is done in 0.2 s, well within its time; the loop blocked
    // past the timeout, and until the child has exited: the timer then runs
    // before the exit's event and the pipe's data.
    while (Date.now() - started < 3050 || !hasExited(pid)) {
      if (Date.now() - started > 20_000) throw new Error('the child never exited')
    }
    const r = await run
    expect(r).toMatchObject({ code: 0, stdout: 'result-line\n', timedOut: false, stop: null })
  })

  it('reject: false resolves a timed-out run with timedOut and its stop', async () => {
    const r = await exec('sleep', ['100'], { timeout: 50, reject: false })
    expect(r).toMatchObject({ timedOut: true, signal: 'SIGTERM', code: null })
    expect(r.stop?.signals).toEqual(['SIGTERM'])
  })
})

describe('maxBuffer', () => {
  it('100 MB of output through maxBuffer 1 MiB: cut at 1 MiB, stopped, ERR_EXEC_MAX_BUFFER, nothing left', async () => {
    const { marker, env } = marked()
    const max = 1 << 20
    const err = await rejection(
      exec('sh', ['-c', 'head -c 100000000 /dev/zero; sleep 100'], { env, maxBuffer: max, encoding: 'buffer' }),
    )
    expect(err).toMatchObject({ code: 'ERR_EXEC_MAX_BUFFER', maxBufferExceeded: true, timedOut: false })
    expect(err.message).toContain('stdout exceeded maxBuffer (1048576 bytes)')
    expect(err.stdout.length).toBe(max)
    expect(Buffer.from(err.stdout).equals(Buffer.alloc(max))).toBe(true)
    // The stop ended it (TERM to the group), not a broken pipe.
    expect(err.stop?.signals).toEqual(['SIGTERM'])
    expect(err.signal).toBe('SIGTERM')
    await nothingLeft(marker, [])
  })

  it('is per stream, and exactly maxBuffer bytes pass', async () => {
    const r = await exec('sh', ['-c', 'head -c 1000 /dev/zero; head -c 1000 /dev/zero >&2'], { maxBuffer: 1000 })
    expect([r.stdout.length, r.stderr.length, r.maxBufferExceeded]).toEqual([1000, 1000, false])
    const err = await rejection(exec('sh', ['-c', 'head -c 1001 /dev/zero >&2'], { maxBuffer: 1000 }))
    expect(err).toMatchObject({ code: 'ERR_EXEC_MAX_BUFFER', stdout: '' })
    expect(err.stderr.length).toBe(1000)
    expect(err.message).toContain('stderr exceeded')
  })
  it('a cut inside a UTF-8 character keeps the whole characters before it (no U+FFFD); buffer: the exact bytes', async () => {
    // '€' is 3 bytes (e2 82 ac), '😀' 4: maxBuffer 10 cuts the 4th euro
    // after 1 byte, the 3rd emoji after 2. One stream each: the first cut
    // stops the command, maybe before it writes to the other.
    const euros = ['-c', `printf '€€€€€€'; sleep 100`]
    const emoji = ['-c', `printf '😀😀😀😀' >&2; sleep 100`]
    expect(await rejection(exec('sh', euros, { maxBuffer: 10 }))).toMatchObject({
      code: 'ERR_EXEC_MAX_BUFFER',
      stdout: '€€€',
    })
    expect(await rejection(exec('sh', emoji, { maxBuffer: 10 }))).toMatchObject({
      code: 'ERR_EXEC_MAX_BUFFER',
      stderr: '😀😀',
    })
    const raw = await rejection(exec('sh', euros, { maxBuffer: 10, encoding: 'buffer' }))
    expect(Buffer.from(raw.stdout as Uint8Array).toString('hex')).toBe(`${'e282ac'.repeat(3)}e2`)
    const rawErr = await rejection(exec('sh', emoji, { maxBuffer: 10, encoding: 'buffer' }))
    expect(Buffer.from(rawErr.stderr as Uint8Array).toString('hex')).toBe(`${'f09f9880'.repeat(2)}f09f`)
    // Not cut: what the command wrote is decoded as it is, its own bad bytes included.
    const own = await exec('sh', ['-c', `printf 'a\\342'`])
    expect(own.stdout).toBe('a\uFFFD')
    // Cut after bytes that can begin no character (e0 80: an overlong
    // form): the command's own bad bytes, decoded as such, not dropped.
    const bad = ['-c', `printf 'a\\340\\200\\200AA'; sleep 100`]
    expect(await rejection(exec('sh', bad, { maxBuffer: 3 }))).toMatchObject({ stdout: 'a\uFFFD\uFFFD' })
  })
  it('an output found past maxBuffer after the exit (still in the pipe) rejects too', async () => {
    // Written in one go and exited: the bytes may be read after the reap.
    for (let i = 0; i < 5; i++) {
      const err = await rejection(exec('sh', ['-c', 'head -c 60000 /dev/zero'], { maxBuffer: 100 }))
      expect(err).toMatchObject({ code: 'ERR_EXEC_MAX_BUFFER', maxBufferExceeded: true })
      expect(err.stdout.length).toBe(100)
    }
  })
})

describe('abort', () => {
  it('before the start: AbortError with the reason, nothing started', async () => {
    const dir = tempDir()
    const ac = new AbortController()
    ac.abort(new Error('not wanted'))
    const err = (await exec('sh', ['-c', `touch ${dir}/ran`], { signal: ac.signal }).catch((e: unknown) => e)) as Error
    expect(err).toMatchObject({ name: 'AbortError', code: 'ABORT_ERR' })
    expect(err.cause).toBe(ac.signal.reason)
    expect(existsSync(join(dir, 'ran'))).toBe(false)
  })

  it('while running: the whole tree stops, ABORT_ERR with the reason as cause', async () => {
    const { marker, env } = marked()
    const ac = new AbortController()
    const run = exec('sh', ['-c', 'sleep 100 & sleep 100'], { env, signal: ac.signal })
    const tree = await treeOf(marker, 3)
    ac.abort(new Error('user cancelled'))
    const err = await rejection(run)
    expect(err).toMatchObject({ name: 'AbortError', code: 'ABORT_ERR', aborted: true, timedOut: false })
    expect(err.cause).toBe(ac.signal.reason)
    expect(err.stop?.signals).toEqual(['SIGTERM'])
    await nothingLeft(marker, tree)
  })

  it('after the exit, before its event and the output are read (a busy loop): changes nothing', async () => {
    const ac = new AbortController()
    const { result: run, pid } = withChild(() =>
      exec('sh', ['-c', 'printf "result-line\\n"; sleep 0.2'], { signal: ac.signal }),
    )
    const started = Date.now()
    while (!hasExited(pid)) {
      if (Date.now() - started > 20_000) throw new Error('the child never exited')
    }
    ac.abort()
    expect(await run).toMatchObject({ code: 0, stdout: 'result-line\n', aborted: false, stop: null })
  })

  it('after the exit: changes nothing', async () => {
    const ac = new AbortController()
    const r = await exec('echo', ['done'], { signal: ac.signal })
    ac.abort()
    expect(r).toMatchObject({ stdout: 'done\n', aborted: false, stop: null })
  })

  it('reject: false resolves an aborted run with aborted: true', async () => {
    const ac = new AbortController()
    const run = exec('sleep', ['100'], { signal: ac.signal, reject: false })
    setTimeout(() => ac.abort(), 20)
    expect(await run).toMatchObject({ aborted: true, signal: 'SIGTERM' })
  })
})

describe('bad input: a TypeError/RangeError with a code, before anything starts', () => {
  const cases: [string, Record<string, unknown>, string, string][] = [
    ['a negative maxBuffer', { maxBuffer: -1 }, 'RangeError', 'ERR_OUT_OF_RANGE'],
    ['a fractional maxBuffer', { maxBuffer: 1.5 }, 'RangeError', 'ERR_OUT_OF_RANGE'],
    ['a maxBuffer that is a string', { maxBuffer: '1M' }, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
    ['a timeout NaN', { timeout: Number.NaN }, 'RangeError', 'ERR_OUT_OF_RANGE'],
    ['a negative timeout', { timeout: -5 }, 'RangeError', 'ERR_OUT_OF_RANGE'],
    ['an unknown option key', { killSignal: 'SIGKILL' }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
    ["spawnSupervised's stdio", { stdio: 'pipe' }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
    ['input of the wrong type', { input: 42 }, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
    ['an unknown encoding', { encoding: 'latin1' }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
    ['an unknown stdout', { stdout: 'file' }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
    ['a reject that is not a boolean', { reject: 'no' }, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
    ['a signal that is not an AbortSignal', { signal: {} }, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
    ['a bad stop option', { stop: { graceMs: -1 } }, 'RangeError', 'ERR_OUT_OF_RANGE'],
  ]
  it.each(cases)('%s', async (_what, options, name, code) => {
    const dir = tempDir()
    const err = (await exec('sh', ['-c', `touch ${dir}/ran`], options as never).catch((e: unknown) => e)) as Error
    expect(err.constructor.name).toBe(name)
    expect(err).toMatchObject({ code })
    expect(isArgumentError(err)).toBe(true)
    expect(existsSync(join(dir, 'ran'))).toBe(false)
  })

  it("names the option in the caller's words, with a hint for what users bring from child_process", async () => {
    await expect(exec('true', [], { killSignal: 'SIGKILL' } as never)).rejects.toThrow(
      /options\.killSignal is not an option of exec .*stop: \{ signal \}/,
    )
    await expect(exec('true', [], { maxBuffer: -1 })).rejects.toThrow(/options\.maxBuffer/)
    await expect(exec('', [])).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' })
    await expect(exec('true', 'x' as never)).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' })
  })
})

it('leaves no fd behind, whether a run completes, fails or times out', async () => {
  const before = openFds()
  await exec('cat', [], { input: 'x' })
  await exec('sh', ['-c', 'exit 1'], { reject: false })
  await exec('sleep', ['100'], { timeout: 20, reject: false })
  expect(await fdsLeftSince(before)).toEqual([])
})

describe('exec past the longest string', () => {
  const { MAX_STRING_LENGTH } = require('node:buffer').constants as { MAX_STRING_LENGTH: number }
  // 600 MiB of text where a string holds about 512 MiB: the run still ends in
  // an ExecError or a result (was a plain Error ERR_STRING_TOO_LONG, or a
  // TypeError from the decoder, the result lost).
  const big = ['-c', 'head -c 629145600 /dev/zero | tr "\\0" a']
  it.skipIf(MAX_STRING_LENGTH > 600 * 1024 * 1024)(
    'maxBuffer: Infinity, text: cut at the string limit, ERR_EXEC_MAX_BUFFER saying so; reject: false keeps the result',
    async () => {
      const err = await exec('sh', big, { maxBuffer: Number.POSITIVE_INFINITY }).catch((e: unknown) => e)
      expect(isExecError(err)).toBe(true)
      const e = err as ExecError
      expect(e.code).toBe('ERR_EXEC_MAX_BUFFER')
      expect(e.message).toMatch(/stdout exceeded the longest string this runtime can make/)
      expect(e.result.maxBufferExceeded).toBe(true)
      expect(e.result.stdout.length).toBe(MAX_STRING_LENGTH)
      const r = await exec('sh', big, { maxBuffer: 600 * 1024 * 1024, reject: false })
      expect(r.maxBufferExceeded).toBe(true)
      expect(r.stdout.length).toBe(MAX_STRING_LENGTH)
      expect(r.stdout.endsWith('aaaa')).toBe(true)
    },
    120_000,
  )
})
