// Stop slack: from the target's real exit to the stop resolving, for a child
// that takes 40 ms to clean up after SIGTERM — procward (our child, and the
// same process as a bare pid) vs a stop that polls `ps` every 100 ms. And the
// wall time of a stop of a TERM-ignoring target with grace G.
import { execFileSync, spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fmt, lines, stats, table } from './util.mjs'

const require = createRequire(import.meta.url)
const { spawnSupervised, stopSupervisedProcess } = require('../index.js')
const FIXTURES = join(import.meta.dirname, '..', '__test__', 'fixtures')

// Prints "ready", and on SIGTERM sleeps 40 ms, prints the wall clock in ns
// and exits: the moment of the real exit, give or take the shell's exit.
const CLEANUP = `trap 'sleep 0.04; date +%s%N; exit 0' TERM; echo ready; while :; do sleep 0.01; done`
const wallNs = () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6))

async function slack(kind) {
  let pid
  let next
  let child
  if (kind === 'ours') {
    child = spawnSupervised('sh', ['-c', CLEANUP], { stdio: ['ignore', 'pipe', 'ignore'] })
    pid = child.pid
    next = lines(child.stdout)
  } else {
    child = spawn('sh', ['-c', CLEANUP], { stdio: ['ignore', 'pipe', 'ignore'] })
    pid = child.pid
    next = lines(child.stdout)
  }
  await next()
  let stopped
  if (kind === 'ours') stopped = child.stop()
  else if (kind === 'bare') stopped = stopSupervisedProcess(pid)
  else stopped = psPollStop(pid)
  const exitedAt = BigInt(await next())
  await stopped
  const resolvedAt = wallNs()
  if (kind !== 'ours') await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)))
  return Number(resolvedAt - exitedAt) / 1e6
}

/** The approach procward replaces: SIGTERM, then `ps` every 100 ms. */
async function psPollStop(pid) {
  process.kill(pid, 'SIGTERM')
  for (;;) {
    await new Promise((r) => setTimeout(r, 100))
    let st = ''
    try {
      st = execFileSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' }).trim()
    } catch {}
    if (st === '' || st.startsWith('Z')) return
  }
}

export async function run() {
  const n = 15
  const rows = []
  for (const [kind, label] of [
    ['ours', 'SupervisedProcess.stop()'],
    ['bare', 'stopSupervisedProcess(pid)'],
    ['ps', 'SIGTERM + ps poll every 100 ms'],
  ]) {
    const xs = []
    for (let i = 0; i < n; i++) xs.push(await slack(kind))
    const s = stats(xs)
    rows.push({ stop: label, 'slack p50 ms': fmt(s.p50), 'slack max ms': fmt(s.max) })
  }
  console.log(`\n## Stop slack: real exit → stop resolved (target cleans up 40 ms after SIGTERM, ${n} runs)\n`)
  table(rows, ['stop', 'slack p50 ms', 'slack max ms'])

  const G = 200
  const over = []
  for (let i = 0; i < 10; i++) {
    const p = spawnSupervised(join(FIXTURES, 'ignore-term.sh'), [], { stdio: ['ignore', 'pipe', 'ignore'] })
    await lines(p.stdout)()
    const r = await p.stop({ graceMs: G })
    over.push(r.elapsedMs - G)
  }
  const s = stats(over)
  console.log(`\n## TERM-ignoring target with graceMs ${G}: wall time beyond G (10 runs)\n`)
  table(
    [{ stop: 'stop() → killed', 'p50 ms over G': fmt(s.p50), 'max ms over G': fmt(s.max) }],
    ['stop', 'p50 ms over G', 'max ms over G'],
  )
}
