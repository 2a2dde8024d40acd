// The other process in the lock benchmark, for one of three implementations
// (procward | proper-lockfile | pidfile):
//   node lock-peer.cjs <impl> <path> hold    take the lock, print "held", keep it
//   node lock-peer.cjs <impl> <path> serve   on each stdin line "wait": wait for
//       the lock, print "got <CLOCK_MONOTONIC ns>" the moment it is ours,
//       release it, print "released"
// Waiting, proper-lockfile and the pid file poll every POLL_MS (procward blocks
// in the kernel).
const fs = require('node:fs')
const path = require('node:path')
const { acquireLock } = require(path.join(__dirname, '..', 'index.js'))
const properLockfile = require('proper-lockfile')

const POLL_MS = 10
const [impl, file, role] = process.argv.slice(2)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** The pattern procward replaces: a pid file judged by kill(pid, 0). */
function pidFileTry(file) {
  try {
    const fd = fs.openSync(file, 'wx')
    fs.writeSync(fd, String(process.pid))
    fs.closeSync(fd)
    return () => fs.unlinkSync(file)
  } catch (e) {
    if (e.code !== 'EEXIST') throw e
  }
  let pid
  try {
    pid = Number(fs.readFileSync(file, 'utf8'))
  } catch {
    return null // released meanwhile: try again
  }
  try {
    process.kill(pid, 0)
    return null // "alive" (a zombie too)
  } catch {
    fs.rmSync(file, { force: true }) // stale: take it over on the next try
    return null
  }
}

async function take(wait) {
  if (impl === 'procward') {
    const lock = await acquireLock(file, { wait })
    return () => lock.release()
  }
  if (impl === 'proper-lockfile') {
    const retries = wait ? { forever: true, factor: 1, minTimeout: POLL_MS, maxTimeout: POLL_MS } : 0
    return properLockfile.lock(file, { retries, realpath: false })
  }
  for (;;) {
    const release = pidFileTry(file)
    if (release || !wait) return release
    await sleep(POLL_MS)
  }
}

async function main() {
  if (role === 'hold') {
    await take(false)
    console.log('held')
    setInterval(() => {}, 1 << 30)
    return
  }
  let buf = ''
  process.stdin.on('data', async (d) => {
    buf += String(d)
    while (buf.includes('\n')) {
      buf = buf.slice(buf.indexOf('\n') + 1)
      const got = take(true)
      console.log('waiting')
      const release = await got
      const at = process.hrtime.bigint()
      console.log(`got ${at}`)
      await release()
      console.log('released')
    }
  })
}
main()
