// Types of the ESM entry of procward/pg (pg.mjs): the declarations of
// pg.d.ts, re-exported, as pg.mjs re-exports the objects of pg.js.
import procwardPg from './pg.js'

export * from './pg.js'
export default procwardPg
