// pnpm bench supervisor: keeping a daemon running, procward's Supervisor
// beside pm2 (autorestart, restart_delay 0, its own PM2_HOME in a temp dir)
// and the hand-written pattern (child_process + an 'exit' listener that
// spawns again), all supervising the same HTTP daemon: a tiny C program
// (bench/c/serve.c, compiled at bench time; bench/serve.py without cc) that
// listens at exec, so what is measured is the supervisor, not a runtime's
// start-up. Each contender on its own port, kills interleaved round by round.
//
//   kill -9 → new child: from the SIGKILL to the replacement's spawn
//   kill -9 → serving:   from the SIGKILL until a new pid answers on the port
//   bare spawn → ready:  child_process.spawn until it answers (the floor)
//   successor:           the supervisor SIGKILLed, a new one started: has
//                        the orphan been stopped, and does the successor serve?
//   crash cycles:        a child that leaves a background worker and exits at
//                        once, restarted 1000 times: zombies, strays left in
//                        its group, event-loop delay of the supervising process
import { execFileSync as cpExecSync, spawn as cpSpawn } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { freePort, get, servedBy } from './http.mjs'
import { compiled } from './peers.mjs'
import { fmt, now, ratio, stats, table, target } from './util.mjs'

const require = createRequire(import.meta.url)
const here = path.dirname(fileURLToPath(import.meta.url))
const procward = require('../index.js')
const SUPERVISOR_PROCESS = path.join(here, '..', '__test__', 'fixtures', 'supervisor-process.cjs')
const NODE = process.execPath
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 50)
const CYCLES = Number(process.env.BENCH_CYCLES ?? 1000)
const ms = (ns) => Number(ns) / 1e6
const sleep = (t) => new Promise((r) => setTimeout(r, t))

function pickDaemon() {
  const c = compiled('serve')
  if (c.path) return { label: 'a C daemon (bench/c/serve.c)', argv: (port) => [c.path, '--port', String(port)] }
  try {
    // The interpreter itself: a version manager's shim may cost a second a start.
    const py = cpExecSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).trim()
    const script = path.join(here, 'serve.py')
    return {
      label: `a python3 daemon (bench/serve.py; ${c.why})`,
      argv: (port) => [py, script, '--port', String(port)],
    }
  } catch {
    const script = path.join(here, '..', '__test__', 'fixtures', 'http-daemon.cjs')
    return {
      label: `a Node daemon (no cc, no python3: Node's start-up is in every figure)`,
      argv: (port) => [NODE, script, '--port', String(port)],
    }
  }
}

function alive(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
    const st = s[s.lastIndexOf(')') + 2]
    return st !== 'Z' && st !== 'X'
  } catch {
    return false
  }
}

/** Daemons left as orphans by the successor scenarios: killed at the end whatever happens. */
const orphans = new Set()
/** Environment tags of the crash cycles: what still carries one is killed at the end. */
const tags = new Set()

function killQuietly(pid, sig = 'SIGKILL') {
  try {
    process.kill(pid, sig)
  } catch {}
}

/** Our zombie children right now. */
function zombieChildren() {
  let n = 0
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue
    try {
      const s = fs.readFileSync(`/proc/${e}/stat`, 'latin1')
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ')
      if (f[0] === 'Z' && Number(f[1]) === process.pid) n++
    } catch {}
  }
  return n
}

/** Live processes whose environment carries `tag`. */
function tagged(tag) {
  const needle = Buffer.from(`PROCWARD_BENCH_TAG=${tag}\0`)
  const out = []
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue
    try {
      if (fs.readFileSync(`/proc/${e}/environ`).includes(needle) && alive(Number(e))) out.push(Number(e))
    } catch {}
  }
  return out
}

// ---- the three contenders ---------------------------------------------------------

function procwardContender(command, args, env, extra = {}) {
  const sup = new procward.Supervisor({
    command,
    args,
    spawn: { env, stdio: 'ignore' },
    backoff: { initialMs: 0, stepMs: 0 },
    crashLoop: { maxRestarts: 2 ** 31 - 1 },
    ...extra,
  })
  let onSpawn = null
  sup.on('spawn', () => onSpawn?.(now()))
  return {
    name: 'procward',
    async start() {
      await sup.start()
    },
    pid: () => sup.child?.pid ?? null,
    nextSpawn: () => new Promise((r) => (onSpawn = r)),
    async stop() {
      await sup.stop({ signal: 'SIGKILL' })
    },
  }
}

function handWrittenContender(command, args, env) {
  let child = null
  let stopped = false
  let onSpawn = null
  const start = () => {
    child = cpSpawn(command, args, { stdio: 'ignore', env })
    onSpawn?.(now())
    child.on('exit', () => {
      if (!stopped) start()
    })
  }
  return {
    name: 'child_process + exit',
    async start() {
      start()
    },
    pid: () => child?.pid ?? null,
    nextSpawn: () => new Promise((r) => (onSpawn = r)),
    async stop() {
      stopped = true
      if (child && child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r))
        child.kill('SIGKILL')
        await exited
      }
    },
  }
}

let pm2 = null
let pm2Home = null
export function loadPm2() {
  if (pm2 !== null) return pm2
  pm2Home = fs.mkdtempSync(path.join(os.tmpdir(), 'procward-bench-pm2-'))
  process.env.PM2_HOME = pm2Home
  try {
    pm2 = require('pm2')
  } catch {
    pm2 = false
  }
  return pm2
}
const p2 = (fn, ...args) =>
  new Promise((resolve, reject) => fn.call(pm2, ...args, (e, v) => (e ? reject(e) : resolve(v))))

/** The pm2 daemon's pid, from its pid file. */
function pm2DaemonPid() {
  try {
    return Number(fs.readFileSync(path.join(pm2Home, 'pm2.pid'), 'utf8'))
  } catch {
    return null
  }
}

let pm2Counter = 0
export function pm2Contender(command, args, env) {
  const name = `bench-${process.pid}-${++pm2Counter}`
  let bus = null
  let onSpawn = null
  return {
    name: 'pm2',
    async start() {
      await p2(pm2.connect)
      bus = await p2(pm2.launchBus)
      bus.on('process:event', (d) => {
        // The daemon stamps events with its Date.now(): same clock, 1 ms resolution.
        if (d.process?.name === name && d.event === 'online') onSpawn?.(BigInt(d.at) * 1_000_000n)
      })
      await p2(pm2.start, {
        script: command,
        args,
        name,
        interpreter: 'none',
        autorestart: true,
        restart_delay: 0,
        min_uptime: 0,
        max_restarts: 2 ** 31 - 1,
        env,
      })
    },
    pid: () => null, // asked through describe() where needed
    async pidNow() {
      const d = await p2(pm2.describe, name)
      return d[0]?.pid ?? null
    },
    nextSpawn: () => new Promise((r) => (onSpawn = (t) => r(t))),
    wallClock: true,
    async stop() {
      await p2(pm2.delete, name).catch(() => {})
      bus?.close?.()
      pm2.disconnect()
    },
  }
}

// ---- measurements -------------------------------------------------------------------

/** One bare spawn of the daemon until it answers, then killed: ms. */
async function bareSpawnToReady(argv, port) {
  const t0 = now()
  const c = cpSpawn(argv[0], argv.slice(1), { stdio: 'ignore' })
  await servedBy(port, null)
  const took = ms(now() - t0)
  const exited = new Promise((r) => c.once('exit', r))
  c.kill('SIGKILL')
  await exited
  return took
}

/**
 * Every contender started on its own port, then ROUNDS rounds in which each
 * in turn has its daemon SIGKILLed (and the bare spawn runs once): per
 * contender, stats of kill → spawn and kill → serving (ms).
 */
async function killLoops(entries, bare) {
  for (const e of entries) {
    await e.contender.start()
    e.pid = await servedBy(e.port, null)
    e.toSpawn = []
    e.toServe = []
  }
  const bareMs = []
  try {
    for (let i = 0; i < ROUNDS; i++) {
      for (const e of entries) {
        const { contender, port } = e
        e.pid = (await get(port)) ?? e.pid
        const spawned = contender.nextSpawn()
        const wall = BigInt(Date.now()) * 1_000_000n
        const t0 = now()
        process.kill(e.pid, 'SIGKILL')
        const at = await spawned
        e.toSpawn.push(contender.wallClock ? ms(at - wall) : ms(at - t0))
        e.pid = await servedBy(port, e.pid)
        e.toServe.push(ms(now() - t0))
      }
      bareMs.push(await bareSpawnToReady(bare.argv, bare.port))
    }
  } finally {
    for (const e of entries) await e.contender.stop()
  }
  return { rows: entries.map((e) => ({ spawn: stats(e.toSpawn), serve: stats(e.toServe) })), bare: stats(bareMs) }
}

async function crashCycles(makeContender, tag) {
  // A child that leaves a worker in its group and exits at once.
  tags.add(tag)
  const env = { ...process.env, PROCWARD_BENCH_TAG: tag }
  const c = makeContender('sh', ['-c', 'sleep 1000 & exit 1'], env)
  let spawns = 0
  let done
  const finished = new Promise((r) => (done = r))
  const count = () => {
    spawns++
    if (spawns >= CYCLES) done()
    else c.nextSpawn().then(count)
  }
  c.nextSpawn().then(count)
  const h = monitorEventLoopDelay({ resolution: 1 })
  h.enable()
  const t0 = now()
  // Sampled while it runs: a child between its exit and its reap is a
  // zombie for a moment by design (procward sweeps its group first).
  let seenZombies = 0
  const zombieWatch = setInterval(() => {
    seenZombies = Math.max(seenZombies, zombieChildren())
  }, 50)
  await c.start()
  const timeout = sleep(120_000).then(() => 'timeout')
  const outcome = await Promise.race([finished, timeout])
  const elapsed = ms(now() - t0)
  clearInterval(zombieWatch)
  h.disable()
  await c.stop()
  await sleep(200)
  const strays = tagged(tag)
  for (const p of strays) killQuietly(p)
  return {
    cycles: spawns,
    seconds: elapsed / 1000,
    timedOut: outcome === 'timeout',
    zombiesSeen: seenZombies,
    zombiesLeft: zombieChildren(),
    strays: strays.length,
    p99: h.percentile(99) / 1e6,
  }
}

/** Supervisor SIGKILLed, successor started: orphan stopped? successor serving? */
async function successorProcward(daemon, port) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procward-bench-'))
  const stateFile = path.join(dir, 'state.json')
  const [command, ...args] = daemon.argv(port)
  const options = {
    command,
    args,
    ready: { port },
    stateFile,
    spawn: { parentDeathSignal: false, stdio: 'ignore' },
  }
  const pred = cpSpawn(NODE, [SUPERVISOR_PROCESS, path.join(here, '..', 'index.js'), JSON.stringify(options)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  pred.stdout.on('data', (d) => (out += d))
  while (!out.includes('"started"')) await sleep(5)
  const orphan = await get(port)
  orphans.add(orphan)
  pred.kill('SIGKILL')
  await new Promise((r) => pred.once('exit', r))
  const t0 = now()
  const succ = new procward.Supervisor(options)
  await succ.start()
  const served = await get(port)
  const elapsed = ms(now() - t0)
  const result = { orphanStopped: !alive(orphan), serving: served === succ.child?.pid, ms: elapsed }
  await succ.stop()
  fs.rmSync(dir, { recursive: true, force: true })
  return result
}

async function successorHandWritten(daemon, port) {
  // The pattern has no record: a successor knows nothing of the orphan.
  const env = { ...process.env }
  const [command, ...args] = daemon.argv(port)
  const script = `
    const { spawn } = require('node:child_process')
    const start = () => spawn(${JSON.stringify(command)}, ${JSON.stringify(args)}, { stdio: 'ignore' }).on('exit', start)
    start(); setInterval(() => {}, 1e9)`
  const pred = cpSpawn(NODE, ['-e', script], { stdio: 'ignore', env })
  let orphan = null
  while (orphan === null) {
    orphan = await get(port)
    await sleep(5)
  }
  orphans.add(orphan)
  pred.kill('SIGKILL')
  await new Promise((r) => pred.once('exit', r))
  const succ = handWrittenContender(command, args, env)
  await succ.start()
  await sleep(1000)
  const served = await get(port)
  const result = { orphanStopped: !alive(orphan), serving: served !== null && served !== orphan, ms: Number.NaN }
  await succ.stop()
  killQuietly(orphan)
  return result
}

async function successorPm2(daemon, port) {
  const [command, ...args] = daemon.argv(port)
  const c = pm2Contender(command, args, { ...process.env })
  await c.start()
  const orphan = await servedBy(port, null)
  orphans.add(orphan)
  const daemonPid = pm2DaemonPid()
  pm2.disconnect()
  killQuietly(daemonPid)
  while (alive(daemonPid)) await sleep(5)
  const t0 = now()
  // The successor: a new pm2 daemon, started as `pm2 start` would.
  const succ = pm2Contender(command, args, { ...process.env })
  // Its client does not always come back after its daemon was killed (seen
  // here about one run in two with the C daemon): bounded.
  const started = await Promise.race([succ.start().then(() => true), sleep(20_000).then(() => false)])
  if (!started) {
    killQuietly(orphan)
    return { orphanStopped: false, serving: false, ms: Number.NaN, why: 'pm2 start did not return within 20 s' }
  }
  await sleep(1000)
  const served = await get(port)
  const result = {
    orphanStopped: !alive(orphan),
    serving: served !== null && served !== orphan,
    ms: served !== null && served !== orphan ? ms(now() - t0) : Number.NaN,
  }
  await succ.stop()
  killQuietly(orphan)
  return result
}

export async function killPm2Daemon() {
  if (!pm2) return
  // Bounded: its client does not always answer once its daemon was killed.
  const bounded = (promise) => Promise.race([promise.catch(() => {}), sleep(10_000)])
  await bounded(p2(pm2.connect))
  await bounded(p2(pm2.killDaemon))
  pm2.disconnect()
  const pid = pm2DaemonPid()
  if (pid !== null && alive(pid)) killQuietly(pid)
  for (let i = 0; i < 400 && pid !== null && alive(pid); i++) await sleep(5)
  fs.rmSync(pm2Home, { recursive: true, force: true })
}

export async function run() {
  const daemon = pickDaemon()
  console.log(`\n## supervisor: kill -9 of ${daemon.label}, ${ROUNDS} interleaved rounds (ms)\n`)
  const hasPm2 = loadPm2() !== false
  if (!hasPm2) console.log('(pm2 is not installed: its column is skipped)')
  try {
    const env = { ...process.env }
    const entries = []
    const add = async (make, extra) => {
      const port = await freePort()
      const [command, ...args] = daemon.argv(port)
      entries.push({ contender: make(command, args, env, extra?.(port)), port })
    }
    await add(procwardContender, (port) => ({ ready: { port } }))
    await add(handWrittenContender)
    if (hasPm2) await add(pm2Contender)
    const barePort = await freePort()
    const bare = { argv: daemon.argv(barePort), port: barePort }
    const measured = await killLoops(entries, bare)
    const rows = entries.map(({ contender }, i) => {
      const r = measured.rows[i]
      return {
        supervisor: contender.name,
        'spawn p50': fmt(r.spawn.p50),
        'spawn p95': fmt(r.spawn.p95),
        'serving p50': fmt(r.serve.p50),
        'serving p95': fmt(r.serve.p95),
        'p95 vs procward': ratio(r.serve.p95, measured.rows[0].serve.p95),
      }
    })
    rows.push({
      supervisor: 'bare spawn → serving',
      'serving p50': fmt(measured.bare.p50),
      'serving p95': fmt(measured.bare.p95),
    })
    table(rows, ['supervisor', 'spawn p50', 'spawn p95', 'serving p50', 'serving p95', 'p95 vs procward'])
    console.log("\n(pm2's spawn times come from its own Date.now() stamps: 1 ms resolution.)")
    const pw = measured.rows[0].serve
    const peers = entries
      .slice(1)
      .map(({ contender }, i) => `${contender.name} ${fmt(measured.rows[i + 1].serve.p95)}`)
      .join(', ')
    target(
      'Supervisor kill -9 → serving p95 ≤ 5 ms',
      `p95 ${fmt(pw.p95)} ms, p50 ${fmt(pw.p50)} ms (p95 of ${peers}; bare spawn ${fmt(measured.bare.p95)})`,
      pw.p95 <= 5,
    )
    // Issue 26's restart targets, against the others in this run.
    const hw = measured.rows[1].serve
    target(
      'restart kill -9 → serving p95 ≤ hand-written child_process loop',
      `${fmt(pw.p95)} vs ${fmt(hw.p95)} ms (${ratio(pw.p95, hw.p95)}); p50 ${fmt(pw.p50)} vs ${fmt(hw.p50)}`,
      pw.p95 <= hw.p95,
    )
    const pm = hasPm2 ? measured.rows[2].serve : null
    target(
      'restart kill -9 → serving p50 ≤ 0.6× pm2',
      pm
        ? `${fmt(pw.p50)} vs ${fmt(pm.p50)} ms (${ratio(pw.p50, pm.p50)}); p95 ${fmt(pw.p95)} vs ${fmt(pm.p95)}`
        : 'pm2 is not installed',
      pm ? pw.p50 <= 0.6 * pm.p50 : null,
    )

    console.log('\n## supervisor SIGKILLed, a successor started\n')
    const srows = []
    const sp = await successorProcward(daemon, await freePort())
    srows.push({ supervisor: 'procward (takeover stop)', ...yes(sp) })
    srows.push({ supervisor: 'child_process + exit', ...yes(await successorHandWritten(daemon, await freePort())) })
    if (hasPm2) srows.push({ supervisor: 'pm2', ...yes(await successorPm2(daemon, await freePort())) })
    table(srows, ['supervisor', 'orphan stopped', 'successor serves', 'ms'])

    console.log(`\n## ${CYCLES} crash/restart cycles (a child leaving a worker in its group)\n`)
    const crows = []
    const makers = [
      ['procward', (c, a, e) => procwardContender(c, a, e)],
      ['child_process + exit', handWrittenContender],
      ...(hasPm2 ? [['pm2', pm2Contender]] : []),
    ]
    for (const [name, make] of makers) {
      const r = await crashCycles(make, `${name.replace(/\W/g, '')}-${process.pid}`)
      crows.push({
        supervisor: name,
        cycles: `${r.cycles}${r.timedOut ? ' (timed out)' : ''}`,
        seconds: fmt(r.seconds, 1),
        'zombies seen': r.zombiesSeen,
        'zombies left': r.zombiesLeft,
        'strays left': r.strays,
        'loop delay p99 ms': fmt(r.p99),
      })
    }
    table(crows, [
      'supervisor',
      'cycles',
      'seconds',
      'zombies seen',
      'zombies left',
      'strays left',
      'loop delay p99 ms',
    ])
    console.log(
      "\n(pm2 runs its daemons in a process of its own: its zombies and loop delay are not this process's; strays are counted system-wide by tag.)",
    )
  } finally {
    await killPm2Daemon()
    for (const pid of orphans) if (pid !== null && alive(pid)) killQuietly(pid)
    // pm2 went on restarting its crashing app until its daemon died.
    for (const tag of tags) for (const pid of tagged(tag)) killQuietly(pid)
  }
}

function yes(r) {
  return {
    'orphan stopped': r.orphanStopped ? 'yes' : 'no',
    'successor serves': r.serving ? 'yes' : `no (${r.why ?? 'port held by the orphan'})`,
    ms: fmt(r.ms),
  }
}
