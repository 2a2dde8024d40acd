// A daemon's log file under volume: 100 MB through a 1 MiB × 3 rotation
// kept byte-exact in whole lines with this process's memory bounded, and a
// full disk (ENOSPC) that drops output, says how much, and never stops
// the daemon from writing on and exiting.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmdirSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, expect, it } from 'vitest'
import { isRoot, tempDirs, trackProcesses } from '../helpers'
import { GROUP_FIXTURES, next, trackGroups } from './helpers'

trackProcesses()
const tempDir = tempDirs('procward-group-log-volume-')
const group = trackGroups()

const MiB = 1024 * 1024
const VOLUME = join(GROUP_FIXTURES, 'volume.cjs')
/** The fixture's own generator: the lines it writes, rebuilt here. */
const generator = createRequire(__filename)(VOLUME) as {
  outLine(i: number): string
  errLine(i: number): string | null
  lineCount(bytes: number): number
}

/** A daemon writing `bytes` of numbered lines (fixtures/volume.cjs) as fast as it can, then exiting 0; not restarted. */
function volume(bytes: number, log: { path: string; maxBytes?: number; keep?: number }) {
  return {
    command: process.execPath,
    args: [VOLUME, String(bytes)],
    ready: { stderr: 'err 0 ' },
    restart: 'never' as const,
    log,
  }
}

/**
 * The numbers of the lines in `text`, per stream, once each line is found
 * to be, byte for byte, the generator's line of its number, in its
 * stream's order; and `text` ends with a newline (no line cut at its end).
 */
function lineNumbers(text: string): { out: number[]; err: number[] } {
  const lines = text.split('\n')
  expect(lines.pop()).toBe('')
  const numbers = { out: [] as number[], err: [] as number[] }
  const wrong: string[] = []
  for (const line of lines) {
    const [stream, n] = line.split(' ', 2)
    const i = Number(n)
    const make = stream === 'out' ? generator.outLine : stream === 'err' ? generator.errLine : null
    // A line cut in two, or anything but the generator's own, is wrong.
    if (make === null || !Number.isInteger(i) || make(i) !== `${line}\n`) wrong.push(line.slice(0, 80))
    else numbers[stream as 'out' | 'err'].push(i)
  }
  expect(wrong).toEqual([])
  for (const ns of [numbers.out, numbers.err]) {
    expect(ns.length).toBeGreaterThan(0)
    expect(ns.every((n, k) => k === 0 || n > (ns[k - 1] as number))).toBe(true)
  }
  return numbers
}

/** The numbers of the lines `stream` writes from its line `from` to `to`, both included. */
function written(stream: 'out' | 'err', from: number, to: number): number[] {
  const ns: number[] = []
  for (let i = from; i <= to; i++) if (stream === 'out' || generator.errLine(i) !== null) ns.push(i)
  return ns
}

/** Restarts this process's peak RSS (VmHWM) from its current RSS. */
function resetPeakRss(): void {
  writeFileSync('/proc/self/clear_refs', '5')
}

/** This process's peak RSS (bytes) since resetPeakRss(). */
function peakRss(): number {
  const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'latin1'))
  if (m === null) throw new Error('no VmHWM in /proc/self/status')
  return Number(m[1]) * 1024
}

it('100 MB through a 1 MiB × 3 rotation: the kept files are its tail, byte-exact, in whole lines; memory stays bounded', async () => {
  const path = join(tempDir(), 'app.log')
  const maxBytes = MiB
  const bytes = 100 * MiB
  const count = generator.lineCount(bytes)
  const g = group({ daemons: { app: volume(bytes, { path, maxBytes, keep: 3 }) } })
  const exit = next(g, 'exit', 'app')
  resetPeakRss()
  const before = process.memoryUsage().rss
  await g.start()
  // It ends on its own, having written all: the log never held it back for good.
  expect(await exit).toMatchObject({ code: 0, signal: null, expected: false })
  await g.stop()
  const peak = peakRss()

  const files = [`${path}.3`, `${path}.2`, `${path}.1`, path]
  expect(existsSync(`${path}.4`)).toBe(false)
  const texts = files.map((f) => readFileSync(f, 'latin1'))
  for (const [k, f] of files.entries()) {
    const size = statSync(f).size
    expect(size).toBeLessThanOrEqual(maxBytes)
    expect(texts[k]?.endsWith('\n')).toBe(true)
    // A rotated file was cut at the last line that fit: less than one
    // line (at most 40 KiB here) short of maxBytes.
    if (f !== path) expect(size).toBeGreaterThan(maxBytes - 41_000)
  }
  // Lines here are shorter than the 64 KiB held whole and than maxBytes:
  // none is split (one longer than maxBytes would be: log.test.ts).
  const { out, err } = lineNumbers(texts.join(''))
  // Each stream's lines consecutive, none lost or repeated, up to the last
  // written (stderr's last comes at most 9 lines of stdout before) ...
  expect(out).toEqual(written('out', out[0] as number, count - 1))
  expect(err).toEqual(written('err', err[0] as number, count - 1))
  expect(err.at(-1)).toBeGreaterThan(count - 11)
  // ... from ~4 MiB before the end of ~100: rotated ~100 times.
  expect(out[0]).toBeGreaterThan(count * 0.9)

  // 100 MB went through, and this process grew by far less: the copy holds
  // one chunk per stream, not the output.
  expect(peak - before).toBeLessThan(64 * MiB)
  expect(peak).toBeLessThan(200 * MiB)
})

/** tmpfs mounts made by the test, unmounted (and removed) after it, whatever happened. */
const mounts: string[] = []
afterEach(() => {
  for (const dir of mounts.splice(0)) {
    try {
      execFileSync('umount', [dir], { stdio: 'ignore' })
    } catch {
      // Never mounted (the mount failed).
    }
    rmdirSync(dir)
  }
})

it('a full disk (ENOSPC): the daemon writes on and exits on its own, the file keeps whole lines, the dropped bytes are reported', async (ctx) => {
  if (!isRoot) return ctx.skip('mounting a small tmpfs needs root')
  const dir = mkdtempSync(join(tmpdir(), 'procward-group-log-full-'))
  mounts.push(dir)
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=512k,mode=0700', 'tmpfs', dir])
  const path = join(dir, 'app.log')
  const bytes = 8 * MiB
  const count = generator.lineCount(bytes)
  let total = 0
  for (let i = 0; i < count; i++) total += generator.outLine(i).length + (generator.errLine(i)?.length ?? 0)
  const warnings: string[] = []
  const onWarning = (w: Error & { code?: string }) => {
    if (w.code === 'PROCWARD_LOG_FILE') warnings.push(w.message)
  }
  process.on('warning', onWarning)
  try {
    const g = group({ daemons: { app: volume(bytes, { path, maxBytes: MiB, keep: 3 }) } })
    const exit = next(g, 'exit', 'app')
    await g.start()
    expect(await exit).toMatchObject({ code: 0, signal: null, expected: false })
    await g.stop()
    // The warnings are emitted on the next tick.
    await new Promise((resolve) => setImmediate(resolve))
  } finally {
    process.off('warning', onWarning)
  }
  const text = readFileSync(path, 'latin1')
  expect(text.length).toBeLessThanOrEqual(512 * 1024)
  expect(text.length).toBeGreaterThan(0)
  // What could be written is there, whole lines, byte-exact, in order,
  // from the first; what could not was dropped in whole chunks (a disk
  // full to the last page takes a smaller chunk after a bigger one failed).
  const { out, err } = lineNumbers(text)
  expect(out[0]).toBe(0)
  expect(err[0]).toBe(0)
  // Said at each failure after a success; then how much was dropped, once
  // a write succeeds again or at close: all that is not in the file, to
  // the byte.
  const failed = warnings.filter((w) => w.startsWith(`procward: cannot write ${path}: ENOSPC`))
  expect(failed.length).toBeGreaterThan(0)
  const reports = warnings.filter((w) => !failed.includes(w))
  let dropped = 0
  for (const w of reports) {
    const m = /^procward: (\d+) bytes of output dropped, not written to (.*) \(ENOSPC: .*\)$/.exec(w)
    expect(m?.[2], w).toBe(path)
    dropped += Number(m?.[1])
  }
  expect(dropped).toBe(total - text.length)
  expect(total - text.length).toBeGreaterThan(bytes - 512 * 1024)
})
