// Concurrent children (1000, then 10 000): memory and fds per child, and
// how long until all are reaped, with the event-loop delay meanwhile, after
// they are all SIGKILLed at once — spawnSupervised vs child_process.
//
// 10 000 children need more descriptors than a default soft limit: like a
// user would, the run raises its own RLIMIT_NOFILE with prlimit(1) first
// (the soft limit up to the hard one; root may raise both). Where that is
// not enough, the 10 000 rows are left out and the reason printed.
import { execFileSync, spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { fmt, table } from './util.mjs'

const require = createRequire(import.meta.url)
const { spawnSupervised } = require('../index.js')

const fds = () => readdirSync('/proc/self/fd').length
const threads = () => readdirSync('/proc/self/task').length

/** This process's soft RLIMIT_NOFILE (Node has no getrlimit). */
function nofile() {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'))
  const soft = line?.split(/\s{2,}/)[1]
  return soft === 'unlimited' ? Number.POSITIVE_INFINITY : Number(soft)
}

/** Raises our own RLIMIT_NOFILE to at least `want`, as far as allowed; returns the soft limit then. */
function raiseNofile(want) {
  if (nofile() >= want) return nofile()
  for (const limits of [`${want}:${want}`, `${want}`]) {
    try {
      execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${limits}`], { stdio: 'ignore' })
      break
    } catch {}
  }
  return nofile()
}

/** Memory after a full GC (`pnpm bench` runs node with --expose-gc). */
function settledMemory() {
  globalThis.gc?.()
  globalThis.gc?.()
  const m = process.memoryUsage()
  return { rss: m.rss, js: m.heapUsed + m.external }
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
  // Up to 3 fds a child for either API, plus what Node itself holds.
  const want = 3 * sizes[sizes.length - 1] + 1000
  const limit = raiseNofile(want)
  for (const n of sizes) {
    if (n > 1000 && limit < want) {
      console.log(`\n(${n} children left out: RLIMIT_NOFILE is ${limit}, ${want} wanted, and prlimit could not raise it)`)
      continue
    }
    if (n > 1000 && backend === 'fallback') {
      console.log(`\n(${n} children left out for the fallback back-end: a thread each)`)
      continue
    }
    rows.push({ api: `spawnSupervised (${backend})`, children: n, ...(await scenario(n, viaProcward)) })
    rows.push({ api: 'child_process.spawn', children: n, ...(await scenario(n, viaChildProcess)) })
  }
  console.log('\n## Scale: concurrent children, then all SIGKILLed at once\n')
  table(rows, Object.keys(rows[0]))
}
