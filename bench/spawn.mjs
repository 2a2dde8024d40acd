// Spawn+exit throughput and JS-thread time per spawn call: spawnSupervised
// vs child_process.spawn vs Bun.spawn (under Bun, same program, rounds
// interleaved in the same run).
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { bunRound } from './peers.mjs'
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
  return summarise((performance.now() - t0) / 1000, callUs)
}

function summarise(secs, callUs) {
  const mean = callUs.reduce((a, b) => a + b, 0) / callUs.length
  return { perSec: callUs.length / secs, call: { ...stats(callUs), mean } }
}

async function viaBun(n) {
  const r = await bunRound('spawn', n)
  return r && summarise(r.secs, r.callUs)
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
  await viaBun(50)
  // Interleave rounds so drift on a shared machine hits all alike.
  const res = { procward: [], cp: [], bun: [] }
  for (let round = 0; round < 3; round++) {
    res.procward.push(await sequential(viaProcward, n))
    res.cp.push(await sequential(viaChildProcess, n))
    const b = await viaBun(n)
    if (b) res.bun.push(b)
  }
  const best = (xs) => (xs.length ? xs.reduce((a, b) => (b.perSec > a.perSec ? b : a)) : null)
  const rows = [
    ['spawnSupervised', best(res.procward)],
    ['child_process.spawn', best(res.cp)],
    ['Bun.spawn (under Bun)', best(res.bun)],
  ]
    .filter(([, r]) => r)
    .map(([api, r]) => ({
      api,
      'spawns/s': fmt(r.perSec, 0),
      'JS-thread µs/call mean': fmt(r.call.mean, 0),
      p50: fmt(r.call.p50, 0),
      p99: fmt(r.call.p99, 0),
    }))
  console.log(`\n## Spawn: /bin/true, sequential spawn → exit, best of 3 interleaved rounds of ${n}\n`)
  table(rows, ['api', 'spawns/s', 'JS-thread µs/call mean', 'p50', 'p99'])
  const pw = best(res.procward)
  for (const [name, other] of [
    ['child_process', best(res.cp)],
    ['Bun.spawn', best(res.bun)],
  ]) {
    if (!other) {
      console.log(`\n${name}: not measured (no Bun for this machine)`)
      continue
    }
    console.log(
      `\nvs ${name}: throughput ${ratio(pw.perSec, other.perSec)}; JS-thread time per call (mean) ${ratio(pw.call.mean, other.call.mean)}`,
    )
  }
}
