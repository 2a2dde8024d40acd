// isProcessRunning against the ways it is done without procward.
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fmt, lines, loopDelayWhile, perCall, ratio, table } from './util.mjs'

const require = createRequire(import.meta.url)
const { isProcessRunning, getProcessInfo } = require('../index.js')
const isRunningPkg = require('is-running')

const killZero = (p) => {
  try {
    process.kill(p, 0)
    return true
  } catch (e) {
    return e.code === 'EPERM'
  }
}

export async function run() {
  const { processExists } = await import('process-exists')
  // 80 live targets: rotating through more pids than procward caches (64)
  // makes every check a first check (pidfd_open + poll, and a close).
  const kids = Array.from({ length: 80 }, () => spawn('sleep', ['1000'], { stdio: 'ignore' }))
  const pids = kids.map((k) => k.pid)
  const pid = pids[0]
  const identity = getProcessInfo(pid).identity

  const procStat = (p) => {
    try {
      const s = readFileSync(`/proc/${p}/stat`, 'latin1')
      const st = s[s.lastIndexOf(')') + 2]
      return st !== 'Z' && st !== 'X'
    } catch {
      return false
    }
  }
  const ps = (p) => {
    try {
      const st = execFileSync('ps', ['-o', 'stat=', '-p', String(p)], { encoding: 'utf8' }).trim()
      return st !== '' && !st.startsWith('Z')
    } catch {
      return false
    }
  }

  const cases = [
    ['process.kill(pid, 0)  [zombie-blind]', () => killZero(pid), {}],
    ['isProcessRunning, same pid (cached fd)', () => isProcessRunning(pid), {}],
    ['isProcessRunning, first check of a pid', (i) => isProcessRunning(pids[i % pids.length]), {}],
    ['isProcessRunning(pid, identity)', () => isProcessRunning(pid, identity), {}],
    ['getProcessInfo(pid)', () => getProcessInfo(pid), {}],
    ['readFileSync /proc/<pid>/stat in JS', () => procStat(pid), {}],
    ['is-running (npm)  [zombie-blind]', () => isRunningPkg(pid), {}],
    ["execFileSync('ps', ['-o','stat=','-p',pid])", () => ps(pid), { batches: 5, perBatch: 10 }],
  ]
  const rows = []
  let base = Number.NaN
  for (const [name, fn, opts] of cases) {
    const t = perCall(fn, opts)
    if (rows.length === 0) base = t
    rows.push({ check: name, 'median µs/call': fmt(t, 3), 'vs kill(0)': ratio(t, base) })
  }
  // process-exists is async (it lists every process through ps-list).
  {
    const times = []
    for (let i = 0; i < 10; i++) {
      const t0 = performance.now()
      await processExists(pid)
      times.push((performance.now() - t0) * 1000)
    }
    times.sort((a, b) => a - b)
    const t = times[5]
    rows.push({ check: 'process-exists (npm, async)', 'median µs/call': fmt(t, 3), 'vs kill(0)': ratio(t, base) })
  }
  const first = Number(rows[2]['median µs/call'])
  const psRow = Number(rows[7]['median µs/call'])
  console.log('\n## Liveness: one check of a live pid (median per call)\n')
  table(rows, ['check', 'median µs/call', 'vs kill(0)'])
  console.log(`\nps / isProcessRunning(first check) = ${ratio(psRow, first)}`)

  await mainThreadEnded()

  console.log('\n## Event-loop delay while polling every 10 ms for 1 s (ms)\n')
  const polled = [
    ['nothing', () => {}],
    ['process.kill(pid, 0)', () => killZero(pid)],
    ['isProcessRunning', () => isProcessRunning(pid)],
    ['readFileSync /proc/<pid>/stat', () => procStat(pid)],
    ['is-running (npm)', () => isRunningPkg(pid)],
    ['process-exists (npm, async)', () => pending.add(processExists(pid))],
    ['execFileSync ps', () => ps(pid)],
  ]
  const delayRows = []
  const pending = new Set()
  for (const [name, fn] of polled) {
    const d = await loopDelayWhile(fn)
    // process-exists calls still running (each lists every process via ps)
    // must finish before the next poller is measured.
    await Promise.all(pending)
    pending.clear()
    delayRows.push({ poller: name, p50: fmt(d.p50), p99: fmt(d.p99), max: fmt(d.max) })
  }
  table(delayRows, ['poller', 'p50', 'p99', 'max'])

  for (const k of kids) k.kill('SIGKILL')
  await Promise.all(
    kids.map((k) => new Promise((r) => (k.exitCode !== null || k.signalCode ? r() : k.once('exit', r)))),
  )
}

const FIXTURES = join(import.meta.dirname, '..', '__test__', 'fixtures')

/**
 * A process whose main thread has ended (pthread_exit) while its other
 * threads run on: /proc/<pid>/stat says Z, so a check reads its threads.
 * At ~4, ~350 and ~1250 threads, against process.kill(pid, 0), which asks
 * nothing of threads (and calls a zombie alive). Run alone with
 * `node -e "import('./bench/liveness.mjs').then((m) => m.mainThreadEnded())"`.
 */
export async function mainThreadEnded() {
  console.log('\n## Liveness of a process whose main thread has ended (median per call)\n')
  const dir = mkdtempSync(join(tmpdir(), 'procward-bench-'))
  try {
    const exe = join(dir, 'many-threads')
    try {
      execFileSync(process.env.CC ?? 'cc', ['-O', '-pthread', '-o', exe, join(FIXTURES, 'many-threads.c')])
    } catch {
      console.log('not measured: needs cc to build __test__/fixtures/many-threads.c')
      return
    }
    const rows = []
    // Idle threads; the fixture adds a stdin reader, and the ended leader is listed too.
    for (const idle of [2, 348, 1248]) {
      const child = spawn(exe, [String(idle)], { stdio: ['pipe', 'pipe', 'ignore'] })
      const pid = Number(await lines(child.stdout)())
      const state = () => {
        const s = readFileSync(`/proc/${pid}/stat`, 'latin1')
        return s[s.lastIndexOf(')') + 2]
      }
      while (state() !== 'Z') await sleep(5)
      const threads = readdirSync(`/proc/${pid}/task`).length
      // Few calls: a call cost 1.5 ms at 1260 threads before the first look.
      const opts = { batches: 7, perBatch: 200 }
      const kill0 = perCall(() => killZero(pid), opts)
      const running = perCall(() => isProcessRunning(pid), opts)
      if (!isProcessRunning(pid)) throw new Error(`pid ${pid}, main thread ended: not running?`)
      rows.push({
        threads,
        'kill(0) µs': fmt(kill0, 3),
        'isProcessRunning µs': fmt(running, 3),
        'vs kill(0)': ratio(running, kill0),
      })
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }
    table(rows, ['threads', 'kill(0) µs', 'isProcessRunning µs', 'vs kill(0)'])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
