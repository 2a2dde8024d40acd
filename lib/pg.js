// acquirePgLock, tryPgLock, readPgLock: a lock for more than one host, held
// as a PostgreSQL session advisory lock on a connection of its own. The
// server is the judge: it drops the lock when the holder's session ends
// (release, exit, SIGKILL — the kernel closes the socket, zombie or not) or,
// for a vanished host, when TCP keepalives and tcp_user_timeout, set for the
// session from hostLossMs, give up on it. The holder probes its session
// often enough to abort `lock.signal` before the server can have let go.
//
// node-postgres (`pg`) is an optional peer dependency: loaded here, once,
// with one clear error when it is missing.

const crypto = require('node:crypto')
const net = require('node:net')
const os = require('node:os')
const { brand, rangeError, typeError } = require('./errors')
const validate = require('./validate')

const pg = loadPg()

function loadPg() {
  try {
    return require('pg')
  } catch (err) {
    if (err?.code === 'MODULE_NOT_FOUND' && /['"]pg['"]/.test(String(err.message).split('\n')[0])) {
      const e = new Error(
        "procward/pg needs the package 'pg' (node-postgres), an optional peer dependency of procward: install it beside procward (npm install pg)",
        { cause: err },
      )
      e.code = 'ERR_PROCWARD_PG_MISSING'
      throw brand(e)
    }
    throw err
  }
}

const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')
const INTERNAL = Symbol('PgLock.internal')

const DEFAULT_HOST_LOSS_MS = 10_000
/** Keepalive settings are whole seconds, and three of them must fit. */
const MIN_HOST_LOSS_MS = 2000
const DEFAULT_SCHEMA = 'public'
const TABLE = 'procward_lock_fence'
/** UTF-8 bytes; a key is stored (primary key) beside its fence. */
const KEY_MAX_BYTES = 1024
const PURPOSE_MAX = 4096
/** PostgreSQL's NAMEDATALEN - 1. */
const IDENT_MAX_BYTES = 63
/** Linux's limits for TCP_KEEPIDLE / TCP_KEEPINTVL (seconds). */
const KEEPALIVE_MAX_S = 32767
/** Serializes the fence table's creation (the two-int advisory space: never a key's). */
const CREATE_LOCK = '1886548855, 1' // 'prwd', 1
/** How long an abandoned wait or a release may take to close before we cut the socket. */
const CLOSE_MS = 2000

const ACQUIRE_KEYS = ['connection', 'key', 'wait', 'signal', 'hostLossMs', 'purpose', 'schema']
const TRY_KEYS = ['connection', 'key', 'hostLossMs', 'purpose', 'schema']
const READ_KEYS = ['connection', 'key', 'schema']

// A held lock stays referenced until release(): it ends with release() or
// with its process, never at a garbage collection.
const held = new Set()

// ---- errors ---------------------------------------------------------------------

function abortError(signal) {
  const err = new Error('The operation was aborted', { cause: signal?.reason })
  err.name = 'AbortError'
  err.code = 'ABORT_ERR'
  return brand(err)
}

function where(client) {
  const host = client?.host ?? '?'
  return host.startsWith('/') ? `${host}/.s.PGSQL.${client.port}` : `${host}:${client?.port}`
}

/** A failed or lost connection: pg's error is the cause. */
function connectionError(what, cause, client) {
  const err = new Error(`${what} (PostgreSQL at ${where(client)}): ${cause?.message ?? cause}`, { cause })
  err.code = 'ERR_PROCWARD_PG_CONNECTION'
  return brand(err)
}

/** An error the server sent (SQLSTATE in cause.code). */
function queryError(what, cause) {
  const err = new Error(`${what}: ${cause?.message ?? cause}`, { cause })
  err.code = 'ERR_PROCWARD_PG_QUERY'
  return brand(err)
}

/**
 * An error about a statement, sent by a server that goes on: a SQLSTATE and
 * a severity ERROR. Socket errors, and FATAL ones that end the session
 * (an administrator's shutdown or terminate, class 57P0x), are the
 * connection's.
 */
function fromServer(err) {
  return (
    err != null &&
    typeof err.code === 'string' &&
    /^[0-9A-Z]{5}$/.test(err.code) &&
    err.severity !== undefined &&
    err.severity !== 'FATAL' &&
    err.severity !== 'PANIC' &&
    !err.code.startsWith('57P') && // operator intervention: shutdown, terminate
    !err.code.startsWith('08') // connection exception
  )
}

function describeHolder(holder) {
  if (holder === null) return 'another session'
  let who = `pid ${holder.pid}`
  if (holder.hostname !== os.hostname()) who += ` on ${holder.hostname}`
  if (holder.purpose !== null) who += ` (${holder.purpose})`
  return who
}

function lockedError(key, holder) {
  const err = new Error(`ELOCKED: the PostgreSQL lock ${JSON.stringify(key)} is held by ${describeHolder(holder)}`)
  err.code = 'ELOCKED'
  err.key = key
  err.holder = holder
  err.holderRunning = null
  return brand(err)
}

// ---- input ---------------------------------------------------------------------------

function checkKeys(options, keys, fn) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw typeError(`options must be an object, got ${validate.describe(options)}`)
  }
  for (const key of Object.keys(options)) {
    if (!keys.includes(key)) {
      throw typeError(`options.${key} is not an option of ${fn}() (${keys.join(', ')})`, 'ERR_INVALID_ARG_VALUE')
    }
  }
}

function checkText(value, name, maxBytes, { optional = false } = {}) {
  if (value === undefined && optional) return undefined
  if (typeof value !== 'string') throw typeError(`${name} must be a string, got ${validate.describe(value)}`)
  if (value.length === 0) throw typeError(`${name} must not be empty`, 'ERR_INVALID_ARG_VALUE')
  if (value.includes('\0')) throw typeError(`${name} must not contain NUL characters`, 'ERR_INVALID_ARG_VALUE')
  if (!value.isWellFormed()) {
    throw typeError(`${name} must be well-formed Unicode (it has a lone surrogate)`, 'ERR_INVALID_ARG_VALUE')
  }
  const bytes = Buffer.byteLength(value, 'utf8')
  if (bytes > maxBytes) throw rangeError(`${name} must be at most ${maxBytes} bytes in UTF-8, got ${bytes}`)
  return value
}

const URL_PROTOCOLS = ['postgres:', 'postgresql:', 'socket:']

function checkUrl(url, name) {
  let parsed = null
  try {
    parsed = new URL(url)
  } catch {
    // below
  }
  // Never echo it: a connection string may carry a password.
  if (parsed === null || !URL_PROTOCOLS.includes(parsed.protocol)) {
    throw typeError(
      `${name} must be a PostgreSQL URL (postgres://user@host:port/database)${parsed === null ? '' : `, not a ${parsed.protocol} URL`}`,
      'ERR_INVALID_URL',
    )
  }
}

/** The kind of object that must never be handed in: it has (or is) a session already. */
function pooledKind(c) {
  if (pg.Pool && c instanceof pg.Pool) return 'a pg.Pool'
  if (pg.Client && c instanceof pg.Client) return 'a pg.Client'
  if (typeof c.release === 'function' && typeof c.query === 'function') return 'a pooled client'
  if (typeof c.query === 'function' || typeof c.connect === 'function') return 'a client or pool object'
  return null
}

/** A pg.ClientConfig for a connection of our own. */
function checkConnection(c) {
  let config
  if (typeof c === 'string') {
    checkUrl(c, 'options.connection')
    config = { connectionString: c }
  } else if (c !== null && typeof c === 'object' && !Array.isArray(c)) {
    const kind = pooledKind(c)
    if (kind !== null) {
      throw typeError(
        `options.connection must be a connection string or a client configuration, not ${kind}: a session lock needs a connection of its own (a pooled session would strand or share it); procward opens and closes one from the configuration`,
      )
    }
    if (c.connectionString !== undefined) {
      if (typeof c.connectionString !== 'string') {
        throw typeError(
          `options.connection.connectionString must be a string, got ${validate.describe(c.connectionString)}`,
        )
      }
      checkUrl(c.connectionString, 'options.connection.connectionString')
    }
    config = { ...c }
  } else {
    throw typeError(
      `options.connection must be a PostgreSQL URL or a client configuration object, got ${validate.describe(c)}`,
    )
  }
  return config
}

function checkCommon(options, keys, fn) {
  checkKeys(options, keys, fn)
  const config = checkConnection(options.connection)
  const key = checkText(options.key, 'options.key', KEY_MAX_BYTES)
  const schema = checkText(options.schema, 'options.schema', IDENT_MAX_BYTES, { optional: true }) ?? DEFAULT_SCHEMA
  return { config, key, schema }
}

function checkLockOptions(options, keys, fn) {
  const o = checkCommon(options, keys, fn)
  const purpose = options.purpose ?? null
  if (purpose !== null && typeof purpose !== 'string') {
    throw typeError(`options.purpose must be a string, got ${validate.describe(purpose)}`)
  }
  if (purpose !== null && purpose.length > PURPOSE_MAX) {
    throw rangeError(`options.purpose must be at most ${PURPOSE_MAX} characters, got ${purpose.length}`)
  }
  const hostLossMs = options.hostLossMs ?? DEFAULT_HOST_LOSS_MS
  if (typeof hostLossMs !== 'number') {
    throw typeError(`options.hostLossMs must be a number of milliseconds, got ${validate.describe(hostLossMs)}`)
  }
  if (!(hostLossMs >= MIN_HOST_LOSS_MS && hostLossMs <= validate.DURATION_MAX)) {
    throw rangeError(
      `options.hostLossMs must be a number of milliseconds in ${MIN_HOST_LOSS_MS}..=${validate.DURATION_MAX} (TCP keepalive settings are whole seconds), got ${hostLossMs}`,
    )
  }
  let wait = options.wait ?? false
  if (typeof wait === 'number') {
    if (!Number.isFinite(wait) || wait < 0 || wait > validate.DURATION_MAX) {
      throw rangeError(`options.wait must be a boolean or 0..${validate.DURATION_MAX} ms, got ${String(wait)}`)
    }
    if (wait === 0) wait = false
  } else if (typeof wait !== 'boolean') {
    throw typeError(`options.wait must be a boolean or a number of milliseconds, got ${validate.describe(wait)}`)
  }
  const signal = options.signal
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw typeError(`options.signal must be an AbortSignal, got ${validate.describe(signal)}`)
  }
  return { ...o, purpose, hostLossMs, wait, signal, timing: timing(hostLossMs) }
}

// ---- the key and the timings -------------------------------------------------------------

/**
 * The 64-bit advisory key of a string: the first 8 bytes of its UTF-8
 * SHA-256, big-endian, signed. Stable (documented); in SQL:
 * ('x' || left(encode(sha256(convert_to(key, 'UTF8')), 'hex'), 16))::bit(64)::bigint
 */
function advisoryKey(key) {
  return crypto.createHash('sha256').update(key, 'utf8').digest().readBigInt64BE(0)
}

/** How pg_locks shows a bigint advisory key: classid (high half), objid (low half), objsubid 1. */
function lockIds(k) {
  const u = BigInt.asUintN(64, k)
  return { classid: String(u >> 32n), objid: String(u & 0xffffffffn) }
}

/**
 * From hostLossMs, the session's TCP settings and the holder's probe.
 *
 * The server ends a silent session once keepalives go unanswered: never
 * before `idle` seconds after the last packet it received from us (the
 * keepalive timer starts there; with TCP_USER_TIMEOUT set, Linux gives up
 * at the first probe past that timeout), and no later than idle + interval
 * (Linux) or idle + interval × count (elsewhere), both within hostLossMs.
 * Unacknowledged data is given up after tcp_user_timeout, sent after
 * something we sent. So the lock is held at least `idle` s after the send
 * of our last answered probe: the holder aborts its signal `windowMs` after
 * that send, a margin earlier, and probes four times per window.
 */
function timing(hostLossMs) {
  const s = Math.floor(hostLossMs / 1000)
  const idle = Math.min(KEEPALIVE_MAX_S, Math.max(1, Math.floor(s / 2)))
  const rest = Math.max(1, Math.min(s - idle, 2 * KEEPALIVE_MAX_S))
  const count = Math.min(3, rest)
  const interval = Math.min(KEEPALIVE_MAX_S, Math.max(1, Math.floor(rest / count)))
  const userTimeoutMs = (idle + interval) * 1000
  const safeMs = idle * 1000
  const windowMs = safeMs - Math.max(200, Math.floor(safeMs / 5))
  const probeMs = Math.max(50, Math.floor(windowMs / 4))
  return { idle, interval, count, userTimeoutMs, windowMs, probeMs }
}

// ---- connections -------------------------------------------------------------------------

let identityCache
function ownIdentity() {
  if (identityCache === undefined) {
    try {
      identityCache = require('../index.js').getProcessInfo(process.pid)?.identity ?? ''
    } catch {
      identityCache = ''
    }
  }
  return identityCache
}

const applicationName = () => `procward:${os.hostname()}:${process.pid}`.slice(0, IDENT_MAX_BYTES)

function clientConfig(o) {
  const c = { ...o.config }
  c.application_name = applicationName()
  // Client-side keepalive: a server host lost while we wait is noticed.
  c.keepAlive = true
  c.keepAliveInitialDelayMillis = (o.timing?.idle ?? 5) * 1000
  // A host that does not answer within the bound we were given is lost.
  if (c.connectionTimeoutMillis === undefined) c.connectionTimeoutMillis = o.hostLossMs ?? DEFAULT_HOST_LOSS_MS
  // Our waits are as long as the caller says, never cut by the client.
  c.query_timeout = undefined
  c.pipeline = false
  return c
}

/** Ends a session: politely when it can, by cutting the socket when it cannot in time. */
function closeClient(client) {
  if (client._ended) return Promise.resolve()
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      destroyClient(client)
      resolve()
    }, CLOSE_MS)
    client.end().then(
      () => {
        clearTimeout(timer)
        resolve()
      },
      () => {
        clearTimeout(timer)
        destroyClient(client)
        resolve()
      },
    )
  })
}

function destroyClient(client) {
  try {
    client.connection.stream.destroy()
  } catch {
    // never connected
  }
}

/**
 * A CancelRequest for the backend's current statement, as libpq sends it:
 * a new connection to the same server carrying the backend's pid and key.
 * Resolves when sent (or when it could not be).
 */
function sendCancel(client) {
  const { processID, secretKey } = client
  if (!Number.isInteger(processID) || !Number.isInteger(secretKey)) return Promise.resolve()
  return new Promise((resolve) => {
    const host = client.host ?? 'localhost'
    const socket = host.startsWith('/')
      ? net.connect(`${host}/.s.PGSQL.${client.port}`)
      : net.connect({ port: client.port, host })
    const msg = Buffer.alloc(16)
    msg.writeInt32BE(16, 0)
    msg.writeInt32BE(80877102, 4) // the cancel request code (1234 << 16 | 5678)
    msg.writeInt32BE(processID, 8)
    msg.writeInt32BE(secretKey, 12)
    socket.setTimeout(CLOSE_MS, () => socket.destroy())
    socket.once('connect', () => socket.end(msg))
    socket.once('error', () => {})
    socket.once('close', () => resolve())
  })
}

/** Opens a dedicated session and sets it up for a lock. */
async function openSession(o, signal) {
  const client = new pg.Client(clientConfig(o))
  // A connection error outside a query must never become an uncaught
  // 'error' event; the lock watches its own.
  client.on('error', () => {})
  const onAbort = () => destroyClient(client)
  signal?.addEventListener('abort', onAbort, { once: true })
  try {
    await client.connect()
  } catch (err) {
    destroyClient(client)
    if (signal?.aborted) throw abortError(signal)
    throw connectionError('could not connect', err, client)
  } finally {
    signal?.removeEventListener('abort', onAbort)
  }
  if (signal?.aborted) {
    await closeClient(client)
    throw abortError(signal)
  }
  if (o.timing) {
    try {
      await configure(client, o)
    } catch (err) {
      await closeClient(client)
      throw err
    }
    if (signal?.aborted) {
      await closeClient(client)
      throw abortError(signal)
    }
  }
  return client
}

/** The session's settings; those a server does not know are left out (older releases). */
async function configure(client, o) {
  const t = o.timing
  const settings = [
    ['application_name', applicationName()],
    ['idle_session_timeout', '0'],
    ['idle_in_transaction_session_timeout', '0'],
    ['statement_timeout', '0'],
    ['lock_timeout', '0'],
    // A fence handed out must survive a crash of the server.
    ['synchronous_commit', 'on'],
    ['tcp_keepalives_idle', String(t.idle)],
    ['tcp_keepalives_interval', String(t.interval)],
    ['tcp_keepalives_count', String(t.count)],
    ['tcp_user_timeout', String(t.userTimeoutMs)],
    // A waiting backend whose client is gone leaves the queue.
    ['client_connection_check_interval', String(t.idle * 1000)],
  ]
  const apply = (list) =>
    client.query(
      `SELECT set_config(s.name, s.value, false) FROM unnest($1::text[], $2::text[]) AS s(name, value) JOIN pg_settings p USING (name)`,
      [list.map((s) => s[0]), list.map((s) => s[1])],
    )
  try {
    await apply(settings)
  } catch (err) {
    if (!fromServer(err)) throw connectionError('the connection failed while setting it up', err, client)
    // A server without TCP_USER_TIMEOUT refuses a non-zero value; the
    // keepalives still bound the takeover there (idle + interval × count).
    try {
      await apply(settings.filter(([name]) => name !== 'tcp_user_timeout'))
    } catch (err2) {
      throw fromServer(err2)
        ? queryError('could not set up the lock session', err2)
        : connectionError('the connection failed while setting it up', err2, client)
    }
  }
}

function tableName(client, schema) {
  return `${client.escapeIdentifier(schema)}.${client.escapeIdentifier(TABLE)}`
}

async function createTable(client, schema) {
  const table = tableName(client, schema)
  try {
    await client.query(
      `BEGIN; SELECT pg_advisory_xact_lock(${CREATE_LOCK}); CREATE TABLE IF NOT EXISTS ${table} (key text PRIMARY KEY, fence bigint NOT NULL, holder jsonb, backend_pid integer); COMMIT`,
    )
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw fromServer(err)
      ? queryError(`could not create the fence table ${table}`, err)
      : connectionError('the connection failed while creating the fence table', err, client)
  }
}

/** The record of a holder as the table keeps it, or null. */
function parseHolder(r) {
  if (r === null || typeof r !== 'object' || Array.isArray(r)) return null
  const { pid, identity, hostname, acquiredAt, purpose } = r
  if (!Number.isInteger(pid) || pid < 1) return null
  if (typeof identity !== 'string' || typeof hostname !== 'string' || typeof acquiredAt !== 'string') return null
  if (purpose !== null && typeof purpose !== 'string') return null
  return Object.freeze({ pid, identity, hostname, acquiredAt, purpose })
}

/**
 * Takes the next fence and writes our record, in one statement that checks
 * first that this very backend holds the lock (a transaction-pooling proxy
 * between us and the server would have run the lock on another one).
 */
async function takeFence(client, o, k, holder) {
  const table = tableName(client, o.schema)
  const { classid, objid } = lockIds(k)
  const sql = `WITH prev AS (SELECT holder FROM ${table} WHERE key = $1)
INSERT INTO ${table} AS f (key, fence, holder, backend_pid)
SELECT $1, 1, $2::jsonb, pg_backend_pid()
WHERE EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.granted
  AND l.classid = $3::oid AND l.objid = $4::oid AND l.objsubid = 1)
ON CONFLICT (key) DO UPDATE SET fence = f.fence + 1, holder = EXCLUDED.holder, backend_pid = EXCLUDED.backend_pid
RETURNING f.fence::text AS fence, (SELECT holder FROM prev) AS previous, pg_backend_pid() AS pid`
  const params = [o.key, JSON.stringify(holder), classid, objid]
  let res
  for (let attempt = 0; ; attempt++) {
    try {
      res = await client.query(sql, params)
      break
    } catch (err) {
      if (err?.code === '42P01' && attempt === 0) {
        await createTable(client, o.schema)
        continue
      }
      throw fromServer(err)
        ? queryError(`could not take the next fence in ${table}`, err)
        : connectionError('the connection failed after taking the lock', err, client)
    }
  }
  if (res.rows.length !== 1) {
    const err = new Error(
      'the advisory lock was taken but this session does not hold it: is a transaction-pooling proxy (PgBouncer in transaction mode) between procward and PostgreSQL? A session lock needs a session of its own',
    )
    err.code = 'ERR_PROCWARD_PG_NOT_A_SESSION'
    throw brand(err)
  }
  const row = res.rows[0]
  return { fence: BigInt(row.fence), previous: parseHolder(row.previous), backendPid: row.pid }
}

/** Who holds it, as the server sees it now. */
async function readHolder(client, schema, key) {
  const { classid, objid } = lockIds(advisoryKey(key))
  const lockOf = (pid) => `EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid = $1::oid AND l.objid = $2::oid AND l.objsubid = 1${pid ? ` AND l.pid = ${pid}` : ''})`
  const table = tableName(client, schema)
  try {
    const res = await client.query(
      `SELECT ${lockOf(null)} AS held, (SELECT f.holder FROM ${table} f WHERE f.key = $3 AND ${lockOf('f.backend_pid')}) AS holder`,
      [classid, objid, key],
    )
    const row = res.rows[0]
    return { held: row.held, holder: row.held ? parseHolder(row.holder) : null }
  } catch (err) {
    if (err?.code !== '42P01') throw err
  }
  // No fence table yet: no procward holder ever, but anyone may hold the key.
  const res = await client.query(`SELECT ${lockOf(null)} AS held`, [classid, objid])
  return { held: res.rows[0].held, holder: null }
}

// ---- the lock -------------------------------------------------------------------------------

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
    if (client._ended) this.#lose('the lock session ended', null, true)
    // Like the file lock, a held lock does not keep the process alive: it
    // ends with its process.
    client.unref()
    this.#probeTimer = setInterval(() => this.#probe(), this.#timing.probeMs)
    this.#probeTimer.unref()
    this.#armDeadline()
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

  #armDeadline() {
    if (this.#deadline !== null) clearTimeout(this.#deadline)
    const left = this.#lastOk + this.#timing.windowMs - performance.now()
    this.#deadline = setTimeout(
      () => {
        this.#deadline = null
        this.#lose(
          `no answer from the lock session within ${this.#timing.windowMs} ms (the server may release it ${this.#timing.idle} s after our last packet)`,
          null,
          false,
        )
      },
      Math.max(0, left),
    )
    this.#deadline.unref()
  }

  #probe() {
    if (this.#probing || this.#dead || this.#released || this.#controller.signal.aborted) return
    this.#probing = true
    const sentAt = performance.now()
    this.#client.query({ text: 'SELECT pg_backend_pid()', rowMode: 'array' }).then(
      (res) => {
        this.#probing = false
        if (this.#released || this.#controller.signal.aborted) return
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
    if (this.#probeTimer !== null) clearInterval(this.#probeTimer)
    if (this.#deadline !== null) clearTimeout(this.#deadline)
    this.#probeTimer = null
    this.#deadline = null
  }

  /** The lock may be gone: say so on the signal, once. */
  #lose(why, cause, dead) {
    if (dead) this.#dead = true
    if (this.#released || this.#controller.signal.aborted) return
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
    if (!this.#controller.signal.aborted) {
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
    if (this.#controller.signal.reason?.code === 'ERR_PROCWARD_PG_LOCK_RELEASED') {
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
  let f
  try {
    f = await takeFence(client, o, k, holder)
  } catch (err) {
    await closeClient(client)
    throw err
  }
  // Aborted while the lock was being set up: an aborted acquire never
  // resolves, and ending the session releases what it took.
  if (o.signal?.aborted) {
    await closeClient(client)
    throw abortError(o.signal)
  }
  return new PgLock(INTERNAL, {
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

// ---- the CLI form ------------------------------------------------------------------------------

const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP']
/** EX_TEMPFAIL: held by another holder, or lost while the command ran. */
const EXIT_LOCKED = 75

function statusOf(exit) {
  if (exit === null) return 1
  if (exit.signal) return 128 + (os.constants.signals[exit.signal] ?? 0)
  return exit.code ?? 1
}

/**
 * `procward lock --postgres URL --key KEY [--wait[=MS]] -- COMMAND [ARGS...]`:
 * runs COMMAND while holding the PostgreSQL lock KEY. Resolves to the exit
 * status to exit with: 75 when the lock is held by another holder (or the
 * wait ran out), 75 too when the lock may have been lost while the command
 * ran (its process group is then stopped: SIGTERM, SIGKILL after graceMs),
 * else the command's own status (128 + signal number for a signal).
 * SIGINT, SIGTERM and SIGHUP abort a wait (status 128 + the signal), and
 * once the command runs are passed on to its process group; a second one
 * SIGKILLs the group. Bad input and connection failures reject.
 */
async function runPgLock(options) {
  const {
    url,
    key,
    wait = false,
    command,
    args = [],
    stdio = 'inherit',
    hostLossMs,
    graceMs = 5000,
    stderr = process.stderr,
  } = options ?? {}
  if (typeof command !== 'string' || command.length === 0) {
    throw typeError(`command must be a non-empty string, got ${validate.describe(command)}`)
  }
  if (!Array.isArray(args) || !args.every((a) => typeof a === 'string')) {
    throw typeError('args must be an array of strings')
  }
  validate.duration(graceMs, 'graceMs')
  const procward = require('../index.js')
  const say = (msg) => stderr.write(`procward: ${msg}\n`)

  // While waiting: a signal ends the wait, and us with its status.
  const waitAbort = new AbortController()
  let waitSignal = null
  const onWaitSignal = {}
  for (const sig of FORWARDED) {
    onWaitSignal[sig] = () => {
      waitSignal ??= sig
      waitAbort.abort()
    }
    process.on(sig, onWaitSignal[sig])
  }
  const unlistenWait = () => {
    for (const sig of FORWARDED) process.removeListener(sig, onWaitSignal[sig])
  }
  let lock
  try {
    const lockOptions = { connection: url, key, wait, signal: waitAbort.signal, purpose: [command, ...args].join(' ') }
    if (hostLossMs !== undefined) lockOptions.hostLossMs = hostLossMs
    lock = await acquirePgLock(lockOptions)
  } catch (err) {
    unlistenWait()
    if (err?.code === 'ELOCKED') {
      say(err.message)
      return EXIT_LOCKED
    }
    if (err?.name === 'AbortError' && waitSignal !== null) return 128 + os.constants.signals[waitSignal]
    throw err
  }

  // While the command runs: signals go to its process group; a loss stops it.
  let child = null
  let signals = 0
  let pending = null
  const toGroup = (sig) => {
    if (child === null || child.exitInfo !== null || !(child.pgid > 1)) return
    try {
      process.kill(-child.pgid, sig)
    } catch {
      // the group is gone
    }
  }
  const onSignal = {}
  for (const sig of FORWARDED) {
    onSignal[sig] = () => {
      signals++
      if (child === null) pending = sig
      else toGroup(signals > 1 ? 'SIGKILL' : sig)
    }
    process.on(sig, onSignal[sig])
  }
  // Listening from before the spawn, so a signal in between is passed on.
  unlistenWait()
  let lost = false
  const onLost = () => {
    lost = true
    say(`${lock.signal.reason?.message ?? 'the lock may have been lost'}; stopping ${command}`)
    if (child !== null && child.exitInfo === null) {
      procward.stopSupervisedProcess(child, { graceMs }).catch(() => {})
    }
  }
  lock.signal.addEventListener('abort', onLost, { once: true })
  const unlisten = () => {
    lock.signal.removeEventListener('abort', onLost)
    for (const sig of FORWARDED) process.removeListener(sig, onSignal[sig])
  }
  try {
    child = procward.spawnSupervised(command, args, { stdio, processGroup: true })
  } catch (err) {
    unlisten()
    await lock.release()
    throw err
  }
  if (lost) procward.stopSupervisedProcess(child, { graceMs }).catch(() => {})
  else if (pending !== null) toGroup(signals > 1 ? 'SIGKILL' : pending)
  const exit = await child.exited
  unlisten()
  await lock.release()
  return lost ? EXIT_LOCKED : statusOf(exit)
}

/** advisoryKey for users: the key checked as the lock functions check it. */
function publicAdvisoryKey(key) {
  return advisoryKey(checkText(key, 'key', KEY_MAX_BYTES))
}

module.exports = {
  acquirePgLock,
  tryPgLock,
  readPgLock,
  PgLock,
  advisoryKey: publicAdvisoryKey,
  runPgLock,
  timing,
}
