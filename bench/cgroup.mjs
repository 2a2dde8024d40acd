// Containment's cost: spawn+exit throughput, JS-thread time per spawn call,
// and SIGKILL → 'exit' latency of spawnSupervised with and without
// `cgroup: true`, rounds interleaved in one run, ratios printed. A contained
// exit also kills the cgroup, waits for `populated 0` and removes it before
// the reap. Skipped, with the reason, where cgroupSupport() says no.
import { createRequire } from 'node:module'
import { fmt, now, ratio, stats, table, us } from './util.mjs'

const require = createRequire(import.meta.url)
const { cgroupSupport, spawnSupervised } = require('../index.js')

async function throughput(options, n) {
  const callUs = []
  const t0 = performance.now()
  for (let i = 0; i < n; i++) {
    const c0 = performance.now()
    const p = spawnSupervised('/bin/true', [], { stdio: 'ignore', ...options })
    callUs.push((performance.now() - c0) * 1000)
    await p.exited
  }
  const secs = (performance.now() - t0) / 1000
  return { perSec: n / secs, call: stats(callUs) }
}

async function latency(options, n) {
  const out = []
  for (let i = 0; i < n; i++) {
    const p = spawnSupervised('sleep', ['100'], { stdio: 'ignore', ...options })
    await new Promise((r) => setTimeout(r, 2))
    const done = new Promise((resolve) => p.once('exit', () => resolve(now())))
    const t0 = now()
    process.kill(p.pid, 'SIGKILL')
    out.push(us((await done) - t0))
  }
  return stats(out)
}

export async function run() {
  const support = cgroupSupport()
  console.log('\n## Containment: spawnSupervised with and without cgroup: true\n')
  if (!support.available) {
    console.log(`not measured: ${support.reason}`)
    return
  }
  const plain = {}
  const contained = { cgroup: true }
  const n = 300
  const m = 150
  await throughput(plain, 30)
  await throughput(contained, 30)
  const res = { tp: [], tc: [], lp: [], lc: [] }
  for (let round = 0; round < 3; round++) {
    res.tp.push(await throughput(plain, n))
    res.tc.push(await throughput(contained, n))
    res.lp.push(await latency(plain, m))
    res.lc.push(await latency(contained, m))
  }
  const bestT = (xs) => xs.reduce((a, b) => (b.perSec > a.perSec ? b : a))
  const bestL = (xs) => xs.reduce((a, b) => (b.p50 < a.p50 ? b : a))
  const [tp, tc, lp, lc] = [bestT(res.tp), bestT(res.tc), bestL(res.lp), bestL(res.lc)]
  console.log(
    `/bin/true sequential spawn → exit (best of 3 rounds of ${n}); sleep SIGKILL → 'exit' (best of 3 rounds of ${m})\n`,
  )
  table(
    [
      ['without cgroup', tp, lp],
      ['cgroup: true', tc, lc],
    ].map(([api, t, l]) => ({
      api,
      'spawns/s': fmt(t.perSec, 0),
      'JS-thread µs/call p50': fmt(t.call.p50, 0),
      'exit p50 µs': fmt(l.p50, 0),
      'exit p99 µs': fmt(l.p99, 0),
    })),
    ['api', 'spawns/s', 'JS-thread µs/call p50', 'exit p50 µs', 'exit p99 µs'],
  )
  console.log(
    `\ncgroup vs without: throughput ${ratio(tc.perSec, tp.perSec)}; JS-thread time per call (p50) ${ratio(tc.call.p50, tp.call.p50)}; exit latency (p50) ${ratio(lc.p50, lp.p50)}`,
  )
}
