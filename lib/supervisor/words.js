// How the supervisor words what happened: an exit (as events and the
// record give it, and in a sentence), a rejection's text, and the errors it
// makes. Pure, and below everything that speaks: the exit policy, the ready
// and health checks, the attempt, and the service manager's status lines.

function exitInfo(info) {
  return Object.freeze({ pid: info.pid, code: info.code ?? null, signal: info.signal ?? null })
}

/** Why a child was stopped, as describeExit words it (the exit's `reason`). */
const REASONS = { unhealthy: ', stopped as unhealthy', memory: ', stopped over its memory limit' }

function describeExit(info) {
  if (info === null) return 'could not be started'
  const why = info.reason == null ? '' : (REASONS[info.reason] ?? `, stopped (${info.reason})`)
  if (info.signal) return `was killed by ${info.signal}${why}`
  if (info.code === null) return `exited (status unknown)${why}`
  return `exited with code ${info.code}${why}`
}

/**
 * A rejection's words: its message, or the value as text. Never throws (a
 * check may reject with an object that has no way to become a string).
 */
function messageOf(reason) {
  try {
    return String(reason?.message ?? reason)
  } catch {
    return Object.prototype.toString.call(reason)
  }
}

function supervisorError(code, message, extra) {
  // A falsy reason (a check that rejected with 0 or '') is still the cause;
  // null and undefined are none.
  const err = new Error(message, extra?.cause != null ? { cause: extra.cause } : undefined)
  err.code = code
  if (extra && 'lastExit' in extra) err.lastExit = extra.lastExit
  return err
}

module.exports = { exitInfo, describeExit, messageOf, supervisorError }
