// exec: a command run to completion, its output captured byte for byte, and
// its whole tree bounded. Built on spawnSupervised: a timeout, an abort or an
// output past maxBuffer calls the SupervisedProcess's own stop() (TERM,
// grace, KILL to the process group; with `cgroup: true` the SIGKILL step
// kills the cgroup), where child_process's and execa's `timeout` signal the
// child alone and orphan what it started.

const native = require('../binding.js')
const { brand, typeError, rangeError } = require('./errors')
const { SPAWN_KEYS } = require('./spawn-options')
const { spawnSupervised } = require('./supervised')
const validate = require('./validate')

const { abortError } = validate

// Recognises an ExecError from another copy of this package too.
const EXEC_ERROR_BRAND = Symbol.for('procward.execError')

const MAX_BUFFER_DEFAULT = 64 * 1024 * 1024
/**
 * The longest string this runtime can make (V8: 2^29 - 24 UTF-16 units,
 * about 512 MiB). Each UTF-8 byte decodes to at most one unit, so text
 * output is kept to this many bytes whatever maxBuffer says: past it the
 * decode would throw (ERR_STRING_TOO_LONG) and the run's result be lost.
 */
const { MAX_LENGTH: MAX_BYTES, MAX_STRING_LENGTH: MAX_STRING } = require('node:buffer').constants
const OUTPUTS = ['pipe', 'inherit', 'ignore']
const ENCODINGS = ['utf8', 'buffer']

// Every spawn option but `stdio` (exec's own stdout/stderr say it), and exec's.
const EXEC_KEYS = Object.freeze([
  ...SPAWN_KEYS.filter((k) => k !== 'stdio'),
  'input',
  'timeout',
  'maxBuffer',
  'encoding',
  'stdout',
  'stderr',
  'reject',
])

/** Options users bring from child_process and execa, with what to do instead. */
const EXEC_HINTS = {
  stdio: "exec's stdin is `input` (or nothing); set stdout and stderr apart",
  killSignal: "the stop's first signal is `stop: { signal }`",
  shell: "run a shell explicitly: exec('sh', ['-c', command])",
  detached: 'the child leads its own process group by default (processGroup)',
  stdin: 'stdin is `input` (written, then closed), or nothing',
}

function maxBufferOption(value) {
  if (value === undefined) return MAX_BUFFER_DEFAULT
  if (typeof value !== 'number') {
    throw typeError(`options.maxBuffer must be a number of bytes, got ${validate.describe(value)}`)
  }
  if (value !== Number.POSITIVE_INFINITY && !(Number.isSafeInteger(value) && value >= 0)) {
    throw rangeError(`options.maxBuffer must be a whole number of bytes >= 0 (or Infinity), got ${value}`)
  }
  return value
}

function inputOption(value) {
  if (value === undefined || typeof value === 'string' || value instanceof Uint8Array) return value
  throw typeError(`options.input must be a string or a Uint8Array (a Buffer), got ${validate.describe(value)}`)
}

/** exec's options, checked in the caller's words; nothing is started here. */
function execOptions(options) {
  if (options === undefined || options === null) options = {}
  validate.knownKeys(validate.object(options, 'options'), EXEC_KEYS, 'options', { of: 'exec', hints: EXEC_HINTS })
  const { input, timeout, maxBuffer, encoding, stdout, stderr, reject, signal, ...spawn } = options
  const o = {
    input: inputOption(input),
    // 0 (as in child_process) or absent: no timeout.
    timeout: validate.duration(timeout, 'options.timeout', 0),
    maxBuffer: maxBufferOption(maxBuffer),
    encoding: validate.oneOf(encoding, ENCODINGS, 'options.encoding', 'utf8'),
    stdout: validate.oneOf(stdout, OUTPUTS, 'options.stdout', 'pipe'),
    stderr: validate.oneOf(stderr, OUTPUTS, 'options.stderr', 'pipe'),
    reject: validate.optionalBoolean(reject, 'options.reject') ?? true,
    signal: validate.optionalAbortSignal(signal, 'options.signal'),
  }
  // What is kept of each stream: maxBuffer, and no more than a string (for
  // text) or a Buffer (bytes: 4 GiB on Node 20) can hold.
  o.keep = Math.min(o.maxBuffer, o.encoding === 'buffer' ? MAX_BYTES : MAX_STRING)
  o.spawn = { ...spawn, stdio: [o.input === undefined ? 'ignore' : 'pipe', o.stdout, o.stderr] }
  return o
}

function commandLine(command, args) {
  return [command, ...args].map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : JSON.stringify(a))).join(' ')
}

class ExecError extends Error {
  constructor(code, message, result, cause) {
    super(message, cause === undefined ? undefined : { cause })
    // An abort is named as every aborted operation is (`err.name === 'AbortError'`).
    this.name = code === 'ABORT_ERR' ? 'AbortError' : 'ExecError'
    // The result's fields, its exit code as `exitCode` (`code` is the error's).
    const { code: exitCode, ...rest } = result
    Object.assign(this, rest)
    this.code = code
    this.exitCode = exitCode
    this.result = result
    Object.defineProperty(this, EXEC_ERROR_BRAND, { value: true })
    brand(this)
  }
}

function isExecError(err) {
  return err !== null && typeof err === 'object' && err[EXEC_ERROR_BRAND] === true
}

/** What went wrong with a finished run, or null when it succeeded. */
function failure(result, o, overflowed, abortReason) {
  const cmd = commandLine(result.command, result.args)
  if (result.aborted) return ['ABORT_ERR', `exec ${cmd}: aborted`, abortReason]
  if (result.timedOut) return ['ERR_EXEC_TIMEOUT', `exec ${cmd}: timed out after ${o.timeout} ms`]
  if (result.maxBufferExceeded) {
    let why = `maxBuffer (${o.maxBuffer} bytes)`
    if (o.keep < o.maxBuffer) {
      why =
        o.encoding === 'buffer'
          ? `the largest Buffer this runtime can make (${o.keep} bytes)`
          : `the longest string this runtime can make (${o.keep} bytes; encoding: 'buffer' keeps more)`
    }
    return ['ERR_EXEC_MAX_BUFFER', `exec ${cmd}: ${overflowed} exceeded ${why}`]
  }
  if (result.signal !== null) return ['ERR_EXEC_FAILED', `exec ${cmd}: killed by ${result.signal}`]
  if (result.code !== 0) return ['ERR_EXEC_FAILED', `exec ${cmd}: exit code ${result.code}`]
  return null
}

/**
 * How long the pipes may stay open after a stopped child's reap. The group
 * was sent SIGKILL at the reap, so its members die within moments (later
 * on a loaded machine, still holding the pipes until then); a pipe open
 * past this bound is held by a process that left the group.
 */
const PIPES_AFTER_STOP_MS = 250

/**
 * Whether both outputs reach their end (no writer left) within
 * PIPES_AFTER_STOP_MS (a timer: the loop polls meanwhile, so what the
 * pipes hold is read either way).
 */
function endsSoon(out, err) {
  const ended = Promise.all([out.ended, err.ended]).then(() => true)
  let timer
  const bound = new Promise((resolve) => {
    timer = setTimeout(() => resolve(false), PIPES_AFTER_STOP_MS)
  })
  return Promise.race([ended, bound]).finally(() => clearTimeout(timer))
}

/** Reads a piped stream into chunks, up to `max` bytes; `onOverflow` past it. */
function capture(stream, max, onOverflow) {
  const chunks = []
  let size = 0
  let full = false
  if (stream === null) return { chunks, done: Promise.resolve(), ended: Promise.resolve(), stream, isFull: () => false }
  const done = new Promise((resolve) => {
    stream.once('close', resolve)
  })
  // Its end read (no writer holds the pipe any more), which comes before
  // the 'close' (that waits for the loop's closing phase).
  const ended = new Promise((resolve) => {
    stream.once('end', resolve)
    stream.once('close', resolve)
  })
  // A read error ends the capture (the 'close' follows); the exit still decides.
  stream.on('error', () => {})
  stream.on('data', (chunk) => {
    if (full) return
    if (size + chunk.length > max) {
      // Keep exactly `max` bytes and stop reading: the writer blocks on a
      // full pipe until the stop ends it (the stream is closed after the
      // exit, so the stop, not a SIGPIPE, is what ends it).
      if (max > size) chunks.push(chunk.subarray(0, max - size))
      size = max
      full = true
      stream.pause()
      onOverflow()
      return
    }
    chunks.push(chunk)
    size += chunk.length
  })
  return { chunks, done, ended, stream, isFull: () => full }
}

/**
 * `bytes` decoded, a UTF-8 sequence cut short at its end left out: only a
 * valid start of a character (what a streaming decoder holds back for the
 * next chunk). A start that can begin no character (e0 80, ed a0, f4 90…)
 * is the command's own bad bytes, decoded to U+FFFD as anywhere else.
 * ignoreBOM: a leading BOM is kept, as Buffer#toString keeps it.
 */
function wholeCharacters(bytes) {
  return new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes, { stream: true })
}

/**
 * Runs `command` to completion. Resolves with an ExecResult; rejects with an
 * ExecError for a non-zero exit, a signal, a timeout, an abort or maxBuffer
 * (unless `reject: false`), with the spawn's own error (ENOENT…) when the
 * command could not start, and with a TypeError/RangeError for bad input,
 * before anything starts.
 */
async function exec(command, args, options) {
  validate.nonEmptyString(command, 'command')
  args = args === undefined || args === null ? [] : validate.stringArray(args, 'args')
  const o = execOptions(options)
  if (o.signal?.aborted) throw abortError(o.signal)

  const started = performance.now()
  // Throws ENOENT/EACCES… and bad spawn options synchronously: nothing started.
  const proc = spawnSupervised(command, args, o.spawn)

  let stopReason = null
  let overflowed = null
  let stopping = null
  let abortReason
  const stopAll = (reason) => {
    if (stopReason !== null || proc.exitInfo !== null) return
    stopReason = reason
    // The spawn's `stop` defaults: TERM, grace, KILL, to the whole group.
    stopping = proc.stop()
    // A failed stop (EPERM after a uid switch) is the exit's to report.
    stopping.catch(() => {})
  }

  if (proc.stdin) {
    proc.stdin.on('error', () => {}) // EPIPE: a child that does not read its input
    proc.stdin.end(o.input)
  }
  const overflow = (name, stream) => () => {
    overflowed ??= name
    // Past the exit (the rest was still in the pipe): nothing to stop, and
    // the paused stream is closed at once, not after the exit.
    if (proc.exitInfo !== null) stream.destroy()
    else stopAll('maxBuffer')
  }
  const out = capture(proc.stdout, o.keep, overflow('stdout', proc.stdout))
  const err = capture(proc.stderr, o.keep, overflow('stderr', proc.stderr))

  // After the leader's exit (its group swept), only an escaped process can
  // still hold a pipe open; a timeout or an abort then stops waiting for it.
  const giveUpStreams = () => {
    proc.stdout?.destroy()
    proc.stderr?.destroy()
  }
  // A timeout or an abort that comes after the exit (before its event: a
  // busy loop runs timers before polling) stops nothing, and what the
  // pipes hold was written in time: it is read (the exit's event, then the
  // pipes' ends, as after a stop) before anything is given up. Only a pipe still open then,
  // held by a process that left the group, is given up, and the run counts
  // as timed out or aborted.
  let timedOutAfterExit = false
  let abortedAfterExit = false
  const afterExit = async (mark) => {
    // The exit's event first: the group is swept then.
    await proc.exited
    if (await endsSoon(out, err)) return
    if (stopReason === null) mark()
    giveUpStreams()
  }
  // Exited: reaped, or a zombie whose reap (the exit event) is on its way
  // (its pid is still ours, never another's).
  const leaderExited = () => {
    if (proc.exitInfo !== null) return true
    try {
      return native.isProcessRunning(proc.pid) === false
    } catch {
      return false
    }
  }
  const timer =
    o.timeout > 0
      ? setTimeout(() => {
          if (!leaderExited()) stopAll('timeout')
          else
            afterExit(() => {
              timedOutAfterExit = true
            })
        }, o.timeout)
      : null
  const onAbort = () => {
    abortReason = o.signal.reason
    if (!leaderExited()) stopAll('abort')
    else
      afterExit(() => {
        abortedAfterExit = true
      })
  }
  o.signal?.addEventListener('abort', onAbort, { once: true })

  let exit
  let stop = null
  try {
    exit = await proc.exited
    // A paused (overflowed) stream ends only when closed here.
    for (const c of [out, err]) if (c.isFull()) c.stream.destroy()
    const outputs = Promise.all([out.done, err.done])
    if (stopping) {
      stop = await stopping.catch(() => null)
      // Stopped: the group was sent SIGKILL at the reap (with a cgroup, all
      // of it is gone). A pipe still open past a moment is held by a process
      // that left the group (setsid) without a cgroup to hold it: what is
      // there is read, then the wait stops, as a timeout's would.
      if (!(await endsSoon(out, err))) giveUpStreams()
    }
    await outputs
  } finally {
    if (timer) clearTimeout(timer)
    o.signal?.removeEventListener('abort', onAbort)
  }

  const collect = (c, mode) => {
    const bytes = mode === 'pipe' ? Buffer.concat(c.chunks) : Buffer.alloc(0)
    if (o.encoding === 'buffer') return bytes
    // A cut at maxBuffer inside a character drops its first bytes: they
    // are ours, not the command's, and would decode to U+FFFD.
    return c.isFull() ? wholeCharacters(bytes) : bytes.toString('utf8')
  }
  const result = {
    command,
    args: [...args],
    pid: proc.pid,
    code: exit.code,
    signal: exit.signal,
    stdout: collect(out, o.stdout),
    stderr: collect(err, o.stderr),
    timedOut: stopReason === 'timeout' || timedOutAfterExit,
    aborted: stopReason === 'abort' || abortedAfterExit,
    maxBufferExceeded: overflowed !== null,
    elapsedMs: performance.now() - started,
    stop,
  }
  const failed = failure(result, o, overflowed, abortReason)
  if (failed === null || !o.reject) return result
  throw new ExecError(failed[0], failed[1], result, failed[2])
}

module.exports = { exec, ExecError, isExecError, EXEC_KEYS }
