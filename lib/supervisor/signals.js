// handleSignals: SIGTERM and SIGINT (and SIGHUP, when asked) stop every
// supervisor that opted in, concurrently; then, unless the application
// listens for that signal too, our listeners go and the signal is raised
// again, so the process dies of it. A second signal while stopping sends
// SIGKILL at once. One registry per thread (options refuse handleSignals
// off the main thread: signals go to the process).

const WINDOWS = process.platform === 'win32'
const noop = () => {}

/** Supervisors that opted in and are between start() and their end → their SIGHUP choice. */
const enrolled = new Map()
/** signal → our process listener, while installed. */
const listeners = new Map()
/** The supervisors being stopped after a first signal. */
let stoppingAll = null

function onProcessSignal(sig) {
  if (sig === 'SIGHUP') {
    for (const [s, hup] of enrolled) if (hup === 'forward') s.kill('SIGHUP')
    if (![...enrolled.values()].includes('stop')) return
  }
  if (stoppingAll !== null) {
    // A second signal while stopping: SIGKILL at once.
    for (const s of stoppingAll) s.stop({ signal: 'SIGKILL', killTimeoutMs: 2000 }).catch(noop)
    return
  }
  const targets = [...enrolled].filter(([, hup]) => sig !== 'SIGHUP' || hup === 'stop').map(([s]) => s)
  stoppingAll = targets
  Promise.allSettled(targets.map((s) => s.stop())).then(() => {
    const ours = listeners.get(sig)
    if (process.listeners(sig).some((l) => l !== ours)) {
      // The application listens too: what happens next is its call.
      stoppingAll = null
      sync()
      return
    }
    for (const [s, l] of listeners) process.removeListener(s, l)
    listeners.clear()
    // Die of the signal itself (exit status 128 + n, as a shell reports
    // it), never process.exit(). Windows cannot raise SIGBREAK or SIGHUP:
    // there `process.kill` of ourselves terminates, as it does for SIGTERM.
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
    if ([...enrolled.values()].some((hup) => hup !== null)) want.add('SIGHUP')
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
      process.on(sig, l)
    }
  }
}

/**
 * `supervisor` (anything with stop() and kill()) is stopped by the process
 * signals from now on; `hup`: null (SIGHUP is not ours), 'stop' or 'forward'.
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

module.exports = { enroll, leave }
