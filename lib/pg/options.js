// Checking what procward/pg is given: the connection (never a pool), the
// key, the schema, the wait, the host-loss bound.

const { rangeError, typeError } = require('../errors')
const validate = require('../validate')
const { pg } = require('./driver')
const { DEFAULT_HOST_LOSS_MS, IDENT_MAX_BYTES, timing } = require('./session')

/**
 * Keepalive settings are whole seconds: a server gives up on a silent session
 * 2 s after its last packet at the soonest (idle 1 + interval 1), and the
 * bound needs a margin on top (lib/pg/session.js, timing).
 */
const MIN_HOST_LOSS_MS = 3000
const DEFAULT_SCHEMA = 'public'
/** UTF-8 bytes; a key is stored (primary key) beside its fence. */
const KEY_MAX_BYTES = 1024
const PURPOSE_MAX = 4096
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
  // The record is jsonb, which refuses both: refused here, before a lock is taken.
  if (purpose?.includes('\0')) {
    throw typeError('options.purpose must not contain NUL characters', 'ERR_INVALID_ARG_VALUE')
  }
  if (purpose !== null && !purpose.isWellFormed()) {
    throw typeError('options.purpose must be well-formed Unicode (it has a lone surrogate)', 'ERR_INVALID_ARG_VALUE')
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

module.exports = { checkCommon, checkLockOptions, checkText, KEY_MAX_BYTES, PURPOSE_MAX }
