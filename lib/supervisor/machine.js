// The Supervisor's machine at the bottom: its whole state as one plain
// object (`m`), and dispatch(m, event), which looks the event up in the
// table of ./transitions.js and runs the action its row names. The actions
// live above, in the phase files (boot, life, health, exit, stopping); each
// takes `m` and the event's arguments, and returns nothing, or a promise (a
// verb's answer). Whoever holds `m` holds the machine: the face
// (supervisor.js) is the only one outside.

const { randomBytes } = require('node:crypto')
const { nowIso, RecordWriter, recordOf } = require('./state-file')
const { PUBLIC, TABLE, rowOf } = require('./transitions')

/**
 * The state of a Supervisor (`face`, its public object: the emitter its
 * events go out on, and what signals.js and notify-out.js are handed) with the
 * normalised options `o`; `actions`: the table's actions by name (see
 * actionTable).
 */
function createMachine(face, o, actions) {
  const m = {
    face,
    o,
    actions,
    /** Its voice to the service manager that started us (notify-out.js, with options.notify), or null. */
    manager: null,
    /** What the next spawn takes: options.args, or a restart()'s; the env a restart() gave. */
    args: o.args,
    env: undefined,
    /** Where the machine stands: a substate of transitions.js (its public state: PUBLIC[sub]). */
    sub: 'idle',
    since: nowIso(),
    /** The current attempt (an OwnRun or an AdoptedRun, see attempt.js), or null while none is under way. */
    run: null,
    /** The backoff's timer before a retry. */
    timer: null,
    /** start()/restart() callers waiting for the next ready: { resolve, reject }. */
    waiters: [],
    /** What restart() callers share while a restart is under way (till the next ready). */
    restarting: null,
    /** The stop under way (its promise, see stopping.js), or null. */
    stopping: null,
    /**
     * The boot under way (lock, takeover, our first record), or null:
     * { ac: aborted by stop(), done: settles when it is over, target: the
     * predecessor's orphan it is stopping now, { pid, target: { identity, group } } or null }.
     */
    boot: null,
    lock: null,
    restarts: 0,
    /** The backoff's count, and the monotonic times of the restarts in the crash window (policy.js). */
    attempt: 0,
    window: [],
    lastExit: null,
    lastExitAt: null,
    startedAt: null,
    readyAt: null,
    /** The stateFile's writer, or null without a stateFile. */
    records: null,
    /**
     * With a stateFile: the mark every child carries in its environment
     * (MARK_VAR), recorded before the first spawn, by which a successor
     * finds a child this supervisor spawned but did not live to record.
     */
    mark: null,
    /** This process's identity and session, read for the first record (state-file.js). */
    identity: null,
    session: undefined,
    /** The end's last record write and lock release (see exit.js's afterEnd). */
    ending: Promise.resolve(),
    /** A restart() came while an end was judged (the exited substate): it wins over the policy. */
    restartJudged: false,
    /** The listening sockets held for the children (sockets.js), from the boot to the end; null without options.listen. */
    sockets: null,
    /**
     * The reload under way (reload.js): { from: the serving attempt, next:
     * its successor, promise, resolve, reject, failed, abandoned }, or null.
     */
    reloading: null,
    /** The last reload's outcome, as the record shows it: { at, ok, from, to, error }, or null. */
    lastReload: null,
    /** Children a reload replaced, being stopped (their grace: finishing their requests) until they have exited. */
    draining: new Set(),
  }
  if (o.stateFile !== null) {
    m.records = new RecordWriter(o.stateFile, () => recordOf(m))
    m.mark = randomBytes(16).toString('hex')
  }
  return m
}

/**
 * Takes `event`: the row transitions.js has for it in the current
 * substate moves the machine (the record rewritten, and `since` reset
 * where the public state changes, or a restart begins it again), then
 * runs its action with `args`; its value (a verb's promise, or undefined)
 * is the event's answer. An event without a row is dropped (undefined).
 */
function dispatch(m, event, ...args) {
  const row = rowOf(m.sub, event)
  if (row === undefined) return undefined
  if (row.to !== undefined) {
    const from = PUBLIC[m.sub]
    m.sub = row.to
    if (PUBLIC[row.to] !== from || event === 'restart') {
      m.since = nowIso()
      writeState(m)
    }
  }
  return row.run === undefined ? undefined : m.actions[row.run](m, ...args)
}

/** `event` from attempt `run`: dropped unless `run` is still the current one. */
function dispatchFor(m, run, event, ...args) {
  return run === m.run ? dispatch(m, event, run, ...args) : undefined
}

/**
 * The phases' actions as one frozen table, checked against transitions.js
 * at load: every action a row names is one of them (a typo fails at load,
 * not the day its event comes), each of them is named by a row (none is
 * left that no event runs), and no two phases give one name.
 */
function actionTable(...phases) {
  const actions = {}
  for (const phase of phases) {
    for (const [name, fn] of Object.entries(phase)) {
      if (Object.hasOwn(actions, name)) throw new Error(`two phases give the action ${name}`)
      actions[name] = fn
    }
  }
  const named = new Set()
  for (const [sub, rows] of Object.entries(TABLE)) {
    for (const [event, row] of Object.entries(rows)) {
      if (row.run === undefined) continue
      if (!Object.hasOwn(actions, row.run))
        throw new Error(`transitions.js: ${sub} ${event} names no action ${row.run}`)
      named.add(row.run)
    }
  }
  for (const name of Object.keys(actions)) {
    if (!named.has(name)) throw new Error(`transitions.js: no row names the action ${name}`)
  }
  return Object.freeze(actions)
}

function emit(m, event, ...args) {
  try {
    m.face.emit(event, ...args)
  } catch (err) {
    // A throwing listener surfaces as an uncaught exception, as for any
    // emitter, but never leaves the machine half-way through a step.
    process.nextTick(() => {
      throw err
    })
  }
}

/** A promise of the next ready (or of the failure or stop that comes first). */
function nextReady(m) {
  return new Promise((resolve, reject) => m.waiters.push({ resolve, reject }))
}

/** Resolves (err null) or rejects every start()/restart() waiter. */
function settle(m, value, err) {
  const waiters = m.waiters
  m.waiters = []
  for (const w of waiters) {
    if (err) w.reject(err)
    else w.resolve(value)
  }
}

/** The attempt whose child (or adopted orphan) runs now, or null. */
function liveRun(m) {
  return m.run?.live ? m.run : null
}

/** Applies `change` to the running child's attempt and records it; false when no child runs. */
function recordOnRun(m, change) {
  const run = liveRun(m)
  if (run === null) return false
  change(run)
  writeState(m)
  return true
}

/** Schedules a rewrite of the stateFile (see RecordWriter); resolves once it is in place. */
function writeState(m) {
  return m.records?.write() ?? Promise.resolve()
}

function clearTimer(m) {
  if (m.timer !== null) clearTimeout(m.timer)
  m.timer = null
}

module.exports = {
  createMachine,
  dispatch,
  dispatchFor,
  actionTable,
  emit,
  nextReady,
  settle,
  liveRun,
  recordOnRun,
  writeState,
  clearTimer,
}
