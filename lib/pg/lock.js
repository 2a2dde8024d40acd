// The lock: acquirePgLock, tryPgLock, readPgLock and the PgLock they give,
// which probes its session so that `signal` aborts before the server can
// have let the lock go.

const asyncHooks = require('node:async_hooks')
const os = require('node:os')
const { brand, typeError } = require('../errors')
const { abortError, connectionError, fromServer, lockedError, queryError } = require('./errors')
const { checkCommon, checkLockOptions } = require('./options')
const { advisoryKey, closeClient, destroyClient, openSession, ownIdentity, sendCancel, CLOSE_MS } = require('./session')
const { readHolder, tableName, takeFence } = require('./fence')

const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')
const signalAborted = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted').get
const signalReason = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'reason').get
const INTERNAL = Symbol('PgLock.internal')
const DEADLINE = Symbol('PgLock.deadline')

const ACQUIRE_KEYS = ['connection', 'key', 'wait', 'signal', 'hostLossMs', 'purpose', 'schema']
const TRY_KEYS = ['connection', 'key', 'hostLossMs', 'purpose', 'schema']
const READ_KEYS = ['connection', 'key', 'schema']

// A held lock stays referenced until release(): it ends with release() or
// with its process, never at a garbage collection.
const held = new Set()

// ---- the stall watch ---------------------------------------------------------------------------

/**
 * The locks whose safety window is judged before every callback. After a
 * stall (a blocked event loop, SIGSTOP) the deadline's timer runs in turn
 * with the caller's own timers, maybe after one of them (a timer made
 * during the stall is ordered by the loop's stale time, so before ours); a
 * look at `lock.signal` judges the window itself, but a signal derived from
 * it (`AbortSignal.any`, fetch's, a child process's) only aborts when
 * lock.signal is aborted. So, while a lock is watched, an async hook judges
 * the windows before each callback runs (timer, immediate, I/O, promise
 * continuation): the first callback after the stall finds lock.signal and
 * everything derived from it aborted. Costs a call and a clock read per
 * callback while a lock is held, nothing once none is. Where the runtime
 * has no async hooks (Bun), the deadline's timer and the look remain.
 */
const watched = new Map() // lock → its judge
let nextDeadline = Number.POSITIVE_INFINITY
let stallHook = null
let judging = false
const noop = () => {}

function judgeWatched() {
  if (judging || performance.now() < nextDeadline) return
  judging = true
  // The callback about to run. An abort listener that clears this very
  // timer (or the lock's own clearing of its deadline, when that is the
  // one) leaves Node calling a callback that is gone: it gets one that
  // does nothing, which is what clearing it asked for.
  const resource = asyncHooks.executionAsyncResource()
  const timer = typeof resource?._onTimeout === 'function' ? resource : null
  try {
    for (const judge of [...watched.values()]) judge()
  } finally {
    judging = false
    if (timer !== null && timer._onTimeout === null) timer._onTimeout = noop
    rewatch()
  }
}

function newStallHook() {
  try {
    return asyncHooks.createHook({ before: judgeWatched })
  } catch {
    return null
  }
}

/** The earliest deadline of the watched locks, after one of them moved. */
function rewatch() {
  nextDeadline = Number.POSITIVE_INFINITY
  for (const lock of watched.keys()) nextDeadline = Math.min(nextDeadline, lock[DEADLINE]())
}

function watch(lock, judge) {
  watched.set(lock, judge)
  if (watched.size === 1) {
    stallHook ??= newStallHook()
    stallHook?.enable()
  }
  rewatch()
}

function unwatch(lock) {
  if (!watched.delete(lock)) return
  if (watched.size === 0) stallHook?.disable()
  rewatch()
}

class PgLock {
  #client
  #key
  #k
  #schema
  #fence
  #holder
  #reclaimedFrom
  #backendPid
  #timing
  #controller = new AbortController()
  #released = false
  #releasing = null
  #dead = false
  #probing = false
  #lastOk
  #probeTimer = null
  #deadline = null

  /** @internal Use acquirePgLock() or tryPgLock(). */
  constructor(internal, s) {
    if (internal !== INTERNAL) {
      throw typeError('a PgLock comes from acquirePgLock() or tryPgLock()', 'ERR_ILLEGAL_CONSTRUCTOR')
    }
    this.#client = s.client
    this.#key = s.key
    this.#k = s.k
    this.#schema = s.schema
    this.#fence = s.fence
    this.#holder = s.holder
    this.#reclaimedFrom = s.previous
    this.#backendPid = s.backendPid
    this.#timing = s.timing
    this.#lastOk = s.lastOk
    held.add(this)
    const client = this.#client
    client.on('error', (err) => this.#lose('the lock session failed', err, true))
    client.on('end', () => this.#lose('the lock session ended', null, true))
    // Like the file lock, a held lock does not keep the process alive: it
    // ends with its process.
    client.unref()
    this.#probeTimer = setInterval(() => this.#probe(), this.#timing.probeMs)
    this.#probeTimer.unref()
    this.#armDeadline()
    this.#judgeOnEveryLook()
    watch(this, () => this.#judgeDeadline())
    if (client._ended) this.#lose('the lock session ended', null, true)
  }

  /**
   * After a stall (a blocked event loop, SIGSTOP) the window is judged
   * before the next callback (the stall watch, above); code that goes on in
   * the very callback that stalled has not yielded yet. So the signal also
   * judges the window whenever it is looked at: the first `aborted`,
   * `reason` or `throwIfAborted()` after a stall longer than the window
   * sees the loss.
   */
  #judgeOnEveryLook() {
    const judge = () => this.#judgeDeadline()
    Object.defineProperties(this.#controller.signal, {
      aborted: {
        configurable: true,
        get() {
          judge()
          return signalAborted.call(this)
        },
      },
      reason: {
        configurable: true,
        get() {
          judge()
          return signalReason.call(this)
        },
      },
      throwIfAborted: {
        configurable: true,
        writable: true,
        value() {
          judge()
          return AbortSignal.prototype.throwIfAborted.call(this)
        },
      },
    })
  }

  #aborted() {
    return signalAborted.call(this.#controller.signal)
  }

  #judgeDeadline() {
    if (this.#released || this.#aborted()) return
    if (performance.now() - this.#lastOk >= this.#timing.windowMs) this.#late()
  }

  #late() {
    this.#lose(
      `no answer from the lock session within ${this.#timing.windowMs} ms (the server may release it ${this.#timing.idle} s after our last packet)`,
      null,
      false,
    )
  }

  get key() {
    return this.#key
  }
  get fence() {
    return this.#fence
  }
  get signal() {
    return this.#controller.signal
  }
  get holder() {
    return this.#holder
  }
  get reclaimedFrom() {
    return this.#reclaimedFrom
  }
  get backendPid() {
    return this.#backendPid
  }
  get released() {
    return this.#released
  }

  /** @internal When the window runs out, on performance.now()'s clock. */
  [DEADLINE]() {
    return this.#lastOk + this.#timing.windowMs
  }

  #armDeadline() {
    if (watched.has(this)) rewatch()
    if (this.#deadline !== null) clearTimeout(this.#deadline)
    const left = this.#lastOk + this.#timing.windowMs - performance.now()
    this.#deadline = setTimeout(
      () => {
        this.#deadline = null
        this.#late()
      },
      Math.max(0, left),
    )
    this.#deadline.unref()
  }

  #probe() {
    if (this.#probing || this.#dead || this.#released || this.#aborted()) return
    this.#probing = true
    const sentAt = performance.now()
    this.#client.query({ text: 'SELECT pg_backend_pid()', rowMode: 'array' }).then(
      (res) => {
        this.#probing = false
        if (this.#released || this.#aborted()) return
        if (res.rows[0]?.[0] !== this.#backendPid) {
          this.#lose('the lock session was replaced by another backend (a proxy reconnected?)', null, false)
          return
        }
        this.#lastOk = Math.max(this.#lastOk, sentAt)
        this.#armDeadline()
      },
      (err) => {
        this.#probing = false
        this.#lose('the lock session did not answer its probe', err, !fromServer(err))
      },
    )
  }

  #stopWatching() {
    unwatch(this)
    if (this.#probeTimer !== null) clearInterval(this.#probeTimer)
    if (this.#deadline !== null) clearTimeout(this.#deadline)
    this.#probeTimer = null
    this.#deadline = null
  }

  /** The lock may be gone: say so on the signal, once. */
  #lose(why, cause, dead) {
    if (dead) this.#dead = true
    if (this.#released || this.#aborted()) return
    this.#stopWatching()
    const detail = cause?.message ? `: ${cause.message}` : ''
    const err = new Error(`the PostgreSQL lock ${JSON.stringify(this.#key)} may have been lost: ${why}${detail}`, {
      cause: cause ?? undefined,
    })
    err.code = 'ERR_PROCWARD_PG_LOCK_LOST'
    err.key = this.#key
    this.#controller.abort(brand(err))
  }

  /**
   * Clears our record, unlocks, closes the session. Idempotent; never
   * rejects: a session that cannot be reached is cut, and the server drops
   * its lock when it notices.
   */
  release() {
    if (this.#releasing !== null) return this.#releasing
    this.#released = true
    held.delete(this)
    this.#stopWatching()
    if (!this.#aborted()) {
      const err = new Error(`the PostgreSQL lock ${JSON.stringify(this.#key)} was released`)
      err.code = 'ERR_PROCWARD_PG_LOCK_RELEASED'
      err.key = this.#key
      this.#controller.abort(brand(err))
    }
    this.#releasing = this.#unlock()
    return this.#releasing
  }

  async #unlock() {
    const client = this.#client
    if (this.#dead || client._ended) {
      destroyClient(client)
      return
    }
    client.ref()
    // Lost (a late or failed probe): the session may not answer; ending it
    // releases whatever it still holds.
    if (signalReason.call(this.#controller.signal)?.code === 'ERR_PROCWARD_PG_LOCK_RELEASED') {
      const table = tableName(client, this.#schema)
      let timer
      const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('timed out')), CLOSE_MS)
      })
      try {
        // Committed before the unlock: the next holder never reads us as a
        // holder that died without releasing.
        await Promise.race([
          (async () => {
            await client.query(`UPDATE ${table} SET holder = NULL WHERE key = $1 AND backend_pid = pg_backend_pid()`, [
              this.#key,
            ])
            await client.query(`SELECT pg_advisory_unlock(${this.#k}::bigint)`)
          })(),
          timeout,
        ])
      } catch {
        // Ending the session below releases it all the same.
      } finally {
        clearTimeout(timer)
      }
    }
    await closeClient(client)
  }

  async [asyncDispose]() {
    await this.release()
  }
}

// ---- the API -----------------------------------------------------------------------------------

function newHolder(purpose) {
  return Object.freeze({
    pid: process.pid,
    identity: ownIdentity(),
    hostname: os.hostname(),
    acquiredAt: new Date().toISOString(),
    purpose,
  })
}

/** The lock is ours on this session: fence, record, and the lock object. */
async function finish(client, o, k) {
  const sentAt = performance.now()
  const holder = newHolder(o.purpose)
  // An abort while the fence is taken cancels it (it may wait on the row,
  // locked by someone else's transaction): an abort is never left waiting.
  const onAbort = () => sendCancel(client)
  o.signal?.addEventListener('abort', onAbort, { once: true })
  let f
  try {
    f = await takeFence(client, o, k, holder)
  } catch (err) {
    await closeClient(client)
    if (o.signal?.aborted) throw abortError(o.signal)
    throw err
  } finally {
    o.signal?.removeEventListener('abort', onAbort)
  }
  const lock = new PgLock(INTERNAL, {
    client,
    key: o.key,
    k,
    schema: o.schema,
    fence: f.fence,
    holder,
    previous: f.previous,
    backendPid: f.backendPid,
    timing: o.timing,
    lastOk: sentAt,
  })
  // Aborted while the lock was being set up: an aborted acquire never
  // resolves. Released as a holder releases (its record cleared), so the
  // next holder does not read it as one that died holding the lock.
  if (o.signal?.aborted) {
    await lock.release()
    throw abortError(o.signal)
  }
  return lock
}

async function lockedHere(client, o) {
  let holder = null
  try {
    holder = (await readHolder(client, o.schema, o.key)).holder
  } catch {
    // Locked is what we know.
  }
  await closeClient(client)
  return lockedError(o.key, holder)
}

async function tryOnce(client, k) {
  let got
  try {
    got = (await client.query(`SELECT pg_try_advisory_lock(${k}::bigint) AS got`)).rows[0].got
  } catch (err) {
    await closeClient(client)
    throw fromServer(err)
      ? queryError('could not take the advisory lock', err)
      : connectionError('the connection failed while taking the lock', err, client)
  }
  return got
}

async function tryPgLock(options) {
  const o = checkLockOptions(options ?? {}, TRY_KEYS, 'tryPgLock')
  const k = advisoryKey(o.key)
  const client = await openSession(o)
  if (!(await tryOnce(client, k))) {
    await closeClient(client)
    return null
  }
  return finish(client, o, k)
}

async function acquirePgLock(options) {
  const o = checkLockOptions(options ?? {}, ACQUIRE_KEYS, 'acquirePgLock')
  if (o.signal?.aborted) throw abortError(o.signal)
  const k = advisoryKey(o.key)
  const client = await openSession(o, o.signal)
  if (o.wait === false) {
    if (!(await tryOnce(client, k))) throw await lockedHere(client, o)
    return finish(client, o, k)
  }
  return waitForLock(client, o, k)
}

/**
 * Waits in the server: pg_advisory_lock, bounded by lock_timeout for a
 * number. An abort sends a cancel request, lets the statement end, and
 * closes the session — so a lock granted at the very instant of the abort
 * is released with it, and the wait rejects.
 */
async function waitForLock(client, o, k) {
  const sql =
    o.wait === true
      ? `SELECT pg_advisory_lock(${k}::bigint)`
      : `SET LOCAL lock_timeout = ${Math.max(1, Math.ceil(o.wait))}; SELECT pg_advisory_lock(${k}::bigint)`
  let aborted = false
  let settled = false
  let retry = null
  let cut = null
  // A cancel that reaches the backend before it has started the statement
  // is dropped by the server: send it again until the statement ends, and
  // cut the session if it does not end in time (the server then drops the
  // waiting backend when it notices the closed socket).
  const cancel = () => {
    if (settled) return
    sendCancel(client)
    retry = setTimeout(cancel, 200)
  }
  const onAbort = () => {
    if (aborted) return
    aborted = true
    cancel()
    cut = setTimeout(() => destroyClient(client), CLOSE_MS)
  }
  const waiting = client.query(sql)
  o.signal?.addEventListener('abort', onAbort, { once: true })
  if (o.signal?.aborted) onAbort()
  let outcome
  try {
    await waiting
    outcome = { ok: true }
  } catch (err) {
    outcome = { ok: false, err }
  } finally {
    settled = true
    clearTimeout(retry)
    clearTimeout(cut)
    o.signal?.removeEventListener('abort', onAbort)
  }
  if (aborted || o.signal?.aborted) {
    await closeClient(client)
    throw abortError(o.signal)
  }
  if (outcome.ok) return finish(client, o, k)
  const { err } = outcome
  if (err?.code === '55P03') throw await lockedHere(client, o) // lock_timeout
  await closeClient(client)
  throw fromServer(err)
    ? queryError('could not wait for the advisory lock', err)
    : connectionError('the connection failed while waiting for the lock', err, client)
}

async function readPgLock(options) {
  const o = checkCommon(options ?? {}, READ_KEYS, 'readPgLock')
  const client = await openSession(o)
  try {
    const { held, holder } = await readHolder(client, o.schema, o.key)
    return { held, holder, holderRunning: null }
  } catch (err) {
    throw fromServer(err)
      ? queryError('could not read the lock', err)
      : connectionError('the connection failed while reading the lock', err, client)
  } finally {
    await closeClient(client)
  }
}

module.exports = { acquirePgLock, tryPgLock, readPgLock, PgLock }
