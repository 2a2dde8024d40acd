// Regression tests for the exit watch, identity and descriptor hardening:
// a tracer holding an exited child, a pid reused while the JS loop was
// blocked, an identity read under fd pressure or from a fast-exiting child,
// a stop aimed at one of this process's own threads, and the fds a cycle of
// spawn → check → exit leaves behind. Every back-end runs them (the suite is
// run with PROCWARD_EXIT_WATCH unset, =tokio and =fallback).
import { type ChildProcess, spawn as cpSpawn } from 'node:child_process'
import { readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { describe, expect, it } from 'vitest'
import { getProcessInfo, isProcessRunning, type SupervisedProcess, stopSupervisedProcess } from '../../index.js'
import {
  aliveInProcTable,
  FIXTURES,
  firstLine,
  hasPython,
  isRoot,
  procState,
  runFixture,
  runWithFewFds,
  sleep,
  trackProcesses,
  waitFor,
} from '../helpers'

const { sup, others } = trackProcesses()

/** CPU time (ms) the JS thread has used so far, from its own /proc stat. */
function jsThreadCpuMs(): number {
  const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'latin1')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  // utime and stime are fields 14 and 15 of the line, in clock ticks (100/s).
  return (Number(fields[11]) + Number(fields[12])) * 10
}

/** How busy the JS thread and its loop are while the test sleeps `ms`. */
async function idleFor(ms: number): Promise<{ loop: number; cpu: number }> {
  const elu = performance.eventLoopUtilization()
  const cpu = jsThreadCpuMs()
  const t0 = Date.now()
  await sleep(ms)
  const wall = Date.now() - t0
  // Loop utilisation is the share of time the loop was not waiting in
  // epoll: a loop that spins on a ready fd is near 1 however little CPU the
  // machine gives it; an idle loop is near 0.
  return { loop: performance.eventLoopUtilization(elu).utilization, cpu: (jsThreadCpuMs() - cpu) / wall }
}

function exitCounter(p: SupervisedProcess): { count: () => number } {
  let n = 0
  p.on('exit', () => {
    n++
  })
  return { count: () => n }
}

/** Every open fd of this process, /proc/<pid>/stat ones included. */
function allFds(): string[] {
  const out: string[] = []
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      out.push(`${fd} -> ${readlinkSync(`/proc/self/fd/${fd}`)}`)
    } catch {
      // the fd readdir itself used
    }
  }
  return out
}

describe('an exited child held by a tracer that never waits', () => {
  const skip = !isRoot || !hasPython()
  it.skipIf(skip)('does not spin the JS thread, and gives one exit once the tracer leaves', async () => {
    const p = sup('sleep', ['100'])
    const exits = exitCounter(p)
    const tracer = others.spawn('python3', [join(FIXTURES, 'tracer.py'), String(p.pid)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    expect(await firstLine(tracer)).toBe('seized')
    // SIGKILL: a seized tracee would stop for any other signal.
    expect(p.kill('SIGKILL')).toBe(true)
    await waitFor(() => procState(p.pid) === 'Z', 5000, 'the traced child to become a zombie')
    // The zombie is the tracer's to see first: nothing can reap it yet.
    const busy = await idleFor(500)
    expect(busy.loop).toBeLessThan(0.5)
    expect(busy.cpu).toBeLessThan(0.5)
    expect(exits.count()).toBe(0)
    expect(procState(p.pid)).toBe('Z')

    tracer.kill('SIGTERM')
    const info = await Promise.race([p.exited, sleep(5000).then(() => null)])
    expect(info).toEqual({ pid: p.pid, code: null, signal: 'SIGKILL' })
    expect(procState(p.pid)).toBeNull()
    await sleep(50)
    expect(exits.count()).toBe(1)
  })
})

describe('a pid reused while the JS loop was blocked', () => {
  it.skipIf(!isRoot)('still gives the exit, once, while the newcomer runs', async () => {
    const a = sup('sleep', ['100'])
    const exits = exitCounter(a)
    const pid = a.pid
    a.kill('SIGKILL')
    // Block the loop until the native side has reaped A, then put a child
    // of this process on A's pid before the loop runs again.
    const deadline = Date.now() + 5000
    while (procState(pid) !== null && Date.now() < deadline) {
      // busy-wait on purpose: the loop must not run
    }
    expect(procState(pid)).toBeNull()
    let b: ChildProcess | null = null
    for (let i = 0; i < 200 && b === null; i++) {
      writeFileSync('/proc/sys/kernel/ns_last_pid', String(pid - 1))
      const c = others.spawn('sleep', ['100'])
      if (c.pid === pid) b = c
      else c.kill('SIGKILL')
    }
    expect(b?.pid).toBe(pid)
    const info = await Promise.race([a.exited, sleep(5000).then(() => null)])
    expect(info).toEqual({ pid, code: null, signal: 'SIGKILL' })
    const busy = await idleFor(300)
    expect(busy.loop).toBeLessThan(0.5)
    expect(exits.count()).toBe(1)
    // The newcomer was neither reaped nor reported in A's place.
    expect(aliveInProcTable(pid)).toBe(true)
    expect(isProcessRunning(pid)).toBe(true)
  })
})

describe('identity', () => {
  it('is never empty, even for a child that exits at once', async () => {
    const bad: string[] = []
    for (let i = 0; i < 600; i++) {
      const p = sup('true')
      const id = p.identity
      if (!/^p1:[0-9a-f]+:\d+:\d*$/.test(id)) bad.push(JSON.stringify(id))
      await p.exited
    }
    expect(bad).toEqual([])
  })

  it('equals what getProcessInfo gives, for each of many children', async () => {
    const diff: string[] = []
    for (let i = 0; i < 100; i++) {
      const p = sup('sleep', ['100'])
      const mine = p.identity
      const info = getProcessInfo(p.pid)?.identity
      if (mine !== info) diff.push(`${mine} != ${info}`)
      expect(isProcessRunning(p.pid, mine)).toBe(true)
      p.kill('SIGKILL')
      await p.exited
      // After the reap it is still the child's own, and names no live process.
      expect(p.identity).toBe(mine)
      expect(isProcessRunning(p.pid, mine)).toBe(false)
    }
    expect(diff).toEqual([])
  })

  it.each([0, 1, 2])('is the child’s own, or a thrown EMFILE, with %i free fds at spawn', async (spare) => {
    const { stdout } = await runWithFewFds('identity-emfile.cjs', String(spare))
    const res = JSON.parse(stdout)
    expect(res.held).toBeGreaterThan(0)
    // The spawn itself may fail with EMFILE: it needs /dev/null and a pidfd,
    // and the runtime may have taken a spare fd of its own meanwhile (seen
    // under Node 24 with 1 spare). Then nothing was started.
    if (res.spawnError !== undefined) {
      expect(res.spawnError).toBe('EMFILE')
      return
    }
    if ('error' in res.first) expect(res.first.error).toBe('EMFILE')
    else expect(res.first.identity).toBe(res.identity)
    expect(res.identity).toMatch(/^p1:[0-9a-f]+:\d+:\d*$/)
    expect(res.identity).toBe(res.info)
    expect(res.running).toBe(true)
    expect(res.stop).toBe('exited')
    expect(res.exit).toMatchObject({ signal: 'SIGTERM' })
  })
})

describe('thread ids', () => {
  it('refuses to stop any thread of this process, and calls none of them a process', async () => {
    const { stdout } = await runFixture('own-threads.cjs')
    const res = JSON.parse(stdout)
    expect(res.threads.length).toBeGreaterThan(1)
    expect(res.threads.map((t: { tid: number }) => t.tid)).toContain(res.workerTid)
    for (const t of res.threads) {
      expect(t).toEqual({
        tid: t.tid,
        running: false,
        info: null,
        stop: { name: 'RangeError', code: 'ERR_OUT_OF_RANGE' },
      })
    }
  })

  it('treats a thread id of another process as no process, and signals nothing', async () => {
    const node = others.spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'])
    const pid = node.pid as number
    const threads = () => readdirSync(`/proc/${pid}/task`).map(Number)
    await waitFor(() => threads().length > 1, 5000, 'node to start its threads')
    const tid = threads().find((t) => t !== pid) as number
    expect(isProcessRunning(tid)).toBe(false)
    expect(getProcessInfo(tid)).toBeNull()
    const r = await stopSupervisedProcess(tid, { graceMs: 200, killTimeoutMs: 200 })
    expect(r).toMatchObject({ outcome: 'already-exited', signals: [] })
    await sleep(100)
    expect(node.exitCode).toBeNull()
    expect(node.signalCode).toBeNull()
    expect(isProcessRunning(pid)).toBe(true)
    expect(getProcessInfo(pid)?.pid).toBe(pid)
  })
})

describe('descriptors', () => {
  it('holds no more fds after many spawn → check → exit cycles', async () => {
    const cycle = async () => {
      const p = sup('sleep', ['100'])
      expect(isProcessRunning(p.pid)).toBe(true)
      expect(getProcessInfo(p.pid)?.identity).toBe(p.identity)
      expect(isProcessRunning(p.pid, p.identity)).toBe(true)
      p.kill('SIGKILL')
      await p.exited
    }
    // Process-wide fds (the runtime's epoll, say) are made on first use.
    for (let i = 0; i < 3; i++) await cycle()
    const before = allFds()
    for (let i = 0; i < 200; i++) await cycle()
    // The same for a child_process child, whose reap procward never sees.
    for (let i = 0; i < 20; i++) {
      const c = cpSpawn('sleep', ['100'], { stdio: 'ignore' })
      const pid = c.pid as number
      expect(isProcessRunning(pid)).toBe(true)
      expect(getProcessInfo(pid)?.pid).toBe(pid)
      c.kill('SIGKILL')
      await new Promise((r) => c.once('exit', r))
      expect(isProcessRunning(pid)).toBe(false)
    }
    const after = allFds()
    expect(after.filter((f) => !before.includes(f))).toEqual([])
  })
})
