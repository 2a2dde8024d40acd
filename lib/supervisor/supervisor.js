// Supervisor: keeps one daemon running. Restarts it when it exits (the
// exit event is the reap, so the new child never meets its predecessor's
// workers), backs off and gives up on a crash loop, checks readiness,
// records its state for a successor, takes over from a dead predecessor,
// and restarts a running daemon that fails its health checks. This file is the machine: every verb and every word from
// the boot or an attempt is an event, dispatched through the table of
// ./transitions.js (substate × event → the next substate and the action to
// run), and the actions it names. Its concepts live beside it: options,
// one attempt (an own child or an adopted orphan), readiness, health, the
// state file, takeover, process signals, backoff, and what /proc says.

const { randomBytes } = require('node:crypto')
const { EventEmitter } = require('node:events')
const validate = require('../validate')
const { STOP_DEFAULTS, spawnSupervised, stopSupervisedProcess } = require('../supervised')
const attempt = require('./attempt')
const { checkChildStatus, checkMeta, checkOptions, restartOptions, spawnOptions, stopOptions } = require('./options')
const { relayOutput } = require('./output')
const { watchHealth } = require('./health')
const notify = require('./notify')
const { decideExit, spawnFailure } = require('./policy')
const { whenReady } = require('./readiness')
const procfs = require('./procfs')
const signals = require('./signals')
const { acquireRecordLock, ownIdentity, RecordWriter, removeStaleTemps } = require('./state-file')
const {
  adoptionRecord,
  predecessor,
  stopPredecessor,
  stopUnrecorded,
  unrecordedDaemons,
  withoutKept,
} = require('./takeover')
const transitions = require('./transitions')

const { AdoptedRun, killSpawned, OwnRun } = attempt
const { describeExit, supervisorError } = require('./words')
const { PUBLIC } = transitions
/** The public states in which a restart under way may be joined. */
const LIVE = new Set(['starting', 'running', 'backoff'])
const { abortError } = validate
const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')
const noop = () => {}

function nowIso() {
  return new Date().toISOString()
}

/** A promise of `fn()`'s value, or of its throw (argument errors of a verb that returns a promise). */
function promised(fn) {
  try {
    return fn()
  } catch (err) {
    return Promise.reject(err)
  }
}

class Supervisor extends EventEmitter {
  #o
  #args
  #env = undefined
  /** Where the machine stands: a substate of transitions.js (its public state: PUBLIC[#sub]). */
  #sub = 'idle'
  #since = nowIso()
  /** The current attempt (an OwnRun or an AdoptedRun, see attempt.js), or null while none is under way. */
  #run = null
  #timer = null
  /** start()/restart() callers waiting for the next ready: { resolve, reject }. */
  #waiters = []
  /** What restart() callers share while a restart is under way (till the next ready). */
  #restarting = null
  /** The stop under way (see #stopFlow), or null. */
  #stopping = null
  /**
   * The boot under way (lock, takeover, our first record), or null:
   * { ac: aborted by stop(), done: settles when it is over, target: the
   * predecessor's orphan it is stopping now, { pid, target: { identity, group } } or null }.
   */
  #boot = null
  #lock = null
  #restarts = 0
  #attempt = 0
  /** Monotonic times of the restarts in the crash window. */
  #window = []
  #lastExit = null
  #lastExitAt = null
  #startedAt = null
  #readyAt = null
  /** The stateFile's writer, or null without a stateFile. */
  #records
  #identity = null
  /**
   * With a stateFile: the mark every child carries in its environment
   * (MARK_VAR), recorded before the first spawn, by which a successor
   * finds a child this supervisor spawned but did not live to record.
   */
  #mark = null
  #session = undefined
  /** The end's last record write and lock release (see #afterEnd). */
  #ending = Promise.resolve()
  /** Our voice to the service manager that started us (notify.js), or null. */
  #manager = null
  /** A restart() came while an end was judged (the exited substate): it wins over the policy. */
  #restartJudged = false

  constructor(options) {
    super()
    this.#o = checkOptions(options)
    this.#args = this.#o.args
    this.#manager = notify.speaker(this, this.#o.serviceManager, this.#o.ready !== null)
    if (this.#o.stateFile !== null) {
      this.#records = new RecordWriter(this.#o.stateFile, () => this.#record())
      this.#mark = randomBytes(16).toString('hex')
    } else this.#records = null
  }

  get name() {
    return this.#o.name
  }

  get state() {
    return PUBLIC[this.#sub]
  }

  /** The running child; null while none runs, and for an adopted orphan. */
  get child() {
    const c = this.#run?.child ?? null
    return c !== null && c.exitInfo === null ? c : null
  }

  status() {
    const run = this.#liveRun()
    return {
      name: this.#o.name,
      state: this.state,
      pid: run?.pid ?? null,
      identity: run?.identity ?? null,
      adopted: run?.adopted ?? false,
      restarts: this.#restarts,
      lastExit: this.#lastExit,
      since: this.#since,
      startedAt: this.#startedAt,
      readyAt: this.#readyAt,
      health: run?.health ?? null,
    }
  }

  // ---- public verbs: events of the machine ----

  start() {
    return this.#dispatch('start')
  }

  stop(options) {
    return promised(() => this.#dispatch('stop', stopOptions(this.#o, options)))
  }

  restart(options) {
    return promised(() => {
      const o = restartOptions(this.#o, options)
      // A restart under way is joined, not begun again.
      if (this.#restarting !== null && LIVE.has(this.state)) return this.#restarting
      return this.#dispatch('restart', o)
    })
  }

  /**
   * Publishes `meta` (a JSON object; null clears) with the running daemon:
   * the stateFile's `meta` holds it until the child exits, and not a moment
   * longer (a daemon's port is never advertised after a crash). false when
   * no child runs (nothing is set).
   */
  setMeta(meta) {
    const value = checkMeta(meta)
    return this.#recordOnRun((run) => {
      run.meta = value
    })
  }

  /**
   * @internal The child's own status text (a notify `STATUS=` line; null
   * clears), recorded as `child.status` until it exits. false when no
   * child runs.
   */
  setChildStatus(text) {
    const value = checkChildStatus(text)
    return this.#recordOnRun((run) => {
      run.status = value
      this.#manager?.childStatus(value)
    })
  }

  /** Applies `change` to the running child's run and records it; false when no child runs. */
  #recordOnRun(change) {
    const run = this.#liveRun()
    if (run === null) return false
    change(run)
    this.#writeState()
    return true
  }

  /** The attempt whose child (or adopted orphan) runs now, or null. */
  #liveRun() {
    return this.#run?.live ? this.#run : null
  }

  kill(signal) {
    const num = validate.signal(signal)
    return this.#liveRun()?.signal(num) ?? false
  }

  async [asyncDispose]() {
    await this.stop()
  }

  // ---- the machine ----

  /**
   * Takes `event`: the row transitions.js has for it in the current
   * substate moves the machine (the record rewritten, and `since` reset
   * where the public state changes, or a restart begins it again), then
   * runs its action with `args`; its value is the event's answer. An event
   * without a row is dropped (undefined).
   */
  #dispatch(event, ...args) {
    const row = transitions.rowOf(this.#sub, event)
    if (row === undefined) return undefined
    if (row.to !== undefined) {
      const from = PUBLIC[this.#sub]
      this.#sub = row.to
      if (PUBLIC[row.to] !== from || event === 'restart') {
        this.#since = nowIso()
        this.#writeState()
      }
    }
    return row.run === undefined ? undefined : Supervisor.#ACTIONS[row.run](this, ...args)
  }

  /** `event` from attempt `run`: dropped unless `run` is still the current one. */
  #dispatchFor(run, event, ...args) {
    return run === this.#run ? this.#dispatch(event, run, ...args) : undefined
  }

  /** The actions the rows of transitions.js name. */
  static #ACTIONS = Object.freeze({
    begin: (s) => s.#begin(),
    beginAgain: (s) => s.#beginAgain(),
    alreadyEnded: (s) => s.#ending.then(() => null),
    restartEnded: (s, o) => s.#restartEnded(o),
    joinStart: (s) => s.#nextReady(),
    alreadyRunning: () => Promise.resolve(),
    startAfterStop: (s) => s.#stopping.then(() => s.start()),
    stop: (s, opts) => s.#stop(opts),
    escalate: (s, opts) => {
      s.#escalate(opts)
      return s.#stopping
    },
    refuseRestart: () => Promise.reject(abortError()),
    restartLater: (s, o) => s.#restartReady(o),
    restartJudged: (s, o) => {
      s.#restartJudged = true
      return s.#restartReady(o)
    },
    respawn: (s) => () => s.#dispatch('retry'),
    retire: (s, o) => s.#retire(o),
    restartNow: (s, o) => s.#restartNow(o),
    spawn: (s) => s.#spawn(),
    spawned: (s, run) => s.#spawned(run),
    checkReady: (s, run) => s.#checkReady(run),
    spawnFailed: (s, run, err) => s.#spawnFailed(run, err),
    adopt: (s, c) => s.#adopt(c),
    ready: (s, run) => s.#becameReady(run),
    announceReady: (s, run) => s.#announceReady(run),
    announceAdopted: (s, run) => s.#announceAdopted(run),
    announceRunning: (s, run) => {
      s.#emit('running', { pid: run.pid, identity: run.identity, adopted: false })
      s.#dispatchFor(run, 'running-heard')
    },
    watchHealth: (s, run) => s.#watchHealth(run),
    healthChecked: (s, run, err) => s.#healthChecked(run, err),
    announceHealth: (s, run, err, before, failures) => s.#announceHealth(run, err, before, failures),
    unhealthy: (s, run, err) => s.#unhealthy(run, err),
    readyFailed: (s, run, err) => s.#readyFailed(run, err),
    settled: (s) => {
      s.#attempt = 0
      s.#writeState()
    },
    decide: (s, run, info, spawnError) => s.#decide(run, info, spawnError),
    crash: (s, info, delayMs) => () => s.#dispatch('exit-heard', info, delayMs),
    announceRestart: (s, info, delayMs) => {
      s.#emit('restart', { attempt: s.#attempt, delayMs, lastExit: info })
      s.#dispatch('restart-heard', delayMs)
    },
    retryLater: (s, delayMs) => s.#retryLater(delayMs),
    fail: (s, err) => s.#failed(err),
    finish: (s) => s.#finished(),
  })

  // Every action a row names is one of ours: a typo fails at load, not the day its event comes.
  static {
    for (const [sub, rows] of Object.entries(transitions.TABLE)) {
      for (const [event, row] of Object.entries(rows)) {
        if (row.run !== undefined && !Object.hasOwn(Supervisor.#ACTIONS, row.run)) {
          throw new Error(`transitions.js: ${sub} ${event} names no action ${row.run}`)
        }
      }
    }
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

  // ---- starting ----

  #begin() {
    const ready = this.#nextReady()
    this.#manager?.starting()
    if (this.#o.handleSignals !== null) signals.enroll(this, this.#o.handleSignals.hup)
    if (this.#o.stateFile === null) this.#dispatch('booted')
    else {
      const boot = { ac: new AbortController(), done: null, target: null }
      this.#boot = boot
      boot.done = this.#booting(boot)
    }
    return ready
  }

  /** A start after a failure: the crash count begins again. */
  #beginAgain() {
    this.#window = []
    this.#attempt = 0
    return this.#begin()
  }

  async #booting(boot) {
    const { signal } = boot.ac
    try {
      if (this.#lock === null || this.#lock.released) {
        this.#lock = await acquireRecordLock(this.#o.stateFile, this.#o.name)
      }
      if (signal.aborted) return
      await removeStaleTemps(this.#o.stateFile)
      // Until the previous record has been acted on, nothing overwrites it:
      // a stop or a failure before then leaves it for the next successor.
      await this.#takeover(boot)
      if (signal.aborted) return
      this.#records.owned = true
      // Our mark is on disk before any child carries it: a child we spawn
      // and do not live to record is found by it.
      await this.#writeState()
      this.#dispatch('booted')
    } catch (err) {
      // Heard only while still booting: a stop has taken over.
      this.#dispatch('boot-failed', err)?.()
    } finally {
      if (this.#boot === boot) this.#boot = null
    }
  }

  async #takeover(boot) {
    const { signal } = boot.ac
    const prev = await predecessor(this.#o.stateFile)
    if (prev === null) return
    if (prev.refused !== undefined) {
      // Said once, then overwritten by ours.
      process.emitWarning(`procward: not taking over from ${this.#o.stateFile}: ${prev.refused}`, {
        code: 'PROCWARD_STATE_FILE',
      })
      return
    }
    if (signal.aborted) return // stopped before acting: the record stays for the next one
    const track = (t) => {
      boot.target = t
    }
    const adopt = this.#o.takeover === 'adopt'
    const c = prev.child
    let keep = c !== null && prev.alive && adopt ? c : null
    if (c !== null && keep === null) {
      const event = await stopPredecessor(c, prev.alive, this.#o.stopDefaults, track)
      if (event !== null) this.#emit('takeover', event)
    }
    // What the record does not name: a daemon spawned in the instant
    // before the predecessor's death. Kept with 'adopt' when it is the
    // one daemon (leading its group) and the record's child is gone;
    // stopped otherwise: never a second daemon beside ours.
    if (signal.aborted) return
    let found = await unrecordedDaemons(prev.supervisor, keep)
    if (keep === null && adopt) {
      const leaders = found.filter((d) => d.pgid === d.pid)
      if (leaders.length === 1) {
        keep = await adoptionRecord(leaders[0])
        const rest = found.filter((d) => d !== leaders[0])
        found = await withoutKept(rest, keep)
      }
    }
    for (const d of found) {
      if (signal.aborted) return
      this.#emit('takeover', await stopUnrecorded(d, this.#o.stopDefaults, track))
    }
    if (keep !== null) this.#dispatch('adopt', keep) // not after a stop: no row for it then
  }

  /** Keeps a dead predecessor's still-running child `c` as ours (takeover 'adopt'). */
  #adopt(c) {
    const run = new AdoptedRun(c, this.#o.stopDefaults.killTimeoutMs, (info) => this.#exited(run, info))
    this.#run = run
    this.#records.owned = true
    this.#startedAt = c.startedAt ?? null
    run.readyAt = performance.now()
    this.#readyAt = nowIso()
    run.readyAtIso = this.#readyAt
    this.#publishMeta(run)
    this.#settleLater(run)
    this.#emit('takeover', { pid: c.pid, identity: c.identity, action: 'adopted', result: null, suspects: [] })
    // Records before events: 'running' once the record names the orphan.
    this.#writeState().then(() => this.#dispatchFor(run, 'adopt-recorded'))
  }

  #announceAdopted(run) {
    this.#settle(undefined, null)
    this.#emit('running', { pid: run.pid, identity: run.identity, adopted: true })
    this.#dispatchFor(run, 'running-heard')
  }

  /**
   * options.meta, published with `run` as it begins to run (before the
   * record that says so is written); a function that throws or returns no
   * meta is an uncaught exception, as a throwing listener is, and the
   * child runs without.
   */
  #publishMeta(run) {
    const meta = this.#o.meta
    if (typeof meta !== 'function') return
    try {
      run.meta = checkMeta(meta({ pid: run.pid, identity: run.identity, adopted: run.adopted }))
    } catch (err) {
      process.nextTick(() => {
        throw err
      })
    }
  }

  #spawn() {
    const run = new OwnRun()
    this.#run = run
    let child
    try {
      run.notify = notify.listen(this.#o.ready) // the child's own NOTIFY_SOCKET, or null
      child = spawnSupervised(this.#o.command, this.#args, spawnOptions(this.#o, this.#env, this.#mark, run.notify))
      // Its identity now, while the pid is surely its own: the record (and a
      // successor's takeover) cannot do without it. Unreadable (/proc out
      // of reach: EMFILE), the spawn failed for a reason of ours, and the
      // child goes with its group.
      try {
        void child.identity
      } catch (err) {
        killSpawned(child)
        throw err
      }
    } catch (err) {
      run.notify?.close()
      // Heard on the next turn: so that a start() caller has its listeners
      // on, and a zero backoff never recurses.
      setImmediate(() => this.#dispatchFor(run, 'spawn-failed', err))
      return
    }
    this.#startedAt = nowIso()
    run.spawned(child, this.#o.command, this.#args, this.#startedAt)
    child.once('exit', (info) => this.#exited(run, info))
    run.notify?.watch(child, run.ac.signal, (text) => this.#run === run && this.setChildStatus(text))
    this.#pipeLines(run)
    this.#dispatch('spawned', run)
  }

  #spawned(run) {
    this.#writeState()
    this.#emit('spawn', run.child)
    this.#dispatchFor(run, 'spawn-heard')
  }

  #spawnFailed(run, err) {
    const failed = spawnFailure(err, this.#o.name)
    if (failed !== null) this.#dispatch('fail', failed)?.()
    else this.#exited(run, null, err)
  }

  /**
   * A line ready check's stream: fed to the check, then on as line events,
   * or copied byte for byte to our own stream when no one listens (see
   * output.js).
   */
  #pipeLines(run) {
    if (this.#o.ready?.kind !== 'line') return
    const kind = this.#o.ready.stream
    const stream = run.child[kind]
    if (stream === null) return
    relayOutput(stream, kind === 'stdout' ? 1 : 2, {
      check: () => run.onLine,
      listening: () => this.listenerCount(kind) > 0,
      line: (line) => this.#emit(kind, line),
    })
  }

  #checkReady(run) {
    if (this.#o.ready === null) {
      this.#dispatchFor(run, 'ready')
      return
    }
    whenReady(this.#o.ready, run, this.#o.readyTimeoutMs, this.#o.name).then(
      () => this.#dispatchFor(run, 'ready'),
      (err) => this.#dispatchFor(run, 'ready-failed', err),
    )
  }

  /** A failed ready check counts as a crash: the child is stopped, and its exit decides. */
  #readyFailed(run, err) {
    run.readyFailure = err
    run.ac.abort()
    run.child.stop(this.#o.stopDefaults).catch(noop)
  }

  #becameReady(run) {
    const at = nowIso()
    run.readyAtIso = at
    run.readyAt = performance.now()
    this.#readyAt = at
    this.#publishMeta(run)
    this.#settleLater(run)
    // Records before events: start() and restart() resolve, 'ready' and
    // 'running' fire, once the record reads running.
    this.#writeState().then(() => this.#dispatchFor(run, 'ready-recorded'))
  }

  #announceReady(run) {
    this.#settle(undefined, null)
    this.#emit('ready', run.child)
    this.#dispatchFor(run, 'ready-heard')
  }

  /**
   * Once a child has stayed ready `resetAfterMs`, the backoff count starts
   * again, and the record is rewritten: its `aliveAt` then vouches for every
   * worker the daemon started in its first `resetAfterMs` (see the stray
   * sweep). The timer does not hold the process open.
   */
  #settleLater(run) {
    const t = setTimeout(() => this.#dispatchFor(run, 'settled'), this.#o.backoff.resetAfterMs)
    t.unref()
    run.ac.signal.addEventListener('abort', () => clearTimeout(t), { once: true })
  }

  // ---- health after ready ----

  /** Once 'running' has been heard: the health checks begin (none without options.health). */
  #watchHealth(run) {
    if (this.#o.health === null) return
    watchHealth(this.#o.health, run, this.#o.name, (err) => this.#dispatchFor(run, 'health-checked', err))
  }

  /**
   * A check's result (err null: passed): counted (a failure within
   * startPeriodMs of ready is not), recorded as the child's `health`, then
   * announced (records before events).
   */
  #healthChecked(run, err) {
    const before = run.healthFailures
    const ignored = err !== null && performance.now() - run.readyAt < this.#o.health.startPeriodMs
    if (err === null) run.healthFailures = 0
    else if (!ignored) run.healthFailures++
    const failures = run.healthFailures
    run.health = { ok: err === null, at: nowIso(), error: err?.message ?? null, failures }
    // The counts go along as they are now (health.js times the next check
    // once this promise settles; the counts are this check's either way).
    return this.#writeState().then(() =>
      this.#dispatchFor(run, 'health-recorded', ignored ? null : err, before, failures),
    )
  }

  /**
   * 'unhealthy' at each counted failure, 'healthy' at a pass after
   * failures; at `failures` in a row, the child is stopped (a crash).
   */
  #announceHealth(run, err, before, failures) {
    if (err === null) {
      if (before > 0 && failures === 0) this.#emit('healthy', { pid: run.pid, failures: before })
      return
    }
    const limit = this.#o.health.failures
    this.#emit('unhealthy', { pid: run.pid, failures, limit, error: err })
    if (failures >= limit) this.#dispatchFor(run, 'health-failed', err)
  }

  /**
   * Too many failed checks: the child is stopped with its group as the
   * stop policy says (SIGTERM, the grace, SIGKILL), and SIGCONT after the
   * SIGTERM, so that a stopped daemon acts on it; its exit is judged as a
   * crash (reason 'unhealthy').
   */
  #unhealthy(run, err) {
    run.healthFailure = err
    run.ac.abort()
    run.retire(this.#o.stopDefaults).catch(noop)
    run.resume()
  }

  // ---- restarting ----

  /** restart() while stopped, failed or never started: a start with its args. */
  #restartEnded(o) {
    this.#apply(o)
    return this.start()
  }

  /**
   * The promise restart() callers share until the next ready (alone, the
   * restartLater action: still booting, or retiring, the spawn to come
   * takes the new args).
   */
  #restartReady(o) {
    this.#apply(o)
    const ready = this.#nextReady()
    this.#restarting = ready
    const clear = () => {
      if (this.#restarting === ready) this.#restarting = null
    }
    ready.then(clear, clear)
    return ready
  }

  /** In backoff: no child to stop, spawn at once. */
  #restartNow(o) {
    const ready = this.#restartReady(o)
    this.#clearTimer()
    this.#spawn()
    return ready
  }

  /** A child (or an attempt whose spawn failed) to stop before the new spawn. */
  #retire(o) {
    const ready = this.#restartReady(o)
    const run = this.#run
    run.expected = true
    run.ac.abort()
    run
      .retire(this.#o.stopDefaults)
      .catch(noop)
      .then(() => (run.exited ? run.heard : undefined))
      .then(() => this.#dispatchFor(run, 'retired'))
    return ready
  }

  // ---- an exit, and what the policy makes of it ----

  /** A child's (or adopted orphan's) exit, or a spawn that failed (info null). */
  #exited(run, info, spawnError) {
    if (run.exited) return
    run.exited = true
    run.ac.abort()
    // Stopped for its failed health checks: said in 'exit', the record's
    // lastExit, status() and 'restart'.
    if (info !== null && run.healthFailure !== null) info = Object.freeze({ ...info, reason: 'unhealthy' })
    if (info !== null) {
      this.#lastExit = info
      this.#lastExitAt = nowIso()
    }
    // Its meta, status and health go with it: a port is never advertised
    // for a daemon that has exited (the record is rewritten now, whatever
    // follows).
    run.meta = null
    run.status = null
    run.health = null
    const written = this.#writeState()
    // The state moves on at once: it is never `running` while no child
    // runs. (An exit we caused, retiring or stopping, has no row: the
    // machine waits for it.)
    this.#dispatchFor(run, 'died')
    this.#judge(run, info, spawnError, written)
  }

  /**
   * An end, heard: once the record without it is in place (`written`),
   * and, for an end we did not cause (a death by a signal we did not send,
   * or an exit with a code: a daemon that handles the SIGTERM itself and
   * exits 0), once the stop signals already sent to us have been heard (a
   * service manager signals us and the daemon at once: its end first is
   * no crash), the policy decides
   * (the judged row, where the machine still waits for it: a stop that
   * came meanwhile took it elsewhere), then 'exit' is emitted, then what
   * the decision begins.
   */
  async #judge(run, info, spawnError, written) {
    await written
    const foreign = info !== null && !run.expected && (info.signal === null || !run.sent.has(info.signal))
    if (foreign && signals.stopSignalsConcern(this)) await signals.stopSignalsHeard()
    const then = this.#dispatchFor(run, 'judged', info, spawnError)
    if (info !== null) this.#emit('exit', { ...info, expected: run.expected })
    run.hear()
    then?.()
  }

  /**
   * After an exit we did not cause: restart, or end. Takes the transition
   * now and returns what follows it ('restart' and the next spawn, or
   * 'failed'/'stopped'), for after the 'exit' event.
   */
  #decide(run, info, spawnError) {
    this.#run = null
    if (this.#restartJudged) {
      this.#restartJudged = false
      return this.#dispatch('restart-judged')
    }
    const facts = {
      exit: info,
      spawnError,
      readyFailure: run.readyFailure,
      healthFailure: run.healthFailure,
      sent: run.sent,
      readyAt: run.readyAt,
      adopted: run.adopted,
      attempt: this.#attempt,
    }
    const verdict = decideExit(facts, this.#o, this.#window, performance.now())
    if (verdict.kind === 'fail') return this.#dispatch('fail', verdict.error)
    if (verdict.kind === 'finish') return this.#dispatch('finish')
    this.#attempt = verdict.attempt
    this.#window = verdict.window
    this.#restarts++
    return this.#dispatch('crash', info, verdict.delayMs)
  }

  /** The backoff's delay (after 'exit' and 'restart' were heard), then the retry. */
  #retryLater(delayMs) {
    if (delayMs === 0) this.#dispatch('retry')
    else {
      this.#timer = setTimeout(() => {
        this.#timer = null
        this.#dispatch('retry')
      }, delayMs)
    }
  }

  /**
   * Failed (err): the start() waiters are rejected now (a start() called
   * from a listener afterwards is a new one); returns the emit of 'failed',
   * for the caller to run when its own events are out.
   */
  #failed(err) {
    this.#ended()
    this.#settle(null, err)
    return () => this.#emit('failed', err)
  }

  /** A clean exit the policy does not restart: as #failed, with 'stopped'. */
  #finished() {
    this.#ended()
    const why = this.#lastExit ? describeExit(this.#lastExit) : 'ended'
    this.#settle(null, supervisorError('ERR_SUPERVISOR_STOPPED', `${this.#o.name} ${why} and is not restarted`))
    return () => this.#emit('stopped', null)
  }

  #ended() {
    this.#clearTimer()
    this.#run = null
    this.#afterEnd()
  }

  /** Stopped or failed: the last record written, then the lock released. */
  #afterEnd() {
    signals.leave(this)
    const written = this.#records?.flushed() ?? Promise.resolve()
    this.#ending = written.then(() => {
      if ((this.#sub === 'stopped' || this.#sub === 'failed') && this.#lock !== null) {
        this.#lock.release()
        this.#lock = null
        this.#records.owned = false
      }
    })
    return this.#ending
  }

  // ---- stopping ----

  #stop(opts) {
    this.#restartJudged = false
    this.#manager?.stopping()
    this.#boot?.ac.abort()
    this.#clearTimer()
    const run = this.#run
    if (run !== null) {
      run.expected = true
      run.ac.abort()
    }
    // start()/restart() callers are answered once the stop is done: their
    // promise settles only when nothing of this run is left.
    const waiting = this.#waiters
    this.#waiters = []
    this.#stopping = this.#stopFlow(opts, waiting)
    // A takeover under way stops its orphan with the stop defaults; a stop
    // that asks for more (SIGKILL, a shorter grace) passes it on.
    if (this.#boot?.target) this.#escalate(opts)
    return this.#stopping
  }

  /** The stop; `waiting`: the start()/restart() callers it rejects with AbortError once done. */
  async #stopFlow(opts, waiting) {
    // Nothing before this await: with no child and no boot to wait for, the
    // whole flow would otherwise run inside stop(), clear #stopping before
    // stop() set it, and leave every later stop() returning this one.
    await null
    let result = null
    let error = null
    try {
      if (this.#boot !== null) await this.#boot.done
      const run = this.#run
      if (run !== null) {
        result = await run.retire(opts)
        if (run.exited) await run.heard
      }
    } catch (err) {
      error = err
    }
    this.#run = null
    this.#dispatch('stopped')
    this.#stopping = null
    await this.#afterEnd()
    for (const w of waiting) w.reject(abortError())
    this.#emit('stopped', result)
    if (error !== null) throw error
    return result
  }

  /** A second stop() while stopping: pass on what it asks for more. */
  #escalate(opts) {
    if (this.#run !== null) {
      this.#run.escalate(opts)
      return
    }
    // Still taking over: the predecessor's orphan gets it (a stop of the
    // same target joins the one under way and escalates it).
    const t = this.#boot?.target ?? null
    if (t !== null) stopSupervisedProcess(t.pid, { ...this.#o.stopDefaults, ...opts, ...t.target }).catch(noop)
  }

  #clearTimer() {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
  }

  #apply(o) {
    if (o.args !== undefined) this.#args = o.args
    if (o.env !== undefined) this.#env = o.env
  }

  // ---- the record ----

  #record() {
    const run = this.#liveRun()
    return {
      version: 1,
      name: this.#o.name,
      supervisor: {
        pid: process.pid,
        identity: this.#ownIdentity(),
        running: true,
        mark: this.#mark,
        session: this.#ownSession(),
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
      state: this.state,
      restarts: this.#restarts,
      lastExit: this.#lastExit === null ? null : { ...this.#lastExit, at: this.#lastExitAt },
      stop: this.#stopPolicy(),
      meta: run ? run.meta : null,
      updatedAt: nowIso(),
    }
  }

  #ownIdentity() {
    this.#identity ??= ownIdentity()
    return this.#identity
  }

  /** What a stop of the child takes by default (for `procward stop`, which reads the record). */
  #stopPolicy() {
    const { graceMs, killTimeoutMs } = this.#o.stopDefaults
    return { graceMs: graceMs ?? STOP_DEFAULTS.graceMs, killTimeoutMs: killTimeoutMs ?? STOP_DEFAULTS.killTimeoutMs }
  }

  #ownSession() {
    if (this.#session === undefined) this.#session = procfs.ownSession()
    return this.#session
  }

  /** Schedules a rewrite of the stateFile (see RecordWriter). */
  #writeState() {
    return this.#records?.write() ?? Promise.resolve()
  }
}

module.exports = { Supervisor }
