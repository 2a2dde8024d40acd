// The options of spawnSupervised and of a stop: checked once, in the
// caller's words, and turned into what the native side takes. Pure: nothing
// here starts or signals a process (lib/supervised.js does).

const { isMainThread } = require('node:worker_threads')
const native = require('../binding.js')
const { typeError } = require('./errors')
const validate = require('./validate')

// The exit may be watched on the JS thread's own libuv loop only in Node
// itself: Bun (and Deno) export libuv's symbols as aborting stubs, so the
// native side cannot tell by looking them up.
const IS_NODE = typeof process.versions.node === 'string' && !process.versions.bun && !process.versions.deno
// Bun keeps process.env apart from the C environ: a variable set or
// deleted at run time is seen by child_process, not by environ's readers.
const IS_BUN = typeof process.versions.bun === 'string'

// Package-internal spawn option (the Supervisor's `notifyFd` ready check):
// a pipe whose write end is this fd number in the child. Not in the global
// symbol registry: only a module that requires this one can set it.
const NOTIFY_FD = Symbol('procward.notifyFd')
// Package-internal spawn option (procward run in a terminal): the child's
// group takes the foreground of the terminal on its stdin, when that is our
// controlling terminal and our group has it at the spawn; the terminal is
// given back after the exit (SupervisedProcess).
const TAKE_TERMINAL = Symbol('procward.takeTerminal')
// Package-internal spawn option (the Supervisor's held sockets,
// options.listen): { fds, names, blocking }, handed to the child at fds
// 3, 4, … with LISTEN_FDS, LISTEN_FDNAMES and its own LISTEN_PID.
const LISTEN = Symbol('procward.listen')

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

const STDIO_FILE_KEYS = new Set(['file', 'append'])

function stdioEntry(value, i) {
  if (value === 'ignore' || value === 'inherit' || value === 'pipe') return STDIO_KINDS[value]
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
  'umask',
  'argv0',
  'cgroup',
])
// Checked against on every spawn: made once (knownKeys would make it per call).
const SPAWN_KEY_SET = new Set(SPAWN_KEYS)

const CGROUP_KEYS = ['parent']

// The default death signal's number, and what a spawn without `stop`
// options stops with (nativeStopOptions of nothing over the defaults: the
// same every time, so worked out once).
const SIGKILL = validate.signal('SIGKILL')
const NO_STOP_OPTIONS = nativeStopOptions(undefined, STOP_DEFAULTS, 'options.stop').native

// stdio kinds without a file, as the native call takes them.
const STDIO_KINDS = { ignore: native.STDIO_IGNORE, inherit: native.STDIO_INHERIT, pipe: native.STDIO_PIPE }
const DEFAULT_STDIO = Object.freeze(['ignore', 'inherit', 'inherit'])

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

/** Entries (each key, its value as read) as two arrays, each key and value checked; undefined skipped. */
function envArrays(names, read) {
  const keys = []
  const values = []
  for (let i = 0; i < names.length; i++) {
    const k = names[i]
    const v = read[i]
    if (v === undefined) continue
    if (k.length === 0 || k.includes('=') || k.includes('\0')) {
      throw typeError(
        `options.env key ${JSON.stringify(k)} must be non-empty, without '=' or NUL`,
        'ERR_INVALID_ARG_VALUE',
      )
    }
    keys.push(k)
    values.push(validate.cString(v, `options.env.${k}`))
  }
  return { keys, values }
}

/** A caller's `env`: each entry read once. */
function givenEnv(env) {
  const entries = Object.entries(validate.object(env, 'options.env'))
  return envArrays(
    entries.map((e) => e[0]),
    entries.map((e) => e[1]),
  )
}

// process.env as last converted (on Bun, and in a worker, where the native
// side cannot read environ instead): its keys and values as read, and the
// arrays made of them. Converting and checking every entry on every spawn
// was about a tenth of the call on Bun; reading the keys and comparing the
// values costs a few percent of that (Bun keeps Object.keys of process.env
// cached), and any change, a variable added, deleted or set, converts
// afresh.
let envCache = null

function processEnv() {
  const env = process.env
  const names = Object.keys(env)
  const c = envCache
  if (c !== null && c.names.length === names.length) {
    let same = true
    for (let i = 0; i < names.length; i++) {
      const k = names[i]
      if (k !== c.names[i] || env[k] !== c.read[i]) {
        same = false
        break
      }
    }
    if (same) return c.arrays
  }
  // Copies: the runtime may hand out (and later change) one keys array.
  const copy = [...names]
  const read = copy.map((k) => env[k])
  const arrays = envArrays(copy, read)
  // Handed to every spawn while the cache holds: frozen, so nothing can
  // change what the cache says it holds.
  Object.freeze(arrays.keys)
  Object.freeze(arrays.values)
  envCache = { names: copy, read, arrays }
  return arrays
}

function nativeSpawnOptions(options) {
  if (options !== undefined) validate.object(options, 'options')
  // Every option is read exactly once, here: a getter that answers
  // differently on a second read (or throws) cannot make the validated value
  // and the used one differ, nor fail after the child was started.
  const o = { ...(options ?? {}) }
  if (o.stop !== null && typeof o.stop === 'object') o.stop = { ...o.stop }
  validate.knownKeys(o, SPAWN_KEY_SET, 'options', { of: 'spawnSupervised()', hints: SPAWN_HINTS })
  const cwd = o.cwd === undefined ? undefined : validate.cString(o.cwd, 'options.cwd')
  // No env given: on Node's main thread process.env *is* the process
  // environment (Node writes it through to environ), so the native side
  // reads environ itself and skips converting process.env on every spawn.
  // A worker's process.env is its own copy, and Bun's process.env writes
  // never reach environ: there process.env is passed along.
  const inheritEnv = o.env === undefined && isMainThread && !IS_BUN
  const env = inheritEnv ? undefined : o.env === undefined ? processEnv() : givenEnv(o.env)
  let stdio = o.stdio ?? DEFAULT_STDIO
  if (!Array.isArray(stdio)) stdio = [stdio, stdio, stdio]
  if (stdio.length !== 3) {
    throw typeError('options.stdio must be one option or an array of three', 'ERR_INVALID_ARG_VALUE')
  }
  // Packed for the native call (see STDIO_FILE in src/binding/child.rs):
  // two bits of kind per fd, an append bit per file; the files' paths in
  // `extra`.
  let packedStdio = 0
  let stdioPaths
  let hasPipe = false
  for (let i = 0; i < 3; i++) {
    const entry = stdioEntry(stdio[i], i)
    if (typeof entry === 'number') {
      packedStdio |= entry << (2 * i)
      if (entry === native.STDIO_PIPE) hasPipe = true
      continue
    }
    packedStdio |= (native.STDIO_FILE << (2 * i)) | (entry.append ? native.STDIO_APPEND << i : 0)
    stdioPaths ??= ['', '', '']
    stdioPaths[i] = entry.path
  }
  const processGroup = validate.optionalBoolean(o.processGroup, 'options.processGroup') ?? true
  const killGroupOnExit = validate.optionalBoolean(o.killGroupOnExit, 'options.killGroupOnExit') ?? true
  let deathSignal = 0
  if (o.parentDeathSignal === undefined) deathSignal = SIGKILL
  else if (o.parentDeathSignal !== false)
    deathSignal = validate.signal(o.parentDeathSignal, 'options.parentDeathSignal')
  const uid = optionalId(o.uid, 'options.uid')
  const gid = optionalId(o.gid, 'options.gid')
  // A mode mask: 0o022, not 22 (a decimal 22 is 0o026, in range, and wrong).
  const umask =
    o.umask === undefined
      ? undefined
      : validate.integer(o.umask, 'options.umask', 0, 0o777, ' (0o777: a mode mask such as 0o022)')
  const argv0 = o.argv0 === undefined ? undefined : validate.cString(o.argv0, 'options.argv0')
  validate.optionalAbortSignal(o.signal, 'options.signal')
  // Check the stop defaults now, so a bad one fails the spawn, not a later stop.
  const stopNative =
    o.stop === undefined ? NO_STOP_OPTIONS : nativeStopOptions(o.stop, STOP_DEFAULTS, 'options.stop').native
  const { cgroup, cgroupParent } = cgroupOption(o.cgroup)
  const notify = o[NOTIFY_FD] === undefined ? undefined : notifyFd(o[NOTIFY_FD], 'notifyFd')
  const listen = o[LISTEN]
  let flags = processGroup ? native.SPAWN_PROCESS_GROUP : 0
  if (inheritEnv) flags |= native.SPAWN_INHERIT_ENV
  if (processGroup && killGroupOnExit) flags |= native.SPAWN_KILL_GROUP_ON_EXIT
  if (IS_NODE) flags |= native.SPAWN_USE_LOOP
  if (cgroup) flags |= native.SPAWN_CGROUP
  if (o[TAKE_TERMINAL] === true) flags |= native.SPAWN_TAKE_TERMINAL
  // What most spawns leave unset: absent then, so the native side reads
  // nothing of it.
  const rare =
    cwd !== undefined ||
    stdioPaths !== undefined ||
    notify !== undefined ||
    uid !== undefined ||
    gid !== undefined ||
    umask !== undefined ||
    argv0 !== undefined ||
    cgroup ||
    listen !== undefined
  return {
    native: {
      flags,
      stdio: packedStdio,
      deathSignal,
      // The child's environment, unless inherited: arrays the caller
      // turns into a NativeEnv (process.env's is kept while it reads the
      // same: see processEnv).
      env,
      extra: rare
        ? {
            cwd,
            stdioPaths,
            notifyFd: notify,
            uid,
            gid,
            umask,
            argv0,
            cgroupParent,
            killTimeoutMs: cgroup ? stopNative.killTimeoutMs : undefined,
            listenFds: listen?.fds,
            listenNames: listen?.names,
            listenBlocking: listen?.blocking,
          }
        : undefined,
    },
    // For a spawn error's wording: the directory and the stdio files.
    cwd,
    stdioPaths,
    // Whether the child has pipes to hand over (stdio 'pipe', the notify
    // pipe), and takes the terminal.
    pipes: hasPipe || notify !== undefined,
    terminal: o[TAKE_TERMINAL] === true,
    // Only read (merged under a stop's own options): the frozen defaults
    // themselves when the spawn gives none.
    stopDefaults: o.stop == null ? STOP_DEFAULTS : { ...STOP_DEFAULTS, ...o.stop },
    abortSignal: o.signal,
  }
}

module.exports = {
  IS_NODE,
  LISTEN,
  NOTIFY_FD,
  SPAWN_KEYS,
  STOP_DEFAULTS,
  STOP_KEYS,
  TAKE_TERMINAL,
  nativeSpawnOptions,
  nativeStopOptions,
  notifyFd,
}
