// `pnpm bench restart`: what the restart after kill -9 is made of, per
// round, for the Supervisor (without and with a state file) and a
// hand-written child_process loop, rounds interleaved: kill → 'exit' in JS
// (the exit delivery), 'exit' → the new child spawned (the supervisor's
// turn and the spawn call), spawned → serving (the daemon's start and the
// bench's own poll, every 1 ms), and the event loop's delay meanwhile. The
// daemon is bench/c/serve.c, as in `pnpm bench supervisor`. pm2 (when
// installed) restarts the same daemon in the same rounds: its total only,
// since its exit and spawn happen in its own daemon. Issue 26's targets are
// printed at the end: the Supervisor's p95 against the hand-written loop's,
// its p50 against 0.6× pm2's.
import { spawn as cpSpawn } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { freePort, get, servedBy } from './http.mjs'
import { compiled } from './peers.mjs'
import { killPm2Daemon, loadPm2, pm2Contender } from './supervisor.mjs'
import { fmt, now, ratio, stats, table, target } from './util.mjs'

const require = createRequire(import.meta.url)
const procward = require('../index.js')
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 100)
const ms = (ns) => Number(ns) / 1e6
const _sleep = (t) => new Promise((r) => setTimeout(r, t))

/** A contender: start(), stop(), and per restart the times of its 'exit' and its spawn. */
function supervisor(name, command, args, extra) {
  const sup = new procward.Supervisor({
    command,
    args,
    spawn: { env: { ...process.env }, stdio: 'ignore' },
    backoff: { initialMs: 0, stepMs: 0 },
    crashLoop: { maxRestarts: 2 ** 31 - 1 },
    ...extra,
  })
  const c = { name, exitAt: null, spawnAt: null }
  sup.on('exit', () => (c.exitAt = now()))
  sup.on('spawn', () => (c.spawnAt = now()))
  c.start = () => sup.start()
  c.stop = () => sup.stop({ signal: 'SIGKILL' })
  return c
}

function handWritten(command, args) {
  const c = { name: 'child_process + exit', exitAt: null, spawnAt: null }
  let child = null
  let stopped = false
  const env = { ...process.env }
  const start = () => {
    child = cpSpawn(command, args, { stdio: 'ignore', env })
    c.spawnAt = now()
    child.on('exit', () => {
      c.exitAt = now()
      if (!stopped) start()
    })
  }
  c.start = async () => start()
  c.stop = async () => {
    stopped = true
    const exited = new Promise((r) => child.once('exit', r))
    child.kill('SIGKILL')
    await exited
  }
  return c
}

export async function run() {
  const serve = compiled('serve')
  if (!serve.path) {
    console.log(`\n## restart: not measured (${serve.why})`)
    return
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procward-bench-restart-'))
  const entries = []
  const add = async (make) => {
    const port = await freePort()
    entries.push({ c: make(port), port, rows: [], delay: [] })
  }
  const argv = (port) => ['--port', String(port)]
  await add((port) => supervisor('Supervisor', serve.path, argv(port), { ready: { port } }))
  await add((port) =>
    supervisor('Supervisor + stateFile', serve.path, argv(port), {
      ready: { port },
      stateFile: path.join(dir, 'state.json'),
    }),
  )
  await add((port) => handWritten(serve.path, argv(port)))
  if (loadPm2()) {
    await add((port) => {
      const p = pm2Contender(serve.path, argv(port), { ...process.env })
      return { name: 'pm2', exitAt: null, spawnAt: null, totalOnly: true, start: p.start, stop: p.stop }
    })
  }
  const h = monitorEventLoopDelay({ resolution: 1 })
  try {
    for (const e of entries) {
      await e.c.start()
      e.pid = await servedBy(e.port, null)
    }
    for (let i = 0; i < ROUNDS; i++) {
      for (const e of entries) {
        e.pid = (await get(e.port)) ?? e.pid
        e.c.exitAt = null
        e.c.spawnAt = null
        h.reset()
        h.enable()
        const t0 = now()
        process.kill(e.pid, 'SIGKILL')
        e.pid = await servedBy(e.port, e.pid)
        const t1 = now()
        h.disable()
        const { exitAt, spawnAt } = e.c
        e.rows.push(
          e.c.totalOnly
            ? { exit: Number.NaN, spawn: Number.NaN, serve: Number.NaN, total: ms(t1 - t0) }
            : { exit: ms(exitAt - t0), spawn: ms(spawnAt - exitAt), serve: ms(t1 - spawnAt), total: ms(t1 - t0) },
        )
        e.delay.push(h.max / 1e6)
      }
    }
  } finally {
    for (const e of entries) await e.c.stop()
    await killPm2Daemon()
    fs.rmSync(dir, { recursive: true, force: true })
  }
  console.log(`\n## restart after kill -9 of bench/c/serve.c, ${ROUNDS} interleaved rounds: where the time goes (ms)\n`)
  const rows = []
  const totals = {}
  for (const e of entries) {
    totals[e.c.name] = stats(e.rows.map((r) => r.total))
    if (e.c.totalOnly) {
      const t = totals[e.c.name]
      rows.push({
        restart: `${e.c.name} (total only)`,
        'total p50/p95': `${fmt(t.p50)} / ${fmt(t.p95)}`,
        'loop delay max p50/p95': `${fmt(stats(e.delay).p50)} / ${fmt(stats(e.delay).p95)}`,
      })
      continue
    }
    const col = (k) => stats(e.rows.map((r) => r[k]))
    const [x, s, v, t] = ['exit', 'spawn', 'serve', 'total'].map(col)
    // The rounds that made the tail: what their parts were, on average.
    const cut = t.p95
    const tail = e.rows.filter((r) => r.total >= cut)
    const avg = (k) => tail.reduce((a, r) => a + r[k], 0) / tail.length
    rows.push({
      restart: e.c.name,
      'kill→exit p50/p95': `${fmt(x.p50)} / ${fmt(x.p95)}`,
      'exit→spawned p50/p95': `${fmt(s.p50)} / ${fmt(s.p95)}`,
      'spawned→serving p50/p95': `${fmt(v.p50)} / ${fmt(v.p95)}`,
      'total p50/p95': `${fmt(t.p50)} / ${fmt(t.p95)}`,
      'rounds ≥ p95: exit + spawn + serving': `${fmt(avg('exit'))} + ${fmt(avg('spawn'))} + ${fmt(avg('serve'))}`,
      'loop delay max p50/p95': `${fmt(stats(e.delay).p50)} / ${fmt(stats(e.delay).p95)}`,
    })
  }
  table(rows, [
    'restart',
    'kill→exit p50/p95',
    'exit→spawned p50/p95',
    'spawned→serving p50/p95',
    'total p50/p95',
    'rounds ≥ p95: exit + spawn + serving',
    'loop delay max p50/p95',
  ])
  const sup = totals.Supervisor
  const hw = totals['child_process + exit']
  const pm = totals.pm2
  console.log('')
  target(
    'restart kill -9 → serving p95 ≤ hand-written child_process loop',
    `${fmt(sup.p95)} vs ${fmt(hw.p95)} ms (${ratio(sup.p95, hw.p95)}); p50 ${fmt(sup.p50)} vs ${fmt(hw.p50)}`,
    sup.p95 <= hw.p95,
  )
  target(
    'restart kill -9 → serving p50 ≤ 0.6× pm2',
    pm
      ? `${fmt(sup.p50)} vs ${fmt(pm.p50)} ms (${ratio(sup.p50, pm.p50)}); p95 ${fmt(sup.p95)} vs ${fmt(pm.p95)}`
      : 'pm2 is not installed',
    pm ? sup.p50 <= 0.6 * pm.p50 : null,
  )
}
