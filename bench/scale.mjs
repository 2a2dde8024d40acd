// 1000 concurrent children: memory and fds per child, and the event-loop
// delay while they all die at once — spawnSupervised vs child_process.
import { spawn } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { fmt, table } from './util.mjs'

const require = createRequire(import.meta.url)
const { spawnSupervised } = require('../index.js')

const fds = () => readdirSync('/proc/self/fd').length
const threads = () => readdirSync('/proc/self/task').length

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
  for (let i = 0; i < n; i++) kids.push(start())
  await new Promise((r) => setTimeout(r, 200))
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

export async function run() {
  const n = 1000
  const rows = []
  const backend = process.env.PROCWARD_EXIT_WATCH === 'fallback' ? 'fallback' : 'pidfd'
  rows.push({
    api: `spawnSupervised (${backend})`,
    ...(await scenario(n, () => spawnSupervised('sleep', ['1000'], { stdio: 'ignore' }))),
  })
  rows.push({
    api: 'child_process.spawn',
    ...(await scenario(n, () => {
      const c = spawn('sleep', ['1000'], { stdio: 'ignore' })
      c.exited = new Promise((r) => c.once('exit', r))
      return c
    })),
  })
  console.log(`\n## Scale: ${n} concurrent children, then all SIGKILLed at once\n`)
  table(rows, Object.keys(rows[0]))
}
