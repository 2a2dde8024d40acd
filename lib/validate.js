// Input checks that run before anything reaches native code. napi's integer
// conversions wrap silently (-1 → 4294967295, NaN → 0, 1.7 → 1), so a pid is
// judged here as a JS value first; the Rust side checks it again.

const { constants } = require('node:os')
const { typeError, rangeError } = require('./errors')

const PID_MAX = 4194304

function describe(value) {
  if (value === null) return 'null'
  if (typeof value === 'string') return `string ${JSON.stringify(value.slice(0, 40))}`
  if (typeof value === 'bigint') return `bigint ${value}n`
  if (typeof value === 'object') return 'an object'
  return `${typeof value} ${String(value)}`
}

function pid(value, name = 'pid') {
  if (typeof value !== 'number') {
    throw typeError(`${name} must be a number, got ${describe(value)}`)
  }
  if (!Number.isInteger(value) || value < 1 || value > PID_MAX) {
    throw rangeError(`${name} must be an integer in 1..=${PID_MAX}, got ${String(value)}`)
  }
  return value
}

/** A pid we may signal: never ourselves. */
function targetPid(value, name = 'pid') {
  pid(value, name)
  if (value === process.pid) {
    throw rangeError(`${name} is this process (${value}); refusing to signal ourselves`)
  }
  return value
}

function optionalString(value, name) {
  if (value === undefined) return undefined
  if (typeof value !== 'string') {
    throw typeError(`${name} must be a string, got ${describe(value)}`)
  }
  return value
}

/** A signal name or number → its number. Unknown names throw TypeError. */
function signal(value, name = 'signal') {
  if (typeof value === 'string') {
    const num = constants.signals[value]
    if (typeof num !== 'number') {
      throw typeError(`${name}: unknown signal ${JSON.stringify(value)}`, 'ERR_UNKNOWN_SIGNAL')
    }
    return num
  }
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || value < 1 || value > 64) {
      throw rangeError(`${name} must be a signal number in 1..=64 or a name, got ${value}`)
    }
    return value
  }
  throw typeError(`${name} must be a signal name or number, got ${describe(value)}`)
}

function signalName(num) {
  for (const [name, n] of Object.entries(constants.signals)) {
    if (n === num) return name
  }
  return null
}

// Every duration option: whole or fractional milliseconds in 0..=2^31-1,
// the range of setTimeout (about 24.8 days). A fraction is rounded up to the
// next millisecond natively.
const DURATION_MAX = 2 ** 31 - 1

function duration(value, name, fallback) {
  if (value === undefined) return fallback
  if (typeof value !== 'number') {
    throw typeError(`${name} must be a number of milliseconds, got ${describe(value)}`)
  }
  if (!(value >= 0 && value <= DURATION_MAX)) {
    throw rangeError(`${name} must be a number of milliseconds in 0..=${DURATION_MAX}, got ${value}`)
  }
  return value
}

function optionalBoolean(value, name) {
  if (value === undefined) return undefined
  if (typeof value !== 'boolean') {
    throw typeError(`${name} must be a boolean, got ${describe(value)}`)
  }
  return value
}

module.exports = {
  PID_MAX,
  DURATION_MAX,
  describe,
  pid,
  targetPid,
  optionalString,
  signal,
  signalName,
  duration,
  optionalBoolean,
}
