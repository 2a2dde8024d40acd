// `pnpm bench handover`: what a client sees while a daemon is replaced. A
// client in a process of its own (bench/count-client.cjs) sends GETs back to
// back, a new connection each, while each contender's daemon (an HTTP
// server, bench/handover-daemon.cjs: it binds its own port, or serves on
// the socket it is handed with LISTEN_FDS) is:
// - killed with SIGKILL ROUNDS times (restarted by the contender): refused
//   connections per restart;
// - replaced RELOADS times the contender's way (procward reload() on held
//   sockets; restart() without; pm2 reload, which in fork mode is a
//   restart; a hand-written stop-then-spawn): failed requests per reload.
// Contenders: procward's Supervisor with and without `listen`, a
// hand-written child_process loop, pm2 (fork mode). Figures, not pass/fail;
// the targets (0 refused, 0 failed with `listen`) are printed with them.
import { spawn as cpSpawn } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { freePort, servedBy } from './http.mjs'
import { killPm2Daemon, loadPm2 } from './supervisor.mjs'
import { fmt, table, target } from './util.mjs'

const require = createRequire(import.meta.url)
const procward = require('../index.js')
const HERE = path.dirname(fileURLToPath(import.meta.url))
const DAEMON = path.join(HERE, 'handover-daemon.cjs')
const CLIENT = path.join(HERE, 'count-client.cjs')
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15)
const RELOADS = Number(process.env.BENCH_RELOADS ?? 10)
const sleep = (t) => new Promise((r) => setTimeout(r, t))
const node = process.execPath

/** The client process, counting until stop(): { ok, refused, other }. */
function client(port) {
  const stop = path.join(os.tmpdir(), `procward-bench-client-${process.pid}-${port}`)
  fs.rmSync(stop, { force: true })
  const c = cpSpawn(node, [CLIENT, String(port), stop], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  c.stdout.on('data', (d) => (out += d))
  const done = new Promise((r) => c.once('close', r))
  return {
    async stop() {
      fs.writeFileSync(stop, '')
      await done
      fs.rmSync(stop, { force: true })
      return JSON.parse(out.trim())
    },
  }
}

function supervisorContender(name, port, held) {
  let sup = null
  return {
    name,
    async start() {
      sup = new procward.Supervisor({
        command: node,
        args: held ? [DAEMON] : [DAEMON, '--port', String(port)],
        ...(held ? { listen: [{ port }], ready: { http: `http://127.0.0.1:${port}/` } } : { ready: { port } }),
        spawn: { stdio: 'ignore' },
        backoff: { initialMs: 0, stepMs: 0 },
        crashLoop: { maxRestarts: 2 ** 31 - 1 },
      })
      await sup.start()
    },
    pid: async () => sup.child?.pid ?? null,
    replace: () => (held ? sup.reload() : sup.restart()),
    replaceName: held ? 'reload()' : 'restart()',
    stop: () => sup.stop(),
  }
}

function handWrittenContender(port) {
  let child = null
  let stopping = false
  const spawn = () => {
    child = cpSpawn(node, [DAEMON, '--port', String(port)], { stdio: 'ignore' })
    child.once('exit', () => {
      if (!stopping) spawn()
    })
  }
  return {
    name: 'child_process',
    async start() {
      spawn()
      await servedBy(port, null)
    },
    pid: async () => child?.pid ?? null,
    // What such code does for new args: stop, wait for the exit, spawn.
    async replace() {
      stopping = true
      const old = child
      const exited = new Promise((r) => old.once('exit', r))
      old.kill('SIGTERM')
      await exited
      stopping = false
      spawn()
      await servedBy(port, old.pid)
    },
    replaceName: 'stop, then spawn',
    async stop() {
      stopping = true
      const exited = new Promise((r) => child.once('exit', r))
      child.kill('SIGKILL')
      await exited
    },
  }
}

function pm2Contender(pm2, port) {
  const name = `handover-${process.pid}-${port}`
  const p2 = (fn, ...args) =>
    new Promise((resolve, reject) => fn.call(pm2, ...args, (e, v) => (e ? reject(e) : resolve(v))))
  return {
    name: 'pm2 (fork mode)',
    async start() {
      await p2(pm2.connect)
      await p2(pm2.start, {
        script: DAEMON,
        args: ['--port', String(port)],
        name,
        autorestart: true,
        restart_delay: 0,
        min_uptime: 0,
        max_restarts: 2 ** 31 - 1,
      })
      await servedBy(port, null)
    },
    async pid() {
      const d = await p2(pm2.describe, name)
      return d[0]?.pid ?? null
    },
    async replace() {
      const old = await this.pid()
      await p2(pm2.reload, name)
      await servedBy(port, old)
    },
    replaceName: 'pm2 reload',
    async stop() {
      await p2(pm2.delete, name).catch(() => {})
      pm2.disconnect()
    },
  }
}

/** ROUNDS kill -9s, then RELOADS replacements, each with the client counting. */
async function measure(c, port) {
  await c.start()
  const killing = client(port)
  for (let i = 0; i < ROUNDS; i++) {
    const pid = await c.pid()
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // gone already
    }
    await servedBy(port, pid)
    await sleep(50)
  }
  const killed = await killing.stop()
  const replacing = client(port)
  for (let i = 0; i < RELOADS; i++) {
    await c.replace()
    await sleep(50)
  }
  const replaced = await replacing.stop()
  await c.stop()
  return { killed, replaced }
}

export async function run() {
  console.log(`\n## handover: what a client sees (${ROUNDS} kill -9 restarts, ${RELOADS} replacements each)`)
  const pm2 = loadPm2()
  const makers = [
    (port) => supervisorContender('procward, listen', port, true),
    (port) => supervisorContender('procward, no listen', port, false),
    (port) => handWrittenContender(port),
  ]
  if (pm2) makers.push((port) => pm2Contender(pm2, port))
  const rows = []
  const results = {}
  for (const make of makers) {
    const port = await freePort()
    const c = make(port)
    const { killed, replaced } = await measure(c, port)
    results[c.name] = { killed, replaced }
    rows.push({
      contender: c.name,
      'refused / restart': fmt(killed.refused / ROUNDS),
      'other errors / restart': fmt(killed.other.length / ROUNDS),
      'requests during restarts': String(killed.ok),
      replaced: c.replaceName,
      'failed / replacement': fmt((replaced.refused + replaced.other.length) / RELOADS),
      'requests during replacements': String(replaced.ok),
    })
  }
  if (pm2) await killPm2Daemon()
  table(rows, Object.keys(rows[0]))
  const held = results['procward, listen']
  target('kill -9 with listen: 0 refused', `${held.killed.refused} refused in ${ROUNDS}`, held.killed.refused === 0)
  const failed = held.replaced.refused + held.replaced.other.length
  target('reload() with listen: 0 failed', `${failed} failed in ${RELOADS}`, failed === 0)
}
