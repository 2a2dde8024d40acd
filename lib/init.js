// An init's duties, for `procward run` as a container's PID 1 (`docker run`
// without `--init`) or with `--init` anywhere: reap the orphans the kernel
// re-parents to us, as tini does. Never with a wait for "any child": that
// would take the statuses of our own supervised children, whose reap is
// their exit event. The native side reaps each orphan by its pid, skipping
// the live children this process spawned (`own()`, read on the JS thread,
// where every spawn happens too, so no spawn falls between the list and
// the reap).
//
// When: at each SIGCHLD (an orphan's exit, or a child's), and every second
// as well, since SIGCHLDs coalesce and a signal can be missed while the
// listener is being set up. A pass costs one read of
// /proc/self/task/*/children and a waitpid per exited orphan.

const native = require('../binding.js')
const { callNative } = require('./errors')
const os = require('./os')
const { liveChildPids } = require('./supervised')

const SWEEP_EVERY_MS = 1000

/** Whether this process is PID 1 of its pid namespace (a container's entrypoint). */
function isPidOne() {
  return process.pid === 1
}

/**
 * Starts reaping orphans, leaving alone the live children this thread
 * spawned (`own()`, by default every supervised child whose exit has not
 * been delivered yet). Outside PID 1, `subreaper`
 * makes this process a child subreaper first, so that the orphans of its
 * descendants come to it rather than to the namespace's init. Returns a
 * function that stops the reaping. Linux only; elsewhere a no-op.
 */
function startInitDuties({ own = liveChildPids, subreaper = !isPidOne() } = {}) {
  if (!os.PROCFS || typeof native.reapOrphans !== 'function') return () => {}
  if (subreaper) callNative(() => native.becomeSubreaper())
  const reap = () => {
    try {
      native.reapOrphans([...own()])
    } catch {
      // /proc unreadable for a moment (EMFILE): the next pass looks again.
    }
  }
  process.on('SIGCHLD', reap)
  const timer = setInterval(reap, SWEEP_EVERY_MS)
  timer.unref()
  reap()
  return () => {
    process.removeListener('SIGCHLD', reap)
    clearInterval(timer)
  }
}

module.exports = { startInitDuties, isPidOne }
