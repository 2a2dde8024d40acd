// Smoke test under Bun (run by scripts/test.sh when Bun could be installed
// from the npm registry): the tokio back-end, streams, stop, bare-pid stop,
// liveness, and the environment a child inherits. Bun is not Node: the
// JS-loop back-end must stay off there, and its process.env writes do not
// reach the C environ.
const assert = require('node:assert/strict')
const { join } = require('node:path')
const p = require(join(__dirname, '..', 'index.js'))

/** The environment a child started with `env` (or none) sees, as `env(1)` prints it. */
async function childEnv(env) {
  const c = p.spawnSupervised('/usr/bin/env', [], { stdio: ['ignore', 'pipe', 'inherit'], ...(env && { env }) })
  let out = ''
  c.stdout.on('data', (d) => (out += d))
  await Promise.all([c.exited, new Promise((r) => c.stdout.on('end', r))])
  return Object.fromEntries(
    out
      .split('\n')
      .filter(Boolean)
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  )
}

async function main() {
  const c = p.spawnSupervised('sh', ['-c', 'cat; echo err >&2; exit 3'], { stdio: 'pipe' })
  assert.equal(c.exitWatch, 'pidfd-tokio')
  assert.equal(c.identity, p.getProcessInfo(c.pid).identity)
  let out = ''
  let err = ''
  c.stdout.on('data', (d) => (out += d))
  c.stderr.on('data', (d) => (err += d))
  c.stdin.end('hello')
  const info = await c.exited
  assert.deepEqual(info, { pid: c.pid, code: 3, signal: null })
  assert.equal(p.isProcessRunning(c.pid), false)
  await new Promise((r) => setTimeout(r, 50))
  assert.equal(out, 'hello')
  assert.equal(err, 'err\n')

  const d = p.spawnSupervised('sleep', ['100'])
  const r = await d.stop({ graceMs: 200 })
  assert.equal(r.outcome, 'exited')
  assert.deepEqual(r.signals, ['SIGTERM'])

  const k = p.spawnSupervised('sleep', ['100'])
  const identity = k.identity
  assert.equal(p.isProcessRunning(k.pid, identity), true)
  const r2 = await p.stopSupervisedProcess(k.pid, { identity, graceMs: 200 })
  assert.equal(r2.outcome, 'exited')
  await k.exited
  // Without `env` the child gets process.env as it is now, as with
  // child_process: a variable set, changed or deleted at run time included
  // (HOME and PATH were in the environment Bun started with).
  assert.ok(process.env.HOME && process.env.PATH, 'HOME and PATH set at start')
  process.env.PROCWARD_BUN_SET = 'set at run time'
  process.env.PATH = `/procward-bun-nowhere:${process.env.PATH}`
  delete process.env.HOME
  const seen = await childEnv()
  assert.equal(seen.PROCWARD_BUN_SET, 'set at run time')
  assert.equal(seen.PATH, process.env.PATH)
  assert.equal('HOME' in seen, false)
  // An explicit env is still the child's whole environment.
  assert.deepEqual(await childEnv({ ONLY: 'only' }), { ONLY: 'only' })

  assert.throws(() => p.isProcessRunning(0), RangeError)
  await assert.rejects(p.stopSupervisedProcess(-1), RangeError)
  console.log(`bun smoke: every check passed under Bun ${process.versions.bun}`)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
