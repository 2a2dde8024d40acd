// The errors of procward/pg, Node-shaped: a code, pg's error as `cause`.

const os = require('node:os')
const { brand } = require('../errors')

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

module.exports = { abortError, connectionError, queryError, fromServer, lockedError }
