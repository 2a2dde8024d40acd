// `pnpm bench split`: where one spawnSupervised('/bin/true') call's
// JS-thread time goes, step by step, in thread CPU time and in wall time,
// beside the C floor (posix_spawn, bench/c/spawn-floor.c) and Bun.spawn's
// call (wall) in the same run, rounds interleaved. Then where one exit's
// time goes, from the SIGKILL to the awaiting code (the loop back-end,
// under Node), beside the same path in C (bench/c/exit-floor.c),
// child_process and Bun.spawn, and without the reaper's safety net.
//
// Needs the bench-only build with timestamps (Cargo feature `spawn-trace`,
// src/spawn_trace.rs), put beside the release one:
//
//   pnpm exec napi build --platform --no-js --release --features spawn-trace \
//     --output-dir target/spawn-trace --dts spawn-trace.d.ts
//   node --expose-gc bench/index.mjs split
//
// It loads that binary in place of ../binding.js (so run `split` alone, as
// the first benchmark), and runs spawnSupervised's own steps one by one
// with lib's functions (validate, nativeSpawnOptions, SupervisedProcess),
// marking the JS thread's clocks between them; the native steps mark
// themselves. Each mark costs a clock read or two (measured here, and taken
// off each step).

import { spawn as cpSpawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { bunRound, compiled, exitFloorRound, floorRound } from './peers.mjs'
import { fmt, quantile, table } from './util.mjs'

const require = createRequire(import.meta.url)
const here = dirname(fileURLToPath(import.meta.url))
const TRACE_BINARY =
  process.env.PROCWARD_TRACE_BINARY ?? join(here, '..', 'target', 'spawn-trace', 'procward.linux-x64-gnu.node')

// Native slots (src/spawn_trace.rs), then the JS ones.
const N = { entry: 0, command: 1, prepared: 2, beforeClone: 3, afterClone: 4, spawned: 5, registered: 6 }
Object.assign(N, { onLoop: 7, besideLoop: 8, ret: 9 })
const J = { start: 10, options: 11, returned: 12, built: 13 }
// The exit's: native (src/spawn_trace.rs), then JS (the listener, the
// awaiting code).
const X = { readable: 16, settled: 17, call: 18, tidied: 19, listener: 20, resumed: 21, kill: 22 }
// An exit the reaper delivers (no JS loop: under Bun): its shared table,
// read here as slots 100 on.
const R = { woke: 100, settled: 101, called: 102 }

/** The steps: [label, from slot, to slot, marks inside (native, JS) to take off]. */
const STEPS = [
  ['JS: command, args, options (validate, nativeSpawnOptions)', J.start, J.options, 'js'],
  ['N-API call + napi-rs argument conversion', J.options, N.entry, 'js'],
  ['Command: stdio specs (environ: not copied here)', N.entry, N.command, 'native'],
  ['prepare: CStrings (environ straight in), PATH lookup, /dev/null', N.command, N.prepared, 'native'],
  ['up to clone: main-thread check, signals blocked, ChildArgs', N.prepared, N.beforeClone, 'native'],
  ['clone + wait for the child’s execve (vfork)', N.beforeClone, N.afterClone, 'native'],
  ['after clone: signal mask restored', N.afterClone, N.spawned, 'native'],
  ['identity seed (fstat pidfd), Watched registered', N.spawned, N.registered, 'native'],
  ["JS loop: pidfd into the loop's epoll, listener ref, async context", N.registered, N.onLoop, 'native'],
  ['reaper: pidfd into its epoll', N.onLoop, N.besideLoop, 'native'],
  ['NativeChild built', N.besideLoop, N.ret, 'native'],
  ['return: napi-rs wraps NativeChild', N.ret, J.returned, 'native'],
  ['JS: SupervisedProcess, its promise, pipes, live map', J.returned, J.built, 'js'],
]

function loadTraced() {
  if (!existsSync(TRACE_BINARY)) return null
  const bindingPath = require.resolve('../binding.js')
  const cached = require.cache[bindingPath]
  const traced = require(TRACE_BINARY)
  if (cached && cached.exports !== traced) {
    throw new Error('bench split loads the spawn-trace build in place of binding.js: run it alone (first)')
  }
  require.cache[bindingPath] = { id: bindingPath, filename: bindingPath, loaded: true, exports: traced }
  return traced
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length
const median = (xs) =>
  quantile(
    [...xs].sort((a, b) => a - b),
    0.5,
  )

/** Per-call cost (ns, thread CPU and wall) of `fn`, median of batches. */
function perCallNs(native, fn, { batches = 15, per = 5000 } = {}) {
  for (let i = 0; i < per; i++) fn()
  const cpu = []
  const wall = []
  for (let b = 0; b < batches; b++) {
    const [c0, w0] = native.spawnTraceNow()
    for (let i = 0; i < per; i++) fn()
    const [c1, w1] = native.spawnTraceNow()
    cpu.push((c1 - c0) / per)
    wall.push((w1 - w0) / per)
  }
  return { cpu: median(cpu), wall: median(wall) }
}

export async function run() {
  console.log('\n## Split: one spawnSupervised(/bin/true) call on the JS thread, step by step\n')
  const native = loadTraced()
  if (!native?.spawnTraceTake) {
    console.log(`not measured: no spawn-trace build at ${TRACE_BINARY} (see bench/split.mjs for the command)`)
    return
  }
  const validate = require('../lib/validate.js')
  const { nativeSpawnOptions } = require('../lib/spawn-options.js')
  const { SupervisedProcess, spawnSupervised, nativeEnv } = require('../lib/supervised.js')

  // The step-by-step copy of spawnSupervised (lib/supervised.js), marked.
  const live = new Map()
  const mark = native.spawnTraceMark
  function tracedSpawn(command, args, options) {
    mark(J.start)
    validate.nonEmptyString(command, 'command')
    args = args === undefined || args === null ? [] : validate.stringArray(args, 'args')
    const opts = nativeSpawnOptions(options)
    if (opts.abortSignal?.aborted) throw new Error('aborted')
    let proc = null
    let early = null
    let pid = null
    const spawn = {}
    const onExit = (code, signal) => {
      const info = { code, signal }
      if (live.get(pid) === spawn) live.delete(pid)
      if (proc) proc._onNativeExit(info)
      else early = info
    }
    mark(J.options)
    const n = opts.native
    const env = nativeEnv(n.env)
    const handle = native.spawnSupervised(command, [...args], n.flags, n.stdio, n.deathSignal, env, n.extra, onExit)
    mark(J.returned)
    pid = native.childPid(handle)
    if (early === null) live.set(pid, spawn)
    proc = new SupervisedProcess(handle, pid, opts.stopDefaults, opts.abortSignal, opts.pipes, opts.terminal)
    if (early) proc._onNativeExit(early)
    mark(J.built)
    return proc
  }

  // What a mark costs: native (two clock reads) and from JS (an N-API call too).
  const noop = perCallNs(native, () => native.spawnTraceNoop())
  const jsMark = perCallNs(native, () => mark(15))
  const markCosts = Array.from({ length: 15 }, () => native.spawnTraceMarkCost())
  const nativeMark = { cpu: median(markCosts.map((c) => c[0])), wall: median(markCosts.map((c) => c[1])) }
  const cost = { js: jsMark, native: nativeMark }

  const samples = [] // per spawn: { step label → [cpu ns, wall ns] }, total
  const whole = [] // the real spawnSupervised, between two JS marks
  const floor = { call: [], cpu: [] }
  const bun = []
  const spawnOne = async (traced) => {
    if (traced) {
      native.spawnTraceTake()
      const p = tracedSpawn('/bin/true', [], { stdio: 'ignore' })
      const t = native.spawnTraceTake()
      await p.exited
      return t
    }
    mark(J.start)
    const p = spawnSupervised('/bin/true', [], { stdio: 'ignore' })
    mark(J.built)
    const t = native.spawnTraceTake()
    await p.exited
    return t
  }
  const n = 400
  const rounds = 5
  for (let i = 0; i < 50; i++) await spawnOne(true)
  for (let round = 0; round < rounds; round++) {
    globalThis.gc?.()
    for (let i = 0; i < n; i++) {
      samples.push(await spawnOne(true))
      whole.push(await spawnOne(false))
    }
    const f = await floorRound(n)
    if (f) {
      floor.call.push(...f.callUs)
      floor.cpu.push(...(f.cpuUs ?? []))
    }
    const b = await bunRound('spawn', n)
    if (b) bun.push(...b.callUs)
  }

  const at = (t, slot) => [t[2 * slot], t[2 * slot + 1]]
  const rows = []
  let sumCpu = 0
  let sumWall = 0
  for (const [label, from, to, kind] of STEPS) {
    const cpu = []
    const wall = []
    for (const t of samples) {
      const [c0, w0] = at(t, from)
      const [c1, w1] = at(t, to)
      if (!c0 || !c1) continue
      cpu.push((c1 - c0 - cost[kind].cpu) / 1000)
      wall.push((w1 - w0 - cost[kind].wall) / 1000)
    }
    if (cpu.length === 0) continue
    sumCpu += mean(cpu)
    sumWall += mean(wall)
    rows.push({
      step: label,
      'CPU µs mean': fmt(mean(cpu), 1),
      'CPU p50': fmt(median(cpu), 1),
      'wall µs mean': fmt(mean(wall), 1),
      'wall p50': fmt(median(wall), 1),
    })
  }
  const marks = STEPS.length
  const total = (pick) => samples.map((t) => (at(t, J.built)[pick] - at(t, J.start)[pick]) / 1000)
  const wholeOf = (pick) => whole.map((t) => (at(t, J.built)[pick] - at(t, J.start)[pick] - cost.js.cpu) / 1000)
  rows.push({
    step: 'sum of the steps',
    'CPU µs mean': fmt(sumCpu, 1),
    'CPU p50': '',
    'wall µs mean': fmt(sumWall, 1),
    'wall p50': '',
  })
  rows.push({
    step: `traced call, ${marks + 1} marks included`,
    'CPU µs mean': fmt(mean(total(0)), 1),
    'CPU p50': fmt(median(total(0)), 1),
    'wall µs mean': fmt(mean(total(1)), 1),
    'wall p50': fmt(median(total(1)), 1),
  })
  rows.push({
    step: 'spawnSupervised itself (native marks inside)',
    'CPU µs mean': fmt(mean(wholeOf(0)), 1),
    'CPU p50': fmt(median(wholeOf(0)), 1),
    'wall µs mean': fmt(mean(wholeOf(1)), 1),
    'wall p50': fmt(median(wholeOf(1)), 1),
  })
  rows.push({
    step: 'an empty N-API call',
    'CPU µs mean': fmt(noop.cpu / 1000, 2),
    'CPU p50': '',
    'wall µs mean': fmt(noop.wall / 1000, 2),
    'wall p50': '',
  })
  if (floor.call.length) {
    rows.push({
      step: 'C floor: posix_spawn call (bench/c/spawn-floor.c)',
      'CPU µs mean': floor.cpu.length ? fmt(mean(floor.cpu), 1) : '-',
      'CPU p50': floor.cpu.length ? fmt(median(floor.cpu), 1) : '-',
      'wall µs mean': fmt(mean(floor.call), 1),
      'wall p50': fmt(median(floor.call), 1),
    })
  } else {
    console.log(`C floor: not measured (${compiled('spawn-floor').why})`)
  }
  if (bun.length) {
    rows.push({
      step: 'Bun.spawn call (under Bun; wall only)',
      'CPU µs mean': '-',
      'CPU p50': '-',
      'wall µs mean': fmt(mean(bun), 1),
      'wall p50': fmt(median(bun), 1),
    })
  }
  console.log(
    `${samples.length} traced spawns → exit, ${rounds} rounds interleaved with the C floor and Bun; each step less one mark (native ${fmt(nativeMark.cpu / 1000, 2)} µs CPU, from JS ${fmt(jsMark.cpu / 1000, 2)} µs CPU)\n`,
  )
  table(rows, ['step', 'CPU µs mean', 'CPU p50', 'wall µs mean', 'wall p50'])
  await exitSplit(native, spawnSupervised, cost.js.wall)
}

/**
 * One exit on the JS loop, step by step: `sleep 100` spawned, SIGKILLed
 * 2 ms later, its `'exit'` awaited. Marks (wall ns) from the kill on;
 * `net` off: spawned without the reaper's safety net (bench build only).
 */
async function exitOne(native, spawnSupervised, net) {
  native.spawnTraceSafetyNet(net)
  let p
  try {
    p = spawnSupervised('sleep', ['100'], { stdio: 'ignore' })
  } finally {
    native.spawnTraceSafetyNet(true)
  }
  await new Promise((r) => setTimeout(r, 2))
  const heard = new Promise((resolve) =>
    p.once('exit', () => {
      native.spawnTraceMark(X.listener)
      resolve()
    }),
  )
  native.spawnTraceTake()
  native.spawnTraceTakeShared()
  // The native clock, which the reaper's marks share (Bun's hrtime need not).
  native.spawnTraceMark(X.kill)
  process.kill(p.pid, 'SIGKILL')
  await heard
  native.spawnTraceMark(X.resumed)
  const t = native.spawnTraceTake()
  const r = native.spawnTraceTakeShared()
  // The reaper's marks, as slots of their own (their clock is the same).
  const wall = (slot) => (slot >= R.woke ? r[2 * (slot - R.woke) + 1] : t[2 * slot + 1])
  return { t0: wall(X.kill), wall, backend: p.exitWatch }
}

/** child_process's SIGKILL → 'exit' (µs), the same way. */
async function cpExitOne() {
  const c = cpSpawn('sleep', ['100'], { stdio: 'ignore' })
  await new Promise((r) => setTimeout(r, 2))
  const heard = new Promise((resolve) => c.once('exit', () => resolve(process.hrtime.bigint())))
  const t0 = process.hrtime.bigint()
  process.kill(c.pid, 'SIGKILL')
  return Number((await heard) - t0) / 1000
}

const SETTLE = 'settle: exit seen (waitid WNOWAIT), group swept (killpg), reaped (waitid)'
const EXIT_STEPS = {
  pidfd: [
    ['kill → the loop finds the pidfd readable (the kernel: the exit, the wake)', null, X.readable],
    [SETTLE, X.readable, X.settled],
    ['the child out of the loop, the pidfd closed', X.settled, X.tidied],
    ["the listener's argument, napi_make_callback entered", X.tidied, X.call],
    ["JS: the child's exit handler, 'exit' emitted, the listener", X.call, X.listener],
    ['the awaiting code resumed (microtasks)', X.listener, X.resumed],
  ],
  'pidfd-tokio': [
    ["kill → the reaper's epoll returns (the kernel: the exit, the wake)", null, R.woke],
    [SETTLE, R.woke, R.settled],
    ["threadsafe call → the JS thread runs the child's exit handler, the listener", R.settled, X.listener],
    ['the awaiting code resumed (microtasks)', X.listener, X.resumed],
    ['(on the reaper: the threadsafe call itself)', R.settled, R.called],
  ],
}

async function exitSplit(native, spawnSupervised, jsMarkWall) {
  if (!native.spawnTraceSafetyNet) return
  console.log("\n## Split: one SIGKILL → 'exit', step by step (wall)\n")
  const n = 200
  const rounds = 3
  const withNet = []
  const withoutNet = []
  const cp = []
  const floor = []
  const bun = []
  let backend = null
  for (let i = 0; i < 20; i++) backend = (await exitOne(native, spawnSupervised, true)).backend
  // Off the JS loop the reaper is the watch: no safety net to leave out.
  const loop = backend === 'pidfd' // on the JS loop
  for (let round = 0; round < rounds; round++) {
    globalThis.gc?.()
    for (let i = 0; i < n; i++) {
      withNet.push(await exitOne(native, spawnSupervised, true))
      if (loop) withoutNet.push(await exitOne(native, spawnSupervised, false))
      cp.push(await cpExitOne())
    }
    const f = await exitFloorRound(n)
    if (f) floor.push(...f.latUs)
    const b = await bunRound('exit', n)
    if (b) bun.push(...b.latUs)
  }
  const step = (samples, from, to) =>
    samples
      .map((s) => ((to === null ? s.t0 : s.wall(to)) - (from === null ? s.t0 : s.wall(from))) / 1000)
      .filter((us) => us > 0 && us < 1e6)
  const rows = []
  const row = (label, a, b) =>
    rows.push({
      step: label,
      'p50 µs': a.length ? fmt(median(a), 1) : '-',
      'mean µs': a.length ? fmt(mean(a), 1) : '-',
      'p50 µs, no safety net': b?.length ? fmt(median(b), 1) : '',
    })
  const other = (from, to) => (loop ? step(withoutNet, from, to) : null)
  for (const [label, from, to] of EXIT_STEPS[backend] ?? []) row(label, step(withNet, from, to), other(from, to))
  row(
    'kill → the awaiting code resumed (traced, marks included)',
    step(withNet, null, X.resumed),
    other(null, X.resumed),
  )
  row("child_process: kill → 'exit' listener", cp)
  if (floor.length) row('C: kill → reaped (epoll on the pidfd, waitid, killpg, waitid)', floor)
  else console.log(`C floor: not measured (${compiled('exit-floor').why})`)
  if (bun.length) row('Bun.spawn: kill → exited resolved (under Bun)', bun)
  console.log(
    `${withNet.length} traced kills${loop ? ' each way' : ''}, exit watch ${backend}, ${rounds} rounds interleaved with child_process, the C floor and Bun; a JS mark costs ${fmt(jsMarkWall / 1000, 2)} µs (not taken off)\n`,
  )
  table(rows, ['step', 'p50 µs', 'mean µs', 'p50 µs, no safety net'])
}
