// One guard per error family. Checked by procward's error brand, not by
// `code` alone: an error some other library made with code 'ELOCKED'
// (proper-lockfile's, say) has no record of the holder. The brand is a
// registered symbol, so an error made by another copy of procward in this
// process counts too. A Supervisor's own errors (lib/supervisor/attempt.js)
// carry no brand: they are judged by class and code.

const { isProcwardError } = require('./errors')

const ARGUMENT_CODES = new Set([
  'ERR_INVALID_ARG_TYPE',
  'ERR_INVALID_ARG_VALUE',
  'ERR_OUT_OF_RANGE',
  'ERR_UNKNOWN_SIGNAL',
  'ERR_INVALID_URL',
  'ERR_ILLEGAL_CONSTRUCTOR',
])
const SUPERVISOR_CODES = new Set([
  'ERR_CRASH_LOOP',
  'ERR_SUPERVISOR_FAILED',
  'ERR_SUPERVISOR_STOPPED',
  'ERR_READY_FAILED',
  'ERR_READY_TIMEOUT',
  'ERR_HEALTH_CHECK_FAILED',
  'ERR_HEALTH_CHECK_TIMEOUT',
  'ERR_RELOAD_WITHOUT_LISTEN',
  'ERR_RELOAD_FAILED',
  'ERR_RELOAD_ABANDONED',
])
const UNAVAILABLE_CODES = new Set(['ERR_CGROUP_UNAVAILABLE', 'ERR_NOTIFY_UNAVAILABLE'])
const PG_CODES = new Set([
  'ERR_PROCWARD_PG_MISSING',
  'ERR_PROCWARD_PG_CONNECTION',
  'ERR_PROCWARD_PG_QUERY',
  'ERR_PROCWARD_PG_NOT_A_SESSION',
  'ERR_PROCWARD_PG_LOCK_LOST',
  'ERR_PROCWARD_LOCK_LOST',
  'ERR_PROCWARD_PG_LOCK_RELEASED',
])

/** procward's ELOCKED errors, of a file lock (`path`) or a PostgreSQL lock (`key`). */
function isLockedError(err) {
  return isProcwardError(err) && err.code === 'ELOCKED'
}

function isArgumentError(err) {
  return isProcwardError(err) && (err instanceof TypeError || err instanceof RangeError) && ARGUMENT_CODES.has(err.code)
}

function isSupervisorError(err) {
  return err instanceof Error && SUPERVISOR_CODES.has(err.code)
}

function isUnavailableError(err) {
  return isProcwardError(err) && UNAVAILABLE_CODES.has(err.code)
}

function isPgError(err) {
  return isProcwardError(err) && PG_CODES.has(err.code)
}

module.exports = {
  isLockedError,
  isProcwardError,
  isArgumentError,
  isSupervisorError,
  isUnavailableError,
  isPgError,
}
