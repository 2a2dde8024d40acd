// The exit policy: what follows a child's end, or a spawn that failed, as
// pure functions of the facts, the options, the crash window and a
// monotonic `now` (no clock read, no process touched, nothing kept here:
// the machine applies the verdict). The arithmetic is backoff.js's.

const { backoffDelay, crashWindow, nextAttempt } = require('./backoff')
const { describeExit, supervisorError } = require('./words')

/**
 * Spawn errors no wait can heal: the program is missing (or a directory on
 * its path is not one, or the path is too long or loops), may not be run
 * (EACCES, EPERM: a setuid the supervisor may not do), is no program the
 * kernel can run (ENOEXEC), or its arguments can never fit (E2BIG).
 */
const UNHEALING_SPAWN_ERRORS = new Set([
  'ENOENT',
  'ENOTDIR',
  'ENAMETOOLONG',
  'ELOOP',
  'EACCES',
  'EPERM',
  'ENOEXEC',
  'E2BIG',
])

/**
 * A spawn that failed with `err`: the error to fail with at once, or null
 * when it counts as a crash (decideExit then judges it, as an end).
 */
function spawnFailure(err, name) {
  // Containment asked for where it cannot be had: no restart can change
  // that, and running uncontained is never a silent fallback.
  if (err?.code === 'ERR_CGROUP_UNAVAILABLE') return err
  // A program that is not there, may not be run, or is no program: waiting
  // does not change that (a crash loop of restarts would only delay the
  // answer).
  if (UNHEALING_SPAWN_ERRORS.has(err?.code)) {
    return supervisorError('ERR_SUPERVISOR_FAILED', `${name} could not be started: ${err.message}`, {
      cause: err,
      lastExit: null,
    })
  }
  // Counted as a crash: a missing command fails every time, and ends in a
  // crash loop.
  return null
}

/**
 * The verdict on an end we did not cause.
 *
 * facts: `exit` (the exit info, or null for a spawn that failed),
 * `spawnError`, `readyFailure` and `healthFailure` (the errors that had the
 * child stopped, or null), `sent` (the signal names sent through kill()),
 * `readyAt` (monotonic, null while never ready), `adopted`, and `attempt`
 * (the backoff's count so far). options: the Supervisor's normalised ones
 * (name, restart, ready, backoff, crashLoop). window: the monotonic times of
 * the restarts in the crash window. now: monotonic, so that a wall clock
 * stepped back or forward neither hides nor forgives restarts.
 *
 * → { kind: 'crash', delayMs, attempt, window } (restart after delayMs; the
 *   backoff's count and the crash window with this restart in),
 *   { kind: 'fail', error }, or { kind: 'finish' } (a clean exit the policy
 *   does not restart).
 */
function decideExit(facts, options, window, now) {
  const { exit, readyFailure, healthFailure } = facts
  // A child that exits before its ready check passed counts as a crash,
  // whatever its code (unless by a signal sent through kill()).
  const beforeReady = options.ready !== null && facts.readyAt === null && !facts.adopted
  let failure
  // A child stopped as unhealthy, or over its memory limit (a reason), failed, whatever its exit.
  if (exit === null || readyFailure !== null || healthFailure !== null || exit.reason != null) failure = true
  else if (exit.signal !== null) failure = !facts.sent.has(exit.signal)
  else failure = exit.code !== 0 || beforeReady // null: an adopted orphan's unknown status
  const cause = readyFailure ?? healthFailure ?? facts.spawnError
  const restart = options.restart
  if (!(restart === 'always' || (restart === 'on-failure' && failure))) {
    if (!failure) return { kind: 'finish' }
    const name = options.name
    const what = cause ? cause.message : `${describeExit(exit)}${beforeReady ? ' before it was ready' : ''}`
    // A ready or health failure names the supervisor already ("web's ready
    // check failed: …", "web was not ready within …").
    const message = what.startsWith(`${name}'s `) || what.startsWith(`${name} `) ? what : `${name} ${what}`
    return { kind: 'fail', error: supervisorError('ERR_SUPERVISOR_FAILED', message, { cause, lastExit: exit }) }
  }
  const { recent, exceeded } = crashWindow(window, now, options.crashLoop)
  if (exceeded) {
    const error = supervisorError(
      'ERR_CRASH_LOOP',
      `${options.name} ${describeExit(exit)}; given up after ${recent.length} restarts within ${options.crashLoop.windowMs} ms`,
      { cause, lastExit: exit },
    )
    return { kind: 'fail', error }
  }
  const attempt = nextAttempt(options.backoff, facts.attempt, facts.readyAt, now)
  return { kind: 'crash', delayMs: backoffDelay(options.backoff, attempt), attempt, window: [...recent, now] }
}

module.exports = { decideExit, spawnFailure }
