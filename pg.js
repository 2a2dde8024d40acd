// procward/pg: the lock for more than one host, on PostgreSQL session
// advisory locks. Needs the optional peer dependency `pg` (node-postgres).
// Types in pg.d.ts; reference in docs/pg-lock.md.
const { acquirePgLock, tryPgLock, readPgLock, PgLock, advisoryKey } = require('./lib/pg.js')

exports.acquirePgLock = acquirePgLock
exports.tryPgLock = tryPgLock
exports.readPgLock = readPgLock
exports.PgLock = PgLock
exports.advisoryKey = advisoryKey
