// SupervisorOptions, checked and normalised once, in the constructor; the
// options of stop() and restart(); and the spawnSupervised options of one
// attempt. The shapes themselves (strings, durations, keys) are
// ../validate.js's, shared with spawnSupervised.

const path = require('node:path')
const { isMainThread } = require('node:worker_threads')
const { rangeError, typeError } = require('../errors')
const validate = require('../validate')
const { checkSpawnOptions, nativeStopOptions, NOTIFY_FD, notifyFd, SPAWN_KEYS, STOP_KEYS } = require('../supervised')
const { checkNotifyReady } = require('./notify')
const { MARK_VAR } = require('./state-file')

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
  throw typeError(
    'options.ready must be { port, host? }, { stdout }, { stderr }, { notifyFd }, { notify: true } or a function',
    'ERR_INVALID_ARG_VALUE',
  )
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
    maxRestarts: validate.integer(
      c.maxRestarts ?? DEFAULTS.crashLoop.maxRestarts,
      'options.crashLoop.maxRestarts',
      0,
      validate.DURATION_MAX,
    ),
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
    handle = { hup: validate.oneOf(value.hup, ['stop', 'forward'], 'options.handleSignals.hup', null) }
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
    stateFile:
      options.stateFile === undefined
        ? null
        : path.resolve(validate.nonEmptyString(options.stateFile, 'options.stateFile')),
    takeover: validate.oneOf(options.takeover, ['stop', 'adopt'], 'options.takeover', DEFAULTS.takeover),
    handleSignals: checkHandleSignals(options.handleSignals),
  }
  // The spawn options themselves, checked now rather than at the first
  // spawn (the native options builder checks everything, starts nothing).
  checkSpawnOptions(spawnOptions(opts, undefined))
  return opts
}

/**
 * The spawnSupervised options of one attempt (forcing what a ready check
 * needs); with a `mark`, the child's environment carries it (see MARK_VAR),
 * and with `notifyIn` (notify.js) its NOTIFY_SOCKET.
 */
function spawnOptions(opts, env, mark = null, notifyIn = null) {
  const o = { ...opts.spawn }
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
  if (options === undefined) return { ...opts.stopDefaults }
  checkStop(options, 'options')
  return { ...opts.stopDefaults, ...options }
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

/** setChildStatus()'s argument: a string (cut at STATUS_MAX characters), or null. */
function checkChildStatus(value) {
  if (value === null) return null
  if (typeof value !== 'string') throw typeError(`status must be a string or null, got ${validate.describe(value)}`)
  return value.length > STATUS_MAX ? value.slice(0, STATUS_MAX) : value
}

module.exports = { checkOptions, spawnOptions, stopOptions, restartOptions, checkMeta, checkChildStatus }
