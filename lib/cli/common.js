// What the verbs share: the package and the platform's facts, loaded only
// when a verb needs them (so that --help and --version work where the
// native binary is missing), exit statuses, and error messages with their
// causes.

const { existsSync } = require('node:fs')
const { constants } = require('node:os')
const { dirname, resolve } = require('node:path')
const { findSpawnError, spawnFailureStatus, SPAWN_WORDS } = require('./exec-failure.js')

let pkg = null
/** The package's public entry. */
function procward() {
  pkg ??= require('../..')
  return pkg
}

/** What this platform supports and what the kernel says (lib/os.js). */
function os() {
  return require('../os.js')
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

/**
 * The words after an exit in the log: "(unhealthy)" when its health checks
 * had it stopped; "(unexpected)" unless we stopped it, or it ended cleanly
 * where that is not a crash.
 */
function exitNote(e, restart) {
  if (e.reason === 'unhealthy') return ' (unhealthy)'
  if (e.expected) return ''
  if (e.code === 0 && !e.signal && (restart === 'never' || restart === 'on-failure')) return ''
  return ' (unexpected)'
}

/**
 * A library message in the words of a verb's arguments: its leading
 * `options.NAME` (or `NAME`) as `words` names it (`options.connection` →
 * `--postgres`), the longest name first (`spawn.stop.graceMs`).
 */
function inOurWords(message, words) {
  const names = Object.keys(words).sort((a, b) => b.length - a.length)
  for (const name of names) {
    for (const lead of [`options.${name}`, name]) {
      if (message.startsWith(`${lead} `) || message.startsWith(`${lead}.`) || message.startsWith(`${lead}[`)) {
        return `${words[name]}${message.slice(lead.length)}`
      }
    }
  }
  return message
}

/** The first line of a message: a require stack or a server's detail after it is not for one log line. */
const firstLine = (m) => String(m).split('\n', 1)[0]

/**
 * An error's message, then each cause's where it adds something; a file
 * that could not be created because its directory is missing says so.
 */
function describe(err) {
  let text = firstLine(err?.message ?? err)
  const seen = new Set()
  for (let e = err?.cause, depth = 0; e != null && depth < 8 && !seen.has(e); e = e.cause, depth++) {
    seen.add(e)
    const m = firstLine(e?.message ?? e)
    if (!text.includes(m)) text += `: ${m}`
  }
  const missing = missingDirectory(err)
  if (missing !== null) text += ` (no directory ${missing}: create it first)`
  const spawnError = findSpawnError(err)
  if (spawnError !== null && SPAWN_WORDS[spawnError.code] && spawnError.path) {
    text += ` (${spawnError.path}: ${SPAWN_WORDS[spawnError.code]})`
  }
  return text
}

/** The directory that an open() failed for (ENOENT) because it does not exist, or null. */
function missingDirectory(err) {
  for (let e = err, depth = 0; e != null && depth < 8; e = e.cause, depth++) {
    if (e?.code === 'ENOENT' && e.syscall === 'open' && typeof e.path === 'string') {
      const dir = dirname(resolve(e.path))
      return existsSync(dir) ? null : dir
    }
  }
  return null
}

/**
 * Why `file` gave no record: it is not there, or it is not one (a file of
 * something else, or damaged).
 */
function noRecord(file) {
  return existsSync(file)
    ? 'not a procward state record (not written by procward run --state-file?)'
    : 'no supervisor state recorded'
}

/** A failure (not bad usage): one line on stderr. A command that could not be run says so plainly. */
function fail(err) {
  const words = SPAWN_WORDS[err?.code]
  const own = findSpawnError(err) === err && words && err.path
  process.stderr.write(`procward: ${own ? `${err.path}: ${words}` : describe(err)}\n`)
}

module.exports = {
  procward,
  os,
  statusOf,
  exitText,
  exitNote,
  escapeControl,
  spawnFailureStatus,
  inOurWords,
  describe,
  fail,
  noRecord,
}
