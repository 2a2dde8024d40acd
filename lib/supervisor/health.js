// Health after ready: a running daemon checked again and again (a port
// that accepts a connection, an HTTP GET that answers 2xx or the status
// asked for, or a function), so that one alive but no longer serving —
// hung, deadlocked, SIGSTOPped, its listener closed — is restarted like a
// crash. This file makes the checks and times them (runChecks), and is
// the machine's side of them: each result counted, recorded and announced,
// and a child that failed too many in a row stopped, a crash (the actions).
//
// One check at a time, one timer at a time: the next check starts
// intervalMs after the previous one ended, and each ends by timeoutMs (its
// signal aborted, its result a failure). A function that goes on past its
// timeout, ignoring its signal, is never called beside itself: the checks
// that come due meanwhile are failures, not calls. Nothing here waits on
// the event loop's turn: a check is sockets and timers.

const fs = require('node:fs')
const { devNull } = require('node:os')
const { dispatchFor, emit, writeState } = require('./machine')
const { httpCheck, tryConnect } = require('./readiness')
const { nowIso } = require('./state-file')
const { messageOf, supervisorError } = require('./words')

const noop = () => {}

/**
 * Errors of this process's own making: out of file descriptors, memory or
 * buffers. A check that fails with one says nothing of the daemon.
 */
const OURS = new Set(['EMFILE', 'ENFILE', 'ENOBUFS', 'ENOMEM'])

/** Did a check fail for a reason of ours (its error's code, or its cause's)? */
function oursToBlame(err) {
  try {
    if (OURS.has(err?.code) || OURS.has(err?.cause?.code)) return true
  } catch {
    // A value whose properties throw: asked below.
  }
  // A runtime may misname it (Bun 1.4 reports a socket() that failed with
  // EMFILE as ECONNREFUSED): is our fd table full now?
  return fdTableFull()
}

/** Can this process open no file now (EMFILE, ENFILE)? One open and close, after a failed check only. */
function fdTableFull() {
  try {
    fs.closeSync(fs.openSync(devNull, 'r'))
    return false
  } catch (e) {
    return e?.code === 'EMFILE' || e?.code === 'ENFILE'
  }
}

/** A check that failed for a reason of ours (`reason`): not made, as far as the daemon goes. */
class NotMade {
  constructor(reason) {
    this.reason = reason
  }
}

/** One check of `health` (the normalised option) on `run`, until `signal` aborts. */
async function checkOnce(health, run, signal) {
  switch (health.kind) {
    case 'port': {
      const err = await tryConnect(health.port, health.host, signal)
      if (err !== null) throw err
      return
    }
    case 'http':
      return httpCheck(health.url, health.status, signal)
    default:
      // An adopted orphan is no child of ours: the function gets null.
      return health.fn(run.child, signal)
  }
}

/**
 * Checks `run` (an attempt that runs: an OwnRun once ready, or an adopted
 * orphan) by `health` until `run.ac` aborts (its exit, a stop, a restart,
 * a failed health), and gives each check's result to `heard(err)` (err
 * null for a pass; an error with code ERR_HEALTH_CHECK_FAILED or
 * ERR_HEALTH_CHECK_TIMEOUT for a failure); the next check is timed once
 * what `heard` returns (a promise: the result recorded and announced) has
 * settled. `name`: the supervisor's, for the errors. No result is given
 * once `run.ac` has aborted.
 */
function runChecks(health, run, name, heard) {
  const stopped = run.ac.signal
  let timer = null
  /** A check whose function has not settled yet (past its timeout, too). */
  let busy = false

  const next = () => {
    if (stopped.aborted) return
    timer = setTimeout(check, health.intervalMs)
    // The daemon holds the process open, not its checks.
    timer.unref()
  }

  // A result is recorded and announced before the next check is timed, so
  // that the record, the events and the count follow the checks in order.
  const hear = (err) => Promise.resolve(heard(err)).catch(noop)

  const failed = (message, code, cause) =>
    // (trimEnd: OpenSSL's messages end with a newline.)
    supervisorError(
      code,
      `${name}'s health check failed: ${message.trimEnd()}`,
      cause === undefined ? undefined : { cause },
    )

  // A check we could not make (out of fds: procward's own trouble, not the
  // daemon's) is neither a pass nor a failure: said once, until a check is
  // made again, and tried again at the next interval.
  let warned = false
  const notMade = (err) => {
    if (warned) return
    warned = true
    process.emitWarning(
      `procward: ${name}'s health check could not be made, procward itself being out of file descriptors, memory or buffers (${messageOf(err)}): not counted against the daemon (said once until a check is made)`,
      { code: 'PROCWARD_HEALTH_CHECK_NOT_MADE' },
    )
  }

  async function check() {
    timer = null
    if (busy) {
      // The previous call still runs (it ignored its aborted signal): a
      // failure, without a second call beside it.
      await hear(failed('the previous check has not ended', 'ERR_HEALTH_CHECK_TIMEOUT'))
      next()
      return
    }
    const ac = new AbortController()
    let late = false
    let timeout
    let over
    // Ends at the timeout, or at once when the attempt ends.
    const timedOut = new Promise((resolve) => {
      over = resolve
      timeout = setTimeout(() => {
        late = true
        ac.abort()
        resolve(null)
      }, health.timeoutMs)
    })
    const onStop = () => {
      ac.abort()
      over(null)
    }
    stopped.addEventListener('abort', onStop, { once: true })
    busy = true
    const settled = Promise.resolve()
      .then(() => checkOnce(health, run, ac.signal))
      .then(
        () => null,
        (err) => (oursToBlame(err) ? new NotMade(err) : failed(messageOf(err), 'ERR_HEALTH_CHECK_FAILED', err)),
      )
    settled.then(() => {
      busy = false
    }, noop)
    const result = await Promise.race([settled, timedOut])
    clearTimeout(timeout)
    // Past the timeout, whatever the check made of its aborted signal.
    const err = late ? failed(`no answer within ${health.timeoutMs} ms`, 'ERR_HEALTH_CHECK_TIMEOUT') : result
    stopped.removeEventListener('abort', onStop)
    if (stopped.aborted) return
    if (err instanceof NotMade) notMade(err.reason)
    else {
      warned = false
      await hear(err)
    }
    next()
  }

  stopped.addEventListener('abort', () => clearTimeout(timer), { once: true })
  next()
}

// ---- the machine's side: each result counted, recorded, announced ----

/** Once 'running' has been heard: the health checks begin (none without options.health). */
function watchHealth(m, run) {
  if (m.o.health === null) return
  runChecks(m.o.health, run, m.o.name, (err) => dispatchFor(m, run, 'health-checked', err))
}

/**
 * A check's result (err null: passed): counted (a failure within
 * startPeriodMs of ready is not), recorded as the child's `health`, then
 * announced (records before events). The promise is runChecks' cue to time
 * the next check.
 */
function healthChecked(m, run, err) {
  const before = run.healthFailures
  const ignored = err !== null && performance.now() - run.readyAt < m.o.health.startPeriodMs
  if (err === null) run.healthFailures = 0
  else if (!ignored) run.healthFailures++
  const failures = run.healthFailures
  run.health = { ok: err === null, at: nowIso(), error: err?.message ?? null, failures }
  // The counts go along as they are now (the next check is timed once
  // this promise settles; the counts are this check's either way).
  return writeState(m).then(() => dispatchFor(m, run, 'health-recorded', ignored ? null : err, before, failures))
}

/**
 * 'unhealthy' at each counted failure, 'healthy' at a pass after
 * failures; at `failures` in a row, the child is stopped (a crash).
 */
function announceHealth(m, run, err, before, failures) {
  if (err === null) {
    if (before > 0 && failures === 0) emit(m, 'healthy', { pid: run.pid, failures: before })
    return
  }
  const limit = m.o.health.failures
  emit(m, 'unhealthy', { pid: run.pid, failures, limit, error: err })
  if (failures >= limit) dispatchFor(m, run, 'health-failed', err)
}

/**
 * Too many failed checks: the child is stopped with its group as the
 * stop policy says (SIGTERM, the grace, SIGKILL), and SIGCONT after the
 * SIGTERM, so that a stopped daemon acts on it; its exit is judged as a
 * crash (reason 'unhealthy').
 */
function unhealthy(m, run, err) {
  run.healthFailure = err
  run.ac.abort()
  run.retire(m.o.stopDefaults).catch(noop)
  run.resume()
}

/** The actions of health after ready. */
const actions = { watchHealth, healthChecked, announceHealth, unhealthy }

module.exports = { actions }
