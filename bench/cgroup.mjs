// Containment's cost: spawn+exit throughput, JS-thread time per spawn call,
// and SIGKILL → 'exit' latency of spawnSupervised with and without
// `cgroup: true`, rounds interleaved in one run, ratios printed. A contained
// exit also kills the cgroup, waits for `populated 0` and removes it before
// the reap. Skipped, with the reason, where cgroupSupport() says no.
import { createRequire } from 'node:module'
import { killToExit, procwardSleep } from './exit.mjs'
import { compiled, jsonOf } from './peers.mjs'
import { bestOfInterleaved, fmt, ratio, sequential, stats, table, target } from './util.mjs'

const require = createRequire(import.meta.url)
const { cgroupSupport, spawnSupervised } = require('../index.js')

const trueWith = (options) => () => spawnSupervised('/bin/true', [], { stdio: 'ignore', ...options }).exited

export async function run() {
  const support = cgroupSupport()
  console.log('\n## Containment: spawnSupervised with and without cgroup: true\n')
  if (!support.available) {
    const why = `not measured: ${support.reason} (needs cgroup v2 delegated to this user, or root)`
    console.log(why)
    target('cgroup: true throughput cost ≤ 10 %', why, null)
    target("cgroup: true SIGKILL → 'exit' p50 cost ≤ 60 µs", why, null)
    return
  }
  const contained = { cgroup: true }
  const n = 300
  const m = 150
  const tput = await bestOfInterleaved(
    { plain: (k) => sequential(trueWith({}), k), contained: (k) => sequential(trueWith(contained), k) },
    { n, warm: 30 },
  )
  const lat = await bestOfInterleaved(
    { plain: (k) => killToExit(procwardSleep({}), k), contained: (k) => killToExit(procwardSleep(contained), k) },
    { n: m, warm: 15 },
  )
  console.log(
    `/bin/true sequential spawn → exit (best of 3 interleaved rounds of ${n}, figure by figure); sleep SIGKILL → 'exit' (best of 3 interleaved rounds of ${m}, figure by figure)\n`,
  )
  table(
    [
      ['without cgroup', tput.plain, lat.plain],
      ['cgroup: true', tput.contained, lat.contained],
    ].map(([api, t, l]) => ({
      api,
      'spawns/s': fmt(t.perSec, 0),
      'JS-thread µs/call mean': fmt(t.call.mean, 0),
      p50: fmt(t.call.p50, 0),
      'exit p50 µs': fmt(l.p50, 0),
      'exit p95 µs': fmt(l.p95, 0),
    })),
    ['api', 'spawns/s', 'JS-thread µs/call mean', 'p50', 'exit p50 µs', 'exit p95 µs'],
  )
  const [tp, tc, lp, lc] = [tput.plain, tput.contained, lat.plain, lat.contained]
  console.log(
    `\ncgroup vs without: throughput ${ratio(tc.perSec, tp.perSec)}; JS-thread time per call (mean) ${ratio(tc.call.mean, tp.call.mean)}; exit latency (p50) ${ratio(lc.p50, lp.p50)}`,
  )
  await kernelFloor(support.parent, m)
  const cost = 1 - tc.perSec / tp.perSec
  target(
    'cgroup: true throughput cost ≤ 10 %',
    `${fmt(tc.perSec, 0)} vs ${fmt(tp.perSec, 0)} spawns/s (${ratio(tc.perSec, tp.perSec)}, ${fmt(cost * 100, 0)} % less)`,
    cost <= 0.1,
  )
  const gap = lc.p50 - lp.p50
  target(
    "cgroup: true SIGKILL → 'exit' p50 cost ≤ 60 µs",
    `${fmt(lc.p50, 0)} vs ${fmt(lp.p50, 0)} µs (${gap >= 0 ? '+' : ''}${fmt(gap, 0)} µs)`,
    gap <= 60,
  )
}

/**
 * What the kernel itself takes for a cgroup per child, with no library in
 * between (bench/c/cgroup-floor.c, under the same parent): the mkdir and
 * rmdir, and SIGKILL → pidfd readable with and without a fresh cgroup.
 */
async function kernelFloor(parent, n) {
  const { path, why } = compiled('cgroup-floor')
  if (!path) {
    console.log(`\nkernel floor (C): not measured: ${why}`)
    return
  }
  const r = await jsonOf(path, [parent, String(n)])
  const [mk, rm, ex, exc] = [r.mkdirUs, r.rmdirUs, r.exitUs, r.exitContainedUs].map(stats)
  console.log(
    `\nkernel floor (C, ${n} rounds, same parent, p50): mkdir ${fmt(mk.p50, 0)} µs + rmdir ${fmt(rm.p50, 0)} µs per child; SIGKILL → pidfd readable ${fmt(exc.p50, 0)} µs in a fresh cgroup vs ${fmt(ex.p50, 0)} µs without (+${fmt(exc.p50 - ex.p50, 0)} µs)`,
  )
}
