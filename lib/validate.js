// Input checks that run before anything reaches native code. napi's integer
// conversions wrap silently (-1 → 4294967295, NaN → 0, 1.7 → 1), so a pid is
// judged here as a JS value first; the Rust side checks it again.

const { constants } = require('node:os')
const { brand, typeError, rangeError } = require('./errors')

const PID_MAX = 4194304

function describe(value) {
  if (value === null) return 'null'
  if (value === undefined) return 'undefined'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'string') return `string ${JSON.stringify(value.slice(0, 40))}`
  if (typeof value === 'bigint') return `bigint ${value}n`
  if (typeof value === 'object') return 'an object'
  return `${typeof value} ${String(value)}`
}

function pid(value, name = 'pid') {
  return integer(value, name, 1, PID_MAX)
}

/** A pid we may signal: never ourselves. */
function targetPid(value, name = 'pid') {
  pid(value, name)
  if (value === process.pid) {
    throw rangeError(`${name} is this process (${value}); refusing to signal ourselves`)
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

/** A checker of `typeof value === type` that lets undefined (not given) through. */
function optional(type) {
  return (value, name) => {
    if (value === undefined || typeof value === type) return value
    throw typeError(`${name} must be a ${type}, got ${describe(value)}`)
  }
}

const optionalString = optional('string')
const optionalBoolean = optional('boolean')

/** A plain options object (not null, not an array). */
function object(value, name) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw typeError(`${name} must be an object, got ${describe(value)}`)
  }
  return value
}

/**
 * Refuses a key the option object does not define, rather than ignoring
 * it: a misspelt `procesGroup` would otherwise change nothing, silently. A
 * key whose value is undefined sets nothing and passes (objects spread from
 * a config often carry such keys). `of` names the function the options
 * are for; `hints` adds a word for a key users bring from elsewhere
 * (child_process's `shell`, say).
 */
function knownKeys(value, keys, name, { of, hints = {} } = {}) {
  const known = keys instanceof Set ? keys : new Set(keys)
  for (const key of Object.keys(value)) {
    if (known.has(key) || value[key] === undefined) continue
    const hint = Object.hasOwn(hints, key) ? `; ${hints[key]}` : ''
    throw typeError(
      `${name}.${key} is not an option${of ? ` of ${of}` : ''} (${[...known].join(', ')})${hint}`,
      'ERR_INVALID_ARG_VALUE',
    )
  }
  return value
}

/** A string without NUL (the C side would cut it there); `empty: false` refuses ''. */
function cString(value, name, { empty = true } = {}) {
  if (typeof value !== 'string') throw typeError(`${name} must be a string, got ${describe(value)}`)
  if (!empty && value.length === 0) throw typeError(`${name} must not be empty`, 'ERR_INVALID_ARG_VALUE')
  if (value.includes('\0')) throw typeError(`${name} must not contain NUL bytes`, 'ERR_INVALID_ARG_VALUE')
  return value
}

/** A non-empty string without NUL: a command, a name, a path. */
function nonEmptyString(value, name) {
  return cString(value, name, { empty: false })
}

/** An array of strings without NUL, copied (and frozen: read once, used as read). */
function stringArray(value, name) {
  if (!Array.isArray(value)) throw typeError(`${name} must be an array of strings, got ${describe(value)}`)
  for (const [i, a] of value.entries()) cString(a, `${name}[${i}]`)
  return Object.freeze([...value])
}

/** An integer in min..=max; `why` explains the range in the error. */
function integer(value, name, min, max, why = '') {
  if (typeof value !== 'number') throw typeError(`${name} must be a number, got ${describe(value)}`)
  if (!Number.isInteger(value) || value < min || value > max) {
    throw rangeError(`${name} must be an integer in ${min}..=${max}${why}, got ${String(value)}`)
  }
  return value
}

/** One of `choices`, or `fallback` when not given. */
function oneOf(value, choices, name, fallback) {
  if (value === undefined) return fallback
  if (!choices.includes(value)) {
    throw typeError(
      `${name} must be one of ${choices.map((c) => `'${c}'`).join(', ')}, got ${describe(value)}`,
      'ERR_INVALID_ARG_VALUE',
    )
  }
  return value
}

/** The error of an operation `signal` aborted, as Node's own (AbortError, ABORT_ERR). */
function abortError(signal) {
  const err = new Error('The operation was aborted', { cause: signal?.reason })
  err.name = 'AbortError'
  err.code = 'ABORT_ERR'
  return brand(err)
}

/** An AbortSignal, or undefined. */
function optionalAbortSignal(value, name) {
  if (value !== undefined && !(value instanceof AbortSignal)) {
    throw typeError(`${name} must be an AbortSignal, got ${describe(value)}`)
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
  object,
  knownKeys,
  cString,
  nonEmptyString,
  stringArray,
  integer,
  oneOf,
  optionalAbortSignal,
  abortError,
}
