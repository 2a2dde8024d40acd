// handleSignals: SIGTERM and SIGINT (and SIGHUP, when asked) stop every
// supervisor that opted in, concurrently; then, unless the application
// listens for that signal too, our listeners go and the signal is raised
// again, so the process dies of it. A second signal while stopping sends
// SIGKILL at once. One registry per thread (options refuse handleSignals
// off the main thread: signals go to the process).
//
// Every other signal whose default action ends the process (SIGQUIT,
// SIGUSR2, SIGALRM, SIGHUP when it is not ours to forward or stop...) is
// treated the same way when it would end the process, that is when no one
// else listens for it: a daemon's workers must not outlive a supervisor
// killed by a signal it could have caught. With a listener of the
// application's own, such a signal is the application's, and left alone.

const { constants } = require('node:os')
const { otherThreadsRunnable, ownStatus, WINDOWS } = require('../os')

const noop = () => {}

/**
 * Signals that end a process by default and that a JS listener may catch.
 * Not the faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS: a
 * listener would only return to the faulting instruction), SIGUSR1 (Node's
 * inspector), SIGPROF (V8's profiler), SIGPIPE and SIGXFSZ (Node ignores
 * them), nor real-time signals (Node has no names for them).
 */
const FATAL_BY_DEFAULT = WINDOWS
  ? ['SIGHUP']
  : ['SIGHUP', 'SIGQUIT', 'SIGABRT', 'SIGUSR2', 'SIGALRM', 'SIGVTALRM', 'SIGXCPU', 'SIGIO', 'SIGPWR', 'SIGSTKFLT']
const EXTRA = FATAL_BY_DEFAULT.filter((s) => constants.signals[s] !== undefined)

/**
 * Is `sig` caught or ignored other than through Node (a native module's
 * timer or async-I/O signal)? Then it would not end the process, and a
 * listener of ours would replace that disposition: left alone. Linux tells
 * (SigCgt, SigIgn); elsewhere, nothing is known to take them.
 */
function takenNatively(sig, taken) {
  if (taken === 0n || process.listenerCount(sig) > 0) return false
  return ((taken >> BigInt(constants.signals[sig] - 1)) & 1n) === 1n
}

/** The signals caught or ignored now (a SigCgt | SigIgn mask), 0n where unknown. */
function takenMask() {
  const st = ownStatus()
  return st === null ? 0n : st.caught | st.ignored
}

/**
 * The signals a service manager or a terminal stops a process with: an
 * application that listens for one may stop its supervisors from its own
 * handler (handleSignals off).
 */
const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGBREAK'].filter((s) => constants.signals[s] !== undefined)

/** Supervisors that opted in and are between start() and their end → their SIGHUP choice. */
const enrolled = new Map()
/** signal → our process listener, while installed. */
const listeners = new Map()
/** The supervisors being stopped after a first signal. */
let stoppingAll = null

/** Does the application itself listen for `sig`? */
function othersListen(sig) {
  const ours = listeners.get(sig)
  return process.listeners(sig).some((l) => l !== ours)
}

function onProcessSignal(sig) {
  const all = [...enrolled]
  // Those that stop on `sig` whoever else listens, and those SIGHUP is
  // passed on to.
  const stoppers =
    sig === 'SIGHUP'
      ? all.filter(([, hup]) => hup === 'stop').map(([s]) => s)
      : sig === 'SIGTERM' || sig === 'SIGINT' || sig === 'SIGBREAK'
        ? all.map(([s]) => s)
        : []
  const forwarders = sig === 'SIGHUP' ? all.filter(([, hup]) => hup === 'forward').map(([s]) => s) : []
  const reloaders = sig === 'SIGHUP' ? all.filter(([, hup]) => hup === 'reload').map(([s]) => s) : []
  // Will the process die of it once the supervisors are stopped? Not when
  // the application listens, nor when SIGHUP is only passed on (or reloads).
  const dies = !othersListen(sig) && (stoppers.length > 0 || forwarders.length + reloaders.length === 0)
  if (!dies) for (const s of forwarders) s.kill('SIGHUP')
  // Its outcome is the 'reload' event's to say.
  if (!dies) for (const s of reloaders) s.reload().catch(noop)
  if (!dies && stoppers.length === 0) return
  if (stoppingAll !== null) {
    // A second signal while stopping: SIGKILL at once.
    for (const s of stoppingAll) s.stop({ signal: 'SIGKILL', killTimeoutMs: 2000 }).catch(noop)
    return
  }
  // Dying: every supervisor's daemon goes first, not only those that
  // asked for this signal (the process's death would leave the others'
  // workers behind).
  const targets = dies ? all.map(([s]) => s) : stoppers
  stoppingAll = targets
  Promise.allSettled(targets.map((s) => s.stop())).then(() => {
    if (!dies || othersListen(sig)) {
      // The application listens (now): what happens next is its call.
      stoppingAll = null
      sync()
      return
    }
    for (const [s, l] of listeners) process.removeListener(s, l)
    listeners.clear()
    // Die of the signal itself (exit status 128 + n, as a shell reports
    // it), never process.exit(). Windows cannot raise SIGBREAK or SIGHUP:
    // there `process.kill` of ourselves terminates, as it does for SIGTERM.
    // PID 1 of a pid namespace (a container's entrypoint) cannot: the
    // kernel drops a signal to init that init has no handler for, even its
    // own. It exits 128 + n instead, as tini does, so `docker run` reports
    // 143 for a SIGTERM.
    if (process.pid === 1) process.exit(128 + (constants.signals[sig] ?? 0))
    process.kill(process.pid, WINDOWS && (sig === 'SIGBREAK' || sig === 'SIGHUP') ? 'SIGTERM' : sig)
  })
}

/** Installs the listeners the enrolled supervisors need, and removes the rest. */
function sync() {
  const want = new Set()
  if (enrolled.size > 0) {
    want.add('SIGTERM')
    want.add('SIGINT')
    // Windows' Ctrl-Break (and a console CTRL_BREAK_EVENT, the first step
    // of a stop there) arrives as SIGBREAK.
    if (WINDOWS) want.add('SIGBREAK')
    const hupAsked = [...enrolled.values()].some((hup) => hup !== null)
    const taken = takenMask()
    for (const sig of EXTRA) {
      if ((sig === 'SIGHUP' && hupAsked) || listeners.has(sig) || !takenNatively(sig, taken)) want.add(sig)
    }
  }
  for (const [sig, l] of listeners) {
    if (!want.has(sig) && stoppingAll === null) {
      process.removeListener(sig, l)
      listeners.delete(sig)
    }
  }
  for (const sig of want) {
    if (!listeners.has(sig)) {
      const l = () => onProcessSignal(sig)
      listeners.set(sig, l)
      // First in line, so that the application's listeners are seen as
      // they were when the signal came: Node removes a process.once()
      // listener before calling it, and one that ran before ours would look
      // like nobody.
      process.prependListener(sig, l)
    }
  }
}

/** The signals pending now, not yet delivered to a thread (SigPnd | ShdPnd), 0n where unknown. */
function pendingMask() {
  const st = ownStatus()
  return st === null ? 0n : st.pending | st.sharedPending
}

/** The signals that may stop a supervisor as they are heard: ours, and the stop signals the application listens for. */
function stoppingSignals() {
  const sigs = new Set(listeners.keys())
  for (const sig of STOP_SIGNALS) if (process.listenerCount(sig) > 0) sigs.add(sig)
  return sigs
}

/** Is a signal that may stop a supervisor sent to this process and not yet delivered? */
function stoppingSignalPending() {
  const sigs = stoppingSignals()
  if (sigs.size === 0) return false
  const mask = pendingMask()
  if (mask === 0n) return false
  for (const sig of sigs) {
    if (((mask >> BigInt(constants.signals[sig] - 1)) & 1n) === 1n) return true
  }
  return false
}

const turn = () => new Promise((resolve) => setImmediate(resolve))

/**
 * Resolves once the stop signals already sent to this process have been
 * heard (their listeners have run, so a supervisor they stop is stopping).
 * A child's death and our own SIGTERM sent at once (a service manager's
 * stop) reach the loop in either order: the death is heard in a poll
 * phase; a signal whose handler ran by then is read from libuv's signal
 * pipe in that poll phase or the next, which the second turn waits out;
 * one still pending in the kernel (not delivered to a thread yet: we were
 * stopped, or not scheduled) is waited for, a turn at a time; so is one a
 * thread has taken from the kernel but whose handler has not written to
 * the pipe yet: that thread is runnable, woken with us (a SIGCONT, a busy
 * machine) and not yet on a CPU, and pending nowhere we can see — so while
 * another thread of ours is runnable, we wait too. At most about 100 ms
 * either way: a signal blocked in every thread never comes, and a thread
 * may be runnable for reasons of its own.
 */
async function stopSignalsHeard() {
  await turn()
  await turn()
  for (let i = 0; i < 100 && (stoppingSignalPending() || otherThreadsRunnable()); i++) {
    await new Promise((resolve) => setTimeout(resolve, 1))
    await turn()
  }
  // What a handler that ran meanwhile wrote is read in this turn or the next.
  await turn()
}

/**
 * May a signal sent to this process stop `supervisor`: it stops on them
 * (handleSignals), or the application listens for a stop signal (its
 * handler may call stop())?
 */
function stopSignalsConcern(supervisor) {
  return enrolled.has(supervisor) || STOP_SIGNALS.some((sig) => process.listenerCount(sig) > 0)
}

/**
 * `supervisor` (anything with stop() and kill()) is stopped by the process
 * signals from now on; `hup`: null (SIGHUP stops it only when it would end
 * the process), 'stop', 'forward' or 'reload'.
 */
function enroll(supervisor, hup) {
  enrolled.set(supervisor, hup)
  sync()
}

/** `supervisor` has ended: signals no longer concern it. */
function leave(supervisor) {
  enrolled.delete(supervisor)
  sync()
}

module.exports = { enroll, leave, stopSignalsConcern, stopSignalsHeard }
