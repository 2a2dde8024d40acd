// Spawn+exit throughput and JS-thread time per spawn call: spawnSupervised
// vs child_process.spawn vs Bun.spawn (under Bun, same program) vs the C
// floor (posix_spawn + waitpid, bench/c/spawn-floor.c), rounds interleaved
// in the same run.
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { bunRound, compiled, floorRound } from './peers.mjs'
import { bestOfInterleaved, fmt, ratio, rowsOf, sequential, summarise, table, target } from './util.mjs'

const require = createRequire(import.meta.url)
const { spawnSupervised } = require('../index.js')

/** A peer's round (raw samples printed as JSON) summarised as our own. */
const viaPeer = (round) => async (n) => {
  const r = await round(n)
  return r && summarise(r.secs, r.callUs)
}

const viaProcward = () => spawnSupervised('/bin/true', [], { stdio: 'ignore' }).exited
const viaChildProcess = () => {
  const c = spawn('/bin/true', [], { stdio: 'ignore' })
  return new Promise((r) => c.once('exit', r))
}

export async function run() {
  const n = 500
  const best = await bestOfInterleaved(
    {
      procward: (k) => sequential(viaProcward, k),
      cp: (k) => sequential(viaChildProcess, k),
      bun: viaPeer((k) => bunRound('spawn', k)),
      floor: viaPeer(floorRound),
    },
    { n, warm: 50 },
  )
  const rows = rowsOf(
    [
      ['spawnSupervised', best.procward],
      ['child_process.spawn', best.cp],
      ['Bun.spawn (under Bun)', best.bun],
      ['C posix_spawn + waitpid', best.floor],
    ],
    (r) => ({
      'spawns/s': fmt(r.perSec, 0),
      'vs procward': ratio(r.perSec, best.procward.perSec),
      'µs/call mean': fmt(r.call.mean, 0),
      p50: fmt(r.call.p50, 0),
      p99: fmt(r.call.p99, 0),
    }),
  )
  console.log(
    `\n## Spawn: /bin/true, sequential spawn → exit, best of 3 interleaved rounds of ${n}, figure by figure\n`,
  )
  table(rows, ['api', 'spawns/s', 'vs procward', 'µs/call mean', 'p50', 'p99'])
  console.log('\n(µs/call: JS-thread time of the spawn call; for C, of the posix_spawn call.)')
  if (!best.floor) console.log(`C floor: not measured (${compiled('spawn-floor').why})`)
  const pw = best.procward
  if (best.cp) {
    console.log(
      `vs child_process: throughput ${ratio(pw.perSec, best.cp.perSec)}; JS-thread time per call (mean) ${ratio(pw.call.mean, best.cp.call.mean)}`,
    )
  }
  if (best.floor) {
    console.log(
      `vs the C floor: throughput ${ratio(pw.perSec, best.floor.perSec)}; time per call (mean) ${ratio(pw.call.mean, best.floor.call.mean)}`,
    )
  }
  const b = best.bun
  if (!b) {
    target('spawn throughput ≥ Bun.spawn', 'no Bun for this machine', null)
    target('spawn JS-thread µs ≤ Bun.spawn', 'no Bun for this machine', null)
    return
  }
  target(
    'spawn throughput ≥ Bun.spawn',
    `${fmt(pw.perSec, 0)} vs ${fmt(b.perSec, 0)} spawns/s (${ratio(pw.perSec, b.perSec)})`,
    pw.perSec >= b.perSec,
  )
  target(
    'spawn JS-thread µs ≤ Bun.spawn',
    `${fmt(pw.call.mean, 0)} vs ${fmt(b.call.mean, 0)} µs mean (${ratio(pw.call.mean, b.call.mean)})`,
    pw.call.mean <= b.call.mean,
  )
}
