import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { getProcessInfo, isProcessRunning, waitForExit } from '../../index.js'
import {
  aliveInProcTable,
  FIXTURES,
  firstLine,
  isRoot,
  procState,
  reusePid,
  sleep,
  trackProcesses,
  waitFor,
} from '../helpers'

const { others } = trackProcesses()

// PROCWARD_EXIT_WATCH=fallback: no pidfd, so liveness is polled and no
// status can be seen.
const POLLED = process.env.PROCWARD_EXIT_WATCH === 'fallback'

/**
 * Open pidfds of this process on `pid` (fdinfo names the pid): the
 * runtime's own pidfds on its children (Bun holds one per child) are not
 * counted.
 */
function pidfds(pid: number): number {
  let n = 0
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (!readlinkSync(`/proc/self/fd/${fd}`).includes('pidfd')) continue
      if (/^Pid:\s*(-?\d+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1] === String(pid)) n++
    } catch {
      // the fd readdir itself used
    }
  }
  return n
}

/**
 * A process that is not our child: a shell starts `script` in the
 * background, prints its pid and exits, so it is reparented to PID 1.
 */
async function grandchild(script: string): Promise<number> {
  const launcher = others.spawn('sh', ['-c', `sh -c '${script}' >/dev/null 2>&1 & echo $!`])
  const pid = Number(await firstLine(launcher))
  others.track(pid)
  return pid
}

/** A pid that no process holds: a child's, after it was reaped. */
async function freePid(): Promise<number> {
  const c = others.spawn('true', [])
  await new Promise((r) => c.once('exit', r))
  return c.pid as number
}

describe('waitForExit', () => {
  it('sees a process that is not our child exit, with its status', async () => {
    const pid = await grandchild('sleep 0.2; exit 7')
    expect(getProcessInfo(pid)?.ppid).not.toBe(process.pid)
    const r = await waitForExit(pid)
    expect(r).toEqual({ pid, pidReused: false, exit: POLLED ? null : { pid, code: 7, signal: null } })
    expect(aliveInProcTable(pid)).toBe(false)
  })

  it('reports a death by signal', async () => {
    const pid = await grandchild('exec sleep 100')
    const before = pidfds(pid)
    const waiting = waitForExit(pid)
    // Its pidfd is open (on the runtime's thread) before the kill, so the status is its to read.
    if (!POLLED) await waitFor(() => pidfds(pid) === before + 1, 5000, "the wait's pidfd")
    else await sleep(20)
    process.kill(pid, 'SIGTERM')
    const r = await waiting
    expect(r).toEqual({ pid, pidReused: false, exit: POLLED ? null : { pid, code: null, signal: 'SIGTERM' } })
  })

  it('never reaps: a child_process child still gets its own exit event', async () => {
    const child = others.spawn('sh', ['-c', 'sleep 0.1; exit 3'])
    const exitEvent = new Promise<[number | null, string | null]>((r) => child.once('exit', (c, s) => r([c, s])))
    const r = await waitForExit(child.pid as number)
    expect(r.pidReused).toBe(false)
    if (!POLLED) expect(r.exit).toEqual({ pid: child.pid, code: 3, signal: null })
    // Node reaps it itself, with the true status: nothing stole it.
    expect(await exitEvent).toEqual([3, null])
  })

  it('counts a zombie as exited, and leaves it unreaped', async () => {
    const parent = others.spawn(join(FIXTURES, 'zombie-parent.sh'), [])
    const pid = Number(await firstLine(parent))
    // The zombie's parent never waits for it.
    await waitFor(() => procState(pid) === 'Z', 5000, 'the zombie')
    const r = await waitForExit(pid)
    expect(r).toEqual({ pid, pidReused: false, exit: POLLED ? null : { pid, code: 0, signal: null } })
    expect(procState(pid)).toBe('Z')
  })

  it('resolves at once for a pid no process holds', async () => {
    const pid = await freePid()
    expect(await waitForExit(pid)).toEqual({ pid, pidReused: false, exit: null })
  })

  it('with the identity of the live process, waits for its exit', async () => {
    const pid = await grandchild('exec sleep 100')
    const identity = getProcessInfo(pid)?.identity as string
    const before = pidfds(pid)
    const waiting = waitForExit(pid, { identity })
    if (!POLLED) await waitFor(() => pidfds(pid) === before + 1, 5000, "the wait's pidfd")
    else await sleep(20)
    process.kill(pid, 'SIGKILL')
    const r = await waiting
    expect(r).toEqual({ pid, pidReused: false, exit: POLLED ? null : { pid, code: null, signal: 'SIGKILL' } })
  })

  it('a reused pid resolves at once with pidReused, and the newcomer is untouched', async (ctx) => {
    if (!isRoot) ctx.skip('forcing a pid needs root (/proc/sys/kernel/ns_last_pid)')
    const { pid, oldIdentity, newcomer } = await reusePid(others)
    const r = await waitForExit(pid, { identity: oldIdentity })
    expect(r).toEqual({ pid, pidReused: true, exit: null })
    expect(newcomer.exitCode).toBeNull()
    expect(isProcessRunning(pid)).toBe(true)
  })

  it('an identity from another boot never matches a live process; a garbled one is refused', async () => {
    const pid = await grandchild('exec sleep 100')
    const live = getProcessInfo(pid)?.identity as string
    const otherBoot = live.replace(/^p1:[0-9a-f]+:/, 'p1:00000000000000000000000000000000:')
    expect(await waitForExit(pid, { identity: otherBoot })).toEqual({ pid, pidReused: true, exit: null })
    await expect(waitForExit(pid, { identity: 'garbage' })).rejects.toMatchObject({
      name: 'TypeError',
      code: 'ERR_INVALID_ARG_VALUE',
    })
    expect(aliveInProcTable(pid)).toBe(true)
  })

  it('many waiters on one process all resolve', async () => {
    const pid = await grandchild('sleep 0.1; exit 4')
    const results = await Promise.all(Array.from({ length: 50 }, () => waitForExit(pid)))
    for (const r of results) expect(r.pid).toBe(pid)
  })

  it('abort rejects with AbortError and leaves no pidfd behind', async () => {
    const pid = await grandchild('exec sleep 100')
    const before = pidfds(pid)
    const ac = new AbortController()
    const waiting = waitForExit(pid, { signal: ac.signal })
    if (!POLLED) await waitFor(() => pidfds(pid) === before + 1, 5000, "the wait's pidfd")
    ac.abort()
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError', code: 'ABORT_ERR' })
    // (The polled path's liveness checks keep a pidfd in procward's bounded
    // liveness cache, so only the pidfd path is counted.)
    if (!POLLED) expect(pidfds(pid)).toBe(before)
    expect(aliveInProcTable(pid)).toBe(true)
  })

  it('AbortSignal.timeout gives a timeout; an aborted signal rejects before anything opens', async () => {
    const pid = await grandchild('exec sleep 100')
    const t0 = Date.now()
    await expect(waitForExit(pid, { signal: AbortSignal.timeout(50) })).rejects.toMatchObject({ name: 'AbortError' })
    expect(Date.now() - t0).toBeGreaterThanOrEqual(45)
    const before = pidfds(pid)
    await expect(waitForExit(pid, { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' })
    expect(pidfds(pid)).toBe(before)
  })

  it('rejects bad input', async () => {
    for (const pid of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 4194305, process.pid]) {
      await expect(waitForExit(pid)).rejects.toMatchObject({ name: 'RangeError', code: 'ERR_OUT_OF_RANGE' })
    }
    for (const pid of ['12', null, undefined, {}, 12n]) {
      await expect(waitForExit(pid as never)).rejects.toMatchObject({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' })
    }
    const pid = await freePid()
    for (const options of [null, 5, 'x']) {
      await expect(waitForExit(pid, options as never)).rejects.toMatchObject({ name: 'TypeError' })
    }
    await expect(waitForExit(pid, { identity: 5 as never })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' })
    await expect(waitForExit(pid, { signal: {} as never })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' })
    await expect(waitForExit(pid, { timeout: 5 } as never)).rejects.toMatchObject({
      name: 'TypeError',
      code: 'ERR_INVALID_ARG_VALUE',
    })
  })
})

describe('waitForExit at scale', () => {
  /** fixtures/many-waits.cjs under `ulimit -n 256`. */
  async function manyWaits(mode: 'same' | 'distinct', n: number) {
    const p = others.spawn('sh', [
      '-c',
      'ulimit -n 256 && exec "$@"',
      'sh',
      process.execPath,
      join(FIXTURES, 'many-waits.cjs'),
      join(__dirname, '..', '..', 'index.js'),
      mode,
      String(n),
    ])
    return JSON.parse(await firstLine(p))
  }

  it('a thousand waits on one process share one pidfd: the fd table stays usable', async () => {
    const r = await manyWaits('same', 1000)
    expect(r.canOpen).toBe(true)
    expect(r.fds).toBeLessThan(100)
    expect(r.resolved).toBe(1000)
  })

  it('waits on more processes than the fd budget poll beyond it: the fd table stays usable', async () => {
    const r = await manyWaits('distinct', 240)
    expect(r.canOpen).toBe(true)
    // Half the table at most for the waits (128), plus liveness's bounded
    // cache (64 pidfds, 16 of them with a stat fd beside) and the runtime's
    // own fds (Deno has some 30): never the whole table.
    expect(r.fds).toBeLessThan(250)
    expect(r.resolved).toBe(240)
  })
})

describe('waitForExit on what is not a process', () => {
  it('a thread id (of a live process) resolves at once as not running, as liveness says', async () => {
    const c = others.spawn(process.execPath, ['-e', 'setTimeout(() => {}, 100000)'], { stdio: 'ignore' })
    await waitFor(() => readdirSync(`/proc/${c.pid}/task`).length > 1, 5000, 'its threads')
    const tid = readdirSync(`/proc/${c.pid}/task`)
      .map(Number)
      .find((t) => t !== c.pid) as number
    expect(isProcessRunning(tid)).toBe(false)
    expect(await waitForExit(tid)).toEqual({ pid: tid, pidReused: false, exit: null })
  })
})
