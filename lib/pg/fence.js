// The fence table: one row per key with its fence and the holder's record,
// made on first use; and who holds a key as the server sees it now.

const { brand } = require('../errors')
const { connectionError, fromServer, queryError } = require('./errors')
const { advisoryKey, lockIds } = require('./session')

const TABLE = 'procward_lock_fence'
/** Serializes the fence table's creation (the two-int advisory space: never a key's). */
const CREATE_LOCK = '1886548855, 1' // 'prwd', 1

function tableName(client, schema) {
  return `${client.escapeIdentifier(schema)}.${client.escapeIdentifier(TABLE)}`
}

async function createTable(client, schema) {
  const table = tableName(client, schema)
  try {
    await client.query(
      `BEGIN; SELECT pg_advisory_xact_lock(${CREATE_LOCK}); CREATE TABLE IF NOT EXISTS ${table} (key text PRIMARY KEY, fence bigint NOT NULL, holder jsonb, backend_pid integer, backend_start timestamptz); COMMIT`,
    )
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw fromServer(err)
      ? queryError(`could not create the fence table ${table}`, err)
      : connectionError('the connection failed while creating the fence table', err, client)
  }
}

/** A table made before the holder's session was recorded by its start as well as its pid gets the column. */
async function addBackendStart(client, schema) {
  const table = tableName(client, schema)
  try {
    await client.query(
      `BEGIN; SELECT pg_advisory_xact_lock(${CREATE_LOCK}); ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS backend_start timestamptz; COMMIT`,
    )
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw fromServer(err)
      ? queryError(`could not add the column backend_start to the fence table ${table}`, err)
      : connectionError('the connection failed while updating the fence table', err, client)
  }
}

/**
 * The session a row names is the one that holds the lock now: the same
 * backend pid and the same backend start. A backend pid alone is not a
 * session: once its backend is gone the kernel may hand the pid to any
 * later one, maybe one that holds the same key.
 */
const SAME_SESSION = (f) =>
  `EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = ${f}.backend_pid AND a.backend_start = ${f}.backend_start)`

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
  // Without backend_start: a table of an older procward that this role may
  // not alter (it does not own it); such a record names no holder.
  const sql = (withStart) => `WITH prev AS (SELECT holder FROM ${table} WHERE key = $1)
INSERT INTO ${table} AS f (key, fence, holder, backend_pid${withStart ? ', backend_start' : ''})
SELECT $1, 1, $2::jsonb, pg_backend_pid()${withStart ? ', (SELECT a.backend_start FROM pg_stat_activity a WHERE a.pid = pg_backend_pid())' : ''}
WHERE EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.granted
  AND l.classid = $3::oid AND l.objid = $4::oid AND l.objsubid = 1)
ON CONFLICT (key) DO UPDATE SET fence = f.fence + 1, holder = EXCLUDED.holder, backend_pid = EXCLUDED.backend_pid${withStart ? ',\n  backend_start = EXCLUDED.backend_start' : ''}
RETURNING f.fence::text AS fence, (SELECT holder FROM prev) AS previous, pg_backend_pid() AS pid`
  const params = [o.key, JSON.stringify(holder), classid, objid]
  let res
  let created = false
  let altered = false
  let withStart = true
  for (;;) {
    try {
      res = await client.query(sql(withStart), params)
      break
    } catch (err) {
      if (err?.code === '42P01' && !created) {
        created = true
        await createTable(client, o.schema)
        continue
      }
      if (err?.code === '42703' && !altered) {
        altered = true
        try {
          await addBackendStart(client, o.schema)
        } catch (alterErr) {
          if (alterErr?.code !== 'ERR_PROCWARD_PG_QUERY') throw alterErr
          withStart = false
        }
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
      `SELECT ${lockOf(null)} AS held, (SELECT f.holder FROM ${table} f WHERE f.key = $3 AND ${lockOf('f.backend_pid')} AND ${SAME_SESSION('f')}) AS holder`,
      [classid, objid, key],
    )
    const row = res.rows[0]
    return { held: row.held, holder: row.held ? parseHolder(row.holder) : null }
  } catch (err) {
    if (err?.code !== '42P01' && err?.code !== '42703') throw err
  }
  // No fence table yet: no procward holder ever, but anyone may hold the key.
  // A table without backend_start: no row of it can name its session (the
  // column is added by the next procward holder of any key).
  const res = await client.query(`SELECT ${lockOf(null)} AS held`, [classid, objid])
  return { held: res.rows[0].held, holder: null }
}

module.exports = { tableName, takeFence, readHolder, parseHolder }
