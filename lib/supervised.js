// SupervisedProcess: the JS face (EventEmitter, streams, AbortSignal) over
// the native child handle. The native side owns the exit watch and the
// reap; this side only reports what it was told.

const { EventEmitter } = require('node:events')
const fs = require('node:fs')
const net = require('node:net')
const { Readable } = require('node:stream')
const native = require('../binding.js')
const { brand, callNative, errnoText, fromNative, nativeInfo, rangeError, systemError } = require('./errors')
const {
  IS_NODE,
  NOTIFY_FD,
  nativeSpawnOptions,
  nativeStopOptions,
  notifyFd,
  SPAWN_KEYS,
  STOP_DEFAULTS,
  STOP_KEYS,
} = require('./spawn-options')
const validate = require('./validate')

const { abortError } = validate

const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')

// Recognises a SupervisedProcess from another copy of this package too (two
// versions in one node_modules tree), as execa brands its errors.
const SUPERVISED_BRAND = Symbol.for('procward.supervised')

// Package-internal, and so not in the global symbol registry: only a module
// that requires this one can name them.
//
// The read end of the notify pipe (see NOTIFY_FD in spawn-options.js), for
// the Supervisor's `notifyFd` ready check.
const NOTIFY_STREAM = Symbol('procward.notifyStream')
// A contained child's cgroup { path, id } (the Supervisor records it in its
// state file).
const CGROUP_RECORD = Symbol('procward.cgroupRecord')

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

const IS_DENO = typeof process.versions.deno === 'string'
const IS_BUN = typeof process.versions.bun === 'string'
const noop = () => {}

function pipeStream(fd, n) {
  if (fd < 0) return null
  // Node: a non-blocking libuv pipe, as child_process uses. Deno's net.Socket
  // adopts an fd too, and its fs streams cannot use one it did not open
  // (EBADF). Bun's net.Socket cannot adopt an fd.
  if (IS_NODE || IS_DENO) return new net.Socket({ fd, readable: n !== 0, writable: n === 0 })
  if (n === 0) return fs.createWriteStream(null, { fd })
  return IS_BUN ? bunPipeReader(fd) : fs.createReadStream(null, { fd })
}

/**
 * A pipe's read end under Bun, read on Bun's own event loop (Bun.file's
 * stream polls a pipe), as a Node Readable. Not fs.createReadStream: Bun
 * reads a pipe with it by a blocking read on its threadpool, one thread per
 * silent pipe, and with as many silent pipes as the pool has threads (two
 * on two cores: a reload's two daemons, two supervisors' line checks) every
 * fs call of the process waited for one of them to speak. The stream never
 * closes the fd: it is closed here once the stream is done.
 */
function bunPipeReader(fd) {
  const stream = Readable.fromWeb(globalThis.Bun.file(fd).stream(), { highWaterMark: 64 * 1024 })
  stream.once('close', () => fs.close(fd, noop))
  return stream
}

const NO_STDIO = Object.freeze([null, null, null])

class SupervisedProcess extends EventEmitter {
  #native
  #pid
  #exitInfo = null
  // Made when first asked for (most callers listen for 'exit' instead):
  // until then, null.
  #exited = null
  #resolveExited = null
  #stopping = null
  #stopDefaults
  #abort = null
  #stdio = NO_STDIO
  #notify = null
  #terminal

  /**
   * @internal Use spawnSupervised(). `handle` is the native child (an
   * external: see src/binding/child.rs); `pipes`: whether it has any pipe
   * to hand over; `terminal`: spawned with TAKE_TERMINAL.
   */
  constructor(handle, pid, stopDefaults, abortSignal, pipes, terminal) {
    super()
    this.#native = handle
    this.#pid = pid
    this.#stopDefaults = stopDefaults
    this.#terminal = terminal
    if (pipes) {
      const [stdin, stdout, stderr, notify] = native.childTakePipes(handle)
      this.#stdio = [stdin, stdout, stderr].map(pipeStream)
      this.#notify = pipeStream(notify, 3)
    }
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
    // Before anyone hears of the exit (a Supervisor restarts at once): a
    // child spawned with TAKE_TERMINAL hands the terminal back to us.
    if (this.#terminal) native.childReclaimTerminal(this.#native)
    this.#resolveExited?.(this.#exitInfo)
    this.emit('exit', this.#exitInfo)
  }

  /**
   * #markExited from a stop's promise: a throwing 'exit' listener is
   * reported as it is from the native delivery (an uncaught exception),
   * never turned into the stop's rejection (which an abort's stop, or a
   * Supervisor's, swallows).
   */
  #markExitedFromStop(info) {
    try {
      this.#markExited(info)
    } catch (err) {
      queueMicrotask(() => {
        throw err
      })
    }
  }

  get pid() {
    return this.#pid
  }
  get pgid() {
    return native.childPgid(this.#native) ?? null
  }
  /** The child's own cgroup (a path under the cgroup2 mount) while it lives. */
  get cgroup() {
    return native.childCgroup(this.#native) ?? null
  }
  /** CPU time, memory and pids of the child's cgroup; null where unknown. */
  resourceUsage() {
    const u = native.childResourceUsage(this.#native)
    return { cpuUsec: u.cpuUsec ?? null, memoryBytes: u.memoryBytes ?? null, pids: u.pids ?? null }
  }
  /** @internal The cgroup's path and id, for a Supervisor's state file. */
  get [CGROUP_RECORD]() {
    const r = native.childCgroupRecord(this.#native)
    return r ? { path: r[0], id: Number(r[1]) } : null
  }
  get identity() {
    // Read from /proc on first use unless known at spawn; EMFILE can throw.
    return callNative(() => native.childIdentity(this.#native))
  }
  /** 'pidfd' | 'pidfd-tokio' | 'kqueue' | 'fallback' */
  get exitWatch() {
    return native.childBackend(this.#native)
  }
  get exited() {
    if (this.#exited === null) {
      this.#exited =
        this.#exitInfo !== null
          ? Promise.resolve(this.#exitInfo)
          : new Promise((resolve) => {
              this.#resolveExited = resolve
            })
    }
    return this.#exited
  }
  get exitInfo() {
    if (this.#exitInfo !== null) return this.#exitInfo
    const s = native.childExitStatus(this.#native)
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
    return callNative(() => native.childKill(this.#native, num))
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
      // Reaped natively, even if the 'exit' event is still on its way (from
      // another thread, or later in this loop turn): it is emitted first, as
      // after a stop that saw the exit, so a caller who awaits the stop finds
      // its 'exit' listeners run. In a microtask, never inside this call.
      const exit = this.exitInfo
      if (exit !== null) {
        return Promise.resolve().then(() => {
          this.#markExitedFromStop(exit)
          return { outcome: 'already-exited', pidReused: false, signals: [], elapsedMs: 0, exit: this.#exitInfo }
        })
      }
      const stopping = startStop(
        (control) => native.childStop(this.#native, opts.native, control),
        (r) => {
          if (r.exit) this.#markExitedFromStop(r.exit)
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
    native.childSetRef(this.#native, true)
    return this
  }

  unref() {
    native.childSetRef(this.#native, false)
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
function spawnError(err, command, args, opts) {
  const info = nativeInfo(err)
  if (!info?.at) return fromNative(err)
  let e
  if (info.at === 'chdir') e = systemError(info.code, { ...info, syscall: 'chdir' }, opts.cwd)
  else if (info.at === 'open') e = systemError(info.code, info, opts.stdioPaths?.[info.fd])
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

// The pids of this thread's children whose exit has not been delivered yet:
// what an init's orphan reaping (lib/init.js) must leave to their watchers.
// Added on the JS thread as the spawn returns, before any reaping pass can
// run. Keyed by pid, valued by the spawn: an exit delivered late (its pid
// reused by a later child meanwhile) removes its own entry, never the
// newcomer's.
const live = new Map()

/** @internal The live supervised children of this thread, by pid. */
function liveChildPids() {
  return live.keys()
}

// Each environment given to a spawn as arrays ({ keys, values }), converted
// once: process.env's arrays are the same object while it reads the same
// (spawn-options.js), so a spawn without `env` on Bun or in a worker
// converts no string.
const nativeEnvs = new WeakMap()

function nativeEnv(env) {
  if (env === undefined) return undefined
  let n = nativeEnvs.get(env)
  if (n === undefined) {
    n = new native.NativeEnv(env.keys, env.values)
    nativeEnvs.set(env, n)
  }
  return n
}

function spawnSupervised(command, args, options) {
  validate.nonEmptyString(command, 'command')
  args = args === undefined || args === null ? [] : validate.stringArray(args, 'args')
  const opts = nativeSpawnOptions(options)
  if (opts.abortSignal?.aborted) throw abortError(opts.abortSignal)

  let proc = null
  let early = null
  let pid = null
  const spawn = {}
  // (code, signal name): the native side passes two primitives, not an object.
  const onExit = (code, signal) => {
    const info = { code, signal }
    if (live.get(pid) === spawn) live.delete(pid)
    if (proc) proc._onNativeExit(info)
    else early = info
  }
  let handle
  try {
    // `args` is validate.stringArray's frozen copy (or a fresh []): already
    // ours, read once by the native side.
    const n = opts.native
    handle = native.spawnSupervised(command, args, n.flags, n.stdio, n.deathSignal, nativeEnv(n.env), n.extra, onExit)
  } catch (err) {
    throw spawnError(err, command, args, opts)
  }
  pid = native.childPid(handle)
  if (early === null) live.set(pid, spawn)
  proc = new SupervisedProcess(handle, pid, opts.stopDefaults, opts.abortSignal, opts.pipes, opts.terminal)
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
  // For bench/split.mjs, which retraces spawnSupervised step by step.
  nativeEnv,
  stopSupervisedProcess,
  liveChildPids,
  // The spawn and stop options, passed on from ./spawn-options for
  // lib/supervisor/, which still takes them from here.
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
