// Held sockets (options.listen): checked once, bound and listening when the
// supervisor starts (after a takeover has stopped a predecessor's daemon,
// which was serving on its own copy), handed to every child as systemd
// hands a socket unit's (fds 3, 4, … with LISTEN_FDS, LISTEN_FDNAMES and
// LISTEN_PID, set by the spawn itself), and closed when the supervisor
// stops or fails. While no daemon runs, a connection waits in the kernel's
// backlog instead of being refused.

const net = require('node:net')
const path = require('node:path')
const native = require('../../binding.js')
const { brand, typeError } = require('../errors')
const validate = require('../validate')

const KEYS_TCP = ['port', 'host', 'name', 'backlog']
const KEYS_UNIX = ['path', 'name', 'mode', 'backlog']
/** Node's own default backlog for server.listen(). */
const DEFAULT_BACKLOG = 511
/** Most sockets one daemon is handed (the spawn's bound). */
const MAX_SOCKETS = 1024

/**
 * Package-internal Supervisor option (`procward run` under a socket unit):
 * sockets already held (adopt()), used instead of options.listen.
 */
const ADOPTED = Symbol('procward.adoptedSockets')

const SHAPES = '{ port, host?, name?, backlog? } or { path, name?, mode?, backlog? }'

/**
 * A socket's default name: the path's basename, or `tcp-PORT` with the
 * port it got (`host:port` cannot be one: LISTEN_FDNAMES separates names
 * with `:`).
 */
function defaultName(e, port = e.port) {
  return e.path !== undefined ? path.basename(e.path) : `tcp-${port}`
}

function checkName(value, name) {
  const text = validate.cString(value, name, { empty: false })
  if (text.includes(':')) {
    throw typeError(
      `${name} must not contain ':' (LISTEN_FDNAMES joins the names with it), got ${validate.describe(text)}`,
      'ERR_INVALID_ARG_VALUE',
    )
  }
  if (text.length > 255) throw typeError(`${name} must be at most 255 characters`, 'ERR_INVALID_ARG_VALUE')
  return text
}

function checkEntry(value, name) {
  validate.object(value, name)
  const backlog =
    value.backlog === undefined
      ? DEFAULT_BACKLOG
      : validate.integer(value.backlog, `${name}.backlog`, 1, 65535, ' (the kernel caps it at net.core.somaxconn)')
  if (value.path !== undefined) {
    validate.knownKeys(value, KEYS_UNIX, name)
    const p = validate.cString(value.path, `${name}.path`, { empty: false })
    if (!path.isAbsolute(p)) {
      throw typeError(`${name}.path must be an absolute path, got ${validate.describe(p)}`, 'ERR_INVALID_ARG_VALUE')
    }
    // sun_path holds 108 bytes, one of them the NUL.
    if (Buffer.byteLength(p) > 107) {
      throw typeError(`${name}.path is longer than a unix socket's 107 bytes: ${p}`, 'ERR_INVALID_ARG_VALUE')
    }
    const mode =
      value.mode === undefined
        ? null
        : validate.integer(value.mode, `${name}.mode`, 0, 0o777, ' (a mode such as 0o660)')
    const e = { path: path.normalize(p), mode, backlog }
    e.name = value.name === undefined ? null : checkName(value.name, `${name}.name`)
    return Object.freeze(e)
  }
  if (value.port === undefined) {
    throw typeError(`${name} must be ${SHAPES}, got neither a port nor a path`, 'ERR_INVALID_ARG_VALUE')
  }
  validate.knownKeys(value, KEYS_TCP, name)
  const port = validate.integer(value.port, `${name}.port`, 0, 65535, ' (0: any free port)')
  const host = value.host === undefined ? '127.0.0.1' : validate.nonEmptyString(value.host, `${name}.host`)
  // Bound before anything is spawned, on the JS thread: no name lookup.
  if (net.isIP(host) === 0) {
    throw typeError(
      `${name}.host must be an IP address (such as 127.0.0.1, ::1, 0.0.0.0 or ::), got ${validate.describe(host)}`,
      'ERR_INVALID_ARG_VALUE',
    )
  }
  const e = { port, host, backlog }
  e.name = value.name === undefined ? null : checkName(value.name, `${name}.name`)
  return Object.freeze(e)
}

/** options.listen → null, or the frozen entries (names unique). */
function checkListen(value) {
  if (value === undefined) return null
  if (!Array.isArray(value)) {
    throw typeError(`options.listen must be an array of ${SHAPES}, got ${validate.describe(value)}`)
  }
  if (value.length === 0 || value.length > MAX_SOCKETS) {
    throw typeError(
      `options.listen must name 1 to ${MAX_SOCKETS} sockets, got ${value.length} (leave it out for none)`,
      'ERR_INVALID_ARG_VALUE',
    )
  }
  if (typeof native.listenTcp !== 'function') {
    throw typeError('options.listen (held sockets) is not supported on this platform', 'ERR_INVALID_ARG_VALUE')
  }
  const entries = value.map((e, i) => checkEntry(e, `options.listen[${i}]`))
  const seen = new Map()
  entries.forEach((e, i) => {
    const where = e.path ?? `${e.host}:${e.port}`
    if (e.port !== 0 && seen.has(where)) {
      throw typeError(
        `options.listen[${i}] is ${where} again (options.listen[${seen.get(where)}])`,
        'ERR_INVALID_ARG_VALUE',
      )
    }
    seen.set(where, i)
  })
  return Object.freeze(entries)
}

/**
 * Whether a port check on `port` may reach one of the held TCP ports (it
 * then tells nothing). By port alone: a host can name a held address in
 * many ways ('localhost', '::ffff:127.0.0.1', a wildcard's interfaces), and
 * a check on the same port of another interface is no use case.
 */
function holds(ports, port) {
  return ports.includes(port)
}

/** How an entry is said in an error: the caller's address. */
function shown(e) {
  if (e.path !== undefined) return e.path
  return e.host.includes(':') ? `[${e.host}]:${e.port}` : `${e.host}:${e.port}`
}

/**
 * Binds and listens on every entry, in order; all or none (a failure
 * closes those already bound and throws, worded with the address, its
 * `code` the errno's: EADDRINUSE, EACCES, …). `adopted`: sockets a socket
 * unit handed us (see adopt()), used instead of binding.
 */
function bind(entries) {
  const held = []
  try {
    for (const e of entries) {
      held.push(
        e.path !== undefined
          ? native.listenUnix(e.path, e.mode ?? undefined, e.backlog)
          : native.listenTcp(e.host, e.port, e.backlog),
      )
    }
  } catch (err) {
    for (const s of held) s.close()
    const e = entries[held.length]
    const wrapped = new Error(`listen ${shown(e)}: ${err.info?.message ?? err.message}`, { cause: err })
    wrapped.code = err.code
    if (err.errno !== undefined) wrapped.errno = err.errno
    wrapped.syscall = 'listen'
    wrapped.address = e.path ?? e.host
    if (e.port !== undefined) wrapped.port = e.port
    throw brand(wrapped)
  }
  return new HeldSockets(
    entries.map((e, i) => e.name ?? defaultName(e, held[i].port)),
    held,
  )
}

/** The sockets a supervisor holds for one life (start to stop). */
class HeldSockets {
  #held
  constructor(names, held) {
    this.names = Object.freeze(names)
    this.#held = held
  }

  /** What `supervisor.listening` shows: the name, and the real address (the port a port 0 got). */
  get listening() {
    return Object.freeze(
      this.#held.map((s, i) => {
        const out = { name: this.names[i] }
        if (s.path !== null && s.path !== undefined) out.path = s.path
        else {
          out.host = s.host
          out.port = s.port
        }
        return Object.freeze(out)
      }),
    )
  }

  /** The TCP ports held (a port 0's real one). */
  get ports() {
    return this.listening.filter((l) => l.port !== undefined).map((l) => l.port)
  }

  /** The spawn's package-internal option: the fds (the spawn copies them), names, and whether to hand them blocking. */
  spawnOption(blocking) {
    return { fds: this.#held.map((s) => s.fd), names: this.names, blocking }
  }

  close() {
    for (const s of this.#held) s.close()
  }
}

/**
 * Sockets a service manager handed this process (`LISTEN_FDS` for our own
 * pid: a socket unit), taken over: each must be a listening stream socket.
 * `names`: LISTEN_FDNAMES's, one per fd; `selected`: the names to keep
 * (the others are closed), or null for all. The variables are then removed
 * from process.env, as sd_listen_fds(unset_environment=1) does, so that no
 * child of ours is told of fds it does not have.
 */
function adopt(count, names, selected = null) {
  const held = []
  const named = []
  try {
    for (let i = 0; i < count; i++) {
      const name = names[i] || `fd${3 + i}`
      const s = native.adoptListenFd(3 + i)
      if (selected === null || selected.includes(name)) {
        held.push(s)
        named.push(name)
      } else s.close()
    }
  } catch (err) {
    for (const s of held) s.close()
    throw err
  }
  if (selected !== null) {
    const missing = selected.filter((n) => !named.includes(n))
    if (missing.length > 0) {
      for (const s of held) s.close()
      throw typeError(
        `the service manager handed no socket named ${missing.join(', ')} (LISTEN_FDNAMES: ${names.join(':')})`,
        'ERR_INVALID_ARG_VALUE',
      )
    }
  }
  return new HeldSockets(named, held)
}

module.exports = { ADOPTED, adopt, bind, checkListen, holds, HeldSockets, shown }
