// ProcessLock against proper-lockfile (mtime-judged lock directory) and the
// pattern it replaces (a pid file judged by kill(pid, 0)): uncontended cost,
// handover from a release to a waiting process, and from a holder SIGKILLed
// and left a zombie to a waiting contender. Then the takeover after a
// SIGKILL side by side: the file lock, procward/pg's PostgreSQL lock (on
// PROCWARD_TEST_PG_URL, or a throwaway server from scripts/pg-server.sh)
// and proper-lockfile.
import { execFileSync, spawn } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, unlinkSync, writeFileSync, writeSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fmt, lines, perCall, quantile, ratio, table } from './util.mjs'

const require = createRequire(import.meta.url)
const { acquireLock, readLock, tryLock } = require('../index.js')
const properLockfile = require('proper-lockfile')

const PEER = join(import.meta.dirname, 'lock-peer.cjs')
// The kernel floor: python3 blocked in flock(2) itself, printing
// CLOCK_MONOTONIC (the clock of process.hrtime) the moment it returns.
const PY_FLOCK_SERVE = `
import fcntl, sys, time
f = open(sys.argv[1], 'r+')
for line in sys.stdin:
    print('waiting', flush=True)
    fcntl.flock(f, fcntl.LOCK_EX)
    print('got', time.clock_gettime_ns(time.CLOCK_MONOTONIC), flush=True)
    fcntl.flock(f, fcntl.LOCK_UN)
    print('released', flush=True)
`
const PY_FLOCK_ONCE = `
import fcntl, sys, time
f = open(sys.argv[1], 'a+')
print('waiting', flush=True)
fcntl.flock(f, fcntl.LOCK_EX)
print(time.clock_gettime_ns(time.CLOCK_MONOTONIC), flush=True)
`
const PG_SERVER = join(import.meta.dirname, '..', 'scripts', 'pg-server.sh')
// A pg lock holder: takes the lock, says "held", keeps it until killed.
const PG_HOLDER = `
const { acquirePgLock } = require(process.argv[1])
acquirePgLock({ connection: process.argv[2], key: process.argv[3], wait: true, hostLossMs: 60000 }).then(() => {
  console.log('held')
  setInterval(() => {}, 1 << 30)
})
`
const POLL_MS = 10 // how often proper-lockfile and the pid file retry here
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const monoMs = () => Number(process.hrtime.bigint()) / 1e6

/** proper-lockfile retrying every POLL_MS for up to capMs: `onHeld()`, then released. */
function properLockfileOnce(file, { capMs, stale }, onHeld) {
  const retries = { retries: Math.ceil(capMs / POLL_MS), factor: 1, minTimeout: POLL_MS, maxTimeout: POLL_MS }
  return properLockfile.lock(file, { realpath: false, stale, retries }).then((release) => {
    onHeld()
    return release()
  })
}

function pidFileTry(file) {
  try {
    const fd = openSync(file, 'wx')
    writeSync(fd, String(process.pid))
    closeSync(fd)
    return () => unlinkSync(file)
  } catch (e) {
    if (e.code !== 'EEXIST') throw e
    return null
  }
}

async function asyncPerCall(fn, n) {
  for (let i = 0; i < 50; i++) await fn()
  const means = []
  for (let b = 0; b < 5; b++) {
    const t0 = performance.now()
    for (let i = 0; i < n; i++) await fn()
    means.push(((performance.now() - t0) * 1000) / n)
  }
  return means.sort((a, b) => a - b)[2]
}

async function uncontended(dir) {
  const a = join(dir, 'u-procward')
  const b = join(dir, 'u-proper')
  writeFileSync(b, '')
  const c = join(dir, 'u-pid')
  const rows = [
    ['procward tryLock + release', perCall(() => tryLock(a).release(), { batches: 5, perBatch: 2000 })],
    ['procward await acquireLock + release', await asyncPerCall(async () => (await acquireLock(a)).release(), 2000)],
    ['proper-lockfile lockSync + release', perCall(() => properLockfile.lockSync(b)(), { batches: 5, perBatch: 500 })],
    ['proper-lockfile await lock + release', await asyncPerCall(async () => (await properLockfile.lock(b))(), 500)],
    ['pid file: open wx + write + unlink', perCall(() => pidFileTry(c)(), { batches: 5, perBatch: 2000 })],
    ['procward readLock (free)', perCall(() => readLock(a), { batches: 5, perBatch: 2000 })],
    ['proper-lockfile checkSync (free)', perCall(() => properLockfile.checkSync(b), { batches: 5, perBatch: 2000 })],
  ]
  const base = rows[0][1]
  console.log('\n## Lock: uncontended acquire + release, and a read (median µs per op)\n')
  table(
    rows.map(([what, t]) => ({ what, 'µs/op': fmt(t, 1), 'vs tryLock': ratio(t, base) })),
    ['what', 'µs/op', 'vs tryLock'],
  )
}

/** Release here → the waiting peer process holds the lock (ms, CLOCK_MONOTONIC). */
async function handover(impl, file, n) {
  const peer =
    impl === 'flock'
      ? spawn('python3', ['-c', PY_FLOCK_SERVE, file], { stdio: ['pipe', 'pipe', 'inherit'] })
      : spawn(process.execPath, [PEER, impl, file, 'serve'], { stdio: ['pipe', 'pipe', 'inherit'] })
  const next = lines(peer.stdout)
  const out = []
  for (let i = 0; i < n; i++) {
    let release
    if (impl === 'procward' || impl === 'flock') {
      const lock = await acquireLock(file, { wait: true })
      release = () => lock.release()
    } else if (impl === 'proper-lockfile')
      release = await properLockfile.lock(file, {
        realpath: false,
        retries: { forever: true, factor: 1, minTimeout: POLL_MS, maxTimeout: POLL_MS },
      })
    else {
      for (;;) {
        release = pidFileTry(file)
        if (release) break
        await sleep(POLL_MS)
      }
    }
    peer.stdin.write('wait\n')
    await next() // waiting
    // Let it settle into its wait, at a random phase of its retry timer.
    await sleep(20 + Math.random() * POLL_MS)
    const t0 = process.hrtime.bigint()
    await release()
    const got = BigInt((await next()).split(' ')[1])
    await next() // released
    out.push(Number(got - t0) / 1e6)
  }
  peer.kill('SIGKILL')
  return out.sort((a, b) => a - b)
}

/** 'Z' (zombie), another state letter (still exiting), or '-' (gone). */
function stateOf(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'latin1')
    return s[s.lastIndexOf(')') + 2]
  } catch {
    return '-'
  }
}

/**
 * A holder whose parent never reaps it is SIGKILLed (it stays a zombie);
 * how long until a contender, already waiting, holds the lock? Capped.
 */
async function afterZombie(impl, file, { capMs, stale }) {
  const holderImpl = impl === 'flock' ? 'procward' : impl
  const parent = spawn('sh', ['-c', `node "$0" "$1" "$2" hold & echo $!; exec sleep 1000`, PEER, holderImpl, file], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const next = lines(parent.stdout)
  const holder = Number(await next())
  await next() // held
  let done = false
  let got = null
  let state = null
  const mark = () => {
    got = monoMs()
    state = stateOf(holder)
  }
  let contender
  let py = null
  if (impl === 'procward') {
    contender = acquireLock(file, { wait: capMs }).then((l) => {
      mark()
      l.release()
    })
  } else if (impl === 'flock') {
    py = spawn('python3', ['-c', PY_FLOCK_ONCE, file], { stdio: ['ignore', 'pipe', 'inherit'] })
    const pyNext = lines(py.stdout)
    await pyNext() // waiting
    contender = pyNext().then((ns) => {
      got = Number(BigInt(ns)) / 1e6
      state = stateOf(holder)
    })
  } else if (impl === 'proper-lockfile') {
    contender = properLockfileOnce(file, { capMs, stale }, mark)
  } else {
    contender = (async () => {
      while (!done) {
        let release = pidFileTry(file)
        if (!release) {
          let pid = 0
          try {
            pid = Number(readFileSync(file, 'utf8'))
          } catch {}
          try {
            process.kill(pid, 0) // a zombie answers "alive"
          } catch {
            rmSync(file, { force: true })
            release = pidFileTry(file)
          }
        }
        if (release) {
          mark()
          release()
          return
        }
        await sleep(POLL_MS)
      }
    })()
  }
  await sleep(50) // the contender is waiting
  const killedAt = monoMs()
  process.kill(holder, 'SIGKILL')
  const timer = setTimeout(() => {
    done = true
  }, capMs)
  await contender.catch(() => {})
  done = true
  clearTimeout(timer)
  if (py) py.kill('SIGKILL')
  parent.kill('SIGKILL') // the zombie goes to init, which reaps it
  await new Promise((r) => parent.once('exit', r))
  rmSync(file, { recursive: true, force: true })
  rmSync(`${file}.lock`, { recursive: true, force: true })
  return { ms: got === null ? null : got - killedAt, state }
}

/** A PostgreSQL server to bench against: { url, stop }, or null (with the reason printed). */
function pgServer() {
  if (process.env.PROCWARD_TEST_PG_URL) return { url: process.env.PROCWARD_TEST_PG_URL, stop() {} }
  let out
  try {
    out = execFileSync('bash', [PG_SERVER, 'start'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  } catch (err) {
    console.log(`(no PostgreSQL server here, the pg lock is left out: ${String(err.stderr ?? err.message).trim()})`)
    return null
  }
  const url = /^PROCWARD_TEST_PG_URL=(.*)$/m.exec(out)?.[1]
  const dir = /^PROCWARD_TEST_PG_DIR=(.*)$/m.exec(out)?.[1]
  return { url, stop: () => execFileSync('bash', [PG_SERVER, 'stop', dir]) }
}

/**
 * A holder process SIGKILLed (reaped at once): how long until a contender,
 * already waiting in this process, holds the lock? ms after the kill, or
 * null when not within capMs.
 */
async function afterKill(impl, target, { capMs, stale, pgUrl }) {
  let holder
  if (impl === 'pg') {
    holder = spawn(process.execPath, ['-e', PG_HOLDER, join(import.meta.dirname, '..', 'pg.js'), pgUrl, target], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
  } else {
    holder = spawn(process.execPath, [PEER, impl === 'file' ? 'procward' : impl, target, 'hold'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
  }
  const next = lines(holder.stdout)
  await next() // held
  let got = null
  let contender
  if (impl === 'file') {
    contender = acquireLock(target, { wait: capMs }).then((l) => {
      got = monoMs()
      l.release()
    })
  } else if (impl === 'pg') {
    const { acquirePgLock } = require('../pg.js')
    contender = acquirePgLock({ connection: pgUrl, key: target, wait: capMs }).then((l) => {
      got = monoMs()
      return l.release()
    })
  } else {
    contender = properLockfileOnce(target, { capMs, stale }, () => {
      got = monoMs()
    })
  }
  await sleep(100) // the contender is waiting
  const killedAt = monoMs()
  holder.kill('SIGKILL')
  await contender.catch(() => {})
  await new Promise((r) => (holder.exitCode !== null || holder.signalCode !== null ? r() : holder.once('exit', r)))
  return got === null ? null : got - killedAt
}

export async function takeoverSideBySide(dir) {
  const CAP_MS = 15_000
  const server = pgServer()
  const rows = []
  const result = {}
  try {
    const cases = [
      ['file', 'procward acquireLock({ wait }) (flock)', 20],
      ...(server ? [['pg', 'procward/pg acquirePgLock({ wait }) (hostLossMs 60 s)', 20]] : []),
      ['proper-lockfile', 'proper-lockfile lock(), minimum stale (2 s), retry every 10 ms', 2],
    ]
    for (const [impl, label, n] of cases) {
      const s = []
      for (let i = 0; i < n; i++) {
        const target = impl === 'pg' ? `bench:takeover:${process.pid}:${i}` : join(dir, `k-${impl}-${i}`)
        if (impl === 'proper-lockfile') writeFileSync(target, '')
        s.push(await afterKill(impl, target, { capMs: CAP_MS, stale: 2000, pgUrl: server?.url }))
        rmSync(`${target}.lock`, { recursive: true, force: true })
      }
      const got = s.filter((x) => x !== null).sort((a, b) => a - b)
      result[impl] = got.length === s.length ? quantile(got, 0.5) : Number.NaN
      rows.push({
        contender: label,
        p50: got.length === s.length ? fmt(quantile(got, 0.5), 3) : `never within ${CAP_MS / 1000} s`,
        p95: got.length === s.length ? fmt(quantile(got, 0.95), 3) : '-',
        max: got.length === s.length ? fmt(got[got.length - 1], 3) : '-',
        n,
      })
    }
  } finally {
    server?.stop()
  }
  for (const row of rows) {
    const impl = row.contender.startsWith('procward/pg')
      ? 'pg'
      : row.contender.startsWith('procward')
        ? 'file'
        : 'proper-lockfile'
    row['vs file lock'] = ratio(result[impl], result.file)
    row['vs pg lock'] = result.pg === undefined ? '-' : ratio(result[impl], result.pg)
  }
  console.log(
    '\n## Lock: holder SIGKILLed → a waiting contender holds it: file lock, pg lock, proper-lockfile (ms after the kill, p50 ratios)\n',
  )
  table(rows, ['contender', 'p50', 'p95', 'max', 'n', 'vs file lock', 'vs pg lock'])
}

export async function run() {
  const dir = mkdtempSync(join(tmpdir(), 'procward-bench-lock-'))
  try {
    await uncontended(dir)

    console.log(`\n## Lock: release → a waiting process holds it (ms; others poll every ${POLL_MS} ms)\n`)
    const rows = []
    for (const [impl, label] of [
      ['procward', 'procward acquireLock({ wait: true })'],
      ['flock', 'python3 blocked in flock(2) (kernel floor)'],
      ['proper-lockfile', `proper-lockfile lock(), retry every ${POLL_MS} ms`],
      ['pidfile', `pid file + kill(pid, 0), retry every ${POLL_MS} ms`],
    ]) {
      const file = join(dir, `h-${impl}`)
      if (impl === 'proper-lockfile' || impl === 'flock') writeFileSync(file, '')
      const s = await handover(impl, file, impl === 'procward' || impl === 'flock' ? 100 : 30)
      rows.push({
        contender: label,
        p50: fmt(quantile(s, 0.5), 3),
        p95: fmt(quantile(s, 0.95), 3),
        max: fmt(s[s.length - 1], 3),
        n: s.length,
      })
    }
    table(rows, ['contender', 'p50', 'p95', 'max', 'n'])

    const CAP_MS = 3000
    console.log(
      `\n## Lock: holder SIGKILLed, left a zombie → a waiting contender holds it (ms after the kill; capped at ${CAP_MS / 1000} s for the pid file)\n`,
    )
    const zrows = []
    const zombieRow = async (label, impl, n, opts) => {
      const s = []
      let zombie = 0
      let exiting = 0
      for (let i = 0; i < n; i++) {
        const r = await afterZombie(impl, join(dir, `z-${impl}-${i}`), opts)
        if (r.state === 'Z') zombie++
        else if (r.state !== null && r.state !== '-') exiting++
        s.push(r.ms)
      }
      const got = s.filter((x) => x !== null).sort((a, b) => a - b)
      const never = `never within ${opts.capMs / 1000} s`
      const all = got.length === s.length
      zrows.push({
        contender: label,
        p50: all ? fmt(quantile(got, 0.5), 3) : never,
        p95: all ? fmt(quantile(got, 0.95), 3) : never,
        max: all ? fmt(got[got.length - 1], 3) : never,
        n,
        'holder then: Z / exiting': all ? `${zombie} / ${exiting}` : '-',
      })
    }
    await zombieRow('procward acquireLock({ wait })', 'procward', 30, { capMs: CAP_MS })
    await zombieRow('python3 blocked in flock(2) (kernel floor)', 'flock', 20, { capMs: CAP_MS })
    await zombieRow('proper-lockfile, default stale (10 s)', 'proper-lockfile', 1, { capMs: 15_000, stale: 10_000 })
    await zombieRow('proper-lockfile, minimum stale (2 s)', 'proper-lockfile', 2, { capMs: 5000, stale: 2000 })
    await zombieRow('pid file + kill(pid, 0)', 'pidfile', 2, { capMs: CAP_MS })
    table(zrows, ['contender', 'p50', 'p95', 'max', 'n', 'holder then: Z / exiting'])

    await takeoverSideBySide(dir)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
