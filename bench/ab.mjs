// Two builds of procward side by side in one process, rounds alternating:
//
//   node --expose-gc bench/ab.mjs <checkout A> [<checkout B>, default: this one] [--rounds 10] [--n 300]
//
// Each checkout's index.js is loaded with its own built addon (two copies
// of procward in one process, each with its own reaper). Per round and
// build: `n` sequential spawnSupervised('/bin/true') → exit cycles; the
// spawn call's JS-thread CPU time (CLOCK_THREAD_CPUTIME_ID, through a
// spawn-trace build's spawnTraceNow when B has one in target/spawn-trace,
// else process.cpuUsage(), which counts every thread) and wall time, and
// the cycles per second. For a commit's before/after numbers.
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { fmt, quantile, table } from './util.mjs'

const require = createRequire(import.meta.url)
const here = dirname(fileURLToPath(import.meta.url))
const args = process.argv.slice(2)
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 ? Number(args[i + 1]) : dflt
}
const dirs = args.filter((a, i) => !a.startsWith('--') && !args[i - 1]?.startsWith('--'))
if (dirs.length < 1) throw new Error('usage: node --expose-gc bench/ab.mjs <checkout A> [<checkout B>]')
const A = resolve(dirs[0])
const B = resolve(dirs[1] ?? join(here, '..'))
const rounds = opt('rounds', 10)
const n = opt('n', 300)

const traceBin = join(B, 'target', 'spawn-trace', 'procward.linux-x64-gnu.node')
const tracer = existsSync(traceBin) ? require(traceBin) : null
const clock = tracer?.spawnTraceNow
  ? () => tracer.spawnTraceNow()[0] / 1000
  : () => {
      const u = process.cpuUsage()
      return u.user + u.system
    }

const builds = [
  ['A', require(join(A, 'index.js'))],
  ['B', require(join(B, 'index.js'))],
]

async function round(pw, k) {
  const cpu = []
  const wall = []
  const t0 = performance.now()
  for (let i = 0; i < k; i++) {
    const c0 = clock()
    const w0 = performance.now()
    const p = pw.spawnSupervised('/bin/true', [], { stdio: 'ignore' })
    const w1 = performance.now()
    cpu.push(clock() - c0)
    wall.push((w1 - w0) * 1000)
    await p.exited
  }
  return { cpu, wall, perSec: k / ((performance.now() - t0) / 1000) }
}

const res = { A: { cpu: [], wall: [], perSec: [] }, B: { cpu: [], wall: [], perSec: [] } }
for (const [, pw] of builds) await round(pw, 50)
for (let r = 0; r < rounds; r++) {
  // Alternate which goes first, so drift within a round hits both alike.
  const order = r % 2 ? [...builds].reverse() : builds
  for (const [name, pw] of order) {
    globalThis.gc?.()
    const x = await round(pw, n)
    res[name].cpu.push(...x.cpu)
    res[name].wall.push(...x.wall)
    res[name].perSec.push(x.perSec)
  }
}
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length
const med = (xs) =>
  quantile(
    [...xs].sort((a, b) => a - b),
    0.5,
  )
console.log(
  `A = ${A}\nB = ${B}\n${rounds} alternating rounds of ${n} spawn → exit cycles; CPU: ${tracer ? 'JS thread (CLOCK_THREAD_CPUTIME_ID)' : 'process.cpuUsage() (all threads)'}\n`,
)
table(
  Object.entries(res).map(([build, r]) => ({
    build,
    'call CPU µs mean': fmt(mean(r.cpu), 1),
    'CPU p50': fmt(med(r.cpu), 1),
    'call wall µs mean': fmt(mean(r.wall), 1),
    'wall p50': fmt(med(r.wall), 1),
    'cycles/s (median round)': fmt(med(r.perSec), 0),
  })),
  ['build', 'call CPU µs mean', 'CPU p50', 'call wall µs mean', 'wall p50', 'cycles/s (median round)'],
)
process.exit()
