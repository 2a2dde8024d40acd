// Smoke test under Deno (npm's @deno/linux-x64-glibc): procward loaded the
// way a Deno program loads a Node addon (createRequire, then require), and
// real processes: a spawn with its streams and exit status, a stop, a stop
// by bare pid, liveness of a process that is not ours, and a lock taken,
// refused to a second holder, and released. Deno has no libuv: the exit
// watch must be the tokio one. Runs under Node too (the same checks), so a
// failure here can be told apart from a Deno difference.
//
// Usage: deno run --allow-all scripts/deno-smoke.mjs
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const require = createRequire(import.meta.url)
const p = require('../index.js')
const underDeno = typeof globalThis.Deno !== 'undefined'

async function main(dir) {
  const c = p.spawnSupervised('sh', ['-c', 'cat; echo err >&2; exit 3'], { stdio: 'pipe' })
  if (underDeno) assert.equal(c.exitWatch, 'pidfd-tokio')
  assert.equal(c.identity, p.getProcessInfo(c.pid).identity)
  let out = ''
  let err = ''
  c.stdout.on('data', (d) => (out += d))
  c.stderr.on('data', (d) => (err += d))
  const ends = Promise.all([c.stdout, c.stderr].map((s) => new Promise((r) => s.on('end', r))))
  c.stdin.end('hello')
  assert.deepEqual(await c.exited, { pid: c.pid, code: 3, signal: null })
  assert.equal(p.isProcessRunning(c.pid), false)
  await ends
  assert.equal(out, 'hello')
  assert.equal(err, 'err\n')

  const d = p.spawnSupervised('sleep', ['100'], { stdio: 'ignore' })
  const stopped = await d.stop({ graceMs: 2000 })
  assert.equal(stopped.outcome, 'exited')
  assert.deepEqual(stopped.signals, ['SIGTERM'])
  assert.equal(p.isProcessRunning(d.pid), false)

  const k = p.spawnSupervised('sleep', ['100'], { stdio: 'ignore' })
  assert.equal(p.isProcessRunning(k.pid, k.identity), true)
  const byPid = await p.stopSupervisedProcess(k.pid, { identity: k.identity, graceMs: 2000 })
  assert.equal(byPid.outcome, 'exited')
  await k.exited

  // A process this one did not start through procward (Deno's own spawn).
  const other = spawn('sleep', ['100'], { stdio: 'ignore' })
  await new Promise((r) => other.once('spawn', r))
  const info = p.getProcessInfo(other.pid)
  assert.equal(info.name, 'sleep')
  assert.equal(p.isProcessRunning(other.pid, info.identity), true)
  const gone = p.waitForExit(other.pid)
  other.kill('SIGKILL')
  assert.equal((await gone).pid, other.pid)
  await new Promise((r) => (other.exitCode === null && other.signalCode === null ? other.once('exit', r) : r()))
  assert.equal(p.isProcessRunning(other.pid), false)

  const path = join(dir, 'smoke.lock')
  const lock = p.tryLock(path, { purpose: 'deno smoke' })
  assert.ok(lock, 'the lock is free')
  assert.equal(lock.holder.pid, process.pid)
  assert.equal(p.readLock(path).held, true)
  assert.equal(p.readLock(path).holder.purpose, 'deno smoke')
  // A second holder in another process is refused while this one holds it.
  const probe = p.spawnSupervised('flock', ['-n', path, 'true'], { stdio: 'ignore' })
  assert.equal((await probe.exited).code, 1)
  lock.release()
  assert.equal(p.readLock(path).held, false)
  const again = await p.acquireLock(path, { wait: 2000 })
  again.release()

  assert.throws(() => p.isProcessRunning(0), RangeError)
  await assert.rejects(p.stopSupervisedProcess(-1), RangeError)
  const runtime = underDeno ? `Deno ${globalThis.Deno.version.deno}` : `Node ${process.version}`
  console.log(`deno smoke: every check passed under ${runtime} (exit watch ${c.exitWatch})`)
}

const dir = mkdtempSync(join(tmpdir(), 'procward-deno-'))
try {
  await main(dir)
} catch (e) {
  console.error(e)
  process.exitCode = 1
} finally {
  rmSync(dir, { recursive: true, force: true })
}
