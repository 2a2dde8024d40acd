// procward lock: runs a command while holding a lock, as flock(1) does —
// a file's (flock(2), with a holder record), or with --postgres a
// PostgreSQL session advisory lock (procward/pg, loaded only then).

const fs = require('node:fs')
const tty = require('node:tty')
const { parse, integer, MAX_MS, UsageError } = require('./args.js')
const common = require('./common.js')

const SPEC = { wait: 'optional', postgres: 'value', key: 'value' }

/** EX_TEMPFAIL: the lock is held by another (as flock(1) -E would be told to use). */
const EXIT_LOCKED = 75

/**
 * Could this SIGINT have come from our terminal's Ctrl-C? Then the command,
 * in our process group, has had it too, and must not get it twice. A
 * SIGINT sent with kill(1) (timeout -s INT, a container's stop signal)
 * reaches us alone: it must be passed on. The terminal sends it to its
 * foreground process group only; on Linux /proc tells whether we are in
 * it (elsewhere: whether a standard stream is a terminal).
 */
function terminalMaySendInt() {
  if (process.platform === 'linux') {
    try {
      const stat = fs.readFileSync('/proc/self/stat', 'latin1')
      // pid (comm) state ppid pgrp session tty_nr tpgid ...
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      const pgrp = Number(f[2])
      const ttyNr = Number(f[4])
      const tpgid = Number(f[5])
      return ttyNr !== 0 && tpgid === pgrp
    } catch {
      // /proc unreadable: judge by the streams below
    }
  }
  return tty.isatty(0) || tty.isatty(1) || tty.isatty(2)
}

async function main(argv, { help }) {
  // The command starts at the first positional, or the second when the
  // first is FILE: --postgres before it says which.
  let p = parse('lock', argv, SPEC, { command: 0 })
  if (!p.opts.help && p.opts.postgres === undefined) p = parse('lock', argv, SPEC, { command: 1 })
  const { opts, positional, rest } = p
  if (opts.help) return help()
  let wait = false
  if (opts.wait === true) wait = true
  else if (opts.wait !== undefined) wait = integer('lock', opts.wait, 'wait', 0, MAX_MS)

  if (opts.postgres !== undefined) {
    if (positional.length > 0) throw new UsageError('lock', `no FILE with --postgres (got ${positional[0]})`)
    if (opts.key === undefined) throw new UsageError('lock', '--key KEY is needed with --postgres')
    if (opts.postgres === '') throw new UsageError('lock', '--postgres needs a URL')
    if (rest === null || rest.length === 0) throw new UsageError('lock', 'a COMMAND is needed (after --)')
    const [command, ...args] = rest
    const { runPgLock } = require('../pg.js')
    try {
      return await runPgLock({ url: opts.postgres, key: opts.key, wait, command, args })
    } catch (err) {
      const status = common.spawnFailureStatus(err)
      if (status === null) throw err
      common.fail(err)
      return status
    }
  }
  if (opts.key !== undefined) throw new UsageError('lock', '--key goes with --postgres')
  if (positional.length !== 1) throw new UsageError('lock', 'one FILE is needed')
  if (rest === null || rest.length === 0) throw new UsageError('lock', 'a COMMAND is needed (after --)')
  const [command, ...args] = rest
  const procward = common.procward()
  let held
  try {
    held = await procward.acquireLock(positional[0], { wait, purpose: [command, ...args].join(' ') })
  } catch (err) {
    if (err.code === 'ELOCKED') {
      process.stderr.write(`procward: ${err.message}\n`)
      return EXIT_LOCKED
    }
    throw err
  }
  // SIGTERM, SIGINT and SIGHUP sent to us are passed on (a terminal's
  // Ctrl-C has reached the command already: not twice). We exit once the
  // command has: the lock must outlive it. A second signal SIGKILLs it (a
  // command that ignores signals would otherwise hold the lock until the
  // end of time). Listening from before the spawn: a signal that arrives
  // as the command starts is passed on too, never the end of us.
  let child = null
  let signals = 0
  let pending = null
  const forward = (sig) => () => {
    signals++
    if (child === null) pending = sig
    else if (signals > 1) child.kill('SIGKILL')
    else if (sig !== 'SIGINT' || !terminalMaySendInt()) child.kill(sig)
  }
  const handlers = { SIGTERM: forward('SIGTERM'), SIGHUP: forward('SIGHUP'), SIGINT: forward('SIGINT') }
  const unlisten = () => {
    for (const [sig, h] of Object.entries(handlers)) process.removeListener(sig, h)
  }
  for (const [sig, h] of Object.entries(handlers)) process.on(sig, h)
  try {
    // In our process group, as flock(1) runs it: a terminal's Ctrl-C
    // reaches it directly, and it may read the terminal.
    child = procward.spawnSupervised(command, args, { stdio: 'inherit', processGroup: false })
  } catch (err) {
    held.release()
    unlisten()
    const status = common.spawnFailureStatus(err)
    if (status === null) throw err
    common.fail(err)
    return status
  }
  if (pending !== null) child.kill(signals > 1 ? 'SIGKILL' : pending)
  const exit = await child.exited
  held.release()
  unlisten()
  return common.statusOf(exit)
}

module.exports = { main }
