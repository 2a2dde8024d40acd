// waitForExit: the exit of a process that need not be our child, through a
// pidfd held natively. Never reaps it (it is not ours).

const native = require('../binding.js')
const { fromNative, typeError, rangeError } = require('./errors')
const validate = require('./validate')

const KNOWN_OPTIONS = new Set(['identity', 'signal'])

function abortError(signal) {
  const err = new Error('The operation was aborted', { cause: signal?.reason })
  err.name = 'AbortError'
  err.code = 'ABORT_ERR'
  return err
}

function checkOptions(options) {
  if (options === undefined) return {}
  if (options === null || typeof options !== 'object') {
    throw typeError(`options must be an object, got ${validate.describe(options)}`)
  }
  for (const key of Object.keys(options)) {
    if (!KNOWN_OPTIONS.has(key)) {
      throw typeError(`options.${key} is not an option of waitForExit`, 'ERR_INVALID_ARG_VALUE')
    }
  }
  const identity = validate.optionalString(options.identity, 'options.identity')
  const signal = options.signal
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw typeError(`options.signal must be an AbortSignal, got ${validate.describe(signal)}`)
  }
  return { identity, signal }
}

async function waitForExit(pid, options) {
  validate.pid(pid)
  if (pid === process.pid) {
    throw rangeError(`pid is this process (${pid}); its exit can never be awaited from inside`)
  }
  const { identity, signal } = checkOptions(options)
  if (signal?.aborted) throw abortError(signal)
  const wait = new native.NativeExitWait()
  const onAbort = () => wait.cancel()
  signal?.addEventListener('abort', onAbort, { once: true })
  let r
  try {
    r = await wait.wait(pid, identity)
  } catch (err) {
    throw fromNative(err)
  } finally {
    signal?.removeEventListener('abort', onAbort)
  }
  if (r === null) throw abortError(signal)
  const exit = r.exit ? Object.freeze({ pid, code: r.exit.code ?? null, signal: r.exit.signal ?? null }) : null
  return { pid, pidReused: r.pidReused, exit }
}

module.exports = { waitForExit, abortError }
