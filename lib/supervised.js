// SupervisedProcess: the JS face (EventEmitter, streams, AbortSignal) over
// the native child handle. The native side owns the exit watch and the
// reap; this side only reports what it was told.

const { EventEmitter } = require('node:events')
const fs = require('node:fs')
const net = require('node:net')
const { isMainThread } = require('node:worker_threads')
const native = require('../binding.js')
const { callNative, fromNative, rangeError, typeError } = require('./errors')
const validate = require('./validate')

const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')

// The exit may be watched on the JS thread's own libuv loop only in Node
// itself: Bun (and Deno) export libuv's symbols as aborting stubs, so the
// native side cannot tell by looking them up.
const IS_NODE = typeof process.versions.node === 'string' && !process.versions.bun && !process.versions.deno

// Recognises a SupervisedProcess from another copy of this package too (two
// versions in one node_modules tree), as execa brands its errors.
const SUPERVISED_BRAND = Symbol.for('procward.supervised')

// Package-internal spawn option and stream (the Supervisor's `notifyFd`
// ready check): a pipe whose write end is this fd number in the child.
const NOTIFY_FD = Symbol.for('procward.notifyFd')
const NOTIFY_STREAM = Symbol.for('procward.notifyStream')

const STOP_DEFAULTS = Object.freeze({ signal: 'SIGTERM', graceMs: 5000, killTimeoutMs: 2000 })

function abortError(signal) {
  const err = new Error('The operation was aborted', { cause: signal?.reason })
  err.name = 'AbortError'
  err.code = 'ABORT_ERR'
  return err
}

/** Validated StopOptions → the native shape (plus identity, for bare pids). */
function nativeStopOptions(options, defaults = STOP_DEFAULTS) {
  if (options !== undefined && (options === null || typeof options !== 'object')) {
    throw typeError(`options must be an object, got ${validate.describe(options)}`)
  }
  const o = { ...defaults, ...(options ?? {}) }
  return {
    native: {
      signal: validate.signal(o.signal ?? 'SIGTERM', 'options.signal'),
      graceMs: validate.duration(o.graceMs, 'options.graceMs', STOP_DEFAULTS.graceMs),
      killTimeoutMs: validate.duration(o.killTimeoutMs, 'options.killTimeoutMs', STOP_DEFAULTS.killTimeoutMs),
      group: validate.optionalBoolean(o.group, 'options.group'),
    },
    identity: validate.optionalString(o.identity, 'options.identity'),
  }
}

function stdioEntry(value, i) {
  if (value === 'ignore' || value === 'inherit' || value === 'pipe') return { kind: value }
  if (value !== null && typeof value === 'object' && typeof value.file === 'string') {
    if (value.file.length === 0 || value.file.includes('\0')) {
      throw typeError(`stdio[${i}].file must be a non-empty path without NUL`, 'ERR_INVALID_ARG_VALUE')
    }
    return { kind: 'file', path: value.file, append: validate.optionalBoolean(value.append, `stdio[${i}].append`) }
  }
  throw typeError(
    `stdio[${i}] must be 'ignore', 'inherit', 'pipe' or { file, append? }, got ${validate.describe(value)}`,
    'ERR_INVALID_ARG_VALUE',
  )
}

function noNul(value, name) {
  if (typeof value !== 'string') throw typeError(`${name} must be a string, got ${validate.describe(value)}`)
  if (value.includes('\0')) throw typeError(`${name} must not contain NUL bytes`, 'ERR_INVALID_ARG_VALUE')
  return value
}

function nativeSpawnOptions(options) {
  if (options !== undefined && (options === null || typeof options !== 'object')) {
    throw typeError(`options must be an object, got ${validate.describe(options)}`)
  }
  const o = options ?? {}
  const cwd = o.cwd === undefined ? undefined : noNul(o.cwd, 'options.cwd')
  // No env given: on the main thread process.env *is* the process
  // environment (Node writes it through to environ), so the native side
  // reads environ itself and skips converting process.env on every spawn.
  // A worker's process.env is its own copy, so there it is passed along.
  const inheritEnv = o.env === undefined && isMainThread
  const env = o.env === undefined ? (inheritEnv ? {} : process.env) : o.env
  if (env === null || typeof env !== 'object') {
    throw typeError(`options.env must be an object, got ${validate.describe(env)}`)
  }
  const envKeys = []
  const envValues = []
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) continue
    if (k.length === 0 || k.includes('=') || k.includes('\0')) {
      throw typeError(
        `options.env key ${JSON.stringify(k)} must be non-empty, without '=' or NUL`,
        'ERR_INVALID_ARG_VALUE',
      )
    }
    envKeys.push(k)
    envValues.push(noNul(v, `options.env.${k}`))
  }
  let stdio = o.stdio ?? ['ignore', 'inherit', 'inherit']
  if (!Array.isArray(stdio)) stdio = [stdio, stdio, stdio]
  if (stdio.length !== 3) {
    throw typeError('options.stdio must be one option or an array of three', 'ERR_INVALID_ARG_VALUE')
  }
  const processGroup = validate.optionalBoolean(o.processGroup, 'options.processGroup') ?? true
  const killGroupOnExit = validate.optionalBoolean(o.killGroupOnExit, 'options.killGroupOnExit') ?? true
  let deathSignal = 0
  if (o.parentDeathSignal === undefined) deathSignal = validate.signal('SIGKILL')
  else if (o.parentDeathSignal !== false)
    deathSignal = validate.signal(o.parentDeathSignal, 'options.parentDeathSignal')
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) {
    throw typeError(`options.signal must be an AbortSignal, got ${validate.describe(o.signal)}`)
  }
  // Check the stop defaults now, so a bad one fails the spawn, not a later stop.
  nativeStopOptions(o.stop)
  const notifyFd = o[NOTIFY_FD]
  if (notifyFd !== undefined && (!Number.isInteger(notifyFd) || notifyFd < 3 || notifyFd > 65535)) {
    throw rangeError(`notifyFd must be an integer in 3..=65535, got ${notifyFd}`)
  }
  return {
    native: {
      cwd,
      inheritEnv,
      envKeys,
      envValues,
      stdio: stdio.map(stdioEntry),
      processGroup,
      killGroupOnExit: processGroup && killGroupOnExit,
      deathSignal,
      notifyFd,
      useLoop: IS_NODE,
    },
    stopDefaults: { ...STOP_DEFAULTS, ...(o.stop ?? {}) },
    abortSignal: o.signal,
  }
}

function pipeStream(fd, n) {
  if (fd < 0) return null
  // Node: a non-blocking libuv pipe, as child_process uses. Bun's net.Socket
  // cannot adopt an fd, and its fs streams read pipes without a threadpool.
  if (IS_NODE) return new net.Socket({ fd, readable: n !== 0, writable: n === 0 })
  return n === 0 ? fs.createWriteStream(null, { fd }) : fs.createReadStream(null, { fd })
}

class SupervisedProcess extends EventEmitter {
  #native
  #pid
  #exitInfo = null
  #exited
  #resolveExited
  #stopping = null
  #stopDefaults
  #abort = null
  #stdio
  #notify

  /** @internal Use spawnSupervised(). */
  constructor(handle, stopDefaults, abortSignal) {
    super()
    this.#native = handle
    this.#pid = handle.pid
    this.#stopDefaults = stopDefaults
    this.#exited = new Promise((resolve) => {
      this.#resolveExited = resolve
    })
    const [stdin, stdout, stderr, notify] = handle.takePipes()
    this.#stdio = [stdin, stdout, stderr].map(pipeStream)
    this.#notify = pipeStream(notify, 3)
    if (abortSignal) {
      const onAbort = () => {
        this.stop().catch(() => {})
      }
      abortSignal.addEventListener('abort', onAbort, { once: true })
      this.#abort = () => abortSignal.removeEventListener('abort', onAbort)
    }
  }

  /** @internal Called once by the native watcher after the reap. */
  _onNativeExit(info) {
    this.#markExited(info)
  }

  #markExited(info) {
    if (this.#exitInfo !== null) return
    this.#exitInfo = Object.freeze({ pid: this.#pid, code: info.code ?? null, signal: info.signal ?? null })
    this.#abort?.()
    this.#abort = null
    this.#resolveExited(this.#exitInfo)
    this.emit('exit', this.#exitInfo)
  }

  get pid() {
    return this.#pid
  }
  get pgid() {
    return this.#native.pgid ?? null
  }
  get identity() {
    return this.#native.identity
  }
  /** 'pidfd' | 'pidfd-tokio' | 'fallback' */
  get exitWatch() {
    return this.#native.backend
  }
  get exited() {
    return this.#exited
  }
  get exitInfo() {
    if (this.#exitInfo !== null) return this.#exitInfo
    const s = this.#native.exitStatus()
    return s ? Object.freeze({ pid: this.#pid, code: s.code ?? null, signal: s.signal ?? null }) : null
  }
  get stdin() {
    return this.#stdio[0]
  }
  get stdout() {
    return this.#stdio[1]
  }
  get stderr() {
    return this.#stdio[2]
  }

  kill(signal = 'SIGTERM') {
    const num = validate.signal(signal)
    return callNative(() => this.#native.kill(num))
  }

  stop(options) {
    let opts
    try {
      opts = nativeStopOptions(options, this.#stopDefaults)
    } catch (err) {
      return Promise.reject(err)
    }
    // Reaped natively, even if the 'exit' event is still on its way.
    const exit = this.exitInfo
    if (exit !== null) return Promise.resolve({ outcome: 'already-exited', signals: [], elapsedMs: 0, exit })
    if (this.#stopping) return this.#stopping
    const stopping = this.#native.stop(opts.native).then(
      (r) => {
        if (r.exit) this.#markExited(r.exit)
        return { outcome: r.outcome, signals: r.signals, elapsedMs: r.elapsedMs, exit: this.#exitInfo }
      },
      (err) => {
        throw fromNative(err)
      },
    )
    this.#stopping = stopping
    const clear = () => {
      if (this.#stopping === stopping) this.#stopping = null
    }
    stopping.then(clear, clear)
    return stopping
  }

  ref() {
    this.#native.ref()
    return this
  }

  unref() {
    this.#native.unref()
    return this
  }

  async [asyncDispose]() {
    await this.stop()
  }

  /** @internal The read end of the notify pipe (see NOTIFY_FD), or null. */
  get [NOTIFY_STREAM]() {
    return this.#notify
  }

  get [SUPERVISED_BRAND]() {
    return true
  }
}

function spawnSupervised(command, args, options) {
  if (typeof command !== 'string' || command.length === 0) {
    throw typeError(`command must be a non-empty string, got ${validate.describe(command)}`, 'ERR_INVALID_ARG_VALUE')
  }
  noNul(command, 'command')
  if (args === undefined || args === null) args = []
  if (!Array.isArray(args)) throw typeError(`args must be an array of strings, got ${validate.describe(args)}`)
  for (const [i, a] of args.entries()) noNul(a, `args[${i}]`)
  const opts = nativeSpawnOptions(options)
  if (opts.abortSignal?.aborted) throw abortError(opts.abortSignal)

  let proc = null
  let early = null
  const onExit = (info) => {
    if (proc) proc._onNativeExit(info)
    else early = info
  }
  let handle
  try {
    handle = native.spawnSupervised(command, [...args], opts.native, onExit)
  } catch (err) {
    const e = fromNative(err)
    if (typeof e.code === 'string' && e.code.startsWith('E') && !e.code.startsWith('ERR_')) {
      e.path = command
      e.spawnargs = [...args]
    }
    throw e
  }
  proc = new SupervisedProcess(handle, opts.stopDefaults, opts.abortSignal)
  if (early) proc._onNativeExit(early)
  return proc
}

async function stopSupervisedProcess(target, options) {
  if (
    target instanceof SupervisedProcess ||
    (target !== null && typeof target === 'object' && target[SUPERVISED_BRAND] === true)
  ) {
    return target.stop(options)
  }
  validate.targetPid(target, 'target')
  const opts = nativeStopOptions(options)
  try {
    const r = await native.stopPid(target, opts.native, opts.identity)
    return { outcome: r.outcome, signals: r.signals, elapsedMs: r.elapsedMs, exit: null }
  } catch (err) {
    throw fromNative(err)
  }
}

module.exports = {
  SupervisedProcess,
  spawnSupervised,
  stopSupervisedProcess,
  abortError,
  nativeStopOptions,
  checkSpawnOptions: nativeSpawnOptions,
  NOTIFY_FD,
  NOTIFY_STREAM,
}
