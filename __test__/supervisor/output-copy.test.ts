// The copy of a line ready check's stream to this process's own stdout or
// stderr (when no one listens to 'stdout'/'stderr'): never blocks the event
// loop, whatever fd 1 and 2 are; passes backpressure on to the child; and
// is byte for byte what the child wrote. Each supervisor runs in a process
// of its own (supervisor-copy.cjs), whose fd 1 and 2 the test chooses.

import { closeSync, openSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  aliveInProcTable,
  childrenOf,
  FIXTURES,
  NODE,
  PROCWARD,
  sleep,
  tempDirs,
  trackProcesses,
  waitFor,
} from '../helpers'
import { type EventLine, eventsOf, onStalledTerminal, readyThen, SUPERVISOR_COPY } from './helpers'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-copy-')

const BYTES = join(FIXTURES, 'output-bytes.cjs')
const { payload } = createRequire(__filename)(BYTES) as { payload: () => Buffer }

const count = (lines: EventLine[], event: string) => lines.filter((l) => l.event === event).length
const last = (lines: EventLine[], event: string) => lines.filter((l) => l.event === event).at(-1)

function supervisorArgs(options: object): string[] {
  return [SUPERVISOR_COPY, PROCWARD, JSON.stringify(options)]
}

/** Resident set size of `pid`, in bytes. */
function rss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'latin1'))
  return Number(m?.[1]) * 1024
}

/** Bytes `pid` has written so far (write(2) and friends). */
function written(pid: number): number {
  let io: string
  try {
    io = readFileSync(`/proc/${pid}/io`, 'latin1')
  } catch {
    throw new Error(`process ${pid} is gone: it wrote all it had, nothing held it back`)
  }
  return Number(/wchar:\s+(\d+)/.exec(io)?.[1])
}

/** Waits until `pid` has written nothing more for 300 ms: it is blocked. */
async function stalled(pid: number): Promise<number> {
  let before = -1
  for (let i = 0; i < 200; i++) {
    const now = written(pid)
    if (now === before) return now
    before = now
    await sleep(300)
  }
  throw new Error(`process ${pid} never stalled`)
}

describe('the copy of a ready check stream', () => {
  it('never blocks the loop on a terminal nobody reads: a killed daemon is restarted, SIGTERM is heard', async () => {
    const options = readyThen('exec yes "a line the terminal never takes"', { handleSignals: true })
    // Its stdout and stderr: a terminal nobody reads.
    const py = onStalledTerminal(others, [NODE, ...supervisorArgs(options)])
    const lines = eventsOf(py)
    await waitFor(() => count(lines, 'started') === 1, 10_000, 'the supervisor to start')
    const supPid = last(lines, 'started')?.pid as number
    const daemon = last(lines, 'ready')?.pid as number
    others.track(daemon)
    // The terminal is full: the daemon is blocked writing (as with 'inherit').
    await stalled(daemon)
    const ticks = count(lines, 'tick')
    await waitFor(() => count(lines, 'tick') > ticks + 3, 10_000, 'the loop to keep turning')

    process.kill(daemon, 'SIGKILL')
    await waitFor(() => count(lines, 'ready') === 2, 10_000, 'the killed daemon to be restarted')
    const second = last(lines, 'ready')?.pid as number
    others.track(second)
    expect(second).not.toBe(daemon)
    expect(lines.map((l) => l.event).filter((e) => e !== 'tick')).toEqual([
      'spawn',
      'ready',
      'started',
      'exit',
      'restart',
      'spawn',
      'ready',
    ])

    process.kill(supPid, 'SIGTERM')
    const [code, signal] = await new Promise<[number | null, string | null]>((r) =>
      py.once('exit', (c, s) => r([c, s])),
    )
    // python reports its child's death by SIGTERM as -15 → exit status 241 (256-15).
    expect({ code, signal }).toEqual({ code: 256 - 15, signal: null })
    expect(last(lines, 'stopped')).toBeDefined()
    expect(aliveInProcTable(second)).toBe(false)
  })

  it('passes backpressure on to the child: into a stalled pipe, the supervisor stays small', async () => {
    const total = 100_000_000
    const options = readyThen(`exec head -c ${total} /dev/zero`, { restart: 'never' })
    const proc = others.spawn(NODE, supervisorArgs(options), { stdio: ['ignore', 'pipe', 'inherit', 'pipe'] })
    const lines = eventsOf(proc)
    await waitFor(() => count(lines, 'started') === 1, 10_000, 'the supervisor to start')
    const supPid = last(lines, 'started')?.pid as number
    const daemon = last(lines, 'ready')?.pid as number
    others.track(daemon)
    const rssAtReady = rss(supPid)
    // Nobody reads the supervisor's stdout: the daemon must block.
    const wrote = await stalled(daemon)
    expect(wrote).toBeLessThan(16 * 1024 * 1024)
    expect(rss(supPid) - rssAtReady).toBeLessThan(100 * 1024 * 1024)

    // Reading again: everything arrives, byte for byte.
    let got = 0
    let nonZero = 0
    let head = ''
    proc.stdout?.on('data', (d: Buffer) => {
      if (got < 6) head += d.subarray(0, 6 - got).toString('latin1')
      for (let i = Math.max(0, 6 - got); i < d.length; i++) if (d[i] !== 0) nonZero++
      got += d.length
    })
    await waitFor(() => got >= 6 + total, 60_000, 'the whole output')
    await waitFor(() => count(lines, 'stopped') === 1, 10_000, "the daemon's clean exit")
    expect({ got, head, nonZero }).toEqual({ got: 6 + total, head: 'ready\n', nonZero: 0 })
  })

  for (const to of ['pipe', 'file'] as const) {
    it(`is byte for byte what the child wrote (our stdout a ${to})`, async () => {
      const options = {
        command: NODE,
        args: [BYTES, 'exit'],
        ready: { stdout: 'ready' },
        restart: 'never',
      }
      const expected = payload()
      const file = join(tempDir(), 'out')
      const fd = to === 'file' ? openSync(file, 'w') : null
      const proc = others.spawn(NODE, supervisorArgs(options), {
        stdio: ['ignore', fd ?? 'pipe', 'inherit', 'pipe'],
      })
      if (fd !== null) closeSync(fd)
      const chunks: Buffer[] = []
      proc.stdout?.on('data', (d: Buffer) => chunks.push(d))
      const lines = eventsOf(proc)
      await waitFor(() => count(lines, 'stopped') === 1, 10_000, "the daemon's clean exit")
      const out = () => (to === 'file' ? readFileSync(file) : Buffer.concat(chunks))
      await waitFor(() => out().length >= expected.length, 10_000, 'the whole output').catch(() => {})
      await sleep(100)
      expect(out().equals(expected)).toBe(true)
    })
  }

  it("line events are strings without the newline or a CRLF's CR (and nothing is copied)", async () => {
    const { Supervisor } = await import('../../index.js')
    const sup = new Supervisor({ command: NODE, args: [BYTES, 'exit'], ready: { stdout: 'ready' }, restart: 'never' })
    const got: string[] = []
    sup.on('stdout', (l: string) => got.push(l))
    const stopped = new Promise((r) => sup.once('stopped', r))
    await sup.start()
    await stopped
    await waitFor(() => got.includes('no newline at the end'), 5000, 'the last line')
    expect(got).toContain('crlf one')
    expect(got).toContain('crlf two')
    expect(got).toContain('é€😀 split')
    expect(got.every((l) => l.length <= 64 * 1024)).toBe(true)
    expect(got.join('').length).toBeGreaterThanOrEqual(200_000)
    expect(childrenOf(process.pid).filter(aliveInProcTable)).toEqual([])
  })
})
