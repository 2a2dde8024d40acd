// lockPath(dir, name): the lock file for a name of any kind — a user id,
// `resync:${identity}`, a URL — without each caller inventing a file-name
// encoding. The mapping is injective (two names never share a file), stable
// across releases and platforms (it is how a lock is found again), and gives
// a name every file system takes: no separator, no NUL, not '.' or '..', no
// name that Windows reserves, at most 255 bytes.

const crypto = require('node:crypto')
const path = require('node:path')
const { typeError } = require('./errors')
const validate = require('./validate')

const SUFFIX = '.lock'
/** Names longer than this (encoded) keep a readable head and a hash of the whole. */
const MAX_ENCODED = 160

// Kept as they are: letters, digits, '-', '_', '.' (a leading '.' is encoded:
// no hidden file, no '.' or '..'). Every other byte of the UTF-8 is '%XX', so
// '%' itself is encoded and the mapping is one to one. Upper and lower case
// stay apart only where the file system keeps them apart (macOS, Windows
// fold them): there, 'A' and 'a' name one lock — still never a wrong one,
// since both sides take the same file; lower-case hex keeps escapes stable.
function encode(name) {
  let out = ''
  for (const byte of Buffer.from(name, 'utf8')) {
    const c = String.fromCharCode(byte)
    const plain = /[A-Za-z0-9_-]/.test(c) || (c === '.' && out.length > 0)
    out += plain ? c : `%${byte.toString(16).padStart(2, '0')}`
  }
  return out
}

/**
 * The path of the lock file for `name` in `dir`: `dir/<encoded name>.lock`.
 * Any non-empty string is a name; a lone surrogate is refused (it has no
 * UTF-8, so two such names could not be told apart).
 */
function lockPath(dir, name) {
  validate.nonEmptyString(dir, 'dir')
  if (typeof name !== 'string') throw typeError(`name must be a string, got ${validate.describe(name)}`)
  if (name.length === 0) throw typeError('name must not be empty', 'ERR_INVALID_ARG_VALUE')
  if (!name.isWellFormed()) {
    throw typeError('name must be well-formed Unicode (it has a lone surrogate)', 'ERR_INVALID_ARG_VALUE')
  }
  let file = encode(name)
  // CON.lock, nul.lock, com1.lock... are devices on Windows, whatever the extension.
  if (/^(con|prn|aux|nul|com[0-9]|lpt[0-9])$/i.test(file)) file = `%${file.charCodeAt(0).toString(16)}${file.slice(1)}`
  if (file.length > MAX_ENCODED) {
    const hash = crypto.createHash('sha256').update(name, 'utf8').digest('hex').slice(0, 32)
    // Cut the readable head between escapes, never inside one.
    const head = file.slice(0, 96).replace(/%[0-9a-f]?$/, '')
    file = `${head}~${hash}`
  }
  return path.join(dir, file + SUFFIX)
}

module.exports = { lockPath }
