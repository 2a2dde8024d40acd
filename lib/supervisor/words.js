// How the supervisor words what happened: an exit (as events and the
// record give it, and in a sentence), a rejection's text, and the errors it
// makes. Pure, and below everything that speaks: the exit policy, the ready
// and health checks, the attempt, and the service manager's status lines.

function exitInfo(info) {
  return Object.freeze({ pid: info.pid, code: info.code ?? null, signal: info.signal ?? null })
}

function describeExit(info) {
  if (info === null) return 'could not be started'
  const unhealthy = info.reason === 'unhealthy' ? ', stopped as unhealthy' : ''
  if (info.signal) return `was killed by ${info.signal}${unhealthy}`
  if (info.code === null) return `exited (status unknown)${unhealthy}`
  return `exited with code ${info.code}${unhealthy}`
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
