// An end, and what follows it. A child's (or adopted orphan's) exit, or a
// spawn that failed, is recorded at once; once heard (see judge), the
// exit policy (policy.js, a pure function) gives its verdict, the machine
// moves, 'exit' is emitted, and then what the verdict begins: 'restart'
// and the retry after the backoff's delay, or 'failed', or 'stopped'.
// Here too the end of a life: timers cleared, signals left, the last
// record flushed and the lock released.

const { clearTimer, dispatch, dispatchFor, emit, settle, writeState } = require('./machine')
const { decideExit } = require('./policy')
const signals = require('./signals')
const { nowIso } = require('./state-file')
const { describeExit, supervisorError } = require('./words')

/**
 * Package-internal: a function a Supervisor may carry under this key,
 * `(info) => reason | null`, asked at an exit we did not cause whether
 * someone outside the machine had the child stopped (a group's memoryLimit:
 * 'memory'). Such an exit is a crash, whatever its status, with `reason`.
 */
const EXIT_REASON = Symbol('procward.exitReason')

/** What the face's EXIT_REASON says of `info`: a reason, or null (none, or it threw). */
function outsideReason(m, info) {
  try {
    return m.face[EXIT_REASON]?.(info) ?? null
  } catch {
    return null
  }
}

/** A child's (or adopted orphan's) exit, or a spawn that failed (info null, its error `spawnError`). */
function exited(m, run, info, spawnError) {
  if (run.exited) return
  run.exited = true
  run.ac.abort()
  // Stopped for its failed health checks, or by someone outside (see
  // EXIT_REASON): said in 'exit', the record's lastExit, status() and
  // 'restart'.
  if (info !== null && run.healthFailure !== null) info = Object.freeze({ ...info, reason: 'unhealthy' })
  else if (info !== null && !run.expected) {
    const reason = outsideReason(m, info)
    if (reason !== null) info = Object.freeze({ ...info, reason })
  }
  if (info !== null) {
    m.lastExit = info
    m.lastExitAt = nowIso()
  }
  // Its meta, status and health go with it: a port is never advertised
  // for a daemon that has exited (the record is rewritten now, whatever
  // follows).
  run.meta = null
  run.status = null
  run.health = null
  const written = writeState(m)
  // The state moves on at once: it is never `running` while no child
  // runs. (An exit we caused, retiring or stopping, has no row: the
  // machine waits for it.)
  dispatchFor(m, run, 'died')
  judge(m, run, info, spawnError, written)
}

/**
 * An end, heard: once the record without it is in place (`written`),
 * and, for an end we did not cause (a death by a signal we did not send,
 * or an exit with a code: a daemon that handles the SIGTERM itself and
 * exits 0), once the stop signals already sent to us have been heard (a
 * service manager signals us and the daemon at once: its end first is
 * no crash), the policy decides (the judged row, where the machine still
 * waits for it: a stop that came meanwhile took it elsewhere, and the
 * attempt has no verdict), then 'exit' is emitted, then what the verdict
 * begins.
 */
async function judge(m, run, info, spawnError, written) {
  await written
  const foreign = info !== null && !run.expected && (info.signal === null || !run.sent.has(info.signal))
  if (foreign && signals.stopSignalsConcern(m.face)) await signals.stopSignalsHeard()
  dispatchFor(m, run, 'judged', info, spawnError)
  if (info !== null) emit(m, 'exit', { ...info, expected: run.expected })
  run.hear()
  if (run.verdict !== null) follow(m, run.verdict, info)
}

/**
 * What a verdict begins, once 'exit' has been heard. A crash's 'restart'
 * and a restart's new child are steps (re-entrancy guards: not begun where
 * an 'exit' listener stopped the supervisor); an end is said whatever a
 * listener did since: it has happened.
 */
function follow(m, verdict, info) {
  switch (verdict.kind) {
    case 'crash':
      dispatch(m, 'exit-heard', info, verdict.delayMs)
      break
    case 'restart':
      dispatch(m, 'retry')
      break
    case 'fail':
      emit(m, 'failed', verdict.error)
      break
    case 'finish':
      emit(m, 'stopped', null)
      break
  }
}

/** A restart() came while the end was judged: a new child at once, whatever the policy. */
const RESTART = Object.freeze({ kind: 'restart' })

/**
 * After an end we did not cause: restart, or end. The verdict is the
 * attempt's (judge follows it once 'exit' is out); the machine moves now.
 */
function decide(m, run, info, spawnError) {
  // The child a reload is replacing: its successor takes over (reload.js),
  // whatever the policy would say.
  if (m.reloading !== null && m.reloading.from === run && !m.reloading.failed) {
    dispatch(m, 'promote', run)
    return
  }
  m.run = null
  if (m.restartJudged) {
    m.restartJudged = false
    run.verdict = RESTART
    dispatch(m, 'restart-judged')
    return
  }
  const facts = {
    exit: info,
    spawnError,
    readyFailure: run.readyFailure,
    healthFailure: run.healthFailure,
    sent: run.sent,
    readyAt: run.readyAt,
    adopted: run.adopted,
    attempt: m.attempt,
  }
  const verdict = decideExit(facts, m.o, m.window, performance.now())
  run.verdict = verdict
  if (verdict.kind === 'crash') {
    m.attempt = verdict.attempt
    m.window = verdict.window
    m.restarts++
  }
  dispatch(m, verdict.kind, verdict)
}

/** After a crash's 'exit': 'restart', then (once it has been heard) the backoff. */
function announceRestart(m, info, delayMs) {
  emit(m, 'restart', { attempt: m.attempt, delayMs, lastExit: info })
  dispatch(m, 'restart-heard', delayMs)
}

/** The backoff's delay, then the retry. */
function retryLater(m, delayMs) {
  if (delayMs === 0) dispatch(m, 'retry')
  else {
    m.timer = setTimeout(() => {
      m.timer = null
      dispatch(m, 'retry')
    }, delayMs)
  }
}

/**
 * Failed at once (the boot failed, or a spawn no wait can heal): the
 * start() waiters are rejected (a start() called from a listener
 * afterwards is a new one), then 'failed' is emitted.
 */
function fail(m, err) {
  end(m)
  settle(m, null, err)
  emit(m, 'failed', err)
}

/** The policy's fail: as fail, with 'failed' emitted after 'exit' (see follow). */
function endFailed(m, verdict) {
  end(m)
  settle(m, null, verdict.error)
}

/** A clean exit the policy does not restart: as endFailed, with 'stopped'. */
function endFinished(m) {
  end(m)
  const why = m.lastExit ? describeExit(m.lastExit) : 'ended'
  settle(m, null, supervisorError('ERR_SUPERVISOR_STOPPED', `${m.o.name} ${why} and is not restarted`))
}

function end(m) {
  clearTimer(m)
  m.run = null
  afterEnd(m)
}

/** Stopped or failed: the last record written, then the lock released. */
function afterEnd(m) {
  signals.leave(m.face)
  // No daemon will serve on them: a client is refused now, not queued.
  // A socket unit's (adopted) stay ours for a later start().
  if (m.sockets !== null && m.sockets !== m.o.adopted) m.sockets.close()
  m.sockets = null
  const written = m.records?.flushed() ?? Promise.resolve()
  m.ending = written.then(() => {
    if ((m.sub === 'stopped' || m.sub === 'failed') && m.lock !== null) {
      m.lock.release()
      m.lock = null
      m.records.owned = false
    }
  })
  return m.ending
}

/** The actions of an end. */
const actions = { decide, announceRestart, retryLater, fail, endFailed, endFinished }

module.exports = { actions, exited, afterEnd, EXIT_REASON }
