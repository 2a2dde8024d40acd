// procward demo: a Supervisor keeping a real daemon (python3 -m http.server
// on a loopback port) running. `kill -9` of the daemon: the exit event (the
// reap), the restart, the port served again. Then the supervisor itself is
// SIGKILLed, its daemon left running as an orphan; a successor reads the
// state file, stops the orphan (pid and identity checked) and serves with a
// child of its own.
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { freePort, httpStatus, say, sleep } from './common.mjs'

const require = createRequire(import.meta.url)
const here = dirname(fileURLToPath(import.meta.url))
const PROCWARD = join(here, '..', 'index.js')
const { Supervisor, isProcessRunning, readSupervisorState } = require(PROCWARD)

const t0 = performance.now()
const at = () => `${(performance.now() - t0).toFixed(1).padStart(7)} ms`

const port = await freePort()
const dir = mkdtempSync(join(tmpdir(), 'procward-demo-'))
const stateFile = join(dir, 'http.json')
const options = {
  command: 'python3',
  args: ['-m', 'http.server', '--bind', '127.0.0.1', String(port)],
  name: 'http',
  ready: { port },
  stateFile,
  // So that the daemon outlives a SIGKILLed supervisor (the default kills it
  // with the supervisor), and part two has an orphan to take over.
  spawn: { stdio: 'ignore', parentDeathSignal: false },
}

say(`# part 1: kill -9 of the daemon (port ${port})\n`)
const { stateFile: _, ...withoutStateFile } = options
const sup = new Supervisor(withoutStateFile)
for (const ev of ['spawn', 'ready']) sup.on(ev, (c) => say(`${at()}  ${ev.padEnd(8)} pid ${c.pid}`))
sup.on('exit', (e) =>
  say(`${at()}  exit     pid ${e.pid} signal ${e.signal} (already reaped: ${!isProcessRunning(e.pid)})`),
)
sup.on('restart', (r) => say(`${at()}  restart  attempt ${r.attempt}, delay ${r.delayMs} ms`))
await sup.start()
const first = sup.child.pid
say(`${at()}  serving: HTTP ${await httpStatus(port)} from pid ${first}`)
say(`${at()}  kill -9 ${first}`)
const ready = new Promise((r) => sup.once('ready', r))
process.kill(first, 'SIGKILL')
await ready
say(`${at()}  serving: HTTP ${await httpStatus(port)} from pid ${sup.child.pid}; restarts: ${sup.status().restarts}`)
await sup.stop()

say('\n# part 2: the supervisor SIGKILLed, a successor takes over\n')
const script = `
  const { Supervisor } = require(${JSON.stringify(PROCWARD)})
  const sup = new Supervisor(${JSON.stringify(options)})
  sup.start().then(() => console.log(sup.child.pid))
  setInterval(() => {}, 1e9)`
const predecessor = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
const orphan = await new Promise((r) => predecessor.stdout.once('data', (d) => r(Number(String(d).trim()))))
say(`${at()}  predecessor supervisor pid ${predecessor.pid}, its daemon pid ${orphan}`)
predecessor.kill('SIGKILL')
await new Promise((r) => predecessor.once('exit', r))
say(`${at()}  predecessor SIGKILLed; its daemon lives on as an orphan: HTTP ${await httpStatus(port)}`)
const rec = readSupervisorState(stateFile)
say(
  `${at()}  state file: supervisor running: ${rec.supervisor.running}, child pid ${rec.child.pid} running: ${rec.child.running}`,
)

const successor = new Supervisor(options)
successor.on('takeover', (t) =>
  say(`${at()}  takeover: ${t.action} pid ${t.pid} (${t.result?.outcome ?? 'no stop'}), suspects: [${t.suspects}]`),
)
successor.on('spawn', (c) => say(`${at()}  spawn    pid ${c.pid}`))
successor.on('ready', (c) => say(`${at()}  ready    pid ${c.pid}`))
await successor.start()
say(
  `${at()}  orphan ${orphan} running: ${isProcessRunning(orphan)}; serving: HTTP ${await httpStatus(port)} from pid ${successor.child.pid}`,
)
await successor.stop()
say(`${at()}  stopped; state file says: ${readSupervisorState(stateFile).state}`)
await sleep(10)
rmSync(dir, { recursive: true, force: true })
if (existsSync(dir)) process.exitCode = 1
