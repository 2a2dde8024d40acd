// The order of an exit's last steps: the 'exit' listener is called before
// the tidying (on the JS loop, before the poll handle stops and the pidfd
// is let go of; on the reaper, before the pidfd leaves its epoll and
// closes). Listeners that re-enter (ref/unref, stop, exited, new spawns
// that reuse the fd numbers, a throw, process.exit, a worker's end) must
// still see each exit once, leave no zombie and no fd, and find the exited
// child's fd free for a respawn at the fd limit. The in-process tests run
// on whatever back-end the suite is run with (PROCWARD_EXIT_WATCH unset,
// =tokio, =fallback); the ones in a process of their own pick theirs.
import { execFile } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { cgroupSupport, type SupervisedProcess, stopSupervisedProcess } from '../../index.js'
import {
  aliveInProcTable,
  FIXTURES,
  fdsLeftSince,
  firstLine,
  firstLineOf,
  hasPython,
  IS_BUN,
  isRoot,
  NODE,
  openFds,
  PROCWARD,
  procState,
  sleep,
  trackProcesses,
  waitFor,
  zombieChildren,
} from '../helpers'

const { sup, others } = trackProcesses()

/** Open pidfds of this process (a leaked one would name no live child). */
function pidfds(): number {
  return readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === 'anon_inode:[pidfd]'
    } catch {
      return false
    }
  }).length
}

/** A few loop turns: a late second delivery would have come by then. */
async function turns(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    await new Promise((r) => setImmediate(r))
    await sleep(10)
  }
}

/**
 * Listens on each child the way every test here re-enters procward: ref()
 * and unref() of the exited child, its `exited`, `exitInfo`, `kill()` and
 * `stop()`, and a replacement spawned at once (its pidfd takes a number
 * an exited one may just have freed). `counts[i]`: exits heard from kids[i].
 */
function reenterOnExit(kids: SupervisedProcess[]) {
  const counts = kids.map(() => 0)
  const checks: Promise<unknown>[] = []
  const replacements: SupervisedProcess[] = []
  for (const [i, p] of kids.entries()) {
    p.on('exit', (info) => {
      counts[i] = (counts[i] as number) + 1
      replacements.push(sup('sh', ['-c', 'exit 5'], { stdio: 'ignore' }))
      p.unref()
      p.ref()
      expect(p.exitInfo).toBe(info)
      expect(p.kill('SIGKILL')).toBe(false)
      checks.push(p.exited.then((e) => expect(e).toBe(info)))
      checks.push(p.stop().then((r) => expect(r).toMatchObject({ outcome: 'already-exited', signals: [], exit: info })))
    })
  }
  /** Waits for every listener's replacement and check; each exit heard once. */
  const settled = async () => {
    await waitFor(() => replacements.length === kids.length, 5000, 'every listener to have run')
    const infos = await Promise.all(replacements.map((r) => r.exited))
    expect(infos).toEqual(replacements.map((r) => ({ pid: r.pid, code: 5, signal: null })))
    await Promise.all(checks)
    await turns()
    expect(counts.filter((c) => c !== 1)).toEqual([])
  }
  return { counts, settled }
}

type Ran = { status: number | null; signal: string | null; lines: Record<string, unknown>[]; stderr: string }

/** What a script run by this runtime did (with at most `fds` fds); SIGKILLed if it runs 20 s. */
function runScript(code: string, backend: 'loop' | 'tokio', fds = 0): Promise<Ran> {
  const env = { ...process.env }
  if (backend === 'tokio') env.PROCWARD_EXIT_WATCH = 'tokio'
  else delete env.PROCWARD_EXIT_WATCH
  const prelude = `const procward = require(${JSON.stringify(PROCWARD)})
const out = (o) => process.stdout.write(JSON.stringify(o) + '\\n')`
  const argv = [NODE, '-e', `${prelude}\n${code}`]
  if (fds) argv.unshift('sh', '-c', `ulimit -n ${fds} && exec "$0" "$@"`)
  const opts = { env, timeout: 20_000, killSignal: 'SIGKILL' as const }
  return new Promise((resolve) =>
    execFile(argv[0] as string, argv.slice(1), opts, (err, stdout, stderr) => {
      const e = err as { code?: number; signal?: string } | null
      const lines = stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
      resolve({ status: e ? (e.code ?? null) : 0, signal: e?.signal ?? null, lines, stderr })
    }),
  )
}

describe('a listener that re-enters procward', () => {
  it('200 children SIGKILLed at once, each listener spawning a replacement: every exit once, no zombie, no fd', async () => {
    await sup('true', [], { stdio: 'ignore' }).exited
    // Its pidfd closes after 'exit' (the tidying), within the same loop turn.
    await turns()
    const before = openFds()
    const kids = Array.from({ length: 200 }, (_, i) => {
      const k = sup('sleep', ['100'], { stdio: 'ignore' })
      return i % 2 ? k.unref() : k
    })
    const { settled } = reenterOnExit(kids)
    for (const k of kids) expect(k.kill('SIGKILL')).toBe(true)
    const infos = await Promise.all(kids.map((k) => k.exited))
    expect(infos).toEqual(kids.map((k) => ({ pid: k.pid, code: null, signal: 'SIGKILL' })))
    await settled()
    expect(zombieChildren()).toEqual([])
    expect(await fdsLeftSince(before)).toEqual([])
    expect(pidfds()).toBe(0)
  }, 30_000)

  it('a JS thread blocked while children exit: reaped during the block, each listener called once after it', async () => {
    const kids = Array.from({ length: 20 }, () => sup('sleep', ['100'], { stdio: 'ignore' }))
    const { counts, settled } = reenterOnExit(kids)
    for (const k of kids) k.kill('SIGKILL')
    // Busy-wait on purpose: the loop must not run until the reaper has reaped them all.
    for (const t0 = Date.now(); kids.some((k) => procState(k.pid) !== null) && Date.now() - t0 < 10_000; );
    expect(kids.filter((k) => procState(k.pid) !== null).map((k) => k.pid)).toEqual([])
    expect(counts.filter((c) => c !== 0)).toEqual([])
    await Promise.all(kids.map((k) => k.exited))
    await settled()
  })

  it.skipIf(!isRoot || !hasPython())(
    'a traced child: one exit once the tracer leaves, its listener re-entering',
    async () => {
      const p = sup('sleep', ['100'], { stdio: 'ignore' })
      const { counts, settled } = reenterOnExit([p])
      const tracer = others.spawn('python3', [join(FIXTURES, 'tracer.py'), String(p.pid)], {
        stdio: ['pipe', 'pipe', 'inherit'],
      })
      expect(await firstLine(tracer)).toBe('seized')
      expect(p.kill('SIGKILL')).toBe(true)
      await waitFor(() => procState(p.pid) === 'Z', 5000, 'the traced child to become a zombie')
      await turns()
      expect(counts).toEqual([0])
      tracer.kill('SIGTERM')
      expect(await p.exited).toEqual({ pid: p.pid, code: null, signal: 'SIGKILL' })
      await settled()
      expect(procState(p.pid)).toBeNull()
    },
  )
})

const cg = cgroupSupport()
describe.skipIf(!cg.available)(`a contained child, stops racing its exit (${cg.reason ?? 'cgroup v2'})`, () => {
  it('every stop and the listener get the one exit, after the cgroup is gone', async () => {
    const p = sup('sh', ['-c', 'setsid sleep 1000 & echo ready; read x'], {
      cgroup: true,
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    expect(await firstLineOf(p)).toBe('ready')
    const cgroup = p.cgroup as string
    const procs = () => readFileSync(`${cgroup}/cgroup.procs`, 'utf8').split('\n').filter(Boolean).map(Number)
    await waitFor(() => procs().length === 2, 5000, 'the member in the cgroup')
    const member = procs().find((pid) => pid !== p.pid) as number
    const atExit = { count: 0, tidy: false, stops: [] as Promise<unknown>[] }
    p.on('exit', () => {
      atExit.count++
      atExit.tidy = !existsSync(cgroup) && !aliveInProcTable(member) && procState(p.pid) === null
      atExit.stops.push(p.stop())
    })
    process.kill(p.pid, 'SIGKILL')
    const stops = [p.stop({ signal: 'SIGKILL' }), stopSupervisedProcess(p), p.stop({ graceMs: 0 })]
    const results = await Promise.all(stops)
    const info = await p.exited
    expect(info).toEqual({ pid: p.pid, code: null, signal: 'SIGKILL' })
    for (const r of [...results, ...(await Promise.all(atExit.stops))]) expect(r).toMatchObject({ exit: info })
    await turns()
    expect(atExit).toMatchObject({ count: 1, tidy: true })
    p.stdin?.destroy()
  })
})

describe.each(['loop', 'tokio'] as const)('in a process of its own (%s)', (backend) => {
  it('a throwing listener is one uncaught exception each; the other children and the process carry on', async () => {
    const r = await runScript(
      `const uncaught = []
process.on('uncaughtException', (e) => uncaught.push(e.message))
const kids = Array.from({ length: 20 }, () => procward.spawnSupervised('sleep', ['100'], { stdio: 'ignore' }))
let exits = 0
kids.forEach((k, i) => k.on('exit', () => { exits++; if (i % 2 === 0) throw new Error('boom ' + i) }))
for (const k of kids) k.kill('SIGKILL')
Promise.all(kids.map((k) => k.exited)).then(async () => {
  for (let i = 0; i < 3; i++) await new Promise((r) => setTimeout(r, 10))
  const after = await procward.spawnSupervised('sh', ['-c', 'exit 4'], { stdio: 'ignore' }).exited
  out({ uncaught: uncaught.sort(), exits, after: after.code })
})`,
      backend,
    )
    const want = Array.from({ length: 10 }, (_, i) => `boom ${i * 2}`).sort()
    expect(r).toMatchObject({ status: 0, signal: null, lines: [{ uncaught: want, exits: 20, after: 4 }] })
  })

  it('process.exit() in the listener ends the process with that code, and its children with it', async () => {
    const r = await runScript(
      `const long = Array.from({ length: 5 }, () => procward.spawnSupervised('sleep', ['100'], { stdio: 'ignore' }))
out({ pids: long.map((p) => p.pid) })
const q = procward.spawnSupervised('sh', ['-c', 'exit 3'], { stdio: 'ignore' })
q.on('exit', (info) => { out({ code: info.code }); procward.spawnSupervised('sleep', ['100'], { stdio: 'ignore' }); process.exit(7) })`,
      backend,
    )
    expect(r).toMatchObject({ status: 7, signal: null, lines: [{}, { code: 3 }] })
    const pids = r.lines[0]?.pids as number[]
    await waitFor(() => !pids.some(aliveInProcTable), 5000, 'the children to die with their parent')
  })

  it('ref() of the exited child in its listener does not hold the process; an unref()ed new child does not either', async () => {
    const r = await runScript(
      `const a = procward.spawnSupervised('true', [], { stdio: 'ignore' })
a.on('exit', () => { a.unref(); a.ref(); const s = procward.spawnSupervised('sleep', ['100'], { stdio: 'ignore' }); s.unref(); out({ sleeper: s.pid }) })`,
      backend,
    )
    expect(r).toMatchObject({ status: 0, signal: null, lines: [{}] })
    const pid = r.lines[0]?.sleeper as number
    await waitFor(() => !aliveInProcTable(pid), 5000, 'the unref()ed child to die with its parent')
  })
})

describe.skipIf(IS_BUN)('at the fd limit (the JS loop)', () => {
  it("the exited child's pidfd is closed when 'exit' runs: a listener's spawn has that fd", async () => {
    // Fills the fd table, frees just enough for a piped spawn, takes one
    // back: the exited child's pidfd is then the one fd a respawn lacks.
    const r = await runScript(
      `const fs = require('node:fs')
const turns = async () => { for (let i = 0; i < 3; i++) await new Promise((r) => setTimeout(r, 10)) }
const piped = () => { const b = procward.spawnSupervised('true', [], { stdio: ['ignore', 'pipe', 'ignore'] }); b.stdout.resume(); return b }
const pipedDone = async () => { const b = piped(); await Promise.all([b.exited, new Promise((r) => b.stdout.once('close', r))]); await turns() }
;(async () => {
  await pipedDone()
  const a = procward.spawnSupervised('sleep', ['100'], { stdio: 'ignore' })
  await turns()
  const held = []
  for (;;) { try { held.push(fs.openSync('/dev/null', 'r')) } catch { break } }
  for (;;) { try { await pipedDone(); break } catch (e) { if (e.code !== 'EMFILE' || held.length === 0) throw e; fs.closeSync(held.pop()) } }
  held.push(fs.openSync('/dev/null', 'r'))
  const short = await pipedDone().then(() => 'spawned', (e) => e.code)
  const inListener = new Promise((resolve) => a.on('exit', () => { try { piped(); resolve('spawned') } catch (e) { resolve(e.code) } }))
  a.kill('SIGKILL')
  out({ short, inListener: await inListener })
  for (const fd of held) fs.closeSync(fd)
})()`,
      'loop',
      64,
    )
    expect(r).toMatchObject({ status: 0, lines: [{ short: 'EMFILE', inListener: 'spawned' }] })
  })
})

// Under Node a worker's children are watched on the worker's own loop
// (its teardown closes the watches of those still running).
const WORKER = `const { workerData } = require('node:worker_threads')
const { spawnSupervised } = require(workerData.procward)
const s = new Int32Array(workerData.shared)
const note = (p) => { s[2 + Atomics.add(s, 1, 1)] = p.pid; return p }
const sleeper = () => note(spawnSupervised('sleep', ['100'], { stdio: 'ignore' }))
const mode = workerData.mode
if (mode === 'spawn-then-exit') {
  spawnSupervised('true', [], { stdio: 'ignore' }).on('exit', () => { sleeper(); process.exit(0) })
} else {
  const kids = Array.from({ length: 20 }, () => sleeper())
  kids.forEach((k, i) => k.on('exit', () => {
    if (mode === 'exit-in-listener' && i === 0) process.exit(5)
    spawnSupervised('true', [], { stdio: 'ignore' })
    if (mode === 'terminated-in-listener' && i === 0) {
      for (let j = 0; j < 5; j++) sleeper()
      Atomics.store(s, 0, 2)
      Atomics.wait(s, 0, 2) // until terminate() ends it
    }
  }))
  if (mode === 'terminated') Atomics.store(s, 0, 1)
  else for (const k of kids) k.kill('SIGKILL')
}`

describe('worker threads', () => {
  it.each([
    ['exit-in-listener', 5, 20],
    ['terminated', 1, 20],
    ['terminated-in-listener', 1, 25],
    ['spawn-then-exit', 0, 1],
  ] as const)('%s: the worker ends with %i, each child it spawned reaped', async (mode, code, spawned) => {
    const r = await runScript(
      `const { Worker } = require('node:worker_threads')
const { readdirSync, readFileSync } = require('node:fs')
const stat = (p) => { try { const t = readFileSync('/proc/' + p + '/stat', 'latin1'); return t.slice(t.lastIndexOf(')') + 2).split(' ') } catch { return null } }
const zombies = () => readdirSync('/proc').filter((e) => /^\\d+$/.test(e)).filter((e) => { const f = stat(e); return f && f[0] === 'Z' && Number(f[1]) === process.pid })
const pause = () => new Promise((r) => setTimeout(r, 5))
;(async () => {
  const mode = ${JSON.stringify(mode)}
  const shared = new SharedArrayBuffer(256)
  const s = new Int32Array(shared)
  const w = new Worker(${JSON.stringify(WORKER)}, { eval: true, workerData: { procward: ${JSON.stringify(PROCWARD)}, mode, shared } })
  const ended = new Promise((r) => w.once('exit', r))
  const step = { terminated: 1, 'terminated-in-listener': 2 }[mode]
  if (step) {
    for (const until = Date.now() + 10000; Atomics.load(s, 0) !== step && Date.now() < until; ) await pause()
    if (mode === 'terminated') for (let i = 0; i < s[1]; i++) process.kill(s[2 + i], 'SIGKILL')
    await w.terminate()
  }
  const code = await ended
  const pids = Array.from(s.subarray(2, 2 + s[1]))
  // What the worker left running is still this process's child: kill it.
  for (const p of pids) { const f = stat(p); if (f && f[0] !== 'Z' && Number(f[1]) === process.pid) process.kill(p, 'SIGKILL') }
  for (const until = Date.now() + 5000; (pids.some((p) => stat(p) !== null) || zombies().length > 0) && Date.now() < until; ) await pause()
  out({ code, spawned: pids.length, left: pids.filter((p) => stat(p) !== null), zombies: zombies() })
})()`,
      'loop',
    )
    expect(r).toMatchObject({ status: 0, signal: null, lines: [{ code, spawned, left: [], zombies: [] }] })
  })
})
