// waitForExit: the exit of a process that need not be our child, through a
// pidfd held natively. Never reaps it (it is not ours).

const native = require('../binding.js')
const { fromNative, rangeError } = require('./errors')
const validate = require('./validate')

const { abortError } = validate

const KNOWN_OPTIONS = ['identity', 'signal']

function checkOptions(options) {
  if (options === undefined) return {}
  validate.knownKeys(validate.object(options, 'options'), KNOWN_OPTIONS, 'options', { of: 'waitForExit()' })
  return {
    identity: validate.optionalString(options.identity, 'options.identity'),
    signal: validate.optionalAbortSignal(options.signal, 'options.signal'),
  }
}

/**
 * Waits in flight, by pid and identity: concurrent callers for one process
 * share one native wait (one pidfd), so a thousand waiters on a daemon cost
 * one descriptor, not a thousand. `users` counts the callers still waiting;
 * the last one to abort cancels the native wait.
 */
const inFlight = new Map()

function sharedWait(pid, identity) {
  const key = `${pid}\0${identity ?? ''}`
  let entry = inFlight.get(key)
  if (entry === undefined) {
    const wait = new native.NativeExitWait()
    entry = { wait, users: 0, result: null }
    const e = entry
    e.result = wait.wait(pid, identity).finally(() => {
      if (inFlight.get(key) === e) inFlight.delete(key)
    })
    // Rejections reach every caller through their own handlers.
    e.result.catch(() => {})
    /** One caller is done; true when it was the last (the wait is cancelled). */
    e.leave = () => {
      if (--e.users > 0) return false
      if (inFlight.get(key) === e) inFlight.delete(key)
      wait.cancel()
      return true
    }
    inFlight.set(key, e)
  }
  entry.users++
  return entry
}

async function waitForExit(pid, options) {
  validate.pid(pid)
  if (pid === process.pid) {
    throw rangeError(`pid is this process (${pid}); its exit can never be awaited from inside`)
  }
  const { identity, signal } = checkOptions(options)
  if (signal?.aborted) throw abortError(signal)
  const entry = sharedWait(pid, identity)
  let onAbort
  const aborted = new Promise((resolve) => {
    onAbort = () => resolve(null)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
  let r
  try {
    r = await Promise.race([entry.result, aborted])
  } catch (err) {
    entry.leave()
    throw fromNative(err)
  } finally {
    signal?.removeEventListener('abort', onAbort)
  }
  if (r === null) {
    // Aborted. The last caller out waits for the cancelled native wait to
    // end, so no pidfd outlives the rejection.
    if (entry.leave()) await entry.result.catch(() => {})
    throw abortError(signal)
  }
  entry.leave()
  const exit = r.exit ? Object.freeze({ pid, code: r.exit.code ?? null, signal: r.exit.signal ?? null }) : null
  return { pid, pidReused: r.pidReused, exit }
}

module.exports = { waitForExit }
