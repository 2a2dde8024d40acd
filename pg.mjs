// ESM entry of procward/pg: the same objects as the CommonJS entry. Loaded
// with require() for the reason index.mjs gives (a throwing CommonJS module
// imported from ESM on Node 20 is also reported as uncaught), so a missing
// `pg` is one clear, catchable error.
import { createRequire } from 'node:module'

const procwardPg = createRequire(import.meta.url)('./pg.js')

export const acquirePgLock = procwardPg.acquirePgLock
export const tryPgLock = procwardPg.tryPgLock
export const readPgLock = procwardPg.readPgLock
export const PgLock = procwardPg.PgLock
export const advisoryKey = procwardPg.advisoryKey
export default procwardPg
