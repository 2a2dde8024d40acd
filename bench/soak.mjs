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
// expected 0; fds, RSS and the JS heap sampled along the way (after a GC,
// every 5 000 cycles at most) with their least-squares slope per 10 000
// cycles, and a line every 50 000 cycles (10 000 for runs under 200 000):
// RSS, its file-backed and anonymous parts (smaps_rollup), the main malloc
// arena (brk [heap]), glibc's other arenas (64 MiB-aligned anonymous heaps
// in /proc/self/smaps: count and resident MiB), V8's heap (resident,
// committed, its young generation, used), the rest of the anonymous memory
// (thread stacks, malloc's mmapped chunks), external and array buffers, fds
// and threads. At the end the RSS slope per 100 000 cycles after cycle
// 200 000 (after the first fifth for shorter runs), against issue 26's
// bound of 1 MiB per 100 000.
import fs from 'node:fs'
import { createRequire } from 'node:module'
import v8 from 'node:v8'
import { fmt, table, target } from './util.mjs'

const require = createRequire(import.meta.url)
const { isProcessRunning, spawnSupervised, stopSupervisedProcess, waitForExit } = require('../index.js')

const argAt = process.argv.indexOf('--cycles')
const CYCLES = Number(argAt >= 0 ? process.argv[argAt + 1] : (process.env.BENCH_SOAK_CYCLES ?? 100_000))
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 4)
// About 100 samples, one every 5 000 cycles at most, on a divisor of 10 000
// from 1 000 cycles up (the table of the first cycles is every 10 000), or
// SOAK_SAMPLE_EVERY. Each sample forces a full GC, which bounds what V8's
// young generation allocates (and so touches) between two GCs: its resident
// size depends on this.
const SAMPLE_EVERY =
  Number(process.env.SOAK_SAMPLE_EVERY) ||
  ((raw) => [5000, 2000, 1000].find((d) => raw >= d) ?? raw)(Math.max(1, Math.round(CYCLES / 100)))
const PRINT_EVERY = CYCLES >= 200_000 ? 50_000 : 10_000
// Issue 26: after 200 000 cycles, RSS may grow by 1 MiB per 100 000 at most.
const SLOPE_FROM = CYCLES >= 300_000 ? 200_000 : Math.round(CYCLES / 5)
const MiB = 2 ** 20
const ARENA_HEAP = 64 * MiB // glibc's HEAP_MAX_SIZE on 64-bit: a non-main arena's heap, aligned to its size
const TAG = `soak-${process.pid}`
const TAGGED_ENV = { ...process.env, PROCWARD_BENCH_TAG: TAG }
const STUCK_MS = 10_000

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const fdCount = () => fs.readdirSync('/proc/self/fd').length

/** kB figures of /proc/self/smaps_rollup, by name. */
function rollup() {
  const out = {}
  for (const m of fs.readFileSync('/proc/self/smaps_rollup', 'latin1').matchAll(/^(\w+):\s+(\d+) kB/gm)) {
    out[m[1]] = Number(m[2])
  }
  return out
}

/**
 * Where malloc's memory sits, from /proc/self/smaps: the main arena's brk
 * heap ([heap]) and glibc's other arenas, each a 64 MiB-aligned anonymous
 * reservation of 64 MiB (read-write head, PROT_NONE rest; an arena that
 * outgrows one heap chains another, counted as one more here). Resident MiB.
 */
function mallocMaps() {
  const text = fs.readFileSync('/proc/self/smaps', 'latin1')
  const maps = []
  for (const m of text.matchAll(
    /^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+ *(.*)\n(?:(?![0-9a-f]+-)[^\n]*\n)*?Rss:\s+(\d+) kB/gm,
  )) {
    maps.push({ start: BigInt(`0x${m[1]}`), end: BigInt(`0x${m[2]}`), perms: m[3], path: m[4], rssKiB: Number(m[5]) })
  }
  let brkKiB = 0
  let arenas = 0
  let arenaKiB = 0
  const heap = BigInt(ARENA_HEAP)
  for (let i = 0; i < maps.length; i++) {
    const a = maps[i]
    if (a.path === '[heap]') brkKiB += a.rssKiB
    if (a.path !== '' || a.perms !== 'rw-p' || a.start % heap !== 0n) continue
    let end = a.end
    let kib = a.rssKiB
    const b = maps[i + 1]
    if (b && b.path === '' && b.perms === '---p' && b.start === a.end) {
      end = b.end
      kib += b.rssKiB
    }
    if (end - a.start === heap) {
      arenas++
      arenaKiB += kib
    }
  }
  return { brkMiB: brkKiB / 1024, arenas, arenaMiB: arenaKiB / 1024 }
}

/** V8's heap: resident (physical) MiB of all its spaces, and its young generation's committed MiB. */
function v8Spaces() {
  const spaces = v8.getHeapSpaceStatistics()
  return {
    v8PhysMiB: spaces.reduce((a, sp) => a + sp.physical_space_size, 0) / MiB,
    newSpaceMiB: spaces.find((sp) => sp.space_name === 'new_space').space_size / MiB,
  }
}

const threadCount = () => Number(/^Threads:\s+(\d+)/m.exec(fs.readFileSync('/proc/self/status', 'latin1'))?.[1])

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
    const r = rollup()
    samples.push({
      cycle,
      secs: (performance.now() - t0) / 1000,
      fds: fdCount(),
      threads: threadCount(),
      rssMiB: m.rss / MiB,
      fileMiB: (r.Rss - r.Anonymous) / 1024,
      anonMiB: r.Anonymous / 1024,
      ...mallocMaps(),
      heapTotalMiB: m.heapTotal / MiB,
      ...v8Spaces(),
      heapUsedMiB: m.heapUsed / MiB,
      externalMiB: m.external / MiB,
      arrayBuffersMiB: m.arrayBuffers / MiB,
      heapMiB: (m.heapUsed + m.external) / MiB,
    })
  }
  const columns = [
    'cycle',
    's',
    'RSS MiB',
    'file',
    'anon',
    'brk heap',
    'arenas',
    'V8 phys',
    'rest',
    'V8 heap',
    'new sp.',
    'heapUsed',
    'external',
    'arrayBuf',
    'fds',
    'threads',
  ]
  const widths = columns.map((c) => Math.max(c.length, 7))
  const line = (cells) => `  ${cells.map((c, i) => String(c).padStart(widths[i])).join('  ')}`
  const row = (s) =>
    line([
      s.cycle,
      fmt(s.secs, 0),
      fmt(s.rssMiB, 1),
      fmt(s.fileMiB, 1),
      fmt(s.anonMiB, 1),
      fmt(s.brkMiB, 1),
      `${s.arenas}/${fmt(s.arenaMiB, 1)}`,
      fmt(s.v8PhysMiB, 1),
      fmt(s.anonMiB - s.brkMiB - s.arenaMiB - s.v8PhysMiB, 1),
      fmt(s.heapTotalMiB, 1),
      fmt(s.newSpaceMiB, 1),
      fmt(s.heapUsedMiB, 1),
      fmt(s.externalMiB, 2),
      fmt(s.arrayBuffersMiB, 2),
      s.fds,
      s.threads,
    ])
  console.log(
    `Every ${PRINT_EVERY} cycles, after a GC (MiB; file/anon: RSS's file-backed and anonymous parts; brk heap: the main malloc arena; arenas: glibc's other arenas, count/resident; V8 phys: V8's heap resident; rest: anon less those three (thread stacks, malloc's mmapped chunks, V8's code and other pages); V8 heap: committed, of it new sp.: the young generation's semi-spaces; heapUsed: live):\n`,
  )
  console.log(line(columns))
  console.log(line(widths.map((w) => '-'.repeat(w))))
  let started = 0
  let done = 0
  const t0 = performance.now()
  sample(0)
  console.log(row(samples[0]))
  const worker = async () => {
    while (started < CYCLES) {
      started++
      const kind = pick()
      count(kind, await cycles[kind]())
      done++
      if (done % SAMPLE_EVERY === 0 || done % PRINT_EVERY === 0) sample(done)
      if (done % PRINT_EVERY === 0) console.log(row(samples[samples.length - 1]))
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  if (samples[samples.length - 1].cycle !== done) sample(done)
  if (done % PRINT_EVERY !== 0) console.log(row(samples[samples.length - 1]))
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
  // Where the warm-up's growth went: the finer samples up to the later of 100 000 cycles and the slope's start.
  const early = samples.filter((s) => s.cycle <= Math.max(100_000, SLOPE_FROM) && s.cycle % 10_000 === 0)
  if (early.length > 2 && CYCLES >= 200_000) {
    console.log('\nThe first cycles, every 10 000:\n')
    console.log(line(columns))
    console.log(line(widths.map((w) => '-'.repeat(w))))
    for (const s of early) console.log(row(s))
  }
  console.log(`zombies among our children at the end: ${zombies.length}`)
  console.log(`tagged processes left behind: ${left.length}${left.length ? ` (killed: ${left.join(' ')})` : ''}`)
  const wrong = [...tally.entries()].filter(([key]) => /stuck|wrong/.test(key)).reduce((a, [, n]) => a + n, 0)
  target(
    'soak: 0 zombies, 0 left behind, no wrong answers',
    `${zombies.length} zombies, ${left.length} left behind, ${wrong} stuck or wrong, ${done} cycles`,
    zombies.length === 0 && left.length === 0 && wrong === 0,
  )
  const fdSlope = per10k('fds')
  target(
    'soak: fds flat (|slope| < 1 fd per 10 000 cycles)',
    `fds ${fmt(fdSlope, 3)} per 10 000 cycles`,
    Math.abs(fdSlope) < 1,
  )
  const late = samples.filter((s) => s.cycle >= SLOPE_FROM)
  const lateSlope = (key) =>
    slope(
      late.map((s) => s.cycle),
      late.map((s) => s[key]),
    ) * 100_000
  const rssLate = lateSlope('rssMiB')
  console.log(
    `\nRSS slope after cycle ${SLOPE_FROM} (${late.length} samples): ${fmt(rssLate, 3)} MiB per 100 000 cycles` +
      ` (anon ${fmt(lateSlope('anonMiB'), 3)}, file ${fmt(lateSlope('fileMiB'), 3)}, brk heap ${fmt(lateSlope('brkMiB'), 3)},` +
      ` arenas ${fmt(lateSlope('arenaMiB'), 3)}, V8 resident ${fmt(lateSlope('v8PhysMiB'), 3)})`,
  )
  target(
    `soak: RSS slope after ${SLOPE_FROM} cycles <= 1 MiB per 100 000 cycles`,
    `${fmt(rssLate, 3)} MiB per 100 000 cycles over ${done - SLOPE_FROM} cycles`,
    late.length >= 3 ? rssLate <= 1 : null,
  )
}
