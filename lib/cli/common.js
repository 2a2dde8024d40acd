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
  if (e.code == null) return 'status unknown'
  return `code ${e.code}`
}

const C_ESCAPES = { '\n': '\\n', '\r': '\\r', '\t': '\\t' }

/**
 * `text` for one line of a terminal or a log: control characters (C0, DEL,
 * C1) escaped as systemctl does (a newline as \n, ESC as \x1b), so that a
 * name or a command can neither forge a line nor drive the terminal.
 */
function escapeControl(text) {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: they are what is escaped
  return String(text).replace(/[\x00-\x1f\x7f-\x9f]/g, (c) => {
    return C_ESCAPES[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`
  })
}

/** The words after an exit in the log: "(unexpected)" unless we stopped it, or it ended cleanly where that is not a crash. */
function exitNote(e, restart) {
  if (e.expected) return ''
  if (e.code === 0 && !e.signal && (restart === 'never' || restart === 'on-failure')) return ''
  return ' (unexpected)'
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

module.exports = { procward, statusOf, exitText, exitNote, escapeControl, spawnFailureStatus, describe, fail }
