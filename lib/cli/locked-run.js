// The one way the CLI runs a command while a lock is held (procward lock):
// acquire, run, pass signals on, stop the command when the lock may be
// lost, release once the command is gone. What differs between the file
// lock and the PostgreSQL lock is their source (lib/cli/lock.js), and what
// follows from it: a lock that can be lost runs its command in a process
// group of its own, so that the loss can stop all of it.

const { constants } = require('node:os')
const tty = require('node:tty')
const common = require('./common.js')
const earlySignals = require('./early-signals.js')

/** EX_TEMPFAIL: held by another holder, or lost while the command ran. */
const EXIT_LOCKED = 75

const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP']

/**
 * Could this SIGINT have come from our terminal's Ctrl-C? Then the command,
 * in our process group, has had it too, and must not get it twice. A
 * SIGINT sent with kill(1) (timeout -s INT, a container's stop signal)
 * reaches us alone: it must be passed on. The terminal sends it to its
 * foreground process group only; where the kernel tells (Linux) whether
 * we are in it, that decides (elsewhere: whether a standard stream is a
 * terminal).
 */
function terminalMaySendInt() {
  const own = common.os().processStat(process.pid)
  if (own !== null) return own.ttyNr !== 0 && own.tpgid === own.pgid
  return tty.isatty(0) || tty.isatty(1) || tty.isatty(2)
}

/** Listens to the forwarded signals with `onSignal(sig)`; returns what stops listening. */
function listen(onSignal) {
  const handlers = FORWARDED.map((sig) => [sig, () => onSignal(sig)])
  for (const [sig, h] of handlers) process.on(sig, h)
  return () => {
    for (const [sig, h] of handlers) process.removeListener(sig, h)
  }
}

/**
 * A lock's source: `acquire(signal)` resolves to the held lock (its
 * `release()`, and `signal` when it can be lost) or rejects with ELOCKED;
 * `waitEndsOnSignal`: SIGINT, SIGTERM and SIGHUP end the wait, which then
 * rejects with an AbortError (else they keep their default action);
 * `envOf(lock)`: what the command is told of the lock, in its environment;
 * `lossGraceMs`: for a lock that can be lost, how long the command has
 * after SIGTERM once it is, before SIGKILL (the command must be gone
 * before another holder can be granted the lock).
 *
 * @typedef {{
 *   acquire(signal: AbortSignal): Promise<{ release(): unknown, signal?: AbortSignal }>,
 *   waitEndsOnSignal: boolean,
 *   envOf(lock: object): Record<string, string>,
 *   lossGraceMs?: number,
 * }} LockSource
 */

/**
 * Runs `command` while the lock of `source` is held. Resolves to the exit
 * status to exit with: 75 when the lock is held by another holder (or the
 * wait ran out), 75 too when the lock may have been lost while the command
 * ran (its process group is then stopped: SIGTERM, SIGKILL after the
 * source's lossGraceMs),
 * else the command's own status (128 + signal number for a signal); 127
 * when COMMAND is not found, 126 when it cannot be run (as a shell). A
 * signal that ends the wait ends us with its status. Once the command runs,
 * SIGINT, SIGTERM and SIGHUP are passed on to it (a terminal's Ctrl-C that
 * has reached it already: not twice); a second one SIGKILLs it. We exit
 * once the command has: the lock must outlive it. Other failures reject.
 *
 * @param {LockSource} source
 * @param {{ command: string, args: string[] }} run
 */
async function runLocked(source, { command, args }) {
  const procward = common.procward()
  const say = (msg) => process.stderr.write(`procward: ${msg}\n`)

  // While waiting: a signal ends the wait, and us with its status.
  const waitAbort = new AbortController()
  let waitSignal = null
  const unlistenWait = source.waitEndsOnSignal
    ? listen((sig) => {
        waitSignal ??= sig
        waitAbort.abort()
      })
    : () => {}
  let lock
  try {
    lock = await source.acquire(waitAbort.signal)
  } catch (err) {
    unlistenWait()
    if (err?.code === 'ELOCKED') {
      say(err.message)
      return EXIT_LOCKED
    }
    if (err?.name === 'AbortError' && waitSignal !== null) return 128 + constants.signals[waitSignal]
    throw err
  }

  // While the command runs. In our process group, as flock(1) runs it, a
  // terminal's Ctrl-C reaches it directly, and it may read the terminal; a
  // lock that can be lost gives it a group of its own, stopped whole.
  // The PostgreSQL lock's loss is the server's word, with a deadline
  // (lossGraceMs): the command's whole group must be gone by then. The
  // file lock's (its file removed or replaced) stops the command as
  // procward's child, in our group, as flock(1) runs it.
  const ownGroup = source.lossGraceMs !== undefined
  let child = null
  let signals = 0
  let pending = null
  const send = (sig) => {
    if (!ownGroup) return child.kill(sig)
    if (child.exitInfo !== null || !(child.pgid > 1)) return
    try {
      process.kill(-child.pgid, sig)
    } catch {
      // the group is gone
    }
  }
  // Listening from before the spawn, so that a signal in between is
  // passed on, never the end of us.
  const unlistenRun = listen((sig) => {
    signals++
    if (child === null) pending = sig
    else if (signals > 1) send('SIGKILL')
    else if (ownGroup || sig !== 'SIGINT' || !terminalMaySendInt()) send(sig)
  })
  unlistenWait()
  // SIGUSR1 is passed on as it comes (our listener keeps Node's inspector
  // shut: lib/cli/early-signals.js); not a stop, so never counted as one.
  earlySignals.onSigusr1(() => {
    if (child !== null) send('SIGUSR1')
  })
  let lost = false
  const stop = () => procward.stopSupervisedProcess(child, { graceMs: source.lossGraceMs }).catch(() => {})
  const onLost = () => {
    lost = true
    say(`${lock.signal.reason?.message ?? 'the lock may have been lost'}; stopping ${command}`)
    if (child !== null && child.exitInfo === null) stop()
  }
  lock.signal?.addEventListener('abort', onLost, { once: true })
  const unlisten = () => {
    lock.signal?.removeEventListener('abort', onLost)
    earlySignals.onSigusr1(null)
    unlistenRun()
  }
  try {
    const env = { ...process.env, ...source.envOf(lock) }
    child = procward.spawnSupervised(command, args, { stdio: 'inherit', processGroup: ownGroup, env })
  } catch (err) {
    unlisten()
    await lock.release()
    const status = common.spawnFailureStatus(err)
    if (status === null) throw err
    common.fail(err)
    return status
  }
  if (lost) stop()
  else if (pending !== null) send(signals > 1 ? 'SIGKILL' : pending)
  const exit = await child.exited
  unlisten()
  await lock.release()
  return lost ? EXIT_LOCKED : common.statusOf(exit)
}

module.exports = { runLocked }
