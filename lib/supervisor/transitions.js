// The Supervisor's machine, as data: its substates, the public state each
// one shows, and for each substate and event the row that says what
// happens — the substate it moves to (`to`, none: it stays) and the
// action the machine runs (`run`, a name the phase files give a function;
// machine.js checks at load that each one has it). An event a substate
// has no row for is dropped: so `stopped` and `failed` are left only by
// start(), `stopping` only by the end of the stop, and a late word from an
// attempt's process (its ready check, its retire, its spawn's failure)
// does nothing once the machine has moved on.

/**
 * Substate → the public state it shows (the `state` getter, status().state
 * and the record's `state`). The starting substates:
 * booting (the stateFile's lock and the takeover; without a stateFile it
 * passes at once), spawning (a spawn whose failure is yet to be heard),
 * awaiting-ready (a child spawned, its ready check under way), retiring (a
 * restart stopping the child it replaces). exited: a child has exited (or
 * its spawn failed) not by our doing, and its end is being judged: the
 * record without it in place first, then, for a death by a signal we did
 * not send, our own pending stop signals heard (a stop that reached us is
 * never taken for a crash); shown as backoff, between a child and what
 * follows it. unhealthy: a running child failed its health checks
 * (options.health) and is being stopped; its exit is then judged as a
 * crash's. Shown as running: the daemon runs until that exit.
 */
const PUBLIC = Object.freeze({
  idle: 'idle',
  booting: 'starting',
  spawning: 'starting',
  'awaiting-ready': 'starting',
  retiring: 'starting',
  running: 'running',
  unhealthy: 'running',
  exited: 'backoff',
  backoff: 'backoff',
  stopping: 'stopping',
  stopped: 'stopped',
  failed: 'failed',
})

/** The seven public states, in the order of a life. */
const STATES = Object.freeze(['idle', 'starting', 'running', 'backoff', 'stopping', 'stopped', 'failed'])

const row = (to, run) => Object.freeze({ to, run })
const stay = (run) => row(undefined, run)

/**
 * Events. The verbs: start, stop, restart. From the boot: booted (the
 * previous record acted on, ours written), adopt (the takeover kept a
 * predecessor's orphan), boot-failed. From an attempt: spawned,
 * spawn-failed, ready (its check passed, or there is none), ready-failed,
 * settled (it stayed ready resetAfterMs), died (its process exited, or its
 * spawn failed, not by our doing), judged (that end is recorded, and no
 * stop signal of ours is left unheard: a stop that came meanwhile took
 * the machine elsewhere), retired (a restart's stop of it is done),
 * health-checked (a health check's result), health-failed (too many
 * failed in a row: stop it, a crash). The policy's verdict on an end
 * (policy.js): crash (restart it after a delay), fail, finish (a clean
 * exit not restarted); or restart-judged (a restart() came while it was
 * judged: a new child at once, whatever the policy). retry (the delay is
 * over), stopped (the stop is done). Then the steps of the guards below.
 */
/**
 * reload() (with held sockets; the face refuses it without) overlaps only
 * with a running child (reload.js). Where none serves — ended, starting,
 * in backoff — there is nothing to overlap with, and it is restart().
 */
const ENDED = {
  start: row('booting', 'begin'),
  stop: stay('alreadyEnded'),
  restart: stay('restartEnded'),
  reload: stay('restartEnded'),
}
const ALIVE = { start: stay('joinStart'), stop: row('stopping', 'stop') }
/** A reload's successor became ready: it is the running child (the swap). */
const RELOADING = { reload: stay('reload'), 'reload-ready': row('running', 'swap') }
/**
 * The verdict moves the machine at once (the record, status() and the
 * start() callers see it before 'exit' is emitted); what it begins —
 * 'restart' and the retry, or 'failed', or 'stopped' — follows the 'exit'
 * event (exit.js).
 */
const DECIDED = {
  judged: stay('decide'),
  'restart-judged': row('backoff', undefined),
  crash: row('backoff', undefined),
  fail: row('failed', 'endFailed'),
  finish: row('stopped', 'endFinished'),
}

// ---- re-entrancy guards ----
// The steps that follow an event once its listeners have been heard
// (…-heard), or once the record says what the event will announce
// (…-recorded: records before events). A listener may stop or restart the
// supervisor; the step then finds no row where the machine has gone, and
// what it would have begun (a ready check, the 'running' event, the
// health checks, the retry) is not begun. One guard per stretch of a life.

/** After 'spawn': the ready check. */
const AFTER_SPAWN = { 'spawn-heard': stay('checkReady') }
/**
 * While running: ready (or an adoption) recorded, then announced; after
 * 'ready', 'running'; after 'running', the health checks; each check's
 * result recorded, then announced.
 */
const WHILE_RUNNING = {
  'ready-recorded': stay('announceReady'),
  'adopt-recorded': stay('announceAdopted'),
  'ready-heard': stay('announceRunning'),
  'running-heard': stay('watchHealth'),
  'health-recorded': stay('announceHealth'),
}
/** After a crash's 'exit': 'restart'; after 'restart', the backoff's delay. */
const AFTER_CRASH = { 'exit-heard': stay('announceRestart'), 'restart-heard': stay('retryLater') }

const TABLE = Object.freeze({
  idle: Object.freeze({ ...ENDED }),
  booting: Object.freeze({
    ...ALIVE,
    restart: stay('restartLater'),
    reload: stay('restartLater'),
    booted: row('spawning', 'spawn'),
    adopt: row('running', 'adopt'),
    'boot-failed': row('failed', 'fail'),
  }),
  spawning: Object.freeze({
    ...ALIVE,
    restart: row('retiring', 'retire'),
    reload: row('retiring', 'retire'),
    spawned: row('awaiting-ready', 'spawned'),
    'spawn-failed': stay('spawnFailed'),
    fail: row('failed', 'fail'),
    died: row('exited', undefined),
  }),
  'awaiting-ready': Object.freeze({
    ...ALIVE,
    restart: row('retiring', 'retire'),
    reload: row('retiring', 'retire'),
    ...AFTER_SPAWN,
    ready: row('running', 'ready'),
    'ready-failed': stay('readyFailed'),
    died: row('exited', undefined),
  }),
  retiring: Object.freeze({
    ...ALIVE,
    restart: stay('restartLater'),
    reload: stay('restartLater'),
    retired: row('spawning', 'spawn'),
  }),
  running: Object.freeze({
    start: stay('alreadyRunning'),
    stop: row('stopping', 'stop'),
    restart: row('retiring', 'retire'),
    ...RELOADING,
    ...WHILE_RUNNING,
    settled: stay('settled'),
    'health-checked': stay('healthChecked'),
    'health-failed': row('unhealthy', 'unhealthy'),
    died: row('exited', undefined),
  }),
  // A late health result, a settle, is dropped here: the child is on its way out.
  unhealthy: Object.freeze({
    start: stay('alreadyRunning'),
    stop: row('stopping', 'stop'),
    restart: row('retiring', 'retire'),
    ...RELOADING,
    died: row('exited', undefined),
  }),
  exited: Object.freeze({
    ...ALIVE,
    restart: stay('restartJudged'),
    reload: stay('restartJudged'),
    // The child a reload replaces ended first: its successor takes over.
    promote: row('awaiting-ready', 'promote'),
    ...DECIDED,
  }),
  backoff: Object.freeze({
    ...ALIVE,
    restart: row('spawning', 'restartNow'),
    reload: row('spawning', 'restartNow'),
    ...AFTER_CRASH,
    retry: row('spawning', 'spawn'),
  }),
  stopping: Object.freeze({
    start: stay('startAfterStop'),
    stop: stay('escalate'),
    restart: stay('refuseRestart'),
    reload: stay('refuseRestart'),
    stopped: row('stopped', undefined),
  }),
  stopped: Object.freeze({ ...ENDED }),
  failed: Object.freeze({ ...ENDED, start: row('booting', 'beginAgain') }),
})

const SUBSTATES = Object.freeze(Object.keys(TABLE))

/** The row for `event` in `substate`, or undefined where the table has none. */
function rowOf(substate, event) {
  return Object.hasOwn(TABLE[substate], event) ? TABLE[substate][event] : undefined
}

module.exports = { TABLE, PUBLIC, STATES, SUBSTATES, rowOf }
