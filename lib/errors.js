// Errors as Node's own APIs shape them: TypeError/RangeError with a
// `code`, and system errors with `code`, `errno` and `syscall`.

const util = require('node:util')

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

// Native errors arrive as objects, built and branded by the addon (see
// src/binding/errors.rs): a TypeError/RangeError/Error with `code` (and
// `errno` where the code is one), and for a failed system call also
// `syscall` and `info` ({ errno, code, message, syscall, path?, at?, fd?,
// reason? }), from which the JS face words it as Node's own errors are.

// libuv's wording of each errno, as Node's own errors use it ("no such file
// or directory"); the C library's (sent along) where a runtime lacks the map.
let errorMap
function errnoText(errno, fallback) {
  if (errorMap === undefined) {
    try {
      errorMap = typeof util.getSystemErrorMap === 'function' ? util.getSystemErrorMap() : null
    } catch {
      errorMap = null
    }
  }
  return errorMap?.get(-errno)?.[1] ?? fallback
}

/**
 * A Node-style system error: `CODE: description, syscall` (plus ` 'path'`),
 * with `errno` (negative, as Node's), `code`, `syscall` and `path`.
 * `info` is the decoded native JSON; `info.reason` replaces the errno's
 * generic text where the native side knows better.
 */
function systemError(code, info, path) {
  const desc = info.reason ?? errnoText(info.errno, info.desc)
  const where = path === undefined ? info.syscall : `${info.syscall} '${path}'`
  const err = new Error(`${code}: ${desc}, ${where}`)
  err.errno = -info.errno
  err.code = code
  err.syscall = info.syscall
  if (path !== undefined) err.path = path
  return err
}

/**
 * The parts of a native system error (`{ errno, code, syscall, desc, at?, fd?,
 * reason? }`, `errno` positive as the OS numbers it), or null for any other
 * error.
 */
function nativeInfo(err) {
  const info = isProcwardError(err) ? err.info : undefined
  if (info === null || typeof info !== 'object') return null
  // The native side names the common errnos; Node knows them all.
  let code = info.code
  if (code === 'EUNKNOWN' && typeof util.getSystemErrorName === 'function') {
    try {
      code = util.getSystemErrorName(info.errno)
    } catch {
      // not an errno Node knows either
    }
  }
  const out = { errno: -info.errno, syscall: info.syscall, desc: info.message, code }
  if (info.at !== undefined) out.at = info.at
  if (info.fd !== undefined) out.fd = info.fd
  if (info.reason !== undefined) out.reason = info.reason
  return out
}

/**
 * A native error as the JS face throws it: a system error reworded the way
 * Node words that errno (libuv's text); any other native error is already
 * final (class, `code`, `errno`, brand), as is anything that is not ours.
 */
function fromNative(err) {
  const info = nativeInfo(err)
  return info ? brand(systemError(info.code, info)) : err
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

module.exports = {
  typeError,
  rangeError,
  fromNative,
  nativeInfo,
  systemError,
  errnoText,
  brand,
  callNative,
  isProcwardError,
}
