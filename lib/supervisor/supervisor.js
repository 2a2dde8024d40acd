// Supervisor: keeps one daemon running. Restarts it when it exits (the
// exit event is the reap, so the new child never meets its predecessor's
// workers), backs off and gives up on a crash loop, checks readiness,
// records its state for a successor, and takes over from a dead
// predecessor. This file is the machine: the actions the transitions of
// ./transitions.js take. Its concepts live beside it: options, readiness,
// the state file, takeover, process signals, backoff, and what /proc says.

const { randomBytes } = require('node:crypto')
const { EventEmitter } = require('node:events')
const validate = require('../validate')
const { STOP_DEFAULTS, spawnSupervised, stopSupervisedProcess } = require('../supervised')
const attempt = require('./attempt')
const { backoffDelay, crashWindow, nextAttempt } = require('./backoff')
const { checkChildStatus, checkMeta, checkOptions, restartOptions, spawnOptions, stopOptions } = require('./options')
const { relayOutput } = require('./output')
const notify = require('./notify')
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

const { describeExit, supervisorError } = attempt
const { abortError } = validate
const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')
const noop = () => {}

/**
 * Spawn errors no wait can heal: the program is missing (or a directory on
 * its path is not one, or the path is too long or loops), may not be run
 * (EACCES, EPERM: a setuid the supervisor may not do), is no program the
 * kernel can run (ENOEXEC), or its arguments can never fit (E2BIG).
 */
const UNHEALING_SPAWN_ERRORS = new Set([
  'ENOENT',
  'ENOTDIR',
  'ENAMETOOLONG',
  'ELOOP',
  'EACCES',
  'EPERM',
  'ENOEXEC',
  'E2BIG',
])

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
  #state = 'idle'
  #since = nowIso()
  /** Bumped by stop(): async work begun before it does nothing after. */
  #epoch = 0
  /** The current attempt (see attempt.js), or null while none is under way. */
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

  constructor(options) {
    super()
    this.#o = checkOptions(options)
    this.#args = this.#o.args
    this.#manager = notify.speaker(this, options, this.#o.ready !== null)
    if (this.#o.stateFile !== null) {
      this.#records = new RecordWriter(this.#o.stateFile, () => this.#record())
      this.#mark = randomBytes(16).toString('hex')
    } else this.#records = null
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
    if (this.#o.handleSignals !== null) signals.enroll(this, this.#o.handleSignals.hup)
    if (this.#o.stateFile === null) this.#spawn()
    else this.#booting = this.#boot(this.#epoch)
    return ready
  }

  stop(options) {
    return promised(() => {
      const opts = stopOptions(this.#o, options)
      if (this.#stopping !== null) {
        this.#escalate(opts)
        return this.#stopping
      }
      // Already ended (or never started): once its last record is written
      // and the lock released, as after a stop of ours.
      if (!this.#go('stop')) return this.#ending.then(() => null)
      this.#manager?.stopping()
      this.#epoch++
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
      if (this.#takingOver !== null) this.#escalate(opts)
      return this.#stopping
    })
  }

  restart(options) {
    return promised(() => {
      const o = restartOptions(this.#o, options)
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
      // Still booting (lock, takeover): it spawns with the new args.
      if (run === null && this.#state === 'starting') return ready
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
      attempt
        .retire(run, this.#o.stopDefaults)
        .catch(noop)
        .then(() => {
          if (epoch !== this.#epoch || this.#run !== run || this.#state !== 'starting') return
          this.#run = null
          this.#spawn()
        })
      return ready
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
    const run = this.#run
    if (run === null || run.exited || (run.child === null && run.adopted === null)) return null
    return run
  }

  kill(signal) {
    const num = validate.signal(signal)
    const run = this.#run
    if (run === null || run.exited || this.#state === 'backoff') return false
    return attempt.signal(run, num)
  }

  async [asyncDispose]() {
    await this.stop()
  }

  // ---- the machine ----

  /** Takes `event` from the current state, if the table allows it. */
  #go(event) {
    const next = transitions.next(this.#state, event)
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

  async #boot(epoch) {
    try {
      if (this.#lock === null || this.#lock.released) {
        this.#lock = await acquireRecordLock(this.#o.stateFile, this.#o.name)
      }
      if (epoch !== this.#epoch) return
      await removeStaleTemps(this.#o.stateFile)
      // Until the previous record has been acted on, nothing overwrites it:
      // a stop or a failure before then leaves it for the next successor.
      await this.#takeover(epoch)
      if (epoch !== this.#epoch) return
      this.#records.owned = true
      // Our mark is on disk before any child carries it: a child we spawn
      // and do not live to record is found by it.
      await this.#writeState()
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
    const prev = await predecessor(this.#o.stateFile)
    if (prev === null) return
    if (prev.refused !== undefined) {
      // Said once, then overwritten by ours.
      process.emitWarning(`procward: not taking over from ${this.#o.stateFile}: ${prev.refused}`, {
        code: 'PROCWARD_STATE_FILE',
      })
      return
    }
    if (epoch !== this.#epoch) return // stopped before acting: the record stays for the next one
    const track = (t) => {
      this.#takingOver = t
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
    if (epoch !== this.#epoch) return
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
      if (epoch !== this.#epoch) return
      this.#emit('takeover', await stopUnrecorded(d, this.#o.stopDefaults, track))
    }
    if (keep !== null && epoch === this.#epoch) this.#adopt(keep)
  }

  /** Keeps a dead predecessor's still-running child as ours (takeover 'adopt'). */
  #adopt(c) {
    const run = attempt.adopted(c, this.#o.stopDefaults.killTimeoutMs, (info) => this.#exited(run, info, 'exit'))
    this.#run = run
    this.#records.owned = true
    this.#startedAt = c.startedAt ?? null
    run.readyAt = performance.now()
    this.#readyAt = nowIso()
    run.readyAtIso = this.#readyAt
    if (!this.#go('adopt')) return
    this.#settleLater(run)
    this.#emit('takeover', { pid: c.pid, identity: c.identity, action: 'adopted', result: null, suspects: [] })
    if (this.#run === run && !run.exited) this.#emit('running', { pid: c.pid, identity: c.identity, adopted: true })
    this.#settle(undefined, null)
  }

  #spawn() {
    const run = attempt.newRun()
    this.#run = run
    let child
    try {
      run.notify = notify.listen(this.#o.ready) // the child's own NOTIFY_SOCKET, or null
      child = spawnSupervised(this.#o.command, this.#args, spawnOptions(this.#o, this.#env, this.#mark, run.notify))
    } catch (err) {
      run.notify?.close()
      // Containment asked for where it cannot be had: no restart can
      // change that, and running uncontained is never a silent fallback.
      if (err?.code === 'ERR_CGROUP_UNAVAILABLE') {
        setImmediate(() => {
          if (this.#run === run) this.#end('fail', err)?.()
        })
        return
      }
      // A program that is not there, may not be run, or is no program:
      // waiting does not change that (a crash loop of restarts would only
      // delay the answer). Failed at once, on the next turn (so that a
      // start() caller has its listeners on).
      if (UNHEALING_SPAWN_ERRORS.has(err?.code)) {
        setImmediate(() => {
          if (this.#run !== run) return
          const failed = supervisorError(
            'ERR_SUPERVISOR_FAILED',
            `${this.#o.name} could not be started: ${err.message}`,
            {
              cause: err,
              lastExit: null,
            },
          )
          this.#end('fail', failed)?.()
        })
        return
      }
      // Counted as a crash (a missing command fails every time, and ends
      // in a crash loop), handled on the next turn so a zero backoff never
      // recurses.
      setImmediate(() => this.#exited(run, null, 'spawn', err))
      return
    }
    this.#startedAt = nowIso()
    attempt.spawned(run, child, this.#o.command, this.#args, this.#startedAt)
    child.once('exit', (info) => this.#exited(run, info, 'exit'))
    run.notify?.watch(child, run.ac.signal, (text) => this.#run === run && this.setChildStatus(text))
    this.#pipeLines(run)
    this.#writeState()
    this.#emit('spawn', child)
    if (this.#run === run && !run.ac.signal.aborted) this.#checkReady(run)
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
      this.#becameReady(run)
      return
    }
    whenReady(this.#o.ready, run, this.#o.readyTimeoutMs, this.#o.name).then(
      () => {
        if (this.#run === run && !run.ac.signal.aborted) this.#becameReady(run)
      },
      (err) => {
        if (this.#run === run && !run.exited && !run.expected) this.#readyFailed(run, err)
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
    const at = nowIso()
    run.readyAtIso = at
    if (!this.#go('ready')) return
    run.readyAt = performance.now()
    this.#readyAt = at
    this.#settleLater(run)
    this.#settle(undefined, null)
    this.#emit('ready', run.child)
    // Unless a 'ready' listener already stopped or restarted it.
    if (this.#run === run && !run.exited && this.#state === 'running') {
      this.#emit('running', { pid: run.child.pid, identity: run.child.identity, adopted: false })
    }
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
    if (info !== null) {
      this.#lastExit = info
      this.#lastExitAt = nowIso()
    }
    // Its meta and status go with it: a port is never advertised for a
    // daemon that has exited (the record is rewritten now, whatever follows).
    run.meta = null
    run.status = null
    this.#writeState()
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
      if (!failure) return this.#end('finish', null)
      const cause = run.readyFailure ?? spawnError
      const what = cause ? cause.message : `${describeExit(info)}${beforeReady ? ' before it was ready' : ''}`
      return this.#end(
        'fail',
        supervisorError('ERR_SUPERVISOR_FAILED', `${this.#o.name} ${what}`, { cause, lastExit: info }),
      )
    }
    // Monotonic: a wall clock stepped back or forward neither hides nor
    // forgives restarts.
    const now = performance.now()
    const { recent, exceeded } = crashWindow(this.#window, now, this.#o.crashLoop)
    this.#window = recent
    if (exceeded) {
      return this.#end(
        'fail',
        supervisorError(
          'ERR_CRASH_LOOP',
          `${this.#o.name} ${describeExit(info)}; given up after ${recent.length} restarts within ${this.#o.crashLoop.windowMs} ms`,
          { cause: run.readyFailure ?? spawnError, lastExit: info },
        ),
      )
    }
    this.#attempt = nextAttempt(this.#o.backoff, this.#attempt, run.readyAt, now)
    const delayMs = backoffDelay(this.#o.backoff, this.#attempt)
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
    signals.leave(this)
    const written = this.#records?.flushed() ?? Promise.resolve()
    this.#ending = written.then(() => {
      if ((this.#state === 'stopped' || this.#state === 'failed') && this.#lock !== null) {
        this.#lock.release()
        this.#lock = null
        this.#records.owned = false
      }
    })
    return this.#ending
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
      if (this.#booting !== null) await this.#booting
      const run = this.#run
      if (run !== null) result = await attempt.retire(run, opts)
    } catch (err) {
      error = err
    }
    this.#run = null
    this.#go('stopped')
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
      attempt.escalate(this.#run, opts)
      return
    }
    // Still taking over: the predecessor's orphan gets it (a stop of the
    // same target joins the one under way and escalates it).
    const t = this.#takingOver
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
    const run = this.#run
    const live = run !== null && !run.exited && run.record !== null
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
      child: live
        ? { ...run.record, aliveAt: nowIso(), readyAt: run.readyAtIso, status: run.status, running: true }
        : null,
      state: this.#state,
      restarts: this.#restarts,
      lastExit: this.#lastExit === null ? null : { ...this.#lastExit, at: this.#lastExitAt },
      stop: this.#stopPolicy(),
      meta: live ? run.meta : null,
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
