// Types of the ESM entry (index.mjs): the very declarations of index.d.ts,
// re-exported, as index.mjs re-exports the very objects of index.js. One
// SupervisedProcess class, one Supervisor, whichever way they are imported.
import procward from './index.js'

export * from './index.js'
export default procward
