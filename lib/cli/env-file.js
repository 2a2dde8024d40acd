// An environment file as systemd's EnvironmentFile= reads it: the state
// machine of systemd's src/basic/env-file.c (parse_env_file_internal),
// state for state, and then the checks its loader makes. Pure but for
// readEnvFile, which takes its readFile so the tests can give it a fake.
//
// What systemd does, and so does this:
// - `#` or `;` starts a comment, but only where a key could start (after
//   leading whitespace); in a value they are the value's. A comment ends at
//   its newline, a trailing backslash there included (systemd >= 254).
// - KEY=VALUE; whitespace around the key and the `=`, and after an unquoted
//   value, is dropped. CR is a newline too (so CRLF files read as LF ones).
// - Unquoted, a backslash escapes the next character (kept as it is), and
//   before a newline joins the next line (a continuation).
// - 'single quotes' take everything literally, newlines included; "double
//   quotes" too, but for `\` before one of " \ ` $ (the character alone),
//   before a newline (a continuation), or before anything else (kept, with
//   the backslash, as a shell does). Quotes are quotes only at the start of
//   a value or right after another quoted part (`A='x'"y"` is xy); inside
//   an unquoted value they are ordinary characters.
// - A later assignment of the same key wins.
//
// Where systemd drops a line and says so in the journal (a key that is not
// a variable name: `export KEY=V`, `9KEY=V`, `A-B=V`), or drops it without
// a word (a line with no `=`), procward refuses the file, naming the line:
// there is no journal to read here, and a variable that silently is not
// set is the harder bug. Bytes that are not UTF-8 fail the file, as in
// systemd; so does a NUL byte (systemd stops reading at one).

const WHITESPACE = ' \t\n\r'
const NEWLINE = '\n\r'
const COMMENTS = '#;'
const SHELL_NEED_ESCAPE = '"\\`$'

/** A name bash (and systemd) take: letters, digits and `_`, not starting with a digit. */
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/** An environment file that cannot be used: `line` (1-based) is where, when one is to blame. */
class EnvFileError extends Error {
  constructor(message, line = null) {
    super(message)
    this.line = line
  }
}

/**
 * `text` → its assignments in order, `{ key, value, line }` (the line its
 * key starts on), exactly as systemd's parser pushes them: keys are not
 * checked here (see checkAssignments). A line with no `=` comes back with
 * `value: null`, where systemd discards it.
 */
function parseEnvText(text) {
  const out = []
  let state = 'PRE_KEY'
  let key = ''
  let value = ''
  // Where trailing whitespace of the key / of an unquoted value starts
  // (-1: none), as systemd's last_key_whitespace / last_value_whitespace.
  let keyWs = -1
  let valueWs = -1
  let line = 1
  let keyLine = 1
  const push = (v) => {
    out.push({ key: keyWs === -1 ? key : key.slice(0, keyWs), value: v, line: keyLine })
    key = ''
    value = ''
  }
  for (const c of text) {
    switch (state) {
      case 'PRE_KEY':
        if (COMMENTS.includes(c)) state = 'COMMENT'
        else if (!WHITESPACE.includes(c)) {
          state = 'KEY'
          keyWs = -1
          keyLine = line
          key = c
        }
        break
      case 'KEY':
        if (NEWLINE.includes(c)) {
          // No `=`: systemd forgets the key.
          state = 'PRE_KEY'
          push(null)
        } else if (c === '=') {
          state = 'PRE_VALUE'
          valueWs = -1
        } else {
          if (!WHITESPACE.includes(c)) keyWs = -1
          else if (keyWs === -1) keyWs = key.length
          key += c
        }
        break
      case 'PRE_VALUE':
        if (NEWLINE.includes(c)) {
          state = 'PRE_KEY'
          push(value)
        } else if (c === "'") state = 'SINGLE_QUOTE_VALUE'
        else if (c === '"') state = 'DOUBLE_QUOTE_VALUE'
        else if (c === '\\') state = 'VALUE_ESCAPE'
        else if (!WHITESPACE.includes(c)) {
          state = 'VALUE'
          value += c
        }
        break
      case 'VALUE':
        if (NEWLINE.includes(c)) {
          state = 'PRE_KEY'
          push(valueWs === -1 ? value : value.slice(0, valueWs))
        } else if (c === '\\') {
          state = 'VALUE_ESCAPE'
          valueWs = -1
        } else {
          if (!WHITESPACE.includes(c)) valueWs = -1
          else if (valueWs === -1) valueWs = value.length
          value += c
        }
        break
      case 'VALUE_ESCAPE':
        state = 'VALUE'
        // An escaped newline is eaten: the value goes on on the next line.
        if (!NEWLINE.includes(c)) value += c
        break
      case 'SINGLE_QUOTE_VALUE':
        if (c === "'") state = 'PRE_VALUE'
        else value += c
        break
      case 'DOUBLE_QUOTE_VALUE':
        if (c === '"') state = 'PRE_VALUE'
        else if (c === '\\') state = 'DOUBLE_QUOTE_VALUE_ESCAPE'
        else value += c
        break
      case 'DOUBLE_QUOTE_VALUE_ESCAPE':
        state = 'DOUBLE_QUOTE_VALUE'
        if (SHELL_NEED_ESCAPE.includes(c)) value += c
        else if (c !== '\n') value += `\\${c}`
        break
      case 'COMMENT':
        if (c === '\\') state = 'COMMENT_ESCAPE'
        else if (NEWLINE.includes(c)) state = 'PRE_KEY'
        break
      case 'COMMENT_ESCAPE':
        // Since systemd 254 a backslash does not carry a comment on.
        state = NEWLINE.includes(c) ? 'PRE_KEY' : 'COMMENT'
        break
    }
    if (c === '\n') line++
  }
  if (state === 'KEY') push(null)
  else if (state === 'VALUE') push(valueWs === -1 ? value : value.slice(0, valueWs))
  else if (state !== 'PRE_KEY' && state !== 'COMMENT' && state !== 'COMMENT_ESCAPE') push(value)
  return out
}

/**
 * The assignments as a unit's environment takes them: names checked, later
 * ones winning. Returns a plain object (null prototype: `__proto__` is a
 * name like any other).
 */
function checkAssignments(entries) {
  const env = Object.create(null)
  for (const { key, value, line } of entries) {
    if (value === null) {
      throw new EnvFileError(`${JSON.stringify(key)} has no '=' (KEY=VALUE)`, line)
    }
    if (!NAME.test(key)) {
      const why = /^export\s/.test(key)
        ? `: write ${key.replace(/^export\s+/, '')}=... without 'export' (systemd ignores such a line)`
        : ' (letters, digits and _, not starting with a digit)'
      throw new EnvFileError(`${JSON.stringify(key)} is not a variable name${why}`, line)
    }
    env[key] = value
  }
  return env
}

/** The 1-based line of byte offset `at` in `bytes`. */
function lineAt(bytes, at) {
  let line = 1
  for (let i = 0; i < at && i < bytes.length; i++) if (bytes[i] === 0x0a) line++
  return line
}

/** The file's bytes as text, refusing what systemd would not take. */
function decode(bytes) {
  const nul = bytes.indexOf(0)
  if (nul !== -1) throw new EnvFileError('contains a NUL byte', lineAt(bytes, nul))
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes)
  } catch {
    // Which line: the first one that does not decode alone.
    let start = 0
    for (let line = 1; start <= bytes.length; line++) {
      let end = bytes.indexOf(0x0a, start)
      if (end === -1) end = bytes.length
      try {
        new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(start, end))
      } catch {
        throw new EnvFileError('is not UTF-8', line)
      }
      start = end + 1
    }
    throw new EnvFileError('is not UTF-8')
  }
}

/** An environment file's text → its variables (throws EnvFileError). */
function parseEnvFile(bytes) {
  const text = typeof bytes === 'string' ? bytes : decode(bytes)
  // An editor's byte-order mark would make the first key "\uFEFFKEY", shown
  // as a name that looks right and is refused: say what it is.
  if (text.startsWith('\uFEFF')) {
    throw new EnvFileError('starts with a byte-order mark (U+FEFF, bytes EF BB BF): save it as UTF-8 without one', 1)
  }
  return checkAssignments(parseEnvText(text))
}

/** The most an environment file may hold: systemd's READ_FULL_BYTES_MAX (64 MiB - 1). */
const MAX_BYTES = 64 * 1024 * 1024 - 1

/** What a file that is not a regular one is, for the message. */
function kindOf(st) {
  if (st.isFIFO()) return 'a FIFO'
  if (st.isDirectory()) return 'a directory'
  if (st.isCharacterDevice()) return 'a character device'
  if (st.isBlockDevice()) return 'a block device'
  if (st.isSocket()) return 'a socket'
  return 'neither a regular file nor a directory'
}

/**
 * `file`'s bytes, but no more than MAX_BYTES + 1 of them (a file that grows
 * as it is read stops there, as systemd's read_full_stream stops). Only a
 * regular file: opened without blocking (a FIFO with no writer would hang
 * open(2), as PID 1 until a SIGKILL), then refused unless fstat says it is
 * one (a FIFO, /dev/zero, a directory), as the lock and the state reader
 * refuse them.
 */
function readBounded(file) {
  const fs = require('node:fs')
  const fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0))
  try {
    const st = fs.fstatSync(fd)
    if (!st.isFile()) throw new EnvFileError(`is ${kindOf(st)}, not a regular file`)
    const chunks = []
    let total = 0
    while (total <= MAX_BYTES) {
      const chunk = Buffer.allocUnsafe(Math.min(1 << 20, MAX_BYTES + 1 - total))
      const n = fs.readSync(fd, chunk, 0, chunk.length, null)
      if (n === 0) break
      chunks.push(chunk.subarray(0, n))
      total += n
    }
    return Buffer.concat(chunks, total)
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Reads and parses `file`. `readFile(file)` returns its bytes (default: the
 * file read up to one byte past MAX_BYTES); its error (ENOENT, EACCES,
 * EISDIR) comes through as it is. A file larger than MAX_BYTES is refused.
 */
function readEnvFile(file, { readFile = readBounded } = {}) {
  const bytes = readFile(file)
  if (bytes.length > MAX_BYTES) throw new EnvFileError('is larger than 64 MiB, the most systemd reads')
  return parseEnvFile(bytes)
}

module.exports = { EnvFileError, MAX_BYTES, parseEnvText, parseEnvFile, readEnvFile }
