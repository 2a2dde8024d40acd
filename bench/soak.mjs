// pnpm bench soak [--cycles N] (or BENCH_SOAK_CYCLES; default 100 000):
// spawn → exit cycles, SOAK_CONCURRENCY (4) at a time, each one drawn at
// random from:
//   true      /bin/true, to its exit
//   kill      sleep, SIGKILLed after a random 0–3 ms
//   stop      sleep, stopSupervisedProcess (SIGTERM) after a random 0–3 ms
//   escalate  sh ignoring SIGTERM (and its sleep too): the stop's SIGKILL step
//   sweep     a leader that exits at once and leaves a worker in its group
//   stale     an earlier child's pid and identity, long reaped (its pid is
//             likely another process's by now): isProcessRunning and
//             waitForExit must say gone, its handle's stop() must send nothing
// /proc/sys/kernel/pid_max is small on most machines, so pids come round
// again within the run (the wraps are counted). At the end: zombies among
// our children and processes left behind (by an environment tag), both
// expected 0; fds, RSS and the JS heap sampled along the way (after a GC)
// with their least-squares slope per 10 000 cycles.
import fs from 'node:fs'
import { createRequire } from 'node:module'
import { fmt, table, target } from './util.mjs'

const require = createRequire(import.meta.url)
const { isProcessRunning, spawnSupervised, stopSupervisedProcess, waitForExit } = require('../index.js')

const argAt = process.argv.indexOf('--cycles')
const CYCLES = Number(argAt >= 0 ? process.argv[argAt + 1] : (process.env.BENCH_SOAK_CYCLES ?? 100_000))
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 4)
const SAMPLE_EVERY = Math.max(1, Math.round(CYCLES / 100))
const TAG = `soak-${process.pid}`
const TAGGED_ENV = { ...process.env, PROCWARD_BENCH_TAG: TAG }
const STUCK_MS = 10_000

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const fdCount = () => fs.readdirSync('/proc/self/fd').length

/** Resolves to `promise`'s value, or to 'stuck' after STUCK_MS. */
function within(promise) {
  let timer
  const stuck = new Promise((r) => {
    timer = setTimeout(() => r('stuck'), STUCK_MS)
  })
  return Promise.race([promise, stuck]).finally(() => clearTimeout(timer))
}

/** State letter and parent pid of `pid`, or null when gone. */
function statOf(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ')
    return { state: f[0], ppid: Number(f[1]) }
  } catch {
    return null
  }
}

function procPids() {
  return fs
    .readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
}

const zombieChildren = () => procPids().filter((p) => statOf(p)?.state === 'Z' && statOf(p)?.ppid === process.pid)

/** Live (not zombie) processes carrying this run's tag in their environment. */
function strays() {
  const needle = Buffer.from(`PROCWARD_BENCH_TAG=${TAG}\0`)
  return procPids().filter((p) => {
    if (p === process.pid) return false
    try {
      if (!fs.readFileSync(`/proc/${p}/environ`).includes(needle)) return false
    } catch {
      return false
    }
    const st = statOf(p)?.state
    return st !== undefined && st !== 'Z' && st !== 'X'
  })
}

/** Least-squares slope of y over x. */
function slope(xs, ys) {
  const n = xs.length
  const mx = xs.reduce((a, b) => a + b, 0) / n
  const my = ys.reduce((a, b) => a + b, 0) / n
  let num = 0
  let den = 0
  for (let i = 0; i < n; i++) {
    num += (xs[i] - mx) * (ys[i] - my)
    den += (xs[i] - mx) ** 2
  }
  return den === 0 ? 0 : num / den
}

const randomDelay = () => sleep(Math.floor(Math.random() * 4))

/** Reaped children kept for the 'stale' cycles: { child, pid, identity }. */
const reaped = []
let lastPid = 0
let wraps = 0
function remember(child) {
  // Spawns run a few at a time: pids come nearly in order, a wrap is a fall.
  if (child.pid < lastPid - 1000) wraps++
  lastPid = child.pid
  if (reaped.length < 512) reaped.push(child)
  else reaped[Math.floor(Math.random() * reaped.length)] = child
}

/** One cycle of `kind`: resolves to an outcome word (counted) once everything it started is gone. */
const cycles = {
  async true() {
    const p = spawnSupervised('/bin/true', [], { stdio: 'ignore' })
    const e = await within(p.exited)
    remember(p)
    return e === 'stuck' ? 'stuck' : `code ${e.code}`
  },
  async kill() {
    const p = spawnSupervised('sleep', ['10'], { stdio: 'ignore' })
    await randomDelay()
    p.kill('SIGKILL')
    const e = await within(p.exited)
    remember(p)
    return e === 'stuck' ? 'stuck' : (e.signal ?? `code ${e.code}`)
  },
  async stop() {
    const p = spawnSupervised('sleep', ['10'], { stdio: 'ignore' })
    await randomDelay()
    const r = await within(stopSupervisedProcess(p, { graceMs: 2000 }))
    remember(p)
    return r === 'stuck' ? 'stuck' : r.outcome
  },
  async escalate() {
    const p = spawnSupervised('sh', ['-c', 'trap "" TERM; sleep 10; :'], { stdio: 'ignore', env: TAGGED_ENV })
    await randomDelay()
    const r = await within(p.stop({ graceMs: 5 }))
    remember(p)
    return r === 'stuck' ? 'stuck' : r.outcome
  },
  async sweep() {
    const p = spawnSupervised('sh', ['-c', 'sleep 10 & exit 3'], { stdio: 'ignore', env: TAGGED_ENV })
    const e = await within(p.exited)
    remember(p)
    return e === 'stuck' ? 'stuck' : `code ${e.code}`
  },
  async stale() {
    if (reaped.length === 0) return 'none yet'
    const old = reaped[Math.floor(Math.random() * reaped.length)]
    if (isProcessRunning(old.pid, old.identity)) return 'said alive (wrong)'
    const w = await within(waitForExit(old.pid, { identity: old.identity }))
    if (w === 'stuck') return 'waitForExit stuck (wrong)'
    const r = await within(old.stop({ signal: 'SIGKILL' }))
    if (r === 'stuck' || r.signals.length > 0) return 'stop sent a signal (wrong)'
    const reused = statOf(old.pid) !== null
    return reused ? 'gone, pid in use again' : 'gone'
  },
}
const draw = [
  ['true', 0.35],
  ['kill', 0.2],
  ['stop', 0.15],
  ['escalate', 0.1],
  ['sweep', 0.1],
  ['stale', 0.1],
]
function pick() {
  let x = Math.random()
  for (const [kind, w] of draw) {
    x -= w
    if (x < 0) return kind
  }
  return 'true'
}

export async function run() {
  console.log(
    `\n## Soak: ${CYCLES} spawn → exit cycles, ${CONCURRENCY} at a time (random kills, stops, sweeps, stale pids)\n`,
  )
  if (!Number.isInteger(CYCLES) || CYCLES < 1) throw new Error(`--cycles must be a positive integer, got ${CYCLES}`)
  const tally = new Map()
  const count = (kind, outcome) => {
    const key = `${kind}\0${outcome}`
    tally.set(key, (tally.get(key) ?? 0) + 1)
  }
  const samples = []
  const sample = (cycle) => {
    globalThis.gc?.()
    const m = process.memoryUsage()
    samples.push({ cycle, fds: fdCount(), rssMiB: m.rss / 2 ** 20, heapMiB: (m.heapUsed + m.external) / 2 ** 20 })
  }
  let started = 0
  let done = 0
  const t0 = performance.now()
  sample(0)
  const worker = async () => {
    while (started < CYCLES) {
      started++
      const kind = pick()
      count(kind, await cycles[kind]())
      done++
      if (done % SAMPLE_EVERY === 0) sample(done)
      if (done % 10_000 === 0) {
        const s = samples[samples.length - 1]
        console.log(
          `  ${done} cycles, ${fmt((performance.now() - t0) / 1000, 0)} s: ${s.fds} fds, RSS ${fmt(s.rssMiB, 1)} MiB`,
        )
      }
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  if (done % SAMPLE_EVERY !== 0) sample(done)
  const secs = (performance.now() - t0) / 1000
  // The swept workers were SIGKILLed before their leader's reap; init reaps
  // them (late on some machines), so give the zombie-aware check a moment.
  let left = strays()
  for (let i = 0; i < 50 && left.length > 0; i++) {
    await sleep(100)
    left = strays()
  }
  for (const p of left) {
    try {
      process.kill(p, 'SIGKILL')
    } catch {}
  }
  const zombies = zombieChildren()

  table(
    [...tally.entries()]
      .map(([key, n]) => {
        const [kind, outcome] = key.split('\0')
        return { cycle: kind, outcome, count: n }
      })
      .sort((a, b) => a.cycle.localeCompare(b.cycle) || b.count - a.count),
    ['cycle', 'outcome', 'count'],
  )
  console.log(`\n${done} cycles in ${fmt(secs, 1)} s (${fmt(done / secs, 0)}/s); pids came round ${wraps} times`)
  // The first tenth warms up (JIT, allocator pools, the reaper's tables).
  const steady = samples.filter((s) => s.cycle >= CYCLES / 10)
  const per10k = (key) =>
    slope(
      steady.map((s) => s.cycle),
      steady.map((s) => s[key]),
    ) * 10_000
  const first = steady[0]
  const last = samples[samples.length - 1]
  console.log('')
  table(
    [
      ['fds', 'fds', 0, 3],
      ['RSS MiB', 'rssMiB', 1, 3],
      ['JS heap + external MiB', 'heapMiB', 1, 3],
    ].map(([what, key, d, sd]) => ({
      sampled: what,
      start: fmt(samples[0][key], d),
      'after warm-up': fmt(first[key], d),
      end: fmt(last[key], d),
      'slope per 10 000 cycles': fmt(per10k(key), sd),
    })),
    ['sampled', 'start', 'after warm-up', 'end', 'slope per 10 000 cycles'],
  )
  console.log(
    `\n(${samples.length} samples, one per ${SAMPLE_EVERY} cycles after a GC; the slope is a least-squares fit over those from cycle ${CYCLES / 10} on.)`,
  )
  console.log(`zombies among our children at the end: ${zombies.length}`)
  console.log(`tagged processes left behind: ${left.length}${left.length ? ` (killed: ${left.join(' ')})` : ''}`)
  const wrong = [...tally.entries()].filter(([key]) => /stuck|wrong/.test(key)).reduce((a, [, n]) => a + n, 0)
  target(
    'soak: 0 zombies, 0 left behind, no wrong answers',
    `${zombies.length} zombies, ${left.length} left behind, ${wrong} stuck or wrong, ${done} cycles`,
    zombies.length === 0 && left.length === 0 && wrong === 0,
  )
  const fdSlope = per10k('fds')
  const rssSlope = per10k('rssMiB')
  target(
    'soak: fds and RSS flat (|slope| < 1 fd and < 1 MiB per 10 000 cycles)',
    `fds ${fmt(fdSlope, 3)}, RSS ${fmt(rssSlope, 3)} MiB per 10 000 cycles`,
    Math.abs(fdSlope) < 1 && Math.abs(rssSlope) < 1,
  )
}
