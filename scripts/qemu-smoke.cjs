// Smoke test of a cross-built Linux arm64 binary, run by scripts/cross-build.sh
// with Node's arm64 build under qemu-user. It installs the package the way a
// package manager lays it out (procward plus procward-linux-arm64-gnu beside
// it in node_modules), loads it through the real loader, and supervises real
// processes. The programs it starts (sleep, sh) are the machine's own x86_64
// ones: qemu runs only Node and the addon.
//
// qemu-user answers /proc/self/* for the emulated process itself from its
// own bookkeeping, so nothing here asks about this process's own pid.
//
// Usage: node scripts/qemu-smoke.cjs BINARY [KEY]
//   KEY: the platform the binary is for, linux-arm64-gnu unless given
//   (scripts/musl-run.sh gives linux-arm64-musl, under a musl Node)

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const { cpSync, mkdirSync, mkdtempSync, rmSync } = require('node:fs')
const { tmpdir } = require('node:os')
const { join } = require('node:path')

const root = join(__dirname, '..')
const binary = process.argv[2]
const key = process.argv[3] ?? 'linux-arm64-gnu'

async function main(modules) {
  assert.equal(process.arch, 'arm64', 'run this under an arm64 Node')
  const pkg = join(modules, 'procward')
  mkdirSync(pkg, { recursive: true })
  for (const f of ['package.json', 'index.js', 'index.mjs', 'binding.js', 'platform.js', 'lib']) {
    cpSync(join(root, f), join(pkg, f), { recursive: true })
  }
  const plat = join(modules, `procward-${key}`)
  mkdirSync(plat)
  cpSync(join(root, 'npm', key, 'package.json'), join(plat, 'package.json'))
  cpSync(binary, join(plat, `procward.${key}.node`))

  const p = require(pkg)

  const other = spawn('sleep', ['100'], { stdio: 'ignore' })
  // Its name is the parent's until the kernel is through the exec (slow under emulation).
  let info = p.getProcessInfo(other.pid)
  for (let i = 0; i < 500 && info.name !== 'sleep'; i++) {
    await new Promise((r) => setTimeout(r, 10))
    info = p.getProcessInfo(other.pid)
  }
  assert.equal(info.name, 'sleep')
  // Alive, in whatever state the emulated loader has it in (it may still be
  // reading its libraries: disk-sleep).
  assert.ok(['running', 'sleeping', 'disk-sleep'].includes(info.state), `state ${info.state}`)
  assert.equal(p.isProcessRunning(other.pid, info.identity), true)
  other.kill('SIGKILL')
  await new Promise((r) => other.once('exit', r))
  assert.equal(p.isProcessRunning(other.pid), false)

  const failing = p.spawnSupervised('sh', ['-c', 'exit 3'], { stdio: 'ignore' })
  assert.deepEqual(await failing.exited, { pid: failing.pid, code: 3, signal: null })

  const daemon = p.spawnSupervised('sleep', ['100'], { stdio: 'ignore' })
  assert.equal(p.getProcessInfo(daemon.pid).identity, daemon.identity)
  const stopped = await daemon.stop({ graceMs: 2000 })
  assert.equal(stopped.outcome, 'exited')
  assert.deepEqual(stopped.signals, ['SIGTERM'])
  assert.equal(p.isProcessRunning(daemon.pid), false)
  assert.throws(() => p.isProcessRunning(0), RangeError)
  console.log(
    `qemu smoke: every check passed (Node ${process.version} ${process.arch}, ${key}, exit watch ${daemon.exitWatch})`,
  )
}

const modules = join(mkdtempSync(join(tmpdir(), 'procward-arm64-')), 'node_modules')
main(modules)
  .catch((err) => {
    console.error(err)
    process.exitCode = 1
  })
  .finally(() => rmSync(join(modules, '..'), { recursive: true, force: true }))
