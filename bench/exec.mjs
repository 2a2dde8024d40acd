// exec vs child_process's execFile (and execa, when it is installed: it is
// not a dependency, and cannot be fetched offline): the time to run
// /bin/true to completion with its output captured, and what a timed-out
// tree leaves behind — a shell with a background job, timed out by each.
import { execFile } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { promisify } from 'node:util'
import { fmt, interleavedRows, sequential, stats, table, target, throughputRow } from './util.mjs'

const require = createRequire(import.meta.url)
const { exec } = require('../index.js')
const execFileP = promisify(execFile)

/** execa's `execa`, or why it is not here. */
async function loadExeca() {
  try {
    const mod = await import('execa')
    return { execa: mod.execa ?? mod.default }
  } catch (err) {
    return { why: `not installed (${err.code ?? err.message}); not a dependency, and not fetchable offline` }
  }
}

/** Live (not zombie) processes whose environment carries `marker`. */
function live(marker) {
  const needle = Buffer.from(`PROCWARD_BENCH_EXEC=${marker}\0`)
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

const TIMEOUT_MS = 200
// A shell that starts a background job and waits: the tree a timeout meets
// (git's remote helpers, a pipeline). The job's output goes to /dev/null,
// so a tool that waits for the pipes to close is not held by it.
const TREE = 'sleep 30 > /dev/null & sleep 30'

/** Times out the tree `runs` times through `run(env)`; what is left each time. */
async function leftBehind(name, run, runs) {
  const left = []
  const overMs = []
  for (let i = 0; i < runs; i++) {
    const marker = `${process.pid}-${name}-${i}`
    const env = { ...process.env, PROCWARD_BENCH_EXEC: marker }
    const t0 = performance.now()
    await run(env).catch(() => {})
    overMs.push(performance.now() - t0 - TIMEOUT_MS)
    // Give the signals sent a moment to land before counting.
    await new Promise((r) => setTimeout(r, 100))
    const pids = live(marker)
    left.push(pids.length)
    // Ours to end: each by its pid.
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // gone meanwhile
      }
    }
  }
  return { left, over: stats(overMs) }
}

export async function run() {
  const { execa, why } = await loadExeca()
  const n = 300
  const { rows } = await interleavedRows(
    {
      procward: ['exec', (k) => sequential(() => exec('/bin/true'), k)],
      cp: ['child_process.execFile', (k) => sequential(() => execFileP('/bin/true'), k)],
      execa: ['execa', async (k) => (execa ? sequential(() => execa('/bin/true'), k) : null)],
    },
    { n, warm: 30 },
    throughputRow('runs/s', 'vs exec', ['p99']),
  )
  console.log(`\n## exec: /bin/true to completion, output captured, best of 3 interleaved rounds of ${n}\n`)
  table(rows, ['api', 'runs/s', 'vs exec', 'µs/call mean', 'p99'])
  if (!execa) console.log(`execa: ${why}`)

  const runs = 5
  const trees = [
    ['exec', (env) => exec('sh', ['-c', TREE], { env, timeout: TIMEOUT_MS })],
    ['child_process.execFile', (env) => execFileP('sh', ['-c', TREE], { env, timeout: TIMEOUT_MS })],
  ]
  if (execa) trees.push(['execa', (env) => execa('sh', ['-c', TREE], { env, timeout: TIMEOUT_MS })])
  const left = []
  for (const [api, fn] of trees) left.push([api, await leftBehind(api, fn, runs)])
  console.log(
    `\n## exec: a timed-out tree (\`sh -c '${TREE}'\`, timeout ${TIMEOUT_MS} ms), ${runs} runs each: processes left running\n`,
  )
  table(
    left.map(([api, r]) => ({
      api,
      'left per run': r.left.join(' '),
      'settled after timeout p50 ms': fmt(r.over.p50),
      max: fmt(r.over.max),
    })),
    ['api', 'left per run', 'settled after timeout p50 ms', 'max'],
  )
  const ours = left[0][1].left.reduce((a, b) => a + b, 0)
  target('exec: a timed-out tree leaves nothing running', `${ours} left in ${runs} runs`, ours === 0)
}
