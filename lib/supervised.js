// SupervisedProcess: the JS face (EventEmitter, streams, AbortSignal) over
// the native child handle. The native side owns the exit watch and the
// reap; this side only reports what it was told.

const { EventEmitter } = require('node:events')
const fs = require('node:fs')
const net = require('node:net')
const { isMainThread } = require('node:worker_threads')
const native = require('../binding.js')
const { brand, callNative, errnoText, fromNative, nativeInfo, rangeError, systemError, typeError } = require('./errors')
const validate = require('./validate')

const { abortError } = validate

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
// Package-internal: a contained child's cgroup { path, id } (the Supervisor
// records it in its state file).
const CGROUP_RECORD = Symbol.for('procward.cgroupRecord')

const STOP_DEFAULTS = Object.freeze({ signal: 'SIGTERM', graceMs: 5000, killTimeoutMs: 2000 })

/**
 * Layers of StopOptions, later ones winning. A field set to `undefined`
 * means "not given", as an absent one does (so `{ graceMs: undefined }`
 * keeps the spawn's default rather than erasing it).
 */
function mergeStopOptions(...layers) {
  const out = {}
  for (const layer of layers) {
    if (layer == null) continue
    for (const [k, v] of Object.entries(layer)) if (v !== undefined) out[k] = v
  }
  return out
}

/** StopOptions: what a stop of a child takes; a bare pid's stop takes an identity too. */
const STOP_KEYS = Object.freeze(['signal', 'graceMs', 'killTimeoutMs', 'group'])
const PID_STOP_KEYS = new Set([...STOP_KEYS, 'identity'])

/**
 * Validated StopOptions → the native shape (plus identity, for bare pids).
 * `name` is how the caller knows the object ('options', or 'options.stop'
 * for a spawn's defaults), so an error points at the field actually given.
 */
function nativeStopOptions(options, defaults = STOP_DEFAULTS, name = 'options', keys = PID_STOP_KEYS) {
  if (options !== undefined) validate.knownKeys(validate.object(options, name), keys, name)
  const o = mergeStopOptions(STOP_DEFAULTS, defaults, options)
  return {
    native: {
      signal: validate.signal(o.signal, `${name}.signal`),
      graceMs: validate.duration(o.graceMs, `${name}.graceMs`),
      killTimeoutMs: validate.duration(o.killTimeoutMs, `${name}.killTimeoutMs`),
      group: validate.optionalBoolean(o.group, `${name}.group`),
    },
    identity: validate.optionalString(o.identity, `${name}.identity`),
  }
}

/**
 * A running stop: its promise, and the control through which a later caller
 * escalates it. Shared by every concurrent caller.
 */
function startStop(start, finish) {
  const control = new native.NativeStopControl()
  const promise = callNative(start, control).then(finish, (err) => {
    throw fromNative(err)
  })
  return { promise, control }
}

const STDIO_FILE_KEYS = new Set(['file', 'append'])

function stdioEntry(value, i) {
  if (value === 'ignore' || value === 'inherit' || value === 'pipe') return { kind: value }
  if (value !== null && typeof value === 'object' && typeof value.file === 'string') {
    validate.nonEmptyString(value.file, `stdio[${i}].file`)
    validate.knownKeys(value, STDIO_FILE_KEYS, `stdio[${i}]`)
    return { kind: 'file', path: value.file, append: validate.optionalBoolean(value.append, `stdio[${i}].append`) }
  }
  throw typeError(
    `stdio[${i}] must be 'ignore', 'inherit', 'pipe' or { file, append? }, got ${validate.describe(value)}`,
    'ERR_INVALID_ARG_VALUE',
  )
}

// Every key SpawnSupervisedOptions defines (a Supervisor's `spawn` takes
// them all but `signal`). Anything else is refused: see validate.knownKeys.
const SPAWN_KEYS = Object.freeze([
  'cwd',
  'env',
  'stdio',
  'processGroup',
  'killGroupOnExit',
  'parentDeathSignal',
  'signal',
  'stop',
  'uid',
  'gid',
  'argv0',
  'cgroup',
])

const CGROUP_KEYS = ['parent']

/** `cgroup`: false/undefined, true, or { parent?: absolute path }. */
function cgroupOption(value) {
  if (value === undefined || value === false) return { cgroup: false, cgroupParent: undefined }
  if (value === true) return { cgroup: true, cgroupParent: undefined }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw typeError(`options.cgroup must be a boolean or an object, got ${validate.describe(value)}`)
  }
  const o = validate.knownKeys({ ...value }, CGROUP_KEYS, 'options.cgroup')
  if (o.parent === undefined) return { cgroup: true, cgroupParent: undefined }
  const parent = validate.cString(o.parent, 'options.cgroup.parent')
  if (!parent.startsWith('/') || parent.includes('\n')) {
    throw typeError(
      `options.cgroup.parent must be an absolute path of a cgroup v2 directory, got ${JSON.stringify(parent)}`,
      'ERR_INVALID_ARG_VALUE',
    )
  }
  return { cgroup: true, cgroupParent: parent }
}

/** Options users bring from child_process, with what to do instead. */
const SPAWN_HINTS = {
  shell: "run a shell explicitly: spawnSupervised('sh', ['-c', command])",
  detached: 'the child leads its own process group by default (processGroup)',
}

/** A uid or gid: an integer in 0..=2^32-2 (2^32-1 means "no change" to the kernel). */
function optionalId(value, name) {
  return value === undefined ? undefined : validate.integer(value, name, 0, 2 ** 32 - 2)
}

/** The fd number of the notify pipe's write end in the child (0..2 are stdio). */
function notifyFd(value, name) {
  return validate.integer(value, name, 3, 65535, ' (0..2 are stdio)')
}

function nativeSpawnOptions(options) {
  if (options !== undefined) validate.object(options, 'options')
  // Every option is read exactly once, here: a getter that answers
  // differently on a second read (or throws) cannot make the validated value
  // and the used one differ, nor fail after the child was started.
  const o = { ...(options ?? {}) }
  if (o.stop !== null && typeof o.stop === 'object') o.stop = { ...o.stop }
  validate.knownKeys(o, SPAWN_KEYS, 'options', { of: 'spawnSupervised()', hints: SPAWN_HINTS })
  const cwd = o.cwd === undefined ? undefined : validate.cString(o.cwd, 'options.cwd')
  // No env given: on the main thread process.env *is* the process
  // environment (Node writes it through to environ), so the native side
  // reads environ itself and skips converting process.env on every spawn.
  // A worker's process.env is its own copy, so there it is passed along.
  const inheritEnv = o.env === undefined && isMainThread
  const env = o.env === undefined ? (inheritEnv ? {} : process.env) : o.env
  validate.object(env, 'options.env')
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
    envValues.push(validate.cString(v, `options.env.${k}`))
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
  const uid = optionalId(o.uid, 'options.uid')
  const gid = optionalId(o.gid, 'options.gid')
  const argv0 = o.argv0 === undefined ? undefined : validate.cString(o.argv0, 'options.argv0')
  validate.optionalAbortSignal(o.signal, 'options.signal')
  // Check the stop defaults now, so a bad one fails the spawn, not a later stop.
  const stopNative = nativeStopOptions(o.stop, STOP_DEFAULTS, 'options.stop').native
  const { cgroup, cgroupParent } = cgroupOption(o.cgroup)
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
      notifyFd: o[NOTIFY_FD] === undefined ? undefined : notifyFd(o[NOTIFY_FD], 'notifyFd'),
      uid,
      gid,
      argv0,
      useLoop: IS_NODE,
      cgroup,
      cgroupParent,
      killTimeoutMs: stopNative.killTimeoutMs,
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
  /** The child's own cgroup (a path under the cgroup2 mount) while it lives. */
  get cgroup() {
    return this.#native.cgroup ?? null
  }
  /** CPU time, memory and pids of the child's cgroup; null where unknown. */
  resourceUsage() {
    const u = this.#native.resourceUsage()
    return { cpuUsec: u.cpuUsec ?? null, memoryBytes: u.memoryBytes ?? null, pids: u.pids ?? null }
  }
  /** @internal The cgroup's path and id, for a Supervisor's state file. */
  get [CGROUP_RECORD]() {
    const r = this.#native.cgroupRecord()
    return r ? { path: r[0], id: Number(r[1]) } : null
  }
  get identity() {
    // Read from /proc on first use unless known at spawn; EMFILE can throw.
    return callNative(() => this.#native.identity)
  }
  /** 'pidfd' | 'pidfd-tokio' | 'kqueue' | 'fallback' */
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
    if (signal === 0) {
      throw rangeError(
        `kill(0) sends nothing and is refused: to check whether process ${this.#pid} is running, use isProcessRunning(${this.#pid}, identity) or read exitInfo`,
      )
    }
    const num = validate.signal(signal)
    return callNative(() => this.#native.kill(num))
  }

  stop(options) {
    let opts
    try {
      opts = nativeStopOptions(options, this.#stopDefaults)
      // A stop is running: share its result, and let this caller's options
      // bring its SIGKILL and its end forward (never later).
      if (this.#stopping) {
        callNative(() => this.#stopping.control.escalate(opts.native))
        return this.#stopping.promise
      }
      // Reaped natively, even if the 'exit' event is still on its way.
      const exit = this.exitInfo
      if (exit !== null) {
        return Promise.resolve({ outcome: 'already-exited', pidReused: false, signals: [], elapsedMs: 0, exit })
      }
      const stopping = startStop(
        (control) => this.#native.stop(opts.native, control),
        (r) => {
          if (r.exit) this.#markExited(r.exit)
          return {
            outcome: r.outcome,
            pidReused: false,
            signals: r.signals,
            elapsedMs: r.elapsedMs,
            exit: this.#exitInfo,
          }
        },
      )
      this.#stopping = stopping
      const clear = () => {
        if (this.#stopping === stopping) this.#stopping = null
      }
      stopping.promise.then(clear, clear)
      return stopping.promise
    } catch (err) {
      return Promise.reject(err)
    }
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

/**
 * A failed spawn, worded as Node words it. Finding or executing the program:
 * child_process's own `spawn <command> <CODE>` (syscall `spawn <command>`,
 * `path` the command). The cwd: `CODE: text, chdir '<cwd>'` with `path` the
 * directory; a stdio file: likewise with `open` and the file. A step of the
 * child before exec (setuid, setgid, ...): `spawn <command> <CODE>
 * (<syscall>: text)` with that syscall. All carry `spawnargs`.
 */
function spawnError(err, command, args, native) {
  const info = nativeInfo(err)
  if (!info?.at) return fromNative(err)
  let e
  if (info.at === 'chdir') e = systemError(info.code, { ...info, syscall: 'chdir' }, native.cwd)
  else if (info.at === 'open') e = systemError(info.code, info, native.stdio[info.fd]?.path)
  else {
    const text = info.at === 'setup' ? ` (${info.syscall}: ${errnoText(info.errno, info.desc)})` : ''
    e = new Error(`spawn ${command} ${info.code}${text}`)
    e.errno = -info.errno
    e.code = info.code
    e.syscall = info.at === 'setup' ? info.syscall : `spawn ${command}`
    e.path = command
  }
  e.spawnargs = [...args]
  return brand(e)
}

function spawnSupervised(command, args, options) {
  validate.nonEmptyString(command, 'command')
  args = args === undefined || args === null ? [] : validate.stringArray(args, 'args')
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
    throw spawnError(err, command, args, opts.native)
  }
  proc = new SupervisedProcess(handle, opts.stopDefaults, opts.abortSignal)
  if (early) proc._onNativeExit(early)
  return proc
}

// Bare-pid stops running on this thread, by what they target (pid, group,
// identity): a concurrent stop of the same target shares the running one and
// may escalate it, as for a SupervisedProcess. Each JS thread has its own.
const bareStops = new Map()

async function stopSupervisedProcess(target, options) {
  if (
    target instanceof SupervisedProcess ||
    (target !== null && typeof target === 'object' && target[SUPERVISED_BRAND] === true)
  ) {
    return target.stop(options)
  }
  validate.targetPid(target, 'target')
  const opts = nativeStopOptions(options)
  const key = JSON.stringify([target, opts.native.group ?? false, opts.identity ?? null])
  const running = bareStops.get(key)
  if (running) {
    callNative(() => running.control.escalate(opts.native))
    return running.promise
  }
  const stopping = startStop(
    (control) => native.stopPid(target, opts.native, opts.identity, control),
    (r) => ({ outcome: r.outcome, pidReused: r.pidReused, signals: r.signals, elapsedMs: r.elapsedMs, exit: null }),
  )
  bareStops.set(key, stopping)
  const clear = () => {
    if (bareStops.get(key) === stopping) bareStops.delete(key)
  }
  stopping.promise.then(clear, clear)
  return stopping.promise
}

module.exports = {
  SupervisedProcess,
  spawnSupervised,
  stopSupervisedProcess,
  nativeStopOptions,
  checkSpawnOptions: nativeSpawnOptions,
  notifyFd,
  SPAWN_KEYS,
  STOP_KEYS,
  NOTIFY_FD,
  NOTIFY_STREAM,
  CGROUP_RECORD,
  STOP_DEFAULTS,
}
