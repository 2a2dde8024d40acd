// exec vs child_process's execFile and execa (a dev dependency; execa 10
// needs Node ≥ 22, so under an older Node its side runs in a process of its
// own under the newer Node the test command caches: bench/execa-peer.mjs):
// the time to run /bin/true to completion with its output captured, and what
// a timed-out tree leaves behind — a shell with a background job, timed out
// by each.
import { execFile } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { execaRound, execaTree, loadExeca } from './execa-peer.mjs'
import { newerNodePath } from './peers.mjs'
import { fmt, interleavedRows, ratio, sequential, stats, table, target, throughputRow } from './util.mjs'

const require = createRequire(import.meta.url)
const { exec } = require('../index.js')
const execFileP = promisify(execFile)
const PEER = join(import.meta.dirname, 'execa-peer.mjs')
const TAG = 'PROCWARD_BENCH_EXEC'

// Peer processes running now, by pid: ended by the cleanup if the run stops early.
const peers = new Set()

/** `node bench/execa-peer.mjs args` under `node`: the JSON line it prints. */
function peerJson(node, args) {
  return new Promise((resolve, reject) => {
    const child = execFile(node, [PEER, ...args], (err, stdout) => {
      peers.delete(child.pid)
      if (err) reject(err)
      else resolve(JSON.parse(stdout))
    })
    peers.add(child.pid)
  })
}

/**
 * execa's side: `{ label, round(n), tree(script, timeoutMs, options, env) }`
 * in this process under Node ≥ 22, else through bench/execa-peer.mjs under the
 * cached newer Node; or `{ why }` it cannot run here.
 */
async function execaSide() {
  const major = Number(process.versions.node.split('.')[0])
  if (major >= 22) {
    try {
      await loadExeca()
    } catch (err) {
      return { why: `cannot be loaded (${err.code ?? err.message}): run pnpm install` }
    }
    return { label: 'execa', round: execaRound, tree: execaTree }
  }
  const node = newerNodePath()
  if (!node) return { why: `needs Node ≥ 22 (this is ${process.version}) and no newer Node could be installed here` }
  // Where this fails (no execa installed, a Node it refuses), its last line says why.
  const probe = 'import("execa").then(() => console.log(process.version))'
  let version
  try {
    version = (await execFileP(node, ['-e', probe], { cwd: join(import.meta.dirname, '..') })).stdout
  } catch (err) {
    const last = String(err.stderr || err.message)
      .trim()
      .split('\n')
      .at(-1)
    return { why: `cannot be loaded under ${node}: ${last}` }
  }
  const under = `under Node ${version.trim().slice(1).split('.')[0]}, own process`
  return {
    label: `execa (${under})`,
    under,
    round: (n) => peerJson(node, ['round', String(n)]),
    tree: (script, timeoutMs, options, env) =>
      peerJson(node, ['tree', String(timeoutMs), JSON.stringify(options), `${TAG}=${env[TAG]}`, script]),
  }
}

/** Live (not zombie) processes whose environment has TAG=`value` (`exact`), or a TAG starting with `value`. */
function live(value, exact = true) {
  const needle = Buffer.from(`${TAG}=${value}${exact ? '\0' : ''}`)
  const out = []
  for (const ent of readdirSync('/proc')) {
    if (!/^\d+$/.test(ent) || Number(ent) === process.pid) continue
    try {
      if (!readFileSync(`/proc/${ent}/environ`).includes(needle)) continue
      const stat = readFileSync(`/proc/${ent}/stat`, 'latin1')
      const state = stat[stat.lastIndexOf(')') + 2]
      if (state !== 'Z' && state !== 'X') out.push(Number(ent))
    } catch {
      // gone, or not ours to read
    }
  }
  return out
}

/** SIGKILL to each of `pids` (processes this benchmark started), by its pid. */
function killEach(pids) {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // gone meanwhile
    }
  }
}

const TIMEOUT_MS = 300
// A shell that starts a background job and waits: the tree a timeout meets
// (git's remote helpers, a pipeline). Both sleeps hold the output pipe: a
// tool that waits for the pipes to close waits for the whole tree to end.
const TREE = 'sleep 30 & sleep 30'

/** `start(env)`'s time to settle, in ms; its rejection (the timeout) is the expected end. */
const timed = (start) => async (env) => {
  const t0 = performance.now()
  await start(env).catch(() => {})
  return performance.now() - t0
}

/**
 * One timed-out tree through `tree(env)` (resolving to the ms until it
 * settled), `marker` in its environment: `{ ms, left }`, the processes of the
 * tree still running 100 ms after it settled; those are ended, by pid.
 */
async function oneTree(marker, tree) {
  const ms = await tree({ ...process.env, [TAG]: marker })
  // Give the signals sent a moment to land before counting.
  await new Promise((r) => setTimeout(r, 100))
  const pids = live(marker)
  killEach(pids)
  return { ms, left: pids.length }
}

export async function run() {
  try {
    await measure()
  } finally {
    // Whatever is still running of ours, had the run stopped early: the
    // execa peers, then every process tagged by this run.
    killEach(peers)
    const left = live(`${process.pid}-`, false)
    killEach(left)
    if (left.length) console.log(`exec: ended ${left.length} tagged processes left at the end`)
  }
}

async function measure() {
  const execa = await execaSide()
  const n = 300
  const { rows } = await interleavedRows(
    {
      procward: ['exec', (k) => sequential(() => exec('/bin/true'), k)],
      cp: ['child_process.execFile', (k) => sequential(() => execFileP('/bin/true'), k)],
      execa: [execa.label, async (k) => (execa.round ? execa.round(k) : null)],
    },
    { n, warm: 30 },
    throughputRow('runs/s', 'vs exec', ['p99']),
  )
  console.log(`\n## exec: /bin/true to completion, output captured, best of 3 interleaved rounds of ${n}\n`)
  table(rows, ['api', 'runs/s', 'vs exec', 'µs/call mean', 'p99'])
  if (execa.why) console.log(`execa: ${execa.why}`)

  // execa waits for the tree's end (30 s): each run of every peer goes side by side.
  const runs = 3
  const under = execa.under ? ` (${execa.under})` : ''
  const trees = [
    ['exec', timed((env) => exec('sh', ['-c', TREE], { env, timeout: TIMEOUT_MS }))],
    ['child_process.execFile', timed((env) => execFileP('sh', ['-c', TREE], { env, timeout: TIMEOUT_MS }))],
  ]
  if (execa.tree) {
    trees.push(
      [`execa${under}`, (env) => execa.tree(TREE, TIMEOUT_MS, {}, env)],
      [`execa, killDescendants: true${under}`, (env) => execa.tree(TREE, TIMEOUT_MS, { killDescendants: true }, env)],
    )
  }
  const results = trees.map(() => [])
  for (let i = 0; i < runs; i++) {
    const round = await Promise.all(trees.map(([, tree], k) => oneTree(`${process.pid}-${k}-${i}`, tree)))
    round.forEach((r, k) => {
      results[k].push(r)
    })
  }
  console.log(
    `\n## exec: a timed-out tree (\`sh -c '${TREE}'\`, timeout ${TIMEOUT_MS} ms), ${runs} runs each, the ${trees.length} side by side: time to settle, processes left running\n`,
  )
  const settled = results.map((rs) => stats(rs.map((r) => r.ms)))
  table(
    trees.map(([api], k) => ({
      api,
      'left per run': results[k].map((r) => r.left).join(' '),
      'settled p50 ms': fmt(settled[k].p50, 0),
      max: fmt(settled[k].max, 0),
      'vs exec': ratio(settled[k].p50, settled[0].p50),
    })),
    ['api', 'left per run', 'settled p50 ms', 'max', 'vs exec'],
  )
  const ours = results[0].reduce((sum, r) => sum + r.left, 0)
  target('exec: a timed-out tree leaves nothing running', `${ours} left in ${runs} runs`, ours === 0)
}
