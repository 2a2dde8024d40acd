// The verbs that end a child: stop(), which ends the life (the boot under
// way, the backoff, the child with its group), and restart(), which stops
// the child it replaces (or spawns at once from the backoff), the next
// ready its answer.

const { stopSupervisedProcess } = require('../supervised')
const { abortError } = require('../validate')
const { afterEnd } = require('./exit')
const { spawn } = require('./life')
const { clearTimer, dispatch, dispatchFor, emit, nextReady } = require('./machine')
const { abandon, drained } = require('./reload')

const noop = () => {}

// ---- stopping ----

function stop(m, opts) {
  m.restartJudged = false
  m.manager?.stopping()
  m.boot?.ac.abort()
  clearTimer(m)
  const run = m.run
  if (run !== null) {
    run.expected = true
    run.ac.abort()
  }
  // start()/restart() callers are answered once the stop is done: their
  // promise settles only when nothing of this run is left.
  const waiting = m.waiters
  m.waiters = []
  // A reload's successor goes too, with the same options, and the stop
  // ends once the daemons reloads replaced have finished too.
  const abandoned = Promise.all([abandon(m, 'stop()', opts), drained(m, opts)])
  m.stopping = stopFlow(m, opts, waiting, abandoned)
  // A takeover under way stops its orphan with the stop defaults; a stop
  // that asks for more (SIGKILL, a shorter grace) passes it on.
  if (m.boot?.target) passOn(m, opts)
  return m.stopping
}

/** The stop; `waiting`: the start()/restart() callers it rejects with AbortError once done. */
async function stopFlow(m, opts, waiting, abandoned) {
  // Nothing before this await: with no child and no boot to wait for, the
  // whole flow would otherwise run inside stop(), clear m.stopping before
  // stop() set it, and leave every later stop() returning this one.
  await null
  let result = null
  let error = null
  try {
    if (m.boot !== null) await m.boot.done
    const run = m.run
    if (run !== null) {
      result = await run.retire(opts)
      if (run.exited) await run.heard
    }
  } catch (err) {
    error = err
  }
  await abandoned
  m.run = null
  dispatch(m, 'stopped')
  m.stopping = null
  await afterEnd(m)
  for (const w of waiting) w.reject(abortError())
  emit(m, 'stopped', result)
  if (error !== null) throw error
  return result
}

/** A second stop while stopping: what it asks for more is passed on. */
function passOn(m, opts) {
  if (m.run !== null) {
    m.run.escalate(opts)
    return
  }
  // Still taking over: the predecessor's orphan gets it (a stop of the
  // same target joins the one under way and escalates it).
  const t = m.boot?.target ?? null
  if (t !== null) stopSupervisedProcess(t.pid, { ...m.o.stopDefaults, ...opts, ...t.target }).catch(noop)
}

// ---- restarting ----

/** restart() while stopped, failed or never started: a start with its args. */
function restartEnded(m, o) {
  apply(m, o)
  return m.face.start()
}

/**
 * The promise restart() callers share until the next ready (alone, the
 * restartLater action: still booting, or retiring, the spawn to come
 * takes the new args).
 */
function restartReady(m, o) {
  apply(m, o)
  const ready = nextReady(m)
  m.restarting = ready
  const clear = () => {
    if (m.restarting === ready) m.restarting = null
  }
  ready.then(clear, clear)
  return ready
}

/** In backoff: no child to stop, spawn at once. */
function restartNow(m, o) {
  const ready = restartReady(m, o)
  clearTimer(m)
  spawn(m)
  return ready
}

/** A child (or an attempt whose spawn failed) to stop before the new spawn. */
function retire(m, o) {
  const ready = restartReady(m, o)
  const run = m.run
  run.expected = true
  run.ac.abort()
  // A reload's successor is stopped beside it: the new child starts once
  // neither runs.
  const abandoned = abandon(m, 'restart()', m.o.stopDefaults)
  const retired = run
    .retire(m.o.stopDefaults)
    .catch(noop)
    .then(() => (run.exited ? run.heard : undefined))
  Promise.all([retired, abandoned]).then(() => dispatchFor(m, run, 'retired'))
  return ready
}

function apply(m, o) {
  if (o.args !== undefined) m.args = o.args
  if (o.env !== undefined) m.env = o.env
}

/** The actions of stop() and restart(), wherever the machine stands. */
const actions = {
  stop,
  escalate: (m, opts) => {
    passOn(m, opts)
    return m.stopping
  },
  alreadyEnded: (m) => m.ending.then(() => null),
  startAfterStop: (m) => m.stopping.then(() => m.face.start()),
  refuseRestart: () => Promise.reject(abortError()),
  restartEnded,
  restartLater: restartReady,
  restartJudged: (m, o) => {
    m.restartJudged = true
    return restartReady(m, o)
  },
  restartNow,
  retire,
}

module.exports = { actions }
