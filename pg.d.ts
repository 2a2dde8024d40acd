// Types of `procward/pg`: a lock for more than one host, held as a
// PostgreSQL session advisory lock. Needs the package `pg` (node-postgres),
// an optional peer dependency: importing `procward/pg` without it throws an
// Error with code 'ERR_PROCWARD_PG_MISSING'. Reference: docs/pg-lock.md.

export type { PgError, PgErrorCode, PgLockedError } from './types/errors.js'
export type { LockHolder } from './types/lock.js'
export * from './types/pg.js'
