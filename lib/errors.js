// Errors as Node's own APIs shape them: TypeError/RangeError with a
// `code`, and system errors with `code`, `errno` and `syscall`.

const { constants } = require('node:os')
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

// Native errors arrive as `[CODE] message`, or for a failed system call as
// `[CODE] {"errno":N,"syscall":"…","desc":"…",…}` (see src/errors.rs).
const NATIVE = /^\[([A-Z0-9_]+)\] ([\s\S]*)$/

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

/** The decoded `{errno, syscall, …}` of a native system error, or null. */
function nativeInfo(err) {
  const m = err instanceof Error ? NATIVE.exec(err.message) : null
  if (!m?.[2].startsWith('{')) return null
  let info
  try {
    info = JSON.parse(m[2])
  } catch {
    return null
  }
  // The native side names the common errnos; Node knows them all.
  let code = m[1]
  if (code === 'EUNKNOWN' && typeof util.getSystemErrorName === 'function') {
    try {
      code = util.getSystemErrorName(-info.errno)
    } catch {
      // not an errno Node knows either
    }
  }
  return { ...info, code }
}

function fromNative(err) {
  if (!(err instanceof Error)) return err
  const m = NATIVE.exec(err.message)
  if (!m) return err
  const [, code, rest] = m
  const info = nativeInfo(err)
  if (info) return brand(systemError(info.code, info))
  let out
  if (code === 'ERR_OUT_OF_RANGE') out = new RangeError(rest)
  else if (code.startsWith('ERR_INVALID_ARG')) out = new TypeError(rest)
  else out = new Error(`${code}: ${rest}`)
  out.code = code
  const errno = constants.errno[code]
  if (typeof errno === 'number') out.errno = -errno
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
