// procward demo: supervise a real daemon (python3 -m http.server on a
// loopback port), kill it with `kill -9` from outside, watch the exit event
// arrive (already reaped, group swept), restart it, and show that nothing is
// left behind — next to what `process.kill(pid, 0)` would have said.
import { execFileSync, spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { freePort, httpStatus, say, sleep } from './common.mjs'

const require = createRequire(import.meta.url)
const { spawnSupervised, isProcessRunning, getProcessInfo, stopSupervisedProcess } = require('../index.js')

function killZero(pid) {
  try {
    process.kill(pid, 0)
    return 'alive'
  } catch (e) {
    return e.code === 'EPERM' ? 'alive' : `dead (${e.code})`
  }
}

function ourChildren() {
  const out = []
  for (const ent of readdirSync('/proc')) {
    if (!/^\d+$/.test(ent)) continue
    try {
      const stat = readFileSync(`/proc/${ent}/stat`, 'latin1')
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (Number(rest[1]) === process.pid) out.push(`${ent}:${rest[0]}`)
    } catch {}
  }
  return out
}

function hasPython() {
  try {
    execFileSync('python3', ['--version'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

const port = await freePort()
const [cmd, args] = hasPython()
  ? ['python3', ['-m', 'http.server', String(port), '--bind', '127.0.0.1']]
  : [process.execPath, ['-e', `require('http').createServer((q,s)=>s.end('ok')).listen(${port},'127.0.0.1')`]]

// ---- a tiny supervisor: restart on crash, within one loop turn of the exit event
let restarts = 0
let stopping = false
let current
function start() {
  const t0 = performance.now()
  current = spawnSupervised(cmd, args, { stdio: ['ignore', 'ignore', 'ignore'], stop: { graceMs: 2000 } })
  say(
    `started ${cmd} pid ${current.pid} (pgid ${current.pgid}) in ${(performance.now() - t0).toFixed(2)} ms; identity ${current.identity}`,
  )
  const proc = current
  proc.on('exit', (info) => {
    say(
      `exit event: pid ${info.pid} ${info.signal ?? `code ${info.code}`} — already reaped: /proc/${info.pid} ${readdirSync('/proc').includes(String(info.pid)) ? 'still there!' : 'gone'}`,
    )
    say(
      `  process.kill(${info.pid}, 0): ${killZero(info.pid)}   isProcessRunning(${info.pid}): ${isProcessRunning(info.pid)}`,
    )
    if (!stopping) {
      restarts++
      start()
    }
  })
}

async function waitServing() {
  for (let i = 0; i < 100; i++) {
    if ((await httpStatus(port)) === 200) return true
    await sleep(50)
  }
  return false
}

say(`# procward demo (node ${process.version}, pid ${process.pid})\n`)
start()
say(`serving on http://127.0.0.1:${port}: ${await waitServing()}`)

say(`\n$ kill -9 ${current.pid}   (from outside, as a crash would)`)
const crashed = current
execFileSync('kill', ['-9', String(crashed.pid)])
await crashed.exited
say(`restarted: pid ${current.pid}, serving again: ${await waitServing()}`)
say(`our children now: ${ourChildren().join(' ')} (pid:state — no Z)`)

// ---- what child_process + kill(pid, 0) would have seen
say('\n# the bugs procward ends: with the event loop blocked for 200 ms, two children exit')
const cp = spawn('sh', ['-c', 'exit 0'], { stdio: 'ignore' })
const ours = spawnSupervised('sh', ['-c', 'exit 0'], { stdio: 'ignore' })
const t = Date.now()
while (Date.now() - t < 200) {} // a busy event loop: libuv cannot reap
say(`child_process child ${cp.pid}: a zombie until the loop runs (state ${getProcessInfo(cp.pid)?.state ?? 'gone'})`)
say(`  process.kill(${cp.pid}, 0): ${killZero(cp.pid)}   isProcessRunning(${cp.pid}): ${isProcessRunning(cp.pid)}`)
const gone = !readdirSync('/proc').includes(String(ours.pid))
say(
  `spawnSupervised child ${ours.pid}: reaped natively meanwhile (/proc/${ours.pid} ${gone ? 'gone' : 'still there!'}); its exit event waits for the loop`,
)
await Promise.all([new Promise((r) => cp.once('exit', r)), ours.exited])

// ---- orderly shutdown
stopping = true
const result = await stopSupervisedProcess(current)
say(`\nstop: ${result.outcome} after ${result.elapsedMs.toFixed(1)} ms, signals ${result.signals.join(' → ')}`)
say(`restarts: ${restarts}; children left: ${ourChildren().length === 0 ? 'none' : ourChildren().join(' ')}`)
