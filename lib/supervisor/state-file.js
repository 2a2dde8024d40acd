// The stateFile: a SupervisorStateRecord as JSON (recordOf: what a
// Supervisor's machine makes of its state), replaced atomically and
// serialized (RecordWriter), read back with liveness judged now
// (readSupervisorState), and trusted only from a file no one else could
// have written (a record names processes to stop and groups to sweep).
// One supervisor per stateFile: its lock is `<stateFile>.lock`.

const fs = require('node:fs')
const fsp = require('node:fs/promises')
const path = require('node:path')
const native = require('../../binding.js')
const { callNative } = require('../errors')
const { STOP_DEFAULTS } = require('../supervised')
const os = require('../os')
const validate = require('../validate')
const procfs = require('./procfs')
const { PUBLIC, STATES } = require('./transitions')

const noop = () => {}

/**
 * The environment variable every child of a supervisor with a stateFile
 * gets, its value the supervisor's mark (recorded as `supervisor.mark`
 * before its first spawn): a successor finds by it a daemon the record
 * does not name yet (the supervisor was killed between a spawn and the
 * record's write).
 */
const MARK_VAR = 'PROCWARD_SUPERVISOR_MARK'
const MARK_PATTERN = /^[0-9a-f]{32}$/

/** Far above any record (args included); a larger file is not one. */
const RECORD_MAX = 1 << 20

// The lock module is loaded on first use: a supervisor without a stateFile
// needs none.
let lockModule = null
function lock() {
  lockModule ??= require('../lock')
  return lockModule
}

/** Is the recorded process (pid + identity) running now? false where that cannot be told. */
function isRunning(pid, identity) {
  try {
    return callNative(native.isProcessRunning, pid, identity)
  } catch {
    return false
  }
}

/** This process's identity, for the record's `supervisor` ('' where it cannot be read). */
function ownIdentity() {
  try {
    return callNative(native.getProcessInfo, process.pid)?.identity ?? ''
  } catch {
    return ''
  }
}

// ---- writing ----------------------------------------------------------------------

let tmpCounter = 0

/**
 * Replaces `file` atomically: a temp file in the same directory (mode
 * 0600: args may hold secrets), renamed over it; `visible()` is called the
 * moment the rename is done (readers see the new record from then on),
 * and only then is it made durable: fsync of the file and of the
 * directory (so the rename itself survives a crash). What an event waits
 * for is the rename, not the disk: a restart costs one write and one
 * rename, not two fsyncs. The price: a host that crashes in the instant
 * between the rename and the fsync may come back with the record's
 * previous or an empty text; every process it named died with the host,
 * and an unparsable record is taken as none. All through fs.promises: off
 * the JS thread.
 */
async function writeAtomic(file, text, visible = noop) {
  const dir = path.dirname(file)
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.${++tmpCounter}.tmp`)
  let fh = null
  try {
    fh = await fsp.open(tmp, 'wx', 0o600)
    await fh.writeFile(text)
    await fsp.rename(tmp, file)
  } catch (err) {
    await fh?.close().catch(noop)
    await fsp.unlink(tmp).catch(noop)
    throw err
  }
  visible()
  try {
    await fh.sync()
  } finally {
    await fh.close().catch(noop)
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

/** The name writeAtomic gives its temp files for `file`: .<name>.<pid>.<n>.tmp. */
function tempPattern(file) {
  const base = path.basename(file).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  return new RegExp(`^\\.${base}\\.(\\d+)\\.\\d+\\.tmp$`)
}

/**
 * Temp files a writer of `file` that died mid-write left behind: only names
 * writeAtomic makes for this very file (not another stateFile's whose name
 * begins the same, nor a user's), and only those whose writer is not
 * running (a pid now reused keeps its file: harmless, and never ours to
 * judge). We hold the lock now, so no live supervisor writes this file.
 */
async function removeStaleTemps(file) {
  const dir = path.dirname(file)
  const pattern = tempPattern(file)
  let names = []
  try {
    names = await fsp.readdir(dir)
  } catch {
    return
  }
  const stale = []
  for (const name of names) {
    const m = pattern.exec(name)
    if (m === null) continue
    const pid = Number(m[1])
    if (pid === process.pid || !validPid(pid) || isRunning(pid)) continue
    stale.push(fsp.unlink(path.join(dir, name)).catch(noop))
  }
  await Promise.all(stale)
}

/** Takes `<stateFile>.lock` (waiting for no one: ELOCKED names the holder). */
function acquireRecordLock(stateFile, name) {
  return lock().acquireLock(`${stateFile}.lock`, { purpose: `procward supervisor ${name}` })
}

/**
 * Keeps the stateFile up to date: write() schedules a rewrite, serialized,
 * the latest state winning (the record, from `snapshot()`, is taken when
 * the write begins, so a burst of changes costs one write after the one in
 * flight). Writes only while `owned` (the lock is held and the previous
 * record has been acted on). write()'s promise resolves once a record
 * taken after the call is in place (renamed: what a reader sees), or the
 * write failed (said once, tried again later): the events that follow a
 * change wait for it, never for its fsync.
 */
class RecordWriter {
  #file
  #snapshot
  #dirty = false
  #writer = null
  #warned = false
  #retryTimer = null
  #retryMs = 0
  /** write() callers whose change no write in flight has taken yet. */
  #waiting = []
  owned = false

  constructor(file, snapshot) {
    this.#file = file
    this.#snapshot = snapshot
  }

  /** Schedules a rewrite; resolves when it is in place (at once when not owned). */
  write() {
    if (!this.owned) return Promise.resolve()
    this.#dirty = true
    const visible = new Promise((resolve) => this.#waiting.push(resolve))
    this.#writer ??= Promise.resolve().then(() => this.#drain())
    return visible
  }

  /** Resolves when the write in flight (if any) is done, fsync included. */
  flushed() {
    return this.#writer ?? Promise.resolve()
  }

  async #drain() {
    try {
      while (this.#dirty && this.owned) {
        this.#dirty = false
        const covered = this.#waiting.splice(0)
        const text = `${JSON.stringify(this.#snapshot(), null, 2)}\n`
        const visible = () => {
          for (const resolve of covered) resolve()
        }
        try {
          await writeAtomic(this.#file, text, visible)
          this.#retryMs = 0
        } catch (err) {
          visible()
          if (!this.#warned) {
            this.#warned = true
            process.emitWarning(`procward: cannot write ${this.#file}: ${err.message}`, {
              code: 'PROCWARD_STATE_FILE',
            })
          }
          this.#retryLater()
        }
      }
    } finally {
      this.#writer = null
      // No longer owned: nothing more is written, no one waits.
      for (const resolve of this.#waiting.splice(0)) resolve()
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
      this.write()
    }, this.#retryMs)
    this.#retryTimer.unref()
  }
}

// ---- the record -------------------------------------------------------------------

/** A wall-clock time as the record (and status()) gives it. */
function nowIso() {
  return new Date().toISOString()
}

/**
 * The record of machine `m` (see machine.js) as the stateFile holds it: a
 * SupervisorStateRecord, its child the attempt that runs now.
 */
function recordOf(m) {
  const run = m.run?.live ? m.run : null
  return {
    version: 1,
    name: m.o.name,
    supervisor: {
      pid: process.pid,
      identity: ownIdentityOf(m),
      running: true,
      mark: m.mark,
      session: ownSessionOf(m),
      pidNamespace: ownPidNamespaceOf(m),
      // What SIGHUP does to it: 'reload' lets `procward reload` signal it.
      hup: m.o.handleSignals?.hup ?? null,
    },
    child: run
      ? {
          ...run.record,
          aliveAt: nowIso(),
          readyAt: run.readyAtIso,
          status: run.status,
          health: run.health,
          running: true,
        }
      : null,
    // A reload's successor, while it starts beside the child it replaces.
    next: m.reloading?.next.live ? { ...m.reloading.next.record, running: true } : null,
    state: PUBLIC[m.sub],
    restarts: m.restarts,
    lastReload: m.lastReload,
    lastExit: m.lastExit === null ? null : { ...m.lastExit, at: m.lastExitAt },
    stop: stopPolicy(m.o.stopDefaults),
    meta: run ? run.meta : null,
    updatedAt: nowIso(),
  }
}

/** This process's identity, read once per machine (for its first record). */
function ownIdentityOf(m) {
  m.identity ??= ownIdentity()
  return m.identity
}

function ownSessionOf(m) {
  if (m.session === undefined) m.session = procfs.ownSession()
  return m.session
}

/** The pid namespace the record's pids are in (null: cannot be told), read once per machine. */
function ownPidNamespaceOf(m) {
  if (m.pidNamespace === undefined) m.pidNamespace = os.ownPidNamespace()
  return m.pidNamespace
}

/**
 * The pid namespace `record` was written in when it is not ours (both
 * known): its pids name other processes here, or none. null otherwise.
 */
function otherPidNamespace(record) {
  const theirs = record.supervisor?.pidNamespace
  if (!Number.isSafeInteger(theirs) || theirs <= 0) return null
  const ours = os.ownPidNamespace()
  return ours !== null && ours !== theirs ? theirs : null
}

/** What a stop of the child takes by default (for `procward stop`, which reads the record). */
function stopPolicy(stopDefaults) {
  const { graceMs, killTimeoutMs } = stopDefaults
  return { graceMs: graceMs ?? STOP_DEFAULTS.graceMs, killTimeoutMs: killTimeoutMs ?? STOP_DEFAULTS.killTimeoutMs }
}

// ---- reading ----------------------------------------------------------------------

/** Why a stateFile's stat makes its record untrusted, or null. */
function untrustedStat(st) {
  if (!st.isFile()) return 'it is not a regular file'
  const euid = process.geteuid?.()
  if (euid !== undefined && st.uid !== euid) return `it is owned by uid ${st.uid}, not ${euid}`
  if ((st.mode & 0o022) !== 0) return `others may write it (mode 0${(st.mode & 0o777).toString(8)})`
  return null
}

/**
 * Reads a stateFile for acting on it: null when missing, else { text } or
 * { untrusted: why }. A record is trusted only from a regular file (not a
 * symlink) owned by this process's user and writable by no one else.
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

/** What a record's supervisor.hup may say. */
const HUP = [null, 'stop', 'forward', 'reload']

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
  // Read as found: a mark or session that cannot be one is left out. A
  // session of 0 is one: its leader is outside our pid namespace (a
  // container, `unshare --pid`), and its members all read 0.
  if (s.mark !== undefined && (typeof s.mark !== 'string' || !MARK_PATTERN.test(s.mark))) delete s.mark
  if (s.session !== undefined && s.session !== null && s.session !== 0 && !validPid(s.session)) delete s.session
  if (
    s.pidNamespace !== undefined &&
    s.pidNamespace !== null &&
    !(Number.isSafeInteger(s.pidNamespace) && s.pidNamespace > 0)
  ) {
    delete s.pidNamespace
  }
  if (s.hup !== undefined && !HUP.includes(s.hup)) delete s.hup
  const c = r.child
  if (c !== null) {
    if (typeof c !== 'object' || !validPid(c.pid) || typeof c.identity !== 'string') return null
    if (c.pgid !== null && !validPid(c.pgid)) return null
    if (c.session !== null && c.session !== 0 && !validPid(c.session)) return null
    if (typeof c.command !== 'string' || !Array.isArray(c.args) || typeof c.aliveAt !== 'string') return null
  }
  return r
}

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
 * `supervisor.running` (its lock is held, and by the recorded supervisor
 * itself, pid and identity: a successor holds it while it takes over, and
 * the record still names the dead one), `child.running` (zombie- and
 * reuse-aware). `meta` only while the recorded child runs (a supervisor
 * SIGKILLed never cleared it). null when the file is missing or holds no
 * such record.
 */
function readSupervisorState(stateFile) {
  validate.nonEmptyString(stateFile, 'stateFile')
  const text = readSmallFile(stateFile)
  if (text === null) return null
  const r = parseRecord(text)
  if (r === null) return null
  const { pid, identity, mark, session, pidNamespace, hup } = r.supervisor
  // Written in another pid namespace (a container's record read from the
  // host): its pids are not this namespace's, and nothing it names can be
  // judged here. Neither is said to run; distrustSupervisorState refuses it.
  if (otherPidNamespace(r) !== null) {
    r.supervisor = { pid, identity, running: false, pidNamespace }
    if (mark !== undefined) r.supervisor.mark = mark
    if (r.child !== null) r.child = { ...r.child, running: false }
    r.meta = null
    return r
  }
  let running
  try {
    const { held, holder } = lock().readLock(`${stateFile}.lock`)
    running = held && holder !== null && holder.pid === pid && (identity === '' || holder.identity === identity)
  } catch {
    // No lock to read (removed by hand, or unreadable): the process itself.
    running = true
  }
  // The lock is let go a moment before the process is gone, never after:
  // a holder that matches is also checked to be that very process.
  if (running) running = isRunning(pid, identity || undefined)
  r.supervisor = { pid, identity, running }
  if (mark !== undefined) r.supervisor.mark = mark
  if (session !== undefined) r.supervisor.session = session
  if (pidNamespace !== undefined) r.supervisor.pidNamespace = pidNamespace
  if (hup !== undefined) r.supervisor.hup = hup
  if (r.child !== null) r.child = { ...r.child, running: isRunning(r.child.pid, r.child.identity) }
  // A reload's successor: judged as the child is; one that cannot be one is left out.
  if (r.next !== undefined && r.next !== null) {
    const n = r.next
    r.next =
      typeof n === 'object' && validPid(n.pid) && typeof n.identity === 'string'
        ? { ...n, running: isRunning(n.pid, n.identity) }
        : null
  }
  if (r.child === null || !r.child.running) r.meta = null
  return r
}

/**
 * Why the running processes `record` (from readSupervisorState(stateFile))
 * names must not be stopped or signalled on its word, or null when they
 * may be. Trusted: a record from a regular file (not a symbolic link) of
 * this process's user that no one else may write — or, for root, one of
 * another user's files whose running processes are all that user's (an
 * administrator stopping a user's supervisor). Never when it names pid 1,
 * this process, one of its ancestors, or the leader of our process group
 * or session, whatever the file.
 */
function distrustSupervisorState(stateFile, record) {
  validate.nonEmptyString(stateFile, 'stateFile')
  validate.object(record, 'record')
  validate.object(record.supervisor, 'record.supervisor')
  if (record.child !== null) validate.object(record.child, 'record.child')
  const elsewhere = otherPidNamespace(record)
  if (elsewhere !== null) {
    return `it was recorded in another pid namespace (pid:[${elsewhere}]): its pids name other processes here; run it inside (e.g. docker exec)`
  }
  const pids = [
    record.supervisor.running ? record.supervisor.pid : null,
    record.child?.running ? record.child.pid : null,
  ]
  for (const pid of pids) {
    const refused = pid === null ? null : procfs.untouchable(pid)
    if (refused !== null) return `it names pid ${pid}, and ${refused}`
  }
  const st = fs.lstatSync(stateFile)
  const why = st.isSymbolicLink() ? 'it is a symbolic link' : untrustedStat(st)
  if (why === null) return null
  if (process.geteuid?.() !== 0 || !st.isFile() || (st.mode & 0o022) !== 0) return why
  for (const pid of pids) {
    if (pid !== null && procfs.processOwner(pid) !== st.uid) {
      return `${why}, and pid ${pid} is not a process of uid ${st.uid}`
    }
  }
  return null
}

module.exports = {
  MARK_VAR,
  isRunning,
  ownIdentity,
  removeStaleTemps,
  acquireRecordLock,
  RecordWriter,
  nowIso,
  recordOf,
  readRecordFile,
  parseRecord,
  readSupervisorState,
  distrustSupervisorState,
  otherPidNamespace,
}
