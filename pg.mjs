// ESM entry of procward/pg: the same objects as the CommonJS entry. Loaded
// with require() for the reason index.mjs gives (a throwing CommonJS module
// imported from ESM on Node 20 is also reported as uncaught), so a missing
// `pg` is one clear, catchable error.
import { createRequire } from 'node:module'

const procwardPg = createRequire(import.meta.url)('./pg.js')

export const { acquirePgLock, tryPgLock, readPgLock, PgLock, advisoryKey } = procwardPg
export default procwardPg
