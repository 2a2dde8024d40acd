// Concurrent children (1000, then 10 000): memory and fds per child, and
// how long until all are reaped, with the event-loop delay meanwhile, after
// they are all SIGKILLed at once — spawnSupervised vs child_process.
//
// 10 000 children need more descriptors than a default soft limit: like a
// user would, the run raises its own RLIMIT_NOFILE with prlimit(1) first
// (root may raise both limits; anyone the soft one up to the hard one). The
// limit it ran with is printed: an API that needs more fds per child than
// it allows falls back (or fails) the way it would for a user. Where not
// even one fd per child is left, the 10 000 rows are left out.
import { execFileSync, spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { fmt, table } from './util.mjs'

const require = createRequire(import.meta.url)
const { spawnSupervised } = require('../index.js')

/** `f()`, or NaN when this process has no fd left to ask with (EMFILE). */
function orNaN(f) {
  try {
    return f()
  } catch (e) {
    if (e.code === 'EMFILE') return Number.NaN
    throw e
  }
}
const fds = () => orNaN(() => readdirSync('/proc/self/fd').length)
const threads = () => orNaN(() => readdirSync('/proc/self/task').length)

/** This process's RLIMIT_NOFILE, soft and hard (Node has no getrlimit). */
function nofile() {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'))
  const [soft, hard] = (line?.split(/\s{2,}/) ?? []).slice(1, 3).map((v) => (v === 'unlimited' ? Infinity : Number(v)))
  return { soft, hard }
}

/** Raises our own RLIMIT_NOFILE to `want`, or as far as allowed; returns the soft limit then. */
function raiseNofile(want) {
  if (nofile().soft >= want) return nofile().soft
  for (const limits of [`${want}:${want}`, `${Math.min(want, nofile().hard)}:`]) {
    try {
      execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${limits}`], { stdio: 'ignore' })
      break
    } catch {}
  }
  return nofile().soft
}

/** Memory after a full GC (`pnpm bench` runs node with --expose-gc). */
function settledMemory() {
  globalThis.gc?.()
  globalThis.gc?.()
  const m = orNaN(() => process.memoryUsage())
  return Number.isNaN(m) ? { rss: m, js: m } : { rss: m.rss, js: m.heapUsed + m.external }
}

async function scenario(n, start) {
  const mem0 = settledMemory()
  const fd0 = fds()
  const th0 = threads()
  const kids = []
  for (let i = 0; i < n; i++) {
    kids.push(start())
    // Let exits and spawn bookkeeping run now and then (a real caller's
    // loop is not blocked for seconds).
    if (i % 500 === 499) await new Promise((r) => setImmediate(r))
  }
  await new Promise((r) => setTimeout(r, 200 + n / 20))
  const mem1 = settledMemory()
  const fd1 = fds()
  const th1 = threads()
  const h = monitorEventLoopDelay({ resolution: 1 })
  h.enable()
  const t0 = performance.now()
  for (const k of kids) process.kill(k.pid, 'SIGKILL')
  await Promise.all(kids.map((k) => k.exited))
  const allMs = performance.now() - t0
  await new Promise((r) => setTimeout(r, 50))
  h.disable()
  return {
    'KiB RSS/child': fmt((mem1.rss - mem0.rss) / 1024 / n, 1),
    'KiB JS heap/child': fmt((mem1.js - mem0.js) / 1024 / n, 2),
    'fds/child': fmt((fd1 - fd0) / n, 2),
    'threads/child': fmt((th1 - th0) / n, 2),
    'all reaped ms': fmt(allMs, 0),
    'loop delay p99 ms': fmt(h.percentile(99) / 1e6, 1),
    'loop delay max ms': fmt(h.max / 1e6, 1),
  }
}

const viaProcward = () => spawnSupervised('sleep', ['1000'], { stdio: 'ignore' })
const viaChildProcess = () => {
  const c = spawn('sleep', ['1000'], { stdio: 'ignore' })
  c.exited = new Promise((r) => c.once('exit', r))
  return c
}

export async function run() {
  const backend = process.env.PROCWARD_EXIT_WATCH ?? 'pidfd'
  const rows = []
  const sizes = [1000, 10_000]
  const biggest = sizes[sizes.length - 1]
  // Up to 3 fds a child, plus what Node itself holds.
  const limit = raiseNofile(3 * biggest + 1000)
  for (const n of sizes) {
    if (limit < n + 1000) {
      console.log(`\n(${n} children left out: RLIMIT_NOFILE is ${limit}, and prlimit could not raise it)`)
      continue
    }
    if (n > 1000 && backend === 'fallback') {
      console.log(`\n(${n} children left out for the fallback back-end: a thread each)`)
      continue
    }
    rows.push({ api: `spawnSupervised (${backend})`, children: n, ...(await scenario(n, viaProcward)) })
    rows.push({ api: 'child_process.spawn', children: n, ...(await scenario(n, viaChildProcess)) })
  }
  console.log(`\n## Scale: concurrent children, then all SIGKILLed at once (RLIMIT_NOFILE ${limit})\n`)
  table(rows, Object.keys(rows[0]))
}
