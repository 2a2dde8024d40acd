// What the verbs share: the package, loaded only when a verb needs it (so
// that --help and --version work where the native binary is missing), exit
// statuses, and error messages with their causes.

const { constants } = require('node:os')
const { findSpawnError, spawnFailureStatus, SPAWN_WORDS } = require('./exec-failure.js')

let pkg = null
/** The package's public entry. */
function procward() {
  pkg ??= require('../..')
  return pkg
}

/** The shell's status for an exit: the code, or 128 + n for signal n. */
function statusOf(exit) {
  if (exit === null) return 1
  if (exit.signal) return 128 + (constants.signals[exit.signal] ?? 0)
  return exit.code ?? 1
}

function exitText(e) {
  if (e === null) return 'unknown status'
  if (e.signal) return `killed by ${e.signal}`
  if (e.code === null) return 'status unknown'
  return `code ${e.code}`
}

/** An error's message, then each cause's where it adds something. */
function describe(err) {
  let text = String(err?.message ?? err)
  const seen = new Set()
  for (let e = err?.cause, depth = 0; e != null && depth < 8 && !seen.has(e); e = e.cause, depth++) {
    seen.add(e)
    const m = String(e?.message ?? e)
    if (!text.includes(m)) text += `: ${m}`
  }
  const spawnError = findSpawnError(err)
  if (spawnError !== null && SPAWN_WORDS[spawnError.code] && spawnError.path) {
    text += ` (${spawnError.path}: ${SPAWN_WORDS[spawnError.code]})`
  }
  return text
}

/** A failure (not bad usage): one line on stderr. A command that could not be run says so plainly. */
function fail(err) {
  const words = SPAWN_WORDS[err?.code]
  const own = findSpawnError(err) === err && words && err.path
  process.stderr.write(`procward: ${own ? `${err.path}: ${words}` : describe(err)}\n`)
}

module.exports = { procward, statusOf, exitText, spawnFailureStatus, describe, fail }
