// A daemon that grows, restarted for its memory: a SupervisorGroup's
// `memoryLimit` (its /proc sampler: at most every 250 ms, off the JS
// thread) beside pm2's `max_memory_restart` (its worker checks every 30 s,
// PM2_WORKER_INTERVAL), each as its users get it by default. The daemon
// touches STEP MB every 100 ms up to a cap and holds it, writing its own RSS
// and the time to a file after each step; the figures come from that file,
// the same for both: how far past the limit it got before it was stopped
// (its last RSS line), and how long after it first passed the limit it was
// seen over it (procward's 'memory' event; pm2 does not say) and its first
// life ended.
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { killPm2Daemon, loadPm2 } from './supervisor.mjs'
import { fmt, table, target } from './util.mjs'

const require = createRequire(import.meta.url)
const { SupervisorGroup } = require('../index.js')

const MB = 1024 * 1024
const LIMIT_MB = 100
const STEP_MB = 10
const STEP_MS = 100
const CAP_MB = 300
const ROUNDS = 3
/** pm2's worker looks every 30 s: a round waits up to this for its restart. */
const PM2_WAIT_MS = 45_000

/** The grower: one line `<Date.now()> <rss bytes>` appended to FILE per step. */
const GROWER = `
const fs = require('node:fs')
const [file, step, every, cap] = process.argv.slice(1).map((v, i) => (i === 0 ? v : Number(v)))
const held = []
let total = 0
setInterval(() => {
  if (total < cap * 1048576) {
    held.push(Buffer.alloc(step * 1048576, 1))
    total += step * 1048576
  }
  fs.appendFileSync(file, Date.now() + ' ' + process.memoryUsage.rss() + '\\n')
}, every)
`

const growerArgs = (file) => ['-e', GROWER, file, String(STEP_MB), String(STEP_MS), String(CAP_MB)]

/** The first life's figures from its file: the peak RSS it wrote, and when it first wrote one over the limit. */
function firstLife(file) {
  const lines = fs.readFileSync(file, 'utf8').trim().split('\n')
  const samples = lines.map((l) => l.split(' ').map(Number))
  const over = samples.find(([, rss]) => rss > LIMIT_MB * MB)
  return { peak: Math.max(...samples.map(([, rss]) => rss)), overAt: over?.[0] ?? null }
}

async function procwardRound(dir, round) {
  const file = path.join(dir, `procward-${round}.rss`)
  const g = new SupervisorGroup({
    daemons: {
      grower: {
        command: process.execPath,
        args: growerArgs(file),
        memoryLimit: LIMIT_MB * MB,
        // Its second life writes elsewhere: the first one's file is the figure.
        backoff: { initialMs: 60_000 },
      },
    },
  })
  const seen = new Promise((resolve) => g.once('memory', () => resolve(Date.now())))
  const restarted = new Promise((resolve) => g.once('exit', () => resolve(Date.now())))
  await g.start()
  const [seenAt, endedAt] = await Promise.all([seen, restarted])
  await g.stop()
  const life = firstLife(file)
  return { peak: life.peak, seenMs: seenAt - life.overAt, reactMs: endedAt - life.overAt }
}

async function pm2Round(dir, pm2) {
  const file = path.join(dir, 'pm2.rss')
  const name = `bench-memory-${process.pid}`
  const p2 = (fn, ...args) => new Promise((res, rej) => fn.call(pm2, ...args, (e, v) => (e ? rej(e) : res(v))))
  await p2(pm2.connect)
  try {
    await p2(pm2.start, {
      script: process.execPath,
      args: growerArgs(file),
      name,
      interpreter: 'none',
      max_memory_restart: `${LIMIT_MB}M`,
      restart_delay: 60_000,
    })
    const t0 = Date.now()
    while (Date.now() - t0 < PM2_WAIT_MS) {
      const d = (await p2(pm2.describe, name))[0]
      if (d !== undefined && (d.pm2_env?.restart_time ?? 0) > 0) {
        const life = firstLife(file)
        return { peak: life.peak, reactMs: Date.now() - life.overAt }
      }
      await sleep(50)
    }
    const life = firstLife(file)
    return { peak: life.peak, reactMs: Number.NaN, why: `not restarted within ${PM2_WAIT_MS / 1000} s` }
  } finally {
    await p2(pm2.delete, name).catch(() => {})
    pm2.disconnect()
  }
}

export async function run() {
  console.log(
    `\n## memory: a daemon growing ${STEP_MB} MB / ${STEP_MS} ms (up to ${CAP_MB} MB), limit ${LIMIT_MB} MB\n`,
  )
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procward-bench-memory-'))
  const rows = []
  try {
    for (let i = 0; i < ROUNDS; i++) rows.push({ api: 'procward memoryLimit', ...(await procwardRound(dir, i)) })
    const pm2 = loadPm2()
    if (pm2 === false) console.log('(pm2 is not installed: its row is skipped)')
    else {
      // One round: its worker looks every 30 s.
      rows.push({ api: 'pm2 max_memory_restart', ...(await pm2Round(dir, pm2)) })
      await killPm2Daemon()
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
  table(
    rows.map((r) => ({
      api: r.api,
      'peak RSS (MB)': fmt(r.peak / MB, 1),
      'over the limit (MB)': fmt((r.peak - LIMIT_MB * MB) / MB, 1),
      'limit passed → seen (ms)': fmt(r.seenMs ?? Number.NaN, 0),
      'limit passed → stopped (ms)': fmt(r.reactMs, 0),
      note: r.why ?? '',
    })),
    ['api', 'peak RSS (MB)', 'over the limit (MB)', 'limit passed → seen (ms)', 'limit passed → stopped (ms)', 'note'],
  )
  const ours = rows.filter((r) => r.api.startsWith('procward'))
  const worst = Math.max(...ours.map((r) => r.peak - LIMIT_MB * MB))
  // At 100 MB/s, a sample every 250 ms plus its own time: at most about
  // three steps past the limit (30 MB), never the cap.
  target(
    'memoryLimit overshoot ≤ 3 growth steps',
    `worst ${fmt(worst / MB, 1)} MB over ${LIMIT_MB} MB (${STEP_MB} MB / ${STEP_MS} ms)`,
    worst <= 3 * STEP_MB * MB,
  )
}
