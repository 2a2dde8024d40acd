// Spawn+exit throughput and JS-thread time per spawn call: spawnSupervised
// vs child_process.spawn vs Bun.spawn (under Bun, same program) vs the C
// floor (posix_spawn + waitpid, bench/c/spawn-floor.c), rounds interleaved
// in the same run; and procward loaded under Bun beside Bun.spawn in that
// one Bun process (bench/bun-peer.mjs both-spawn, cycles alternating). The
// JS-thread time of a call is its wall time on that thread, both runtimes.
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { bunRound, compiled, floorRound } from './peers.mjs'
import {
  bestOfInterleaved,
  fmt,
  ratio,
  rowsOf,
  sequential,
  summarise,
  table,
  target,
  throughputRow,
  withPeers,
} from './util.mjs'

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
      underBun: async (k) => {
        const r = await bunRound('both-spawn', k)
        return (
          r && { procward: summarise(r.procward.secs, r.procward.callUs), bun: summarise(r.bun.secs, r.bun.callUs) }
        )
      },
      floor: viaPeer(floorRound),
    },
    { n, warm: 50 },
  )
  const rows = rowsOf(
    [
      ...withPeers(best, ['spawnSupervised', 'child_process.spawn', 'Bun.spawn']),
      ['C posix_spawn + waitpid', best.floor],
    ],
    (r) => throughputRow('spawns/s', 'vs procward', ['p50', 'p99'])(r, best),
  )
  console.log(
    `\n## Spawn: /bin/true, sequential spawn → exit, best of 3 interleaved rounds of ${n}, figure by figure\n`,
  )
  table(rows, ['api', 'spawns/s', 'vs procward', 'µs/call mean', 'p50', 'p99'])
  console.log(
    "\n(µs/call: JS-thread (wall) time of the spawn call; for C, of the posix_spawn call. 'one process': procward and Bun.spawn alternating cycle by cycle in one Bun process; 'under Bun': Bun.spawn alone in a Bun process of its own.)",
  )
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
  const f = best.floor
  const floorNote = (perSec, mean) =>
    f
      ? `; C floor ${fmt(f.perSec, 0)}/s, ${fmt(f.call.mean, 0)} µs (${ratio(perSec, f.perSec)}, ${ratio(mean, f.call.mean)})`
      : ''
  const b = best.bun
  if (!b) {
    target('spawn throughput ≥ Bun.spawn (procward under Node)', 'no Bun for this machine', null)
    target('spawn JS-thread µs ≤ Bun.spawn (procward under Node)', 'no Bun for this machine', null)
    target('spawn throughput ≥ Bun.spawn (one Bun process)', 'no Bun for this machine', null)
    target('spawn JS-thread µs ≤ Bun.spawn (one Bun process)', 'no Bun for this machine', null)
    return
  }
  target(
    'spawn throughput ≥ Bun.spawn (procward under Node)',
    `${fmt(pw.perSec, 0)} vs ${fmt(b.perSec, 0)} spawns/s (${ratio(pw.perSec, b.perSec)})${floorNote(pw.perSec, pw.call.mean)}`,
    pw.perSec >= b.perSec,
  )
  target(
    'spawn JS-thread µs ≤ Bun.spawn (procward under Node)',
    `${fmt(pw.call.mean, 0)} vs ${fmt(b.call.mean, 0)} µs mean (${ratio(pw.call.mean, b.call.mean)}; p50 ${fmt(pw.call.p50, 0)} vs ${fmt(b.call.p50, 0)})`,
    pw.call.mean <= b.call.mean,
  )
  const u = best.underBun
  if (!u) {
    target('spawn throughput ≥ Bun.spawn (one Bun process)', 'the Bun round failed', null)
    target('spawn JS-thread µs ≤ Bun.spawn (one Bun process)', 'the Bun round failed', null)
    return
  }
  target(
    'spawn throughput ≥ Bun.spawn (one Bun process)',
    `${fmt(u.procward.perSec, 0)} vs ${fmt(u.bun.perSec, 0)} spawns/s (${ratio(u.procward.perSec, u.bun.perSec)})${floorNote(u.procward.perSec, u.procward.call.mean)}`,
    u.procward.perSec >= u.bun.perSec,
  )
  target(
    'spawn JS-thread µs ≤ Bun.spawn (one Bun process)',
    `${fmt(u.procward.call.mean, 0)} vs ${fmt(u.bun.call.mean, 0)} µs mean (${ratio(u.procward.call.mean, u.bun.call.mean)}; p50 ${fmt(u.procward.call.p50, 0)} vs ${fmt(u.bun.call.p50, 0)})`,
    u.procward.call.mean <= u.bun.call.mean,
  )
}
