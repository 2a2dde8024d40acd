// SIGKILL → 'exit' latency: how long after the kill the JS side hears of the
// exit (procward: reaped and group swept; child_process: reaped; Bun.spawn
// under Bun: `exited` resolved). Rounds interleaved in one run.
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { bunRound } from './peers.mjs'
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
const bun = async (n) => {
  const r = await bunRound('exit', n)
  return r && stats(r.latUs)
}

export async function run() {
  const n = 200
  await latency(procward, 20)
  await latency(childProcess, 20)
  await bun(20)
  const res = { procward: [], cp: [], bun: [] }
  for (let round = 0; round < 3; round++) {
    res.procward.push(await latency(procward, n))
    res.cp.push(await latency(childProcess, n))
    const b = await bun(n)
    if (b) res.bun.push(b)
  }
  const best = (xs) => (xs.length ? xs.reduce((x, y) => (y.p50 < x.p50 ? y : x)) : null)
  const rows = [
    ['spawnSupervised exit event', best(res.procward)],
    ['child_process exit event', best(res.cp)],
    ['Bun.spawn exited (under Bun)', best(res.bun)],
  ]
    .filter(([, s]) => s)
    .map(([api, s]) => ({ api, 'p50 µs': fmt(s.p50, 0), 'p99 µs': fmt(s.p99, 0), 'max µs': fmt(s.max, 0), n: s.n }))
  console.log(`\n## Exit delivery: SIGKILL → 'exit' in JS (${n} kills, best of 3 interleaved rounds)\n`)
  table(rows, ['api', 'p50 µs', 'p99 µs', 'max µs', 'n'])
  const pw = best(res.procward)
  const b = best(res.bun)
  if (b) console.log(`\np50 gap to Bun.spawn: ${fmt(pw.p50 - b.p50, 0)} µs (negative: procward sooner)`)
}
