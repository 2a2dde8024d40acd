// acquireLock, tryLock, readLock and ProcessLock: a file lock whose holder is
// a process. The kernel judges who holds it (flock(2), dropped when the
// holder's descriptor closes: release, exit, SIGKILL — a dead holder never
// pins it, not even as an unreaped zombie). The native side opens, locks,
// waits and writes the holder record; this side validates, parses records,
// shapes errors, and maps AbortSignal and timeouts onto a native cancel.

const os = require('node:os')
const native = require('../binding.js')
const { brand, fromNative, nativeInfo, rangeError, systemError, typeError } = require('./errors')
const validate = require('./validate')

const { abortError } = validate

const dispose = Symbol.dispose ?? Symbol.for('nodejs.dispose')
const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')
const LOCK_BRAND = Symbol.for('procward.lock')
const INTERNAL = Symbol('ProcessLock.internal')

const MAX_WAIT_MS = validate.DURATION_MAX
const DEFAULT_MODE = 0o600
/** How long `wait: false` waits out shared locks (probes) before ELOCKED. */
const SHARED_WAIT_MS = 100
/** Characters; keeps every record far below what a reader reads (64 KiB). */
const PURPOSE_MAX = 4096

const TRY_KEYS = ['purpose', 'mode', 'allowNetworkFs']
const ACQUIRE_KEYS = [...TRY_KEYS, 'wait', 'signal']

// A held lock stays referenced until release(): it ends with release() or
// with its process (or worker thread), never at a garbage collection.
const held = new Set()

// ---- input --------------------------------------------------------------------

function checkPath(path) {
  return validate.nonEmptyString(path, 'path')
}

function checkOptions(options = {}, keys, fn) {
  validate.knownKeys(validate.object(options, 'options'), keys, 'options', { of: `${fn}()` })
  const mode = options.mode ?? DEFAULT_MODE
  if (typeof mode !== 'number') throw typeError(`options.mode must be a number, got ${validate.describe(mode)}`)
  // The owner must be able to read and write it: the record is rewritten by
  // every acquire, and a file its own creator cannot open is a lock nobody
  // but root can take again.
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o777 || (mode & 0o600) !== 0o600) {
    throw rangeError(
      `options.mode must be an integer in 0..0o777 with owner read and write (0o600), got ${Object.is(mode, -0) ? '-0' : String(mode)}`,
    )
  }
  const purpose = options.purpose ?? null
  if (purpose !== null && typeof purpose !== 'string') {
    throw typeError(`options.purpose must be a string, got ${validate.describe(purpose)}`)
  }
  if (purpose !== null && purpose.length > PURPOSE_MAX) {
    throw rangeError(`options.purpose must be at most ${PURPOSE_MAX} characters, got ${purpose.length}`)
  }
  const allowNetworkFs = validate.optionalBoolean(options.allowNetworkFs, 'options.allowNetworkFs') ?? false
  return { mode, purpose, allowNetworkFs }
}

function checkAcquireOptions(options) {
  const o = checkOptions(options, ACQUIRE_KEYS, 'acquireLock')
  let wait = options?.wait ?? false
  if (typeof wait === 'number') {
    if (!Number.isFinite(wait) || wait < 0 || wait > MAX_WAIT_MS) {
      throw rangeError(`options.wait must be a boolean or 0..${MAX_WAIT_MS} ms, got ${String(wait)}`)
    }
    if (wait === 0) wait = false
  } else if (typeof wait !== 'boolean') {
    throw typeError(`options.wait must be a boolean or a number of milliseconds, got ${validate.describe(wait)}`)
  }
  const signal = validate.optionalAbortSignal(options?.signal, 'options.signal')
  return { ...o, wait, signal }
}

/** A native error about a lock path, in Node's shape (with `path` for system errors). */
function pathError(err, path) {
  const info = nativeInfo(err)
  return info ? brand(systemError(info.code, info, path)) : fromNative(err)
}

/** A native call on a lock path. */
function onPath(path, fn, ...args) {
  try {
    return fn(...args)
  } catch (err) {
    throw pathError(err, path)
  }
}

// ---- records ------------------------------------------------------------------

/** A holder record as the file holds it, or null (empty or not ours). */
function parseRecord(text) {
  if (typeof text !== 'string' || text.length === 0) return null
  let r
  try {
    r = JSON.parse(text)
  } catch {
    return null
  }
  if (r === null || typeof r !== 'object') return null
  const { pid, identity, hostname, acquiredAt, purpose } = r
  if (!Number.isInteger(pid) || pid < 1 || pid > validate.PID_MAX) return null
  if (typeof identity !== 'string' || typeof hostname !== 'string' || typeof acquiredAt !== 'string') return null
  if (purpose !== null && typeof purpose !== 'string') return null
  return Object.freeze({ pid, identity, hostname, acquiredAt, purpose })
}

/**
 * Zombie- and reuse-aware, and false for a holder already exiting (a killed
 * holder's lock is free microseconds before it is a zombie); null when it
 * cannot be known here.
 */
function holderRunning(holder) {
  if (holder === null || holder.identity === '' || holder.hostname !== os.hostname()) return null
  try {
    return native.lockHolderRunning(holder.pid, holder.identity)
  } catch {
    // hidepid and the like: the process may exist, we cannot see it.
    return null
  }
}

function lockInfo(path) {
  const info = onPath(path, native.lockRead, path)
  const holder = parseRecord(info.record)
  return { held: info.held, holder, holderRunning: holderRunning(holder) }
}

function lockedError(path) {
  let info = { held: true, holder: null, holderRunning: null }
  try {
    info = lockInfo(path)
  } catch {
    // Gone or unreadable since: still locked when we tried.
  }
  const { holder } = info
  let who = 'another process'
  if (holder !== null) {
    who = `pid ${holder.pid}`
    if (holder.hostname !== os.hostname()) who += ` on ${holder.hostname}`
    if (holder.purpose !== null) who += ` (${holder.purpose})`
    if (info.holderRunning === false) who += ', which is not running: another process holds it without a record'
  }
  const err = new Error(`ELOCKED: ${path} is locked by ${who}`)
  err.code = 'ELOCKED'
  err.path = path
  err.holder = holder
  err.holderRunning = holder === null ? null : info.holderRunning
  return brand(err)
}

// ---- the file going away --------------------------------------------------------

/** The signal's reason when the path no longer names the locked file. */
function lostError(path, how) {
  const what = how === 'replaced' ? 'replaced by another file' : 'removed (or renamed away, or its directory removed)'
  const err = new Error(
    `the lock file ${path} was ${what} while held: the path no longer names the locked file, so another process can lock the file there now`,
  )
  err.code = 'ERR_PROCWARD_LOCK_LOST'
  err.path = path
  return brand(err)
}

/** No watch could be had (out of fds, or of inotify instances or watches): said, not thrown. */
function unwatched(path, err) {
  const why = pathError(err, path)
  process.emitWarning(
    `procward: the lock on ${path} is not watched, and its signal will not abort if the file goes away: ${why.message}`,
    { code: 'PROCWARD_LOCK_UNWATCHED' },
  )
}

// ---- the lock -------------------------------------------------------------------

class ProcessLock {
  #native
  #path
  #holder
  #reclaimedFrom
  #released = false
  #controller = null

  /** @internal Use acquireLock() or tryLock(). */
  constructor(internal, handle, path) {
    if (internal !== INTERNAL) {
      throw typeError('a ProcessLock comes from acquireLock() or tryLock()', 'ERR_ILLEGAL_CONSTRUCTOR')
    }
    this.#native = handle
    this.#path = path
    this.#holder = parseRecord(handle.record)
    // A record left in the file means its writer never released. Reclaimed
    // from it when it no longer runs (here: zombie- and reuse-aware), or
    // when it ran elsewhere: it no longer holds the lock, since we do.
    const previous = parseRecord(handle.previous)
    this.#reclaimedFrom = previous !== null && holderRunning(previous) !== true ? previous : null
    held.add(this)
  }

  get path() {
    return this.#path
  }
  get holder() {
    return this.#holder
  }
  get reclaimedFrom() {
    return this.#reclaimedFrom
  }
  get released() {
    return this.#released
  }

  /**
   * Aborts when the path no longer names the locked file while it is held.
   * The kernel watches from the first read of `signal` on (a lock nobody
   * asks costs no watch); a file already gone by then aborts it at once.
   */
  get signal() {
    if (this.#controller === null) {
      this.#controller = new AbortController()
      if (!this.#released) this.#watch()
    }
    return this.#controller.signal
  }

  #watch() {
    let w
    try {
      w = this.#native.watch((how) => this.#lost(how))
    } catch (err) {
      // The callback's own set-up (napi): as a failed watch.
      w = { state: 'failed', error: err }
    }
    if (w.state === 'gone') this.#lost(w.how)
    else if (w.state === 'failed') unwatched(this.#path, w.error)
  }

  #lost(how) {
    if (this.#released || this.#controller.signal.aborted) return
    this.#controller.abort(lostError(this.#path, how))
  }

  /** Truncates the record, then unlocks. Idempotent. Ends the watch; the signal stays as it is. */
  release() {
    if (this.#released) return
    this.#released = true
    held.delete(this)
    this.#native.release()
  }

  [dispose]() {
    this.release()
  }

  async [asyncDispose]() {
    this.release()
  }

  get [LOCK_BRAND]() {
    return true
  }
}

// ---- the API ----------------------------------------------------------------------

// The binding has the lock on every platform it is built for (flock(2) on
// Linux and macOS, LockFileEx on Windows): nothing to probe.

function tryLock(path, options) {
  checkPath(path)
  const o = checkOptions(options, TRY_KEYS, 'tryLock')
  const handle = onPath(path, native.lockTry, path, o.mode, o.allowNetworkFs, o.purpose)
  return typeof handle === 'string' ? null : new ProcessLock(INTERNAL, handle, path)
}

async function acquireLock(path, options) {
  checkPath(path)
  const o = checkAcquireOptions(options)
  if (o.signal?.aborted) throw abortError(o.signal)
  const handle = onPath(path, native.lockTry, path, o.mode, o.allowNetworkFs, o.purpose)
  if (typeof handle !== 'string') return new ProcessLock(INTERNAL, handle, path)
  if (o.wait !== false) return waitForLock(path, o)
  // Only shared locks kept it out (a readLock probe, preempted mid-way, or
  // another program's LOCK_SH): wait for them in the kernel, briefly.
  if (handle === 'shared') return waitForLock(path, { ...o, wait: SHARED_WAIT_MS })
  throw lockedError(path)
}

/**
 * Blocks in flock(LOCK_EX) on a native thread. A timeout or an abort cancels
 * it natively: the wait then ends without the lock, its thread gone and its
 * descriptor closed, before the promise settles. If the kernel granted the
 * lock just before the cancel: a timeout keeps it (it came in time); an
 * abort releases it at once and still rejects.
 */
function waitForLock(path, o) {
  return new Promise((resolve, reject) => {
    let handle = null
    let cause = null // 'abort' | 'timeout'
    let timer = null
    const onAbort = () => {
      // Wins over a timeout that came first: an aborted wait never resolves.
      cause = 'abort'
      handle.cancel()
    }
    const onDone = (end) => {
      if (timer !== null) clearTimeout(timer)
      o.signal?.removeEventListener('abort', onAbort)
      handle.join()
      if (end.outcome === 'acquired') {
        if (cause === 'abort') {
          handle.release()
          reject(abortError(o.signal))
        } else {
          resolve(new ProcessLock(INTERNAL, handle, path))
        }
      } else if (end.outcome === 'cancelled') {
        reject(cause === 'abort' ? abortError(o.signal) : lockedError(path))
      } else {
        reject(pathError(end.error, path))
      }
    }
    try {
      handle = native.lockWait(path, o.mode, o.allowNetworkFs, o.purpose, onDone)
    } catch (err) {
      reject(pathError(err, path))
      return
    }
    o.signal?.addEventListener('abort', onAbort, { once: true })
    if (typeof o.wait === 'number') {
      timer = setTimeout(() => {
        cause ??= 'timeout'
        handle.cancel()
      }, o.wait)
    }
  })
}

function readLock(path) {
  checkPath(path)
  return lockInfo(path)
}

module.exports = { acquireLock, tryLock, readLock, ProcessLock }
