// Spawn+exit throughput and JS-thread time per spawn call: spawnSupervised
// vs child_process.spawn, same program, same run.
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { fmt, ratio, stats, table } from './util.mjs'

const require = createRequire(import.meta.url)
const { spawnSupervised } = require('../index.js')

async function sequential(start, n) {
  const callUs = []
  const t0 = performance.now()
  for (let i = 0; i < n; i++) {
    const c0 = performance.now()
    const wait = start()
    callUs.push((performance.now() - c0) * 1000)
    await wait
  }
  const secs = (performance.now() - t0) / 1000
  return { perSec: n / secs, call: stats(callUs) }
}

const viaProcward = () => spawnSupervised('/bin/true', [], { stdio: 'ignore' }).exited
const viaChildProcess = () => {
  const c = spawn('/bin/true', [], { stdio: 'ignore' })
  return new Promise((r) => c.once('exit', r))
}

export async function run() {
  const n = 500
  await sequential(viaProcward, 50)
  await sequential(viaChildProcess, 50)
  // Interleave rounds so drift on a shared machine hits both alike.
  const res = { procward: [], cp: [] }
  for (let round = 0; round < 3; round++) {
    res.procward.push(await sequential(viaProcward, n))
    res.cp.push(await sequential(viaChildProcess, n))
  }
  const best = (xs) => xs.reduce((a, b) => (b.perSec > a.perSec ? b : a))
  const pw = best(res.procward)
  const cp = best(res.cp)
  console.log(`\n## Spawn: /bin/true, sequential spawn → exit, best of 3 rounds of ${n}\n`)
  table(
    [
      {
        api: 'spawnSupervised',
        'spawns/s': fmt(pw.perSec, 0),
        'JS-thread µs/call p50': fmt(pw.call.p50, 0),
        p99: fmt(pw.call.p99, 0),
      },
      {
        api: 'child_process.spawn',
        'spawns/s': fmt(cp.perSec, 0),
        'JS-thread µs/call p50': fmt(cp.call.p50, 0),
        p99: fmt(cp.call.p99, 0),
      },
    ],
    ['api', 'spawns/s', 'JS-thread µs/call p50', 'p99'],
  )
  console.log(
    `\nthroughput: ${ratio(pw.perSec, cp.perSec)} of child_process; JS-thread time per call: ${ratio(pw.call.p50, cp.call.p50)} of child_process`,
  )
}
