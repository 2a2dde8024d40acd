// Errors as Node's own APIs shape them: TypeError/RangeError with a
// `code`, and system errors with `code`, `errno` and `syscall`.

const { constants } = require('node:os')

const ERROR_BRAND = Symbol.for('procward.error')

function brand(err) {
  Object.defineProperty(err, ERROR_BRAND, { value: true })
  return err
}

function typeError(message, code = 'ERR_INVALID_ARG_TYPE') {
  const err = new TypeError(message)
  err.code = code
  return brand(err)
}

function rangeError(message, code = 'ERR_OUT_OF_RANGE') {
  const err = new RangeError(message)
  err.code = code
  return brand(err)
}

// Native errors arrive as `[CODE] syscall: message` (see src/errors.rs).
const NATIVE = /^\[([A-Z0-9_]+)\] ([\s\S]*)$/

function fromNative(err) {
  if (!(err instanceof Error)) return err
  const m = NATIVE.exec(err.message)
  if (!m) return err
  const [, code, rest] = m
  let out
  if (code === 'ERR_OUT_OF_RANGE') out = new RangeError(rest)
  else if (code.startsWith('ERR_INVALID_ARG')) out = new TypeError(rest)
  else out = new Error(`${code}: ${rest}`)
  out.code = code
  const errno = constants.errno[code]
  if (typeof errno === 'number') {
    out.errno = -errno
    const colon = rest.indexOf(':')
    if (colon > 0) out.syscall = rest.slice(0, colon)
  }
  return brand(out)
}

/** Calls a native function, turning its coded errors into JS-shaped ones. */
function callNative(fn, ...args) {
  try {
    return fn(...args)
  } catch (err) {
    throw fromNative(err)
  }
}

function isProcwardError(err) {
  return err != null && typeof err === 'object' && err[ERROR_BRAND] === true
}

module.exports = { typeError, rangeError, fromNative, callNative, isProcwardError }
