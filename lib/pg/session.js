// A lock's session: its key, its TCP timings derived from hostLossMs, a
// dedicated connection (opened, set up, cancelled, closed).

const crypto = require('node:crypto')
const net = require('node:net')
const os = require('node:os')
const { pg } = require('./driver')
const { abortError, connectionError, fromServer, queryError } = require('./errors')

const DEFAULT_HOST_LOSS_MS = 10_000
/** PostgreSQL's NAMEDATALEN - 1. */
const IDENT_MAX_BYTES = 63
/** Linux's limits for TCP_KEEPIDLE / TCP_KEEPINTVL (seconds). */
const KEEPALIVE_MAX_S = 32767
/** How long an abandoned wait or a release may take to close before we cut the socket. */
const CLOSE_MS = 2000

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
 * keepalive timer starts there), at the first keepalive check past
 * tcp_user_timeout with a probe unanswered (Linux: idle + interval here,
 * whatever a smaller tcp_user_timeout says, as keepalive settings are whole
 * seconds), idle + interval × count elsewhere. Unacknowledged data is given
 * up tcp_user_timeout after it was sent, after something we sent. All of it
 * fits in hostLossMs less a margin: the kernel's timers fire up to an eighth
 * of their length late (its timer wheel), and the server takes a moment to
 * end the backend and hand the lock on; so the smallest hostLossMs, 3000,
 * leaves a second. The lock is held at least `idle` s after the send of our
 * last answered probe: the holder aborts its signal `windowMs` after that
 * send, a margin earlier, and probes four times per window.
 */
function timing(hostLossMs) {
  const marginMs = Math.max(1000, Math.ceil(hostLossMs / 8))
  const s = Math.max(2, Math.floor((hostLossMs - marginMs) / 1000))
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
      identityCache = require('../../binding.js').getProcessInfo(process.pid)?.identity ?? ''
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

module.exports = {
  DEFAULT_HOST_LOSS_MS,
  IDENT_MAX_BYTES,
  advisoryKey,
  lockIds,
  timing,
  applicationName,
  closeClient,
  destroyClient,
  sendCancel,
  openSession,
  ownIdentity,
  CLOSE_MS,
}
