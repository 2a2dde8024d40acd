// SupervisorOptions, checked and normalised once, in the constructor; the
// options of stop() and restart(); and the spawnSupervised options of one
// attempt. The shapes themselves (strings, durations, keys) are
// ../validate.js's, shared with spawnSupervised.

const path = require('node:path')
const { isMainThread } = require('node:worker_threads')
const { brand, rangeError, typeError } = require('../errors')
const validate = require('../validate')
const { checkSpawnOptions, nativeStopOptions, NOTIFY_FD, notifyFd, SPAWN_KEYS, STOP_KEYS } = require('../supervised')
const { LISTEN } = require('../spawn-options')
const { supported: notifySupported } = require('./notify-in')
const sockets = require('./sockets')
const { MARK_VAR } = require('./state-file')

const DEFAULTS = Object.freeze({
  restart: 'always',
  backoff: Object.freeze({ initialMs: 0, stepMs: 100, factor: 2, maxMs: 30_000, resetAfterMs: 10_000 }),
  crashLoop: Object.freeze({ maxRestarts: 5, windowMs: 60_000 }),
  readyTimeoutMs: 30_000,
  takeover: 'stop',
  health: Object.freeze({ intervalMs: 10_000, timeoutMs: 5000, failures: 3, startPeriodMs: 0 }),
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
  'health',
  'stateFile',
  'takeover',
  'handleSignals',
  'notify',
  'meta',
  'listen',
]
// What spawnSupervised takes, but `signal`: a supervisor is stopped with
// stop(), not by aborting one child.
const SUPERVISOR_SPAWN_KEYS = SPAWN_KEYS.filter((k) => k !== 'signal')

/** Milliseconds; `false` too where `allowFalse` (no timeout). */
function ms(value, name, fallback, allowFalse = false) {
  if (allowFalse && value === false) return false
  if (allowFalse && value !== undefined && typeof value !== 'number') {
    throw typeError(`${name} must be a number of milliseconds or false, got ${validate.describe(value)}`)
  }
  return validate.duration(value, name, fallback)
}

/** StopOptions for a child of ours (no identity: the supervisor knows it). */
function checkStop(value, name) {
  if (value === undefined) return {}
  nativeStopOptions(value, undefined, name, STOP_KEYS)
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

/** options.ready.notify: only `true`, and only where the protocol exists (notify-in.js). */
function checkNotifyReady(value, name) {
  if (value !== true) throw typeError(`${name} must be true`, 'ERR_INVALID_ARG_VALUE')
  if (!notifySupported()) {
    const err = new Error(`${name}: the notify protocol needs Linux (unix datagram sockets with SCM_CREDENTIALS)`)
    err.code = 'ERR_NOTIFY_UNAVAILABLE'
    throw brand(err)
  }
  return { kind: 'sd-notify' }
}

/** options.ready → { kind: 'port' | 'line' | 'notify' | 'sd-notify' | 'function', ... }, or null. */
function checkReady(value) {
  if (value === undefined) return null
  if (typeof value === 'function') return { kind: 'function', fn: value }
  validate.object(value, 'options.ready')
  const keys = Object.keys(value)
  if (keys.includes('port')) {
    validate.knownKeys(value, ['port', 'host'], 'options.ready')
    const port = validate.integer(value.port, 'options.ready.port', 1, 65535)
    const host = value.host === undefined ? '127.0.0.1' : validate.nonEmptyString(value.host, 'options.ready.host')
    return { kind: 'port', port, host }
  }
  for (const stream of ['stdout', 'stderr']) {
    if (keys.includes(stream)) {
      validate.knownKeys(value, [stream], 'options.ready')
      return { kind: 'line', stream, match: lineMatcher(value[stream], `options.ready.${stream}`) }
    }
  }
  if (keys.includes('notify')) {
    validate.knownKeys(value, ['notify'], 'options.ready')
    return checkNotifyReady(value.notify, 'options.ready.notify')
  }
  if (keys.includes('notifyFd')) {
    validate.knownKeys(value, ['notifyFd'], 'options.ready')
    return { kind: 'notify', fd: notifyFd(value.notifyFd, 'options.ready.notifyFd') }
  }
  if (keys.includes('http')) {
    validate.knownKeys(value, ['http', 'status'], 'options.ready')
    return checkHttp(value, 'options.ready')
  }
  throw typeError(
    'options.ready must be { port, host? }, { http, status? }, { stdout }, { stderr }, { notifyFd }, { notify: true } or a function',
    'ERR_INVALID_ARG_VALUE',
  )
}

/** A whole number of milliseconds in min..=2^31-1 (a health timer's period), or `fallback`. */
function wholeMs(value, name, min, fallback, why = '') {
  return value === undefined ? fallback : validate.integer(value, name, min, validate.DURATION_MAX, why)
}

/** The largest count taken (failures, restarts): 2^31-1, far past any real one. */
const COUNT_MAX = 2 ** 31 - 1

/** A whole number of things in min..=COUNT_MAX, or `fallback`. */
function count(value, name, min, fallback) {
  return value === undefined ? fallback : validate.integer(value, name, min, COUNT_MAX)
}

/** `{ http, status? }` (keys already checked) → { kind: 'http', url, status }: an http: or https: URL, a status in 100..599 or null (any 2xx). */
function checkHttp(value, name) {
  const text = validate.nonEmptyString(value.http, `${name}.http`)
  let url = null
  try {
    url = new URL(text)
  } catch {
    // worded below
  }
  // A URL that does not parse (a port past 65535, a bad host) is said to
  // be no URL, not to have the wrong scheme.
  const looksHttp = /^https?:/i.test(text)
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw typeError(
      url === null && looksHttp
        ? `${name}.http is not a valid URL (its host or port?), got ${validate.describe(text)}`
        : `${name}.http must be an http: or https: URL, got ${validate.describe(text)}`,
      'ERR_INVALID_ARG_VALUE',
    )
  }
  const status = value.status === undefined ? null : validate.integer(value.status, `${name}.status`, 100, 599)
  return { kind: 'http', url: url.href, status }
}

/** options.health.check → { kind: 'port', port, host } | { kind: 'http', url, status } | { kind: 'function', fn }. */
function checkHealthCheck(value) {
  const name = 'options.health.check'
  if (typeof value === 'function') return { kind: 'function', fn: value }
  const shapes = `${name} must be { port, host? }, { http, status? } or a function (child, signal) => Promise`
  if (value === undefined) throw typeError(`${shapes}, got undefined`, 'ERR_INVALID_ARG_VALUE')
  validate.object(value, name)
  const has = (k) => value[k] !== undefined
  if (has('port') && has('http')) {
    throw typeError(`${name} takes a port or an http URL, not both: choose one`, 'ERR_INVALID_ARG_VALUE')
  }
  if (has('port')) {
    validate.knownKeys(value, ['port', 'host'], name)
    return {
      kind: 'port',
      port: validate.integer(value.port, `${name}.port`, 1, 65535),
      host: value.host === undefined ? '127.0.0.1' : validate.nonEmptyString(value.host, `${name}.host`),
    }
  }
  if (has('http')) {
    validate.knownKeys(value, ['http', 'status'], name)
    return checkHttp(value, name)
  }
  throw typeError(`${shapes}, got an object with neither`, 'ERR_INVALID_ARG_VALUE')
}

/**
 * options.health → null (no checks after ready), or the checks' settings,
 * frozen. timeoutMs defaults to 5000, or half of intervalMs where that is
 * less (so that `{ intervalMs: 1000 }` alone is valid); one given must be
 * less than intervalMs.
 */
function checkHealth(value) {
  if (value === undefined) return null
  const h = validate.object(value, 'options.health')
  validate.knownKeys(h, ['check', ...Object.keys(DEFAULTS.health)], 'options.health')
  const check = checkHealthCheck(h.check)
  const d = DEFAULTS.health
  const intervalMs = wholeMs(
    h.intervalMs,
    'options.health.intervalMs',
    2,
    d.intervalMs,
    ' (above options.health.timeoutMs)',
  )
  const timeoutMs = wholeMs(
    h.timeoutMs,
    'options.health.timeoutMs',
    1,
    Math.min(d.timeoutMs, Math.floor(intervalMs / 2)),
  )
  if (timeoutMs >= intervalMs) {
    throw rangeError(
      `options.health.timeoutMs must be less than options.health.intervalMs (${intervalMs}), got ${timeoutMs}`,
    )
  }
  return Object.freeze({
    ...check,
    intervalMs,
    timeoutMs,
    failures: count(h.failures, 'options.health.failures', 1, d.failures),
    startPeriodMs: wholeMs(h.startPeriodMs, 'options.health.startPeriodMs', 0, d.startPeriodMs),
  })
}

function checkBackoff(value) {
  const b = value === undefined ? {} : validate.object(value, 'options.backoff')
  validate.knownKeys(b, Object.keys(DEFAULTS.backoff), 'options.backoff')
  const factor = b.factor ?? DEFAULTS.backoff.factor
  if (typeof factor !== 'number') {
    throw typeError(`options.backoff.factor must be a number, got ${validate.describe(factor)}`)
  }
  if (!Number.isFinite(factor) || factor < 1 || factor > 1000) {
    throw rangeError(`options.backoff.factor must be 1..1000, got ${String(factor)}`)
  }
  return Object.freeze({
    initialMs: ms(b.initialMs, 'options.backoff.initialMs', DEFAULTS.backoff.initialMs),
    stepMs: ms(b.stepMs, 'options.backoff.stepMs', DEFAULTS.backoff.stepMs),
    factor,
    maxMs: ms(b.maxMs, 'options.backoff.maxMs', DEFAULTS.backoff.maxMs),
    resetAfterMs: ms(b.resetAfterMs, 'options.backoff.resetAfterMs', DEFAULTS.backoff.resetAfterMs),
  })
}

function checkCrashLoop(value) {
  const c = value === undefined ? {} : validate.object(value, 'options.crashLoop')
  validate.knownKeys(c, Object.keys(DEFAULTS.crashLoop), 'options.crashLoop')
  return Object.freeze({
    // null too means the default, as it always has.
    maxRestarts: count(c.maxRestarts ?? undefined, 'options.crashLoop.maxRestarts', 0, DEFAULTS.crashLoop.maxRestarts),
    windowMs: ms(c.windowMs, 'options.crashLoop.windowMs', DEFAULTS.crashLoop.windowMs),
  })
}

/** options.handleSignals → null (not handled) or { hup: null | 'stop' | 'forward' }. */
function checkHandleSignals(value) {
  if (value === undefined || value === false) return null
  let handle
  if (value === true) handle = { hup: null }
  else {
    validate.knownKeys(validate.object(value, 'options.handleSignals'), ['hup'], 'options.handleSignals')
    handle = { hup: validate.oneOf(value.hup, ['stop', 'forward', 'reload'], 'options.handleSignals.hup', null) }
  }
  if (!isMainThread) {
    throw typeError('options.handleSignals works on the main thread only: signals go to the process')
  }
  return handle
}

/** SupervisorOptions → the supervisor's settings (frozen where shared). */
function checkOptions(options) {
  validate.knownKeys(validate.object(options, 'options'), OPTION_KEYS, 'options')
  const command = validate.nonEmptyString(options.command, 'options.command')
  const spawn = options.spawn === undefined ? {} : { ...validate.object(options.spawn, 'options.spawn') }
  if (spawn.signal !== undefined) {
    throw typeError('options.spawn.signal is not an option: stop the supervisor with stop()', 'ERR_INVALID_ARG_VALUE')
  }
  validate.knownKeys(spawn, SUPERVISOR_SPAWN_KEYS, 'options.spawn')
  const opts = {
    command,
    args: options.args === undefined ? Object.freeze([]) : validate.stringArray(options.args, 'options.args'),
    name: options.name === undefined ? path.basename(command) : validate.nonEmptyString(options.name, 'options.name'),
    spawn,
    stopDefaults: checkStop(spawn.stop, 'options.spawn.stop'),
    restart: validate.oneOf(options.restart, ['always', 'on-failure', 'never'], 'options.restart', DEFAULTS.restart),
    backoff: checkBackoff(options.backoff),
    crashLoop: checkCrashLoop(options.crashLoop),
    ready: checkReady(options.ready),
    readyTimeoutMs: ms(options.readyTimeoutMs, 'options.readyTimeoutMs', DEFAULTS.readyTimeoutMs, true),
    health: checkHealth(options.health),
    stateFile:
      options.stateFile === undefined
        ? null
        : path.resolve(validate.nonEmptyString(options.stateFile, 'options.stateFile')),
    takeover: validate.oneOf(options.takeover, ['stop', 'adopt'], 'options.takeover', DEFAULTS.takeover),
    handleSignals: checkHandleSignals(options.handleSignals),
    notify: validate.optionalBoolean(options.notify, 'options.notify') ?? false,
    meta: checkMetaOption(options.meta),
    listen: sockets.checkListen(options.listen),
    adopted: options[sockets.ADOPTED] instanceof sockets.HeldSockets ? options[sockets.ADOPTED] : null,
  }
  checkHeld(opts)
  if (opts.handleSignals?.hup === 'reload' && opts.listen === null && opts.adopted === null) {
    throw typeError(
      "options.handleSignals.hup 'reload' needs options.listen: a reload overlaps two daemons on held sockets",
      'ERR_INVALID_ARG_VALUE',
    )
  }
  // The spawn options themselves, checked now rather than at the first
  // spawn (the native options builder checks everything, starts nothing).
  checkSpawnOptions(spawnOptions(opts, undefined))
  return opts
}

/** What held sockets rule out: a port check on a held address, an adopted daemon, a readiness fd among theirs. */
function checkHeld(opts) {
  if (opts.listen === null && opts.adopted === null) return
  const ports = [
    ...(opts.listen ?? []).filter((e) => e.port !== undefined && e.port !== 0).map((e) => e.port),
    ...(opts.adopted?.ports ?? []),
  ]
  const why =
    'a connect to a held port always succeeds (the kernel queues it until a daemon accepts), so it tells nothing: use { http }, { notify: true }, a line or a function'
  for (const [check, name] of [
    [opts.ready, 'options.ready'],
    [opts.health, 'options.health.check'],
  ]) {
    if (check?.kind === 'port' && sockets.holds(ports, check.port)) {
      throw typeError(`${name} { port: ${check.port} } is a port of options.listen: ${why}`, 'ERR_INVALID_ARG_VALUE')
    }
  }
  if (opts.takeover === 'adopt' && opts.listen !== null) {
    throw typeError(
      "options.listen cannot be combined with takeover: 'adopt': an adopted daemon serves on its own copy of the sockets, which a successor can neither take over nor bind again while it runs",
      'ERR_INVALID_ARG_VALUE',
    )
  }
  const count = opts.listen?.length ?? opts.adopted?.names.length ?? 0
  if (opts.ready?.kind === 'notify' && opts.ready.fd < 3 + count) {
    throw typeError(
      `options.ready.notifyFd ${opts.ready.fd} is one of the held sockets' fds (3..${2 + count}): choose ${3 + count} or above`,
      'ERR_INVALID_ARG_VALUE',
    )
  }
}

/**
 * The spawnSupervised options of one attempt (forcing what a ready check
 * needs); with a `mark`, the child's environment carries it (see MARK_VAR),
 * with `notifyIn` (notify-in.js) its NOTIFY_SOCKET, and with `held` (the
 * held sockets' spawn option, sockets.js) the sockets.
 */
function spawnOptions(opts, env, mark = null, notifyIn = null, held = null) {
  const o = { ...opts.spawn }
  if (held !== null) o[LISTEN] = held
  if (env !== undefined) o.env = env
  if (mark !== null) o.env = { ...(o.env ?? process.env), [MARK_VAR]: mark }
  if (notifyIn !== null) o.env = notifyIn.env(o.env ?? process.env)
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

/** stop()'s options over the spawn's stop defaults. */
function stopOptions(opts, options) {
  return { ...opts.stopDefaults, ...checkStop(options, 'options') }
}

/** restart()'s options: { args?, env? }, checked against the spawn options. */
function restartOptions(opts, options) {
  if (options === undefined) return {}
  validate.knownKeys(validate.object(options, 'options'), ['args', 'env'], 'options')
  const o = {}
  if (options.args !== undefined) o.args = validate.stringArray(options.args, 'options.args')
  if (options.env !== undefined) {
    o.env = { ...validate.object(options.env, 'options.env') }
    checkSpawnOptions(spawnOptions(opts, o.env))
  }
  return o
}

/** A record's `meta` is small: it is rewritten with every state change. */
const META_MAX = 64 * 1024
const STATUS_MAX = 4096

/** setMeta()'s argument: a plain JSON object (copied, so later changes do not leak in), or null. */
function checkMeta(value) {
  if (value === null) return null
  // A Promise is an object, and JSON of it is {}: an async meta function
  // would publish nothing without a word.
  if (typeof value?.then === 'function') {
    throw typeError('meta must be an object or null, got a Promise (meta: a function must return the object itself)')
  }
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw typeError(`meta must be an object or null, got ${validate.describe(value)}`)
  }
  let text
  try {
    text = JSON.stringify(value)
  } catch (err) {
    throw typeError(`meta must be JSON: ${err.message}`, 'ERR_INVALID_ARG_VALUE')
  }
  if (typeof text !== 'string') throw typeError('meta must be JSON (its toJSON gave nothing)', 'ERR_INVALID_ARG_VALUE')
  if (text.length > META_MAX) {
    throw rangeError(`meta must be at most ${META_MAX} characters as JSON, got ${text.length}`)
  }
  return JSON.parse(text)
}

/**
 * options.meta: published with every child once it runs (see the
 * Supervisor's #publishMeta). A function gets the 'running' event's
 * { pid, identity, adopted } and returns the child's meta (checked as
 * setMeta's); an object is checked now and copied for every child. null
 * without one.
 */
function checkMetaOption(value) {
  if (value === undefined || value === null) return null
  if (typeof value === 'function') return value
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw typeError(`options.meta must be an object or a function (child) => object, got ${validate.describe(value)}`)
  }
  const checked = checkMeta(value)
  return () => checked
}

/** setChildStatus()'s argument: a string (cut at STATUS_MAX characters), or null. */
function checkChildStatus(value) {
  if (value === null) return null
  if (typeof value !== 'string') throw typeError(`status must be a string or null, got ${validate.describe(value)}`)
  return value.length > STATUS_MAX ? value.slice(0, STATUS_MAX) : value
}

module.exports = { checkOptions, spawnOptions, stopOptions, restartOptions, checkMeta, checkChildStatus }
