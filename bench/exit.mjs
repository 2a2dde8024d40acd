// SIGKILL → 'exit' latency: how long after the kill the JS side hears of the
// exit (procward: reaped and group swept; child_process: reaped).
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { fmt, now, stats, table, us } from './util.mjs'

const require = createRequire(import.meta.url)
const { spawnSupervised } = require('../index.js')

async function latency(startChild, n) {
  const out = []
  for (let i = 0; i < n; i++) {
    const { pid, onExit } = startChild()
    await new Promise((r) => setTimeout(r, 2))
    const done = new Promise((resolve) => onExit(() => resolve(now())))
    const t0 = now()
    process.kill(pid, 'SIGKILL')
    out.push(us((await done) - t0))
  }
  return stats(out)
}

const procward = () => {
  const p = spawnSupervised('sleep', ['100'], { stdio: 'ignore' })
  return { pid: p.pid, onExit: (cb) => p.once('exit', cb) }
}
const childProcess = () => {
  const c = spawn('sleep', ['100'], { stdio: 'ignore' })
  return { pid: c.pid, onExit: (cb) => c.once('exit', cb) }
}

export async function run() {
  const n = 200
  await latency(procward, 20)
  await latency(childProcess, 20)
  const rows = []
  const a = []
  const b = []
  for (let round = 0; round < 2; round++) {
    a.push(await latency(procward, n))
    b.push(await latency(childProcess, n))
  }
  const best = (xs) => xs.reduce((x, y) => (y.p50 < x.p50 ? y : x))
  for (const [name, s] of [
    ['spawnSupervised exit event', best(a)],
    ['child_process exit event', best(b)],
  ]) {
    rows.push({ api: name, 'p50 µs': fmt(s.p50, 0), 'p99 µs': fmt(s.p99, 0), 'max µs': fmt(s.max, 0), n: s.n })
  }
  console.log(`\n## Exit delivery: SIGKILL → 'exit' in JS (${n} kills, best of 2 rounds)\n`)
  table(rows, ['api', 'p50 µs', 'p99 µs', 'max µs', 'n'])
}
