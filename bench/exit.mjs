// SIGKILL → 'exit' latency: how long after the kill the JS side hears of the
// exit (procward: reaped and group swept; child_process: reaped; Bun.spawn
// under Bun: `exited` resolved), and procward loaded under Bun beside
// Bun.spawn in that one Bun process (bench/bun-peer.mjs both-exit, kills
// alternating; procward's back-end there is pidfd-tokio, Bun has no libuv).
// Rounds interleaved in one run.
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { bunRound } from './peers.mjs'
import { bestOfInterleaved, fmt, now, ratio, rowsOf, stats, table, target, us, withPeers } from './util.mjs'

const require = createRequire(import.meta.url)
const { spawnSupervised } = require('../index.js')

/**
 * `n` children started one after another, each SIGKILLed 2 ms after its
 * spawn: µs from the kill until `onExit` fires. `start()` returns { pid, onExit }.
 */
export async function killToExit(start, n) {
  const out = []
  for (let i = 0; i < n; i++) {
    const { pid, onExit } = start()
    await new Promise((r) => setTimeout(r, 2))
    const done = new Promise((resolve) => onExit(() => resolve(now())))
    const t0 = now()
    process.kill(pid, 'SIGKILL')
    out.push(us((await done) - t0))
  }
  return stats(out)
}

/** A `killToExit` contender: spawnSupervised('sleep', ['100']) with `options`. */
export const procwardSleep = (options) => () => {
  const p = spawnSupervised('sleep', ['100'], { stdio: 'ignore', ...options })
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
  const best = await bestOfInterleaved(
    {
      procward: (k) => killToExit(procwardSleep({}), k),
      cp: (k) => killToExit(childProcess, k),
      bun,
      underBun: async (k) => {
        const r = await bunRound('both-exit', k)
        return r && { procward: stats(r.procward.latUs), bun: stats(r.bun.latUs) }
      },
    },
    { n, warm: 20 },
  )
  const rows = rowsOf(
    withPeers(best, ['spawnSupervised exit event', 'child_process exit event', 'Bun.spawn exited']),
    (s) => ({
      'p50 µs': fmt(s.p50, 0),
      'p95 µs': fmt(s.p95, 0),
      'p99 µs': fmt(s.p99, 0),
      'max µs': fmt(s.max, 0),
      n: s.n,
    }),
  )
  console.log(
    `\n## Exit delivery: SIGKILL → 'exit' in JS (${n} kills, best of 3 interleaved rounds, figure by figure)\n`,
  )
  table(rows, ['api', 'p50 µs', 'p95 µs', 'p99 µs', 'max µs', 'n'])
  const pw = best.procward
  if (best.cp) console.log(`\np50 gap to child_process: ${fmt(pw.p50 - best.cp.p50, 0)} µs (negative: procward sooner)`)
  const b = best.bun
  const u = best.underBun
  const gap = (a, z) =>
    `${fmt(a.p50, 0)} vs ${fmt(z.p50, 0)} µs (${a.p50 - z.p50 >= 0 ? '+' : ''}${fmt(a.p50 - z.p50, 0)} µs, ${ratio(a.p50, z.p50)})`
  if (!b) {
    target("SIGKILL → 'exit' p50 ≤ Bun.spawn (procward under Node)", 'no Bun for this machine', null)
    target("SIGKILL → 'exit' p50 ≤ Bun.spawn (one Bun process)", 'no Bun for this machine', null)
    return
  }
  target("SIGKILL → 'exit' p50 ≤ Bun.spawn (procward under Node)", gap(pw, b), pw.p50 <= b.p50)
  if (!u) target("SIGKILL → 'exit' p50 ≤ Bun.spawn (one Bun process)", 'the Bun round failed', null)
  else target("SIGKILL → 'exit' p50 ≤ Bun.spawn (one Bun process)", gap(u.procward, u.bun), u.procward.p50 <= u.bun.p50)
}
