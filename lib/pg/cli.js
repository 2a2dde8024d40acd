// `procward lock --postgres URL --key KEY -- COMMAND`: the CLI form of the lock.

const os = require('node:os')
const { typeError } = require('../errors')
const validate = require('../validate')
const { acquirePgLock } = require('./lock')
const { PURPOSE_MAX } = require('./options')
const { spawnFailureStatus, SPAWN_WORDS } = require('../cli/exec-failure.js')

const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP']
/** EX_TEMPFAIL: held by another holder, or lost while the command ran. */
const EXIT_LOCKED = 75

/** The command line as the holder's purpose: cut to what a purpose holds, never inside a surrogate pair. */
function purposeOf(command, args) {
  const line = [command, ...args].join(' ')
  if (line.length <= PURPOSE_MAX) return line
  const cut = line.slice(0, PURPOSE_MAX - 1)
  return `${/[\ud800-\udbff]$/.test(cut) ? cut.slice(0, -1) : cut}…`
}

function statusOf(exit) {
  if (exit === null) return 1
  if (exit.signal) return 128 + (os.constants.signals[exit.signal] ?? 0)
  return exit.code ?? 1
}

/**
 * `procward lock --postgres URL --key KEY [--wait[=MS]] -- COMMAND [ARGS...]`:
 * runs COMMAND while holding the PostgreSQL lock KEY. Resolves to the exit
 * status to exit with: 75 when the lock is held by another holder (or the
 * wait ran out), 75 too when the lock may have been lost while the command
 * ran (its process group is then stopped: SIGTERM, SIGKILL after graceMs),
 * else the command's own status (128 + signal number for a signal); 127
 * when COMMAND is not found, 126 when it cannot be run (as a shell).
 * SIGINT, SIGTERM and SIGHUP abort a wait (status 128 + the signal), and
 * once the command runs are passed on to its process group; a second one
 * SIGKILLs the group. Bad input and connection failures reject.
 */
async function runPgLock(options) {
  const {
    url,
    key,
    wait = false,
    command,
    args = [],
    stdio = 'inherit',
    hostLossMs,
    graceMs = 5000,
    stderr = process.stderr,
  } = options ?? {}
  if (typeof command !== 'string' || command.length === 0) {
    throw typeError(`command must be a non-empty string, got ${validate.describe(command)}`)
  }
  if (!Array.isArray(args) || !args.every((a) => typeof a === 'string')) {
    throw typeError('args must be an array of strings')
  }
  validate.duration(graceMs, 'graceMs')
  const procward = require('../supervised')
  const say = (msg) => stderr.write(`procward: ${msg}\n`)

  // While waiting: a signal ends the wait, and us with its status.
  const waitAbort = new AbortController()
  let waitSignal = null
  const onWaitSignal = {}
  for (const sig of FORWARDED) {
    onWaitSignal[sig] = () => {
      waitSignal ??= sig
      waitAbort.abort()
    }
    process.on(sig, onWaitSignal[sig])
  }
  const unlistenWait = () => {
    for (const sig of FORWARDED) process.removeListener(sig, onWaitSignal[sig])
  }
  let lock
  try {
    const lockOptions = { connection: url, key, wait, signal: waitAbort.signal, purpose: purposeOf(command, args) }
    if (hostLossMs !== undefined) lockOptions.hostLossMs = hostLossMs
    lock = await acquirePgLock(lockOptions)
  } catch (err) {
    unlistenWait()
    if (err?.code === 'ELOCKED') {
      say(err.message)
      return EXIT_LOCKED
    }
    if (err?.name === 'AbortError' && waitSignal !== null) return 128 + os.constants.signals[waitSignal]
    throw err
  }

  // While the command runs: signals go to its process group; a loss stops it.
  let child = null
  let signals = 0
  let pending = null
  const toGroup = (sig) => {
    if (child === null || child.exitInfo !== null || !(child.pgid > 1)) return
    try {
      process.kill(-child.pgid, sig)
    } catch {
      // the group is gone
    }
  }
  const onSignal = {}
  for (const sig of FORWARDED) {
    onSignal[sig] = () => {
      signals++
      if (child === null) pending = sig
      else toGroup(signals > 1 ? 'SIGKILL' : sig)
    }
    process.on(sig, onSignal[sig])
  }
  // Listening from before the spawn, so a signal in between is passed on.
  unlistenWait()
  let lost = false
  const onLost = () => {
    lost = true
    say(`${lock.signal.reason?.message ?? 'the lock may have been lost'}; stopping ${command}`)
    if (child !== null && child.exitInfo === null) {
      procward.stopSupervisedProcess(child, { graceMs }).catch(() => {})
    }
  }
  lock.signal.addEventListener('abort', onLost, { once: true })
  const unlisten = () => {
    lock.signal.removeEventListener('abort', onLost)
    for (const sig of FORWARDED) process.removeListener(sig, onSignal[sig])
  }
  try {
    child = procward.spawnSupervised(command, args, { stdio, processGroup: true })
  } catch (err) {
    unlisten()
    await lock.release()
    const status = spawnFailureStatus(err)
    if (status === null) throw err
    say(`${command}: ${SPAWN_WORDS[err.code] ?? err.message}`)
    return status
  }
  if (lost) procward.stopSupervisedProcess(child, { graceMs }).catch(() => {})
  else if (pending !== null) toGroup(signals > 1 ? 'SIGKILL' : pending)
  const exit = await child.exited
  unlisten()
  await lock.release()
  return lost ? EXIT_LOCKED : statusOf(exit)
}

module.exports = { runPgLock }
