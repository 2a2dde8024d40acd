// Supervisor: keeps one daemon running. Restarts it when it exits (the
// exit event is the reap, so the new child never meets its predecessor's
// workers), backs off and gives up on a crash loop, checks readiness,
// records its state for a successor, and takes over from a dead
// predecessor. Built on the public primitives (spawnSupervised, stop,
// waitForExit, liveness) and the lock; the only native calls of its own
// read /proc for the record and sweep a predecessor's strays.

const { EventEmitter } = require('node:events')
const fs = require('node:fs')
const fsp = require('node:fs/promises')
const net = require('node:net')
const path = require('node:path')
const { isMainThread } = require('node:worker_threads')
const native = require('../binding.js')
const { callNative, fromNative, typeError, rangeError } = require('./errors')
const validate = require('./validate')
const {
  abortError,
  CGROUP_RECORD,
  checkSpawnOptions,
  nativeStopOptions,
  NOTIFY_FD,
  NOTIFY_STREAM,
  spawnSupervised,
  stopSupervisedProcess,
} = require('./supervised')
const { waitForExit } = require('./wait')

const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')
const noop = () => {}

// The lock module is loaded on first use: a supervisor without a stateFile
// needs none.
let lockModule = null
function lock() {
  lockModule ??= require('./lock')
  return lockModule
}

// ---- the state machine ------------------------------------------------------------

/**
 * Every transition there is: state → event → next state. A transition not
 * listed cannot happen: #go() refuses it and its caller drops what it was
 * about to do. So `stopped` and `failed` are left only by start(), and
 * `stopping` only by the end of the stop.
 *
 * Events: start (start()), ready (the ready check passed, or there is
 * none), adopt (takeover kept a predecessor's orphan), crash (the daemon
 * exited or failed its ready check, and the policy restarts it), retry (the
 * backoff delay is over), restart (restart()), stop (stop()), stopped (the
 * stop is done), fail (the policy gives up, or the start could not begin),
 * finish (a clean exit the policy does not restart).
 */
const TRANSITIONS = Object.freeze({
  idle: { start: 'starting' },
  starting: {
    ready: 'running',
    adopt: 'running',
    crash: 'backoff',
    restart: 'starting',
    stop: 'stopping',
    fail: 'failed',
    finish: 'stopped',
  },
  running: { crash: 'backoff', restart: 'starting', stop: 'stopping', fail: 'failed', finish: 'stopped' },
  backoff: { retry: 'starting', restart: 'starting', stop: 'stopping' },
  stopping: { stopped: 'stopped' },
  stopped: { start: 'starting' },
  failed: { start: 'starting' },
})

// ---- options ----------------------------------------------------------------------

const MAX_MS = validate.DURATION_MAX
const DEFAULTS = Object.freeze({
  restart: 'always',
  backoff: Object.freeze({ initialMs: 0, stepMs: 100, factor: 2, maxMs: 30_000, resetAfterMs: 10_000 }),
  crashLoop: Object.freeze({ maxRestarts: 5, windowMs: 60_000 }),
  readyTimeoutMs: 30_000,
  takeover: 'stop',
})
const OPTION_KEYS = [
  'command',
  'args',
  'name',
  'spawn',
  'restart',
  'backoff',
  'crashLoop',
  'ready',
  'readyTimeoutMs',
  'stateFile',
  'takeover',
  'handleSignals',
]
// What spawnSupervised takes, but `signal`: a supervisor is stopped with
// stop(), not by aborting one child.
const SPAWN_KEYS = [
  'cwd',
  'env',
  'stdio',
  'processGroup',
  'killGroupOnExit',
  'parentDeathSignal',
  'stop',
  'uid',
  'gid',
  'argv0',
  'cgroup',
]
const STOP_KEYS = ['signal', 'graceMs', 'killTimeoutMs', 'group']
/** A line longer than this is handed on in pieces (a pipe never stalls). */
const MAX_LINE = 64 * 1024

function object(value, name) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw typeError(`${name} must be an object, got ${validate.describe(value)}`)
  }
  return value
}

function knownKeys(value, keys, name) {
  for (const key of Object.keys(value)) {
    if (!keys.includes(key)) {
      throw typeError(`${name}.${key} is not an option (${keys.join(', ')})`, 'ERR_INVALID_ARG_VALUE')
    }
  }
}

function ms(value, name, fallback, allowFalse = false) {
  if (allowFalse && value === false) return false
  if (allowFalse && value !== undefined && typeof value !== 'number') {
    throw typeError(`${name} must be a number of milliseconds or false, got ${validate.describe(value)}`)
  }
  return validate.duration(value, name, fallback)
}

function oneOf(value, choices, name, fallback) {
  if (value === undefined) return fallback
  if (!choices.includes(value)) {
    throw typeError(
      `${name} must be one of ${choices.map((c) => `'${c}'`).join(', ')}, got ${validate.describe(value)}`,
      'ERR_INVALID_ARG_VALUE',
    )
  }
  return value
}

function nonEmptyString(value, name) {
  if (typeof value !== 'string') throw typeError(`${name} must be a string, got ${validate.describe(value)}`)
  if (value.length === 0 || value.includes('\0')) {
    throw typeError(`${name} must be a non-empty string without NUL`, 'ERR_INVALID_ARG_VALUE')
  }
  return value
}

function stringArray(value, name) {
  if (!Array.isArray(value)) throw typeError(`${name} must be an array of strings, got ${validate.describe(value)}`)
  for (const [i, a] of value.entries()) {
    if (typeof a !== 'string') throw typeError(`${name}[${i}] must be a string, got ${validate.describe(a)}`)
  }
  return Object.freeze([...value])
}

function envOption(value, name) {
  object(value, name)
  return { ...value }
}

function checkStop(value, name) {
  if (value === undefined) return {}
  object(value, name)
  knownKeys(value, STOP_KEYS, name)
  if (value.graceMs !== undefined) ms(value.graceMs, `${name}.graceMs`)
  if (value.killTimeoutMs !== undefined) ms(value.killTimeoutMs, `${name}.killTimeoutMs`)
  nativeStopOptions(value) // signal names, group
  return { ...value }
}

function lineMatcher(value, name) {
  if (typeof value === 'string') {
    if (value.length === 0) throw typeError(`${name} must not be empty`, 'ERR_INVALID_ARG_VALUE')
    return (line) => line.includes(value)
  }
  if (value instanceof RegExp) {
    // Whole lines, tested one at a time: g and y would carry lastIndex over.
    const re = new RegExp(value.source, value.flags.replace(/[gy]/g, ''))
    return (line) => re.test(line)
  }
  throw typeError(`${name} must be a string or a RegExp, got ${validate.describe(value)}`)
}

function checkReady(value) {
  if (value === undefined) return null
  if (typeof value === 'function') return { kind: 'function', fn: value }
  object(value, 'options.ready')
  const keys = Object.keys(value)
  if (keys.includes('port')) {
    knownKeys(value, ['port', 'host'], 'options.ready')
    const { port } = value
    if (typeof port !== 'number') throw typeError(`options.ready.port must be a number, got ${validate.describe(port)}`)
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw rangeError(`options.ready.port must be an integer in 1..=65535, got ${String(port)}`)
    }
    const host = value.host === undefined ? '127.0.0.1' : nonEmptyString(value.host, 'options.ready.host')
    return { kind: 'port', port, host }
  }
  for (const stream of ['stdout', 'stderr']) {
    if (keys.includes(stream)) {
      knownKeys(value, [stream], 'options.ready')
      return { kind: 'line', stream, match: lineMatcher(value[stream], `options.ready.${stream}`) }
    }
  }
  if (keys.includes('notifyFd')) {
    knownKeys(value, ['notifyFd'], 'options.ready')
    const fd = value.notifyFd
    if (typeof fd !== 'number') throw typeError(`options.ready.notifyFd must be a number, got ${validate.describe(fd)}`)
    if (!Number.isInteger(fd) || fd < 3 || fd > 65535) {
      throw rangeError(`options.ready.notifyFd must be an integer in 3..=65535 (0..2 are stdio), got ${String(fd)}`)
    }
    return { kind: 'notify', fd }
  }
  throw typeError(
    'options.ready must be { port, host? }, { stdout }, { stderr }, { notifyFd } or a function',
    'ERR_INVALID_ARG_VALUE',
  )
}

function checkOptions(options) {
  object(options, 'options')
  knownKeys(options, OPTION_KEYS, 'options')
  const command = nonEmptyString(options.command, 'options.command')
  const args = options.args === undefined ? Object.freeze([]) : stringArray(options.args, 'options.args')
  const name = options.name === undefined ? path.basename(command) : nonEmptyString(options.name, 'options.name')

  const spawn = options.spawn === undefined ? {} : { ...object(options.spawn, 'options.spawn') }
  if ('signal' in spawn) {
    throw typeError('options.spawn.signal is not an option: stop the supervisor with stop()', 'ERR_INVALID_ARG_VALUE')
  }
  knownKeys(spawn, SPAWN_KEYS, 'options.spawn')
  const stopDefaults = checkStop(spawn.stop, 'options.spawn.stop')

  const b = options.backoff === undefined ? {} : object(options.backoff, 'options.backoff')
  knownKeys(b, Object.keys(DEFAULTS.backoff), 'options.backoff')
  const factor = b.factor ?? DEFAULTS.backoff.factor
  if (typeof factor !== 'number') {
    throw typeError(`options.backoff.factor must be a number, got ${validate.describe(factor)}`)
  }
  if (!Number.isFinite(factor) || factor < 1 || factor > 1000) {
    throw rangeError(`options.backoff.factor must be 1..1000, got ${String(factor)}`)
  }
  const backoff = Object.freeze({
    initialMs: ms(b.initialMs, 'options.backoff.initialMs', DEFAULTS.backoff.initialMs),
    stepMs: ms(b.stepMs, 'options.backoff.stepMs', DEFAULTS.backoff.stepMs),
    factor,
    maxMs: ms(b.maxMs, 'options.backoff.maxMs', DEFAULTS.backoff.maxMs),
    resetAfterMs: ms(b.resetAfterMs, 'options.backoff.resetAfterMs', DEFAULTS.backoff.resetAfterMs),
  })

  const c = options.crashLoop === undefined ? {} : object(options.crashLoop, 'options.crashLoop')
  knownKeys(c, Object.keys(DEFAULTS.crashLoop), 'options.crashLoop')
  const maxRestarts = c.maxRestarts ?? DEFAULTS.crashLoop.maxRestarts
  if (typeof maxRestarts !== 'number') {
    throw typeError(`options.crashLoop.maxRestarts must be a number, got ${validate.describe(maxRestarts)}`)
  }
  if (!Number.isInteger(maxRestarts) || maxRestarts < 0 || maxRestarts > MAX_MS) {
    throw rangeError(`options.crashLoop.maxRestarts must be an integer in 0..${MAX_MS}, got ${String(maxRestarts)}`)
  }
  const crashLoop = Object.freeze({
    maxRestarts,
    windowMs: ms(c.windowMs, 'options.crashLoop.windowMs', DEFAULTS.crashLoop.windowMs),
  })

  let handleSignals = null
  if (options.handleSignals !== undefined && options.handleSignals !== false) {
    if (options.handleSignals === true) handleSignals = { hup: null }
    else {
      object(options.handleSignals, 'options.handleSignals')
      knownKeys(options.handleSignals, ['hup'], 'options.handleSignals')
      handleSignals = { hup: oneOf(options.handleSignals.hup, ['stop', 'forward'], 'options.handleSignals.hup', null) }
    }
    if (!isMainThread) {
      throw typeError('options.handleSignals works on the main thread only: signals go to the process')
    }
  }

  const opts = {
    command,
    args,
    name,
    spawn,
    stopDefaults,
    restart: oneOf(options.restart, ['always', 'on-failure', 'never'], 'options.restart', DEFAULTS.restart),
    backoff,
    crashLoop,
    ready: checkReady(options.ready),
    readyTimeoutMs: ms(options.readyTimeoutMs, 'options.readyTimeoutMs', DEFAULTS.readyTimeoutMs, true),
    stateFile:
      options.stateFile === undefined ? null : path.resolve(nonEmptyString(options.stateFile, 'options.stateFile')),
    takeover: oneOf(options.takeover, ['stop', 'adopt'], 'options.takeover', DEFAULTS.takeover),
    handleSignals,
  }
  // The spawn options themselves, checked now rather than at the first
  // spawn (the native options builder checks everything, starts nothing).
  checkSpawnOptions(spawnOptions(opts, undefined))
  return opts
}

/** The spawnSupervised options of one attempt (forcing what a ready check needs). */
function spawnOptions(opts, env) {
  const o = { ...opts.spawn }
  if (env !== undefined) o.env = env
  const ready = opts.ready
  if (ready?.kind === 'line') {
    let stdio = o.stdio ?? ['ignore', 'inherit', 'inherit']
    stdio = Array.isArray(stdio) ? [...stdio] : [stdio, stdio, stdio]
    stdio[ready.stream === 'stdout' ? 1 : 2] = 'pipe'
    o.stdio = stdio
  }
  if (ready?.kind === 'notify') o[NOTIFY_FD] = ready.fd
  return o
}

// ---- small helpers ------------------------------------------------------------------

function nowIso() {
  return new Date().toISOString()
}

function exitInfo(info) {
  return Object.freeze({ pid: info.pid, code: info.code ?? null, signal: info.signal ?? null })
}

function describeExit(info) {
  if (info === null) return 'could not be started'
  if (info.signal) return `was killed by ${info.signal}`
  if (info.code === null) return 'exited (status unknown)'
  return `exited with code ${info.code}`
}

function supervisorError(code, message, extra) {
  const err = new Error(message, extra?.cause ? { cause: extra.cause } : undefined)
  err.code = code
  if (extra && 'lastExit' in extra) err.lastExit = extra.lastExit
  return err
}

function isRunning(pid, identity) {
  try {
    return callNative(native.isProcessRunning, pid, identity)
  } catch {
    return false
  }
}

function sleepFor(delayMs, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(abortError(signal))
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, delayMs)
    const onAbort = () => {
      clearTimeout(t)
      reject(abortError(signal))
    }
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

function connects(port, host, signal) {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host })
    const done = (ok) => {
      signal.removeEventListener('abort', onAbort)
      sock.destroy()
      resolve(ok)
    }
    const onAbort = () => done(false)
    sock.once('connect', () => done(true))
    sock.once('error', () => done(false))
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

/** The inodes of the TCP sockets listening on `port` in our network namespace; null where /proc cannot tell. */
async function listeningInodes(port) {
  const inodes = new Set()
  let readable = false
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text
    try {
      text = await fsp.readFile(table, 'latin1')
    } catch {
      continue
    }
    readable = true
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const f = line.trim().split(/\s+/)
      if (f.length < 10 || f[3] !== '0A') continue
      if (Number.parseInt(f[1].slice(f[1].lastIndexOf(':') + 1), 16) === port) inodes.add(f[9])
    }
  }
  return readable ? inodes : null
}

/** Does `pid` hold one of `inodes` open? null when its fds cannot be read. */
async function holdsSocket(pid, inodes) {
  let fds
  try {
    fds = await fsp.readdir(`/proc/${pid}/fd`)
  } catch (err) {
    return err.code === 'ENOENT' ? false : null
  }
  for (const fd of fds) {
    let target
    try {
      target = await fsp.readlink(`/proc/${pid}/fd/${fd}`)
    } catch {
      continue
    }
    if (target.startsWith('socket:[') && inodes.has(target.slice(8, -1))) return true
  }
  return false
}

/** The processes in process group `pgid` now (a /proc scan). */
async function groupMembers(pgid) {
  let names
  try {
    names = await fsp.readdir('/proc')
  } catch {
    return []
  }
  const members = []
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = await fsp.readFile(`/proc/${name}/stat`, 'latin1')
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (Number(f[2]) === pgid) members.push(Number(name))
    } catch {
      // gone
    }
  }
  return members
}

/**
 * Is the listener on `port` the child's (it or a member of its group holds
 * the listening socket)? A stale daemon that still listens there must not
 * make a new child look ready. true, false, or null where it cannot be told
 * (no /proc, no listener in our network namespace, fds we may not read).
 */
async function childListens(child, port) {
  const inodes = await listeningInodes(port)
  if (inodes === null || inodes.size === 0) return null
  let unknown = false
  const leader = await holdsSocket(child.pid, inodes)
  if (leader) return true
  if (leader === null) unknown = true
  if (child.pgid !== null) {
    for (const pid of await groupMembers(child.pgid)) {
      if (pid === child.pid) continue
      const held = await holdsSocket(pid, inodes)
      if (held) return true
      if (held === null) unknown = true
    }
  }
  return unknown ? null : false
}

/**
 * Ready once something accepts a connection and, where /proc can tell, the
 * listener is not a leftover: held by the child's group, or opened since
 * the check began (a proxy the child had started, like docker-proxy for
 * `docker run -p`). A listening socket that was there before — a stale
 * daemon still on the port — never counts. Probes at 1 ms, doubling to
 * 20 ms (100 ms while only a leftover answers).
 */
async function portReady(child, port, host, signal) {
  // Right after the spawn: what listened before the child could have.
  const before = await listeningInodes(port)
  let delay = 1
  for (;;) {
    if (signal.aborted) throw abortError(signal)
    let foreign = false
    if (await connects(port, host, signal)) {
      const now = await listeningInodes(port)
      if (now === null || before === null || [...now].some((i) => !before.has(i))) return
      if ((await childListens(child, port)) !== false) return
      foreign = true
    }
    await sleepFor(foreign ? 100 : delay, signal)
    delay = Math.min(delay * 2, 20)
  }
}

/** s6 style: ready at the first newline the child writes to the notify pipe. */
function notifyReady(stream, signal) {
  return new Promise((resolve, reject) => {
    if (stream === null) return reject(new Error('no notify pipe'))
    const finish = (fn, arg) => {
      signal.removeEventListener('abort', onAbort)
      stream.destroy()
      fn(arg)
    }
    const onAbort = () => finish(reject, abortError(signal))
    stream.on('data', (d) => {
      if (String(d).includes('\n')) finish(resolve)
    })
    // EOF without a newline: the daemon never said it is ready; the ready
    // timeout (or its exit) decides.
    stream.on('error', noop)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

// ---- the state file -----------------------------------------------------------------

let tmpCounter = 0

/**
 * Replaces `file` atomically: a temp file in the same directory (mode
 * 0600: args may hold secrets), fsync, rename, then fsync the directory
 * so the rename itself survives a crash. All through fs.promises: off the
 * JS thread.
 */
async function writeAtomic(file, text) {
  const dir = path.dirname(file)
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.${++tmpCounter}.tmp`)
  let fh = null
  try {
    fh = await fsp.open(tmp, 'wx', 0o600)
    await fh.writeFile(text)
    await fh.sync()
    await fh.close()
    fh = null
    await fsp.rename(tmp, file)
  } catch (err) {
    await fh?.close().catch(noop)
    await fsp.unlink(tmp).catch(noop)
    throw err
  }
  try {
    const d = await fsp.open(dir, 'r')
    try {
      await d.sync()
    } finally {
      await d.close()
    }
  } catch {
    // Some filesystems refuse fsync on a directory; the rename stands.
  }
}

/** Temp files a writer that died mid-write left behind (we hold the lock now). */
async function removeStaleTemps(file) {
  const dir = path.dirname(file)
  const prefix = `.${path.basename(file)}.`
  let names = []
  try {
    names = await fsp.readdir(dir)
  } catch {
    return
  }
  await Promise.all(
    names
      .filter((n) => n.startsWith(prefix) && n.endsWith('.tmp'))
      .map((n) => fsp.unlink(path.join(dir, n)).catch(noop)),
  )
}

const STATES = Object.keys(TRANSITIONS)

/**
 * Why a recorded process must never be stopped, adopted or signalled on the
 * record's word, or null. No daemon a supervisor spawned can be pid 1, this
 * process, one of its ancestors, or the leader of its group or session; a
 * record naming one is corrupt or forged (and a group stop of pid 1 would
 * reach every process).
 */
function untouchable(pid) {
  if (pid === 1) return 'it is pid 1 (init)'
  if (pid === process.pid) return 'it is this process'
  let own = null
  try {
    own = callNative(native.getProcessInfo, process.pid)
  } catch {
    // unknown: the ancestor walk below still runs
  }
  if (own !== null && pid === own.pgid) return "it leads this process's group"
  let st = null
  try {
    st = native.procStat?.(process.pid) ?? null
  } catch {
    // no session to compare
  }
  if (st !== null && pid === st.session) return "it leads this process's session"
  let ppid = own?.ppid ?? process.ppid
  for (let i = 0; i < 128 && ppid > 1; i++) {
    if (ppid === pid) return 'it is an ancestor of this process'
    let info = null
    try {
      info = callNative(native.getProcessInfo, ppid)
    } catch {
      break
    }
    if (info === null) break
    ppid = info.ppid
  }
  return null
}

/**
 * Reads a stateFile for acting on it: null when missing, else { text } or
 * { untrusted: why }. A record is trusted only from a regular file (not a
 * symlink) owned by this process's user and writable by no one else: a
 * record names processes to stop and groups to sweep.
 */
async function readRecordFile(file) {
  let fh
  try {
    fh = await fsp.open(file, fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0) | (fs.constants.O_NONBLOCK ?? 0))
  } catch (err) {
    if (err.code === 'ENOENT') return null
    if (err.code === 'ELOOP') return { untrusted: 'it is a symbolic link' }
    return { untrusted: err.message }
  }
  try {
    const st = await fh.stat()
    const why = untrustedStat(st)
    if (why !== null) return { untrusted: why }
    if (st.size > RECORD_MAX) return { untrusted: `it is ${st.size} bytes, larger than any record` }
    return { text: await fh.readFile('utf8') }
  } catch (err) {
    return { untrusted: err.message }
  } finally {
    await fh.close().catch(noop)
  }
}

function untrustedStat(st) {
  if (!st.isFile()) return 'it is not a regular file'
  const euid = process.geteuid?.()
  if (euid !== undefined && st.uid !== euid) return `it is owned by uid ${st.uid}, not ${euid}`
  if ((st.mode & 0o022) !== 0) return `others may write it (mode 0${(st.mode & 0o777).toString(8)})`
  return null
}

function validPid(v) {
  return Number.isInteger(v) && v >= 1 && v <= validate.PID_MAX
}

/** A parsed SupervisorStateRecord (liveness not yet judged), or null. */
function parseRecord(text) {
  let r
  try {
    r = JSON.parse(text)
  } catch {
    return null
  }
  if (r === null || typeof r !== 'object' || r.version !== 1) return null
  if (typeof r.name !== 'string' || !STATES.includes(r.state)) return null
  const s = r.supervisor
  if (s === null || typeof s !== 'object' || !validPid(s.pid) || typeof s.identity !== 'string') return null
  const c = r.child
  if (c !== null) {
    if (typeof c !== 'object' || !validPid(c.pid) || typeof c.identity !== 'string') return null
    if (c.pgid !== null && !validPid(c.pgid)) return null
    if (c.session !== null && c.session !== 0 && !validPid(c.session)) return null
    if (typeof c.command !== 'string' || !Array.isArray(c.args) || typeof c.aliveAt !== 'string') return null
  }
  return r
}

/** Far above any record (args included); a larger file is not one. */
const RECORD_MAX = 1 << 20

/**
 * A regular file's text, or null (missing, not a regular file, larger than
 * any record). Opened non-blocking: a FIFO at the path would otherwise
 * block this thread until a writer came.
 */
function readSmallFile(file) {
  let fd
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0))
  } catch (err) {
    if (err.code === 'ENOENT' || err.code === 'ENXIO') return null
    throw err
  }
  try {
    const st = fs.fstatSync(fd)
    if (!st.isFile() || st.size > RECORD_MAX) return null
    return fs.readFileSync(fd, 'utf8')
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * The record a supervisor keeps in its stateFile, with liveness judged now:
 * `supervisor.running` (its lock is held), `child.running` (zombie- and
 * reuse-aware). null when the file is missing or holds no such record.
 */
function readSupervisorState(stateFile) {
  nonEmptyString(stateFile, 'stateFile')
  const text = readSmallFile(stateFile)
  if (text === null) return null
  const r = parseRecord(text)
  if (r === null) return null
  let held
  try {
    held = lock().readLock(`${stateFile}.lock`).held
  } catch {
    held = isRunning(r.supervisor.pid, r.supervisor.identity || undefined)
  }
  r.supervisor = { pid: r.supervisor.pid, identity: r.supervisor.identity, running: held }
  if (r.child !== null) r.child = { ...r.child, running: isRunning(r.child.pid, r.child.identity) }
  return r
}

// ---- handleSignals ------------------------------------------------------------------

const WINDOWS = process.platform === 'win32'

/** Supervisors that opted in and are between start() and their end. */
const signalled = new Set()
/** signal → our process listener, while installed. */
const listeners = new Map()
/** The stop every opted-in supervisor is in, after a first signal. */
let stoppingAll = null

function onProcessSignal(sig) {
  if (sig === 'SIGHUP') {
    for (const s of signalled) if (s._hup === 'forward') s.kill('SIGHUP')
    if (![...signalled].some((s) => s._hup === 'stop')) return
  }
  if (stoppingAll !== null) {
    // A second signal while stopping: SIGKILL at once.
    for (const s of stoppingAll) s.stop({ signal: 'SIGKILL', killTimeoutMs: 2000 }).catch(noop)
    return
  }
  const targets = [...signalled].filter((s) => sig !== 'SIGHUP' || s._hup === 'stop')
  stoppingAll = targets
  Promise.allSettled(targets.map((s) => s.stop())).then(() => {
    const ours = listeners.get(sig)
    if (process.listeners(sig).some((l) => l !== ours)) {
      // The application listens too: what happens next is its call.
      stoppingAll = null
      syncSignalListeners()
      return
    }
    for (const [s, l] of listeners) process.removeListener(s, l)
    listeners.clear()
    // Die of the signal itself (exit status 128 + n, as a shell reports
    // it), never process.exit(). Windows cannot raise SIGBREAK or SIGHUP:
    // there `process.kill` of ourselves terminates, as it does for SIGTERM.
    process.kill(process.pid, WINDOWS && (sig === 'SIGBREAK' || sig === 'SIGHUP') ? 'SIGTERM' : sig)
  })
}

function syncSignalListeners() {
  const want = new Set()
  if (signalled.size > 0) {
    want.add('SIGTERM')
    want.add('SIGINT')
    // Windows' Ctrl-Break (and a console CTRL_BREAK_EVENT, the first step
    // of a stop there) arrives as SIGBREAK.
    if (WINDOWS) want.add('SIGBREAK')
    if ([...signalled].some((s) => s._hup !== null)) want.add('SIGHUP')
  }
  for (const [sig, l] of listeners) {
    if (!want.has(sig) && stoppingAll === null) {
      process.removeListener(sig, l)
      listeners.delete(sig)
    }
  }
  for (const sig of want) {
    if (!listeners.has(sig)) {
      const l = () => onProcessSignal(sig)
      listeners.set(sig, l)
      process.on(sig, l)
    }
  }
}

// ---- the Supervisor -------------------------------------------------------------------

class Supervisor extends EventEmitter {
  #o
  #args
  #env = undefined
  #state = 'idle'
  #since = nowIso()
  /** Bumped by stop(): async work begun before it does nothing after. */
  #epoch = 0
  /** The current attempt (see #newRun), or null while none is under way. */
  #run = null
  #timer = null
  /** start()/restart() callers waiting for the next ready: { resolve, reject }. */
  #waiters = []
  #restarting = null
  #stopping = null
  #booting = null
  /** The predecessor's orphan a takeover is stopping now: { pid, target: { identity, group } }. */
  #takingOver = null
  #lock = null
  #restarts = 0
  #attempt = 0
  #window = []
  #lastExit = null
  #startedAt = null
  #readyAt = null
  #dirty = false
  #writer = null
  #warnedWrite = false
  #retryTimer = null
  #retryMs = 0
  /** The stateFile is ours to write: locked, and its previous record taken over. */
  #recordOwned = false
  #identity = null

  constructor(options) {
    super()
    this.#o = checkOptions(options)
    this.#args = this.#o.args
  }

  get name() {
    return this.#o.name
  }

  get state() {
    return this.#state
  }

  /** The running child; null while none runs, and for an adopted orphan. */
  get child() {
    const c = this.#run?.child ?? null
    return c !== null && c.exitInfo === null ? c : null
  }

  /** @internal handleSignals' SIGHUP choice. */
  get _hup() {
    return this.#o.handleSignals?.hup ?? null
  }

  status() {
    const run = this.#run
    const live = run !== null && !run.exited && (run.child !== null || run.adopted !== null)
    return {
      name: this.#o.name,
      state: this.#state,
      pid: live ? (run.child?.pid ?? run.adopted.pid) : null,
      identity: live ? (run.child?.identity ?? run.adopted.identity) : null,
      adopted: live && run.adopted !== null,
      restarts: this.#restarts,
      lastExit: this.#lastExit,
      since: this.#since,
      startedAt: this.#startedAt,
      readyAt: this.#readyAt,
    }
  }

  // ---- public verbs ----

  start() {
    switch (this.#state) {
      case 'running':
        return Promise.resolve()
      case 'starting':
      case 'backoff':
        return this.#nextReady()
      case 'stopping':
        return this.#stopping.then(() => this.start())
    }
    if (this.#state === 'failed') {
      this.#window = []
      this.#attempt = 0
    }
    const ready = this.#nextReady()
    this.#go('start')
    if (this.#o.handleSignals !== null) {
      signalled.add(this)
      syncSignalListeners()
    }
    if (this.#o.stateFile === null) this.#spawn()
    else this.#booting = this.#boot(this.#epoch)
    return ready
  }

  stop(options) {
    let opts
    try {
      opts = this.#stopOptions(options)
    } catch (err) {
      return Promise.reject(err)
    }
    if (this.#stopping !== null) {
      this.#escalate(opts)
      return this.#stopping
    }
    if (!['starting', 'running', 'backoff'].includes(this.#state)) return Promise.resolve(null)
    this.#epoch++
    this.#go('stop')
    this.#clearTimer()
    const run = this.#run
    if (run !== null) {
      run.expected = true
      run.ac.abort()
    }
    this.#settle(null, abortError())
    this.#stopping = this.#stopFlow(opts)
    // A takeover under way stops its orphan with the stop defaults; a stop
    // that asks for more (SIGKILL, a shorter grace) passes it on.
    if (this.#takingOver !== null) this.#escalate(opts)
    return this.#stopping
  }

  restart(options) {
    let o
    try {
      o = this.#restartOptions(options)
    } catch (err) {
      return Promise.reject(err)
    }
    switch (this.#state) {
      case 'idle':
      case 'stopped':
      case 'failed':
        this.#apply(o)
        return this.start()
      case 'stopping':
        return Promise.reject(abortError())
    }
    if (this.#restarting !== null) return this.#restarting
    this.#apply(o)
    const ready = this.#nextReady()
    this.#restarting = ready
    const clear = () => {
      if (this.#restarting === ready) this.#restarting = null
    }
    ready.then(clear, clear)
    const run = this.#run
    if (run === null && this.#state === 'starting') {
      // Still booting (lock, takeover): it spawns with the new args.
      return ready
    }
    this.#clearTimer()
    this.#go('restart')
    if (run === null) {
      // In backoff: no child to stop, spawn at once.
      this.#spawn()
      return ready
    }
    run.expected = true
    run.ac.abort()
    const epoch = this.#epoch
    this.#retire(run, this.#o.stopDefaults)
      .catch(noop)
      .then(() => {
        if (epoch !== this.#epoch || this.#run !== run || this.#state !== 'starting') return
        this.#run = null
        this.#spawn()
      })
    return ready
  }

  kill(signal) {
    const num = validate.signal(signal)
    const run = this.#run
    if (run === null || run.exited || this.#state === 'backoff') return false
    const name = validate.signalName(num) ?? String(num)
    if (run.child !== null) {
      run.sent.add(name)
      return run.child.kill(num)
    }
    if (run.adopted !== null) {
      const { pid, identity } = run.adopted
      // Not our child: its pid may be reused the moment it exits. Signalled
      // through a pidfd checked against the identity where there is one.
      if (typeof native.signalIdentified === 'function') {
        run.sent.add(name)
        try {
          return callNative(native.signalIdentified, pid, identity, num)
        } catch {
          return false
        }
      }
      if (!isRunning(pid, identity)) return false
      run.sent.add(name)
      try {
        process.kill(pid, num)
        return true
      } catch {
        return false
      }
    }
    return false
  }

  async [asyncDispose]() {
    await this.stop()
  }

  // ---- the machine ----

  /** Takes `event` from the current state, if the table allows it. */
  #go(event) {
    const next = TRANSITIONS[this.#state][event]
    if (next === undefined) return false
    this.#state = next
    this.#since = nowIso()
    this.#writeState()
    return true
  }

  #emit(event, ...args) {
    try {
      this.emit(event, ...args)
    } catch (err) {
      // A throwing listener surfaces as an uncaught exception, as for any
      // emitter, but never leaves the machine half-way through a step.
      process.nextTick(() => {
        throw err
      })
    }
  }

  #nextReady() {
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }))
  }

  /** Resolves (err null) or rejects every start()/restart() waiter. */
  #settle(value, err) {
    const waiters = this.#waiters
    this.#waiters = []
    for (const w of waiters) {
      if (err) w.reject(err)
      else w.resolve(value)
    }
  }

  #newRun() {
    return {
      child: null,
      adopted: null,
      /** Aborted when this attempt ends or is given up: ready checks stop. */
      ac: new AbortController(),
      /** Set when our own stop() or restart() ends it. */
      expected: false,
      exited: false,
      /** Signal names sent through kill(): an exit by one is not a failure. */
      sent: new Set(),
      readyFailure: null,
      readyAt: null,
      record: null,
      /** Adopted: resolves once the orphan's exit has been handled. */
      adoptedDone: null,
      waitAc: null,
    }
  }

  async #boot(epoch) {
    try {
      if (this.#lock === null || this.#lock.released) {
        this.#lock = await lock().acquireLock(`${this.#o.stateFile}.lock`, {
          purpose: `procward supervisor ${this.#o.name}`,
        })
      }
      if (epoch !== this.#epoch) return
      await removeStaleTemps(this.#o.stateFile)
      // Until the previous record has been acted on, nothing overwrites it:
      // a stop or a failure before then leaves it for the next successor.
      await this.#takeover(epoch)
      if (epoch !== this.#epoch) return
      this.#recordOwned = true
      this.#writeState()
      if (epoch !== this.#epoch || this.#state !== 'starting' || this.#run !== null) return
      this.#spawn()
    } catch (err) {
      if (epoch !== this.#epoch || this.#state !== 'starting') return
      this.#end('fail', err)?.()
    } finally {
      this.#booting = null
    }
  }

  async #takeover(epoch) {
    const file = await readRecordFile(this.#o.stateFile)
    if (file === null) return
    if (file.untrusted) {
      this.#warnRecord(`${file.untrusted}`)
      return
    }
    const prev = parseRecord(file.text)
    const c = prev?.child
    if (!c) return
    const alive = isRunning(c.pid, c.identity)
    const refused = alive ? untouchable(c.pid) : null
    if (refused !== null) {
      this.#warnRecord(`it names pid ${c.pid}, and ${refused}`)
      return
    }
    if (epoch !== this.#epoch) return // stopped before acting: the record stays for the next one
    if (alive && this.#o.takeover === 'adopt') {
      this.#adopt(c)
      return
    }
    let result = null
    if (alive) {
      const info = (() => {
        try {
          return callNative(native.getProcessInfo, c.pid)
        } catch {
          return null
        }
      })()
      const target = { identity: c.identity, group: info !== null && info.pgid === c.pid }
      this.#takingOver = { pid: c.pid, target }
      try {
        result = await stopSupervisedProcess(c.pid, { ...this.#o.stopDefaults, ...target })
      } finally {
        this.#takingOver = null
      }
    }
    let swept = { killed: [], suspects: [] }
    const aliveAtMs = Date.parse(c.aliveAt)
    // (No stray sweep where the platform has no /proc scan of its own.)
    const canSweep = typeof native.sweepStrays === 'function'
    // A recorded cgroup holds every member, however far it strayed from the
    // group: killing it leaves no stray to sweep (and one already removed
    // had no member left).
    const cgroupKilled = await killRecordedCgroup(c.cgroup, this.#o.stopDefaults.killTimeoutMs)
    if (
      cgroupKilled === null &&
      canSweep &&
      c.pgid !== null &&
      c.session !== null &&
      c.session >= 0 &&
      Number.isFinite(aliveAtMs)
    ) {
      try {
        swept = await native.sweepStrays(
          { pgid: c.pgid, session: c.session, identity: c.identity, aliveAtMs },
          this.#o.stopDefaults.killTimeoutMs ?? 2000,
        )
      } catch (err) {
        throw fromNative(err)
      }
    }
    if (alive || cgroupKilled === true || swept.killed.length > 0 || swept.suspects.length > 0) {
      this.#emit('takeover', {
        pid: c.pid,
        identity: c.identity,
        action: 'stopped',
        result,
        suspects: swept.suspects,
      })
    }
  }

  /** A previous record not acted on: said once, then overwritten by ours. */
  #warnRecord(why) {
    process.emitWarning(`procward: not taking over from ${this.#o.stateFile}: ${why}`, {
      code: 'PROCWARD_STATE_FILE',
    })
  }

  /** Keeps a dead predecessor's still-running child as ours (takeover 'adopt'). */
  #adopt(c) {
    const run = this.#newRun()
    run.adopted = Object.freeze({ pid: c.pid, identity: c.identity, pgid: c.pgid })
    run.record = {
      pid: c.pid,
      identity: c.identity,
      pgid: c.pgid,
      session: c.session,
      command: c.command,
      args: c.args,
      startedAt: c.startedAt,
      cgroup: c.cgroup ?? null,
    }
    run.waitAc = new AbortController()
    this.#run = run
    this.#recordOwned = true
    this.#startedAt = c.startedAt ?? null
    run.adoptedDone = waitForExit(c.pid, { identity: c.identity, signal: run.waitAc.signal }).then(
      async (r) => {
        // The leader's exit ends its cgroup, as for a child of our own:
        // nothing it started runs on into the next attempt.
        await killRecordedCgroup(c.cgroup, this.#o.stopDefaults.killTimeoutMs).catch(noop)
        const info = exitInfo({ pid: c.pid, code: r.exit?.code, signal: r.exit?.signal })
        this.#exited(run, info, 'exit')
      },
      noop, // aborted: an unkillable orphan we stopped waiting for
    )
    if (!this.#go('adopt')) return
    run.readyAt = performance.now()
    this.#readyAt = nowIso()
    this.#settleLater(run)
    this.#emit('takeover', { pid: c.pid, identity: c.identity, action: 'adopted', result: null, suspects: [] })
    this.#settle(undefined, null)
  }

  #spawn() {
    const run = this.#newRun()
    this.#run = run
    let child
    try {
      child = spawnSupervised(this.#o.command, this.#args, spawnOptions(this.#o, this.#env))
    } catch (err) {
      // Containment asked for where it cannot be had: no restart can
      // change that, and running uncontained is never a silent fallback.
      if (err?.code === 'ERR_CGROUP_UNAVAILABLE') {
        setImmediate(() => {
          if (this.#run === run) this.#end('fail', err)?.()
        })
        return
      }
      // Counted as a crash (a missing command fails every time, and ends
      // in a crash loop), handled on the next turn so a zero backoff never
      // recurses.
      setImmediate(() => this.#exited(run, null, 'spawn', err))
      return
    }
    run.child = child
    const startedAt = nowIso()
    this.#startedAt = startedAt
    let st = null
    try {
      st = native.procStat?.(child.pid) ?? native.procStat?.(process.pid) ?? null
    } catch {
      // read /proc failed: no session, so no stray sweep for this record
    }
    run.record = {
      pid: child.pid,
      identity: child.identity,
      pgid: child.pgid,
      session: st?.session ?? null,
      command: this.#o.command,
      args: [...this.#args],
      startedAt,
      cgroup: child[CGROUP_RECORD] ?? null,
    }
    child.once('exit', (info) => this.#exited(run, info, 'exit'))
    this.#pipeLines(run)
    this.#writeState()
    this.#emit('spawn', child)
    if (this.#run === run && !run.ac.signal.aborted) this.#checkReady(run)
  }

  #pipeLines(run) {
    if (this.#o.ready?.kind !== 'line') return
    const kind = this.#o.ready.stream
    const stream = run.child[kind]
    if (stream === null) return
    stream.setEncoding('utf8')
    let buf = ''
    stream.on('data', (chunk) => {
      buf += chunk
      let nl = buf.indexOf('\n')
      while (nl >= 0) {
        this.#line(run, kind, buf.slice(0, nl))
        buf = buf.slice(nl + 1)
        nl = buf.indexOf('\n')
      }
      if (buf.length > MAX_LINE) {
        this.#line(run, kind, buf)
        buf = ''
      }
    })
    stream.on('end', () => {
      if (buf.length > 0) this.#line(run, kind, buf)
      buf = ''
    })
    stream.on('error', noop)
  }

  #line(run, kind, line) {
    // "\r\n" ends a line too (as readline reads it): the \r is not the line's.
    if (line.endsWith('\r')) line = line.slice(0, -1)
    run.onLine?.(line)
    if (this.listenerCount(kind) > 0) this.#emit(kind, line)
    else (kind === 'stdout' ? process.stdout : process.stderr).write(`${line}\n`)
  }

  #checkReady(run) {
    const ready = this.#o.ready
    if (ready === null) {
      this.#becameReady(run)
      return
    }
    const { signal } = run.ac
    let timedOut = false
    let timer = null
    if (this.#o.readyTimeoutMs !== false) {
      timer = setTimeout(() => {
        timedOut = true
        run.ac.abort()
      }, this.#o.readyTimeoutMs)
    }
    let check
    switch (ready.kind) {
      case 'port':
        check = portReady(run.child, ready.port, ready.host, signal)
        break
      case 'line':
        check = new Promise((resolve, reject) => {
          run.onLine = (line) => {
            if (ready.match(line)) {
              run.onLine = null
              resolve()
            }
          }
          signal.addEventListener('abort', () => reject(abortError(signal)), { once: true })
        })
        break
      case 'notify':
        check = notifyReady(run.child[NOTIFY_STREAM], signal)
        break
      default:
        check = Promise.resolve().then(() => ready.fn(run.child, signal))
    }
    check.then(
      () => {
        clearTimeout(timer)
        if (this.#run === run && !signal.aborted) this.#becameReady(run)
      },
      (err) => {
        clearTimeout(timer)
        if (this.#run !== run || run.exited || run.expected) return
        const why = timedOut
          ? supervisorError('ERR_READY_TIMEOUT', `${this.#o.name} was not ready within ${this.#o.readyTimeoutMs} ms`)
          : supervisorError('ERR_READY_FAILED', `${this.#o.name}'s ready check failed: ${err?.message ?? err}`, {
              cause: err,
            })
        this.#readyFailed(run, why)
      },
    )
  }

  /** A failed ready check counts as a crash: the child is stopped, and its exit decides. */
  #readyFailed(run, err) {
    run.readyFailure = err
    run.ac.abort()
    if (run.child !== null) run.child.stop(this.#o.stopDefaults).catch(noop)
  }

  #becameReady(run) {
    if (!this.#go('ready')) return
    run.readyAt = performance.now()
    this.#readyAt = nowIso()
    this.#settleLater(run)
    this.#settle(undefined, null)
    this.#emit('ready', run.child)
  }

  /**
   * Once a child has stayed ready `resetAfterMs`, the backoff count starts
   * again, and the record is rewritten: its `aliveAt` then vouches for every
   * worker the daemon started in its first `resetAfterMs` (see the stray
   * sweep). The timer does not hold the process open.
   */
  #settleLater(run) {
    const t = setTimeout(() => {
      if (this.#run !== run || run.exited || this.#state !== 'running') return
      this.#attempt = 0
      this.#writeState()
    }, this.#o.backoff.resetAfterMs)
    t.unref()
    run.ac.signal.addEventListener('abort', () => clearTimeout(t), { once: true })
  }

  /** A child's (or adopted orphan's) exit, or a spawn that failed (info null). */
  #exited(run, info, why, spawnError) {
    if (run.exited) return
    run.exited = true
    run.ac.abort()
    if (info !== null) this.#lastExit = info
    let then = null
    if (run === this.#run && !run.expected) {
      this.#run = null
      // The state moves on before 'exit' is heard: it is never `running`
      // while no child runs, not even inside an 'exit' listener.
      then = this.#decide(run, info, why, spawnError)
    }
    if (info !== null) this.#emit('exit', { ...info, expected: run.expected })
    then?.()
  }

  /**
   * After an exit we did not cause: restart, or end. Takes the transition
   * now and returns what follows it ('restart' and the next spawn, or
   * 'failed'/'stopped'), for after the 'exit' event.
   */
  #decide(run, info, why, spawnError) {
    // A child that exits before its ready check passed counts as a crash,
    // whatever its code (unless by a signal sent through kill()).
    const beforeReady = this.#o.ready !== null && run.readyAt === null && run.adopted === null
    let failure
    if (why === 'spawn' || run.readyFailure !== null) failure = true
    else if (info.signal !== null) failure = !run.sent.has(info.signal)
    else failure = info.code !== 0 || beforeReady // null: an adopted orphan's unknown status
    const policy = this.#o.restart
    if (!(policy === 'always' || (policy === 'on-failure' && failure))) {
      if (failure) {
        const cause = run.readyFailure ?? spawnError
        const what = cause ? cause.message : `${describeExit(info)}${beforeReady ? ' before it was ready' : ''}`
        return this.#end(
          'fail',
          supervisorError('ERR_SUPERVISOR_FAILED', `${this.#o.name} ${what}`, {
            cause,
            lastExit: info,
          }),
        )
      }
      return this.#end('finish', null)
    }
    // Monotonic: a wall clock stepped back or forward neither hides nor
    // forgives restarts.
    const now = performance.now()
    const { maxRestarts, windowMs } = this.#o.crashLoop
    this.#window = this.#window.filter((t) => now - t < windowMs)
    if (this.#window.length >= maxRestarts) {
      return this.#end(
        'fail',
        supervisorError(
          'ERR_CRASH_LOOP',
          `${this.#o.name} ${describeExit(info)}; given up after ${this.#window.length} restarts within ${windowMs} ms`,
          { cause: run.readyFailure ?? spawnError, lastExit: info },
        ),
      )
    }
    const b = this.#o.backoff
    if (run.readyAt !== null && now - run.readyAt >= b.resetAfterMs) this.#attempt = 0
    this.#attempt++
    // stepMs 0 times a factor grown to Infinity would be NaN.
    const grown = b.stepMs === 0 ? 0 : b.stepMs * b.factor ** (this.#attempt - 2)
    const delayMs = this.#attempt === 1 ? b.initialMs : Math.min(b.maxMs, grown)
    this.#window.push(now)
    this.#restarts++
    if (!this.#go('crash')) return null
    return () => {
      if (this.#state !== 'backoff') return // an 'exit' listener stopped or restarted it
      this.#emit('restart', { attempt: this.#attempt, delayMs, lastExit: info })
      if (this.#state !== 'backoff') return // a 'restart' listener did
      if (delayMs === 0) this.#retry()
      else {
        this.#timer = setTimeout(() => {
          this.#timer = null
          this.#retry()
        }, delayMs)
      }
    }
  }

  #retry() {
    if (this.#go('retry')) this.#spawn()
  }

  /**
   * The policy ends it: 'fail' (err) or 'finish' (a clean exit). Takes the
   * transition and settles the start() waiters now (a start() called from a
   * listener afterwards is a new one); returns the emit of 'failed' or
   * 'stopped', for the caller to run when its own events are out.
   */
  #end(event, err) {
    this.#clearTimer()
    if (!this.#go(event)) return null
    this.#run = null
    this.#afterEnd()
    if (event === 'fail') {
      this.#settle(null, err)
      return () => this.#emit('failed', err)
    }
    const why = this.#lastExit ? describeExit(this.#lastExit) : 'ended'
    this.#settle(null, supervisorError('ERR_SUPERVISOR_STOPPED', `${this.#o.name} ${why} and is not restarted`))
    return () => this.#emit('stopped', null)
  }

  /** Stopped or failed: the last record written, then the lock released. */
  #afterEnd() {
    signalled.delete(this)
    syncSignalListeners()
    const written = this.#writer ?? Promise.resolve()
    return written.then(() => {
      if ((this.#state === 'stopped' || this.#state === 'failed') && this.#lock !== null) {
        this.#lock.release()
        this.#lock = null
        this.#recordOwned = false
      }
    })
  }

  /** Stops an attempt's child or adopted orphan, waiting for its exit. */
  async #retire(run, opts) {
    if (run.child !== null) return run.child.stop(opts)
    if (run.adopted !== null) {
      const { pid, identity, pgid } = run.adopted
      const result = await stopSupervisedProcess(pid, { ...opts, identity, group: pgid === pid })
      if (result.outcome === 'unkillable') run.waitAc.abort()
      else await run.adoptedDone
      return result
    }
    return null
  }

  async #stopFlow(opts) {
    // Nothing before this await: with no child and no boot to wait for, the
    // whole flow would otherwise run inside stop(), clear #stopping before
    // stop() set it, and leave every later stop() returning this one.
    await null
    let result = null
    let error = null
    try {
      if (this.#booting !== null) await this.#booting
      const run = this.#run
      if (run !== null) result = await this.#retire(run, opts)
    } catch (err) {
      error = err
    }
    this.#run = null
    this.#go('stopped')
    this.#stopping = null
    await this.#afterEnd()
    this.#emit('stopped', result)
    if (error !== null) throw error
    return result
  }

  /** A second stop() while stopping: pass on what it asks for more. */
  #escalate(opts) {
    const run = this.#run
    const kill = opts.signal === 'SIGKILL' || opts.signal === 9
    if (run === null) {
      // Still taking over: the predecessor's orphan gets it (a stop of the
      // same target joins the one under way and escalates it).
      const t = this.#takingOver
      if (t !== null) stopSupervisedProcess(t.pid, { ...this.#o.stopDefaults, ...opts, ...t.target }).catch(noop)
      return
    }
    if (run.child !== null) {
      run.child.stop(opts).catch(noop)
      if (kill) run.child.kill('SIGKILL')
    } else if (run.adopted !== null && kill) {
      const { pid, identity, pgid } = run.adopted
      stopSupervisedProcess(pid, { signal: 'SIGKILL', identity, group: pgid === pid }).catch(noop)
    }
  }

  #clearTimer() {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
  }

  #stopOptions(options) {
    if (options === undefined) return { ...this.#o.stopDefaults }
    checkStop(options, 'options')
    return { ...this.#o.stopDefaults, ...options }
  }

  #restartOptions(options) {
    if (options === undefined) return {}
    object(options, 'options')
    knownKeys(options, ['args', 'env'], 'options')
    const o = {}
    if (options.args !== undefined) o.args = stringArray(options.args, 'options.args')
    if (options.env !== undefined) {
      o.env = envOption(options.env, 'options.env')
      checkSpawnOptions(spawnOptions(this.#o, o.env))
    }
    return o
  }

  #apply(o) {
    if (o.args !== undefined) this.#args = o.args
    if (o.env !== undefined) this.#env = o.env
  }

  // ---- the state file ----

  #record() {
    const run = this.#run
    const live = run !== null && !run.exited && run.record !== null
    return {
      version: 1,
      name: this.#o.name,
      supervisor: { pid: process.pid, identity: this.#ownIdentity(), running: true },
      child: live ? { ...run.record, aliveAt: nowIso(), running: true } : null,
      state: this.#state,
      restarts: this.#restarts,
      lastExit: this.#lastExit,
      updatedAt: nowIso(),
    }
  }

  #ownIdentity() {
    if (this.#identity === null) {
      try {
        this.#identity = callNative(native.getProcessInfo, process.pid)?.identity ?? ''
      } catch {
        this.#identity = ''
      }
    }
    return this.#identity
  }

  /**
   * Schedules a rewrite of the stateFile: serialized, the latest state
   * winning (the record is taken when the write begins, so a burst of
   * changes costs one write after the one in flight). Only while the lock
   * is held. Resolves when written.
   */
  #writeState() {
    if (this.#o.stateFile === null || !this.#recordOwned) return Promise.resolve()
    this.#dirty = true
    this.#writer ??= Promise.resolve().then(() => this.#drain())
    return this.#writer
  }

  async #drain() {
    try {
      while (this.#dirty && this.#recordOwned) {
        this.#dirty = false
        const text = `${JSON.stringify(this.#record(), null, 2)}\n`
        try {
          await writeAtomic(this.#o.stateFile, text)
          this.#retryMs = 0
        } catch (err) {
          if (!this.#warnedWrite) {
            this.#warnedWrite = true
            process.emitWarning(`procward: cannot write ${this.#o.stateFile}: ${err.message}`, {
              code: 'PROCWARD_STATE_FILE',
            })
          }
          this.#retryLater()
        }
      }
    } finally {
      this.#writer = null
    }
  }

  /**
   * A write failed (ENOSPC, EACCES, EIO...): tried again later, 100 ms
   * doubling to 30 s, so the record catches up once the disk has room —
   * left stale, it would name a child long gone to a successor, and not
   * the one running. The timer does not hold the process open.
   */
  #retryLater() {
    if (this.#retryTimer !== null) return
    this.#retryMs = Math.min(Math.max(this.#retryMs * 2, 100), 30_000)
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = null
      this.#writeState()
    }, this.#retryMs)
    this.#retryTimer.unref()
  }
}

/**
 * Kills a recorded cgroup whole (`cgroup.kill`, then waits up to
 * `killTimeoutMs` for it to empty and removes it), if it is still the one
 * recorded: same id, a name procward gives. True: killed; false: gone, or
 * not ours; null: no cgroup recorded.
 */
async function killRecordedCgroup(cg, killTimeoutMs = 2000) {
  if (cg === null || typeof cg !== 'object' || typeof cg.path !== 'string' || !Number.isSafeInteger(cg.id)) {
    return null
  }
  if (typeof native.killRecordedCgroup !== 'function') return false
  try {
    return await native.killRecordedCgroup(cg.path, cg.id, killTimeoutMs)
  } catch (err) {
    throw fromNative(err)
  }
}

module.exports = { Supervisor, readSupervisorState, TRANSITIONS, killRecordedCgroup, untouchable, untrustedStat }
