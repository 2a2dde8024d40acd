// The Bun side of `pnpm bench spawn` and `pnpm bench exit`, run under Bun by
// those benchmarks (bench/peers.mjs) with the same workload as the Node
// side: `bun bench/bun-peer.mjs <mode> <n>` prints one JSON line of raw
// samples, which the Node side summarises with the same code as its own.
//
//   spawn, exit        Bun.spawn alone (the column beside procward under Node)
//   both-spawn,        procward (loaded under Bun: its tokio back-end, Bun has
//   both-exit          no libuv) and Bun.spawn in this one process, cycle by
//                      cycle alternating: { bun: {...}, procward: {...} }
import { createRequire } from 'node:module'

const [mode, nArg] = process.argv.slice(2)
const n = Number(nArg)
const now = () => Bun.nanoseconds()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const IGNORE = ['ignore', 'ignore', 'ignore']

// Each contender: start() → { pid, exited: Promise, onExit(cb) }.
const bunTrue = () => {
  const p = Bun.spawn(['/bin/true'], { stdio: IGNORE })
  return { pid: p.pid, exited: p.exited, onExit: (cb) => p.exited.then(cb) }
}
const bunSleep = () => {
  const p = Bun.spawn(['sleep', '100'], { stdio: IGNORE })
  return { pid: p.pid, exited: p.exited, onExit: (cb) => p.exited.then(cb) }
}
let procward = null
const load = () => {
  procward ??= createRequire(import.meta.url)('../index.js')
  return procward
}
const procwardTrue = () => {
  const p = load().spawnSupervised('/bin/true', [], { stdio: 'ignore' })
  return { pid: p.pid, exited: p.exited, onExit: (cb) => p.once('exit', cb) }
}
let exitWatch = null
const procwardSleep = () => {
  const p = load().spawnSupervised('sleep', ['100'], { stdio: 'ignore' })
  exitWatch = p.exitWatch
  return { pid: p.pid, exited: p.exited, onExit: (cb) => p.once('exit', cb) }
}

/** One spawn → exit cycle: the call's wall time (µs) and the cycle's (s). */
async function spawnCycle(start) {
  const c0 = now()
  const p = start()
  const c1 = now()
  await p.exited
  return { callUs: (c1 - c0) / 1000, secs: (now() - c0) / 1e9 }
}

/** One child SIGKILLed 2 ms after its spawn: µs from the kill until its exit is heard. */
async function exitCycle(start) {
  const p = start()
  await sleep(2)
  const done = new Promise((resolve) => p.onExit(() => resolve(now())))
  const t0 = now()
  process.kill(p.pid, 'SIGKILL')
  return ((await done) - t0) / 1000
}

async function spawnRound(start) {
  const callUs = []
  const t0 = now()
  for (let i = 0; i < n; i++) callUs.push((await spawnCycle(start)).callUs)
  return { secs: (now() - t0) / 1e9, callUs }
}

async function exitRound(start) {
  const latUs = []
  for (let i = 0; i < n; i++) latUs.push(await exitCycle(start))
  return { latUs }
}

// The both-* modes load procward and run WARM cycles of each before
// measuring: every round is a fresh Bun process, and the first call would
// otherwise carry the addon's load.
const WARM = 10

/** Both in this process, alternating cycle by cycle (who goes first alternates too). */
async function bothSpawn() {
  for (let i = 0; i < WARM; i++) {
    await spawnCycle(procwardTrue)
    await spawnCycle(bunTrue)
  }
  const out = { bun: { secs: 0, callUs: [] }, procward: { secs: 0, callUs: [] } }
  const pair = [
    ['bun', bunTrue],
    ['procward', procwardTrue],
  ]
  for (let i = 0; i < n; i++) {
    for (const [name, start] of i % 2 ? pair : [...pair].reverse()) {
      const c = await spawnCycle(start)
      out[name].secs += c.secs
      out[name].callUs.push(c.callUs)
    }
  }
  return out
}

async function bothExit() {
  for (let i = 0; i < WARM; i++) {
    await exitCycle(procwardSleep)
    await exitCycle(bunSleep)
  }
  const out = { bun: { latUs: [] }, procward: { latUs: [] } }
  const pair = [
    ['bun', bunSleep],
    ['procward', procwardSleep],
  ]
  for (let i = 0; i < n; i++) {
    for (const [name, start] of i % 2 ? pair : [...pair].reverse()) out[name].latUs.push(await exitCycle(start))
  }
  return { ...out, exitWatch }
}

const modes = {
  spawn: () => spawnRound(bunTrue),
  exit: () => exitRound(bunSleep),
  'both-spawn': bothSpawn,
  'both-exit': bothExit,
}
if (!modes[mode] || !(n > 0))
  throw new Error(`usage: bun bench/bun-peer.mjs ${Object.keys(modes).join('|')} <n>, got ${mode}`)
console.log(JSON.stringify(await modes[mode]()))
