// The Supervisor's machine, as data: its substates, the public state each
// one shows, and for each substate and event the row that says what
// happens — the substate it moves to (`to`, none: it stays) and the
// action the machine runs (`run`, a name supervisor.js gives a method).
// An event a substate has no row for is dropped: so `stopped` and `failed`
// are left only by start(), `stopping` only by the end of the stop, and a
// late word from an attempt's process (its ready check, its retire, its
// spawn's failure) does nothing once the machine has moved on.

/**
 * Substate → the public state it shows (status().state, the record's
 * `state`, the 'state' a listener sees). The starting substates:
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
 * failed in a row: stop it, a crash). The policy's word
 * on an exit: restart-judged (a restart() came while it was judged: a
 * new child at once, whatever the policy), crash (restart it after a delay), fail, finish (a clean exit
 * not restarted). retry (the delay is over), stopped (the stop is done).
 *
 * Steps: what follows an event once its listeners have been heard
 * (spawn-heard, ready-heard, running-heard, exit-heard,
 * restart-heard), or once the
 * record says what the event will announce (ready-recorded,
 * adopt-recorded, health-recorded: records before events). A listener may
 * stop or restart the supervisor; the step then finds no row where the
 * machine has gone, and what it would have begun (a ready check, the
 * 'running' event, the retry) is not begun.
 */
const ENDED = { start: row('booting', 'begin'), stop: stay('alreadyEnded'), restart: stay('restartEnded') }
const ALIVE = { start: stay('joinStart'), stop: row('stopping', 'stop') }
const DECIDED = {
  judged: stay('decide'),
  crash: row('backoff', 'crash'),
  fail: row('failed', 'fail'),
  finish: row('stopped', 'finish'),
}

const TABLE = Object.freeze({
  idle: Object.freeze({ ...ENDED }),
  booting: Object.freeze({
    ...ALIVE,
    restart: stay('restartLater'),
    booted: row('spawning', 'spawn'),
    adopt: row('running', 'adopt'),
    'boot-failed': row('failed', 'fail'),
  }),
  spawning: Object.freeze({
    ...ALIVE,
    restart: row('retiring', 'retire'),
    spawned: row('awaiting-ready', 'spawned'),
    'spawn-failed': stay('spawnFailed'),
    fail: row('failed', 'fail'),
    died: row('exited', undefined),
  }),
  'awaiting-ready': Object.freeze({
    ...ALIVE,
    restart: row('retiring', 'retire'),
    'spawn-heard': stay('checkReady'),
    ready: row('running', 'ready'),
    'ready-failed': stay('readyFailed'),
    died: row('exited', undefined),
  }),
  retiring: Object.freeze({
    ...ALIVE,
    restart: stay('restartLater'),
    retired: row('spawning', 'spawn'),
  }),
  running: Object.freeze({
    start: stay('alreadyRunning'),
    stop: row('stopping', 'stop'),
    restart: row('retiring', 'retire'),
    'ready-recorded': stay('announceReady'),
    'adopt-recorded': stay('announceAdopted'),
    'ready-heard': stay('announceRunning'),
    'running-heard': stay('watchHealth'),
    settled: stay('settled'),
    'health-checked': stay('healthChecked'),
    'health-recorded': stay('announceHealth'),
    'health-failed': row('unhealthy', 'unhealthy'),
    died: row('exited', undefined),
  }),
  // A late health result, a settle, is dropped here: the child is on its way out.
  unhealthy: Object.freeze({
    start: stay('alreadyRunning'),
    stop: row('stopping', 'stop'),
    restart: row('retiring', 'retire'),
    died: row('exited', undefined),
  }),
  exited: Object.freeze({
    ...ALIVE,
    restart: stay('restartJudged'),
    'restart-judged': row('backoff', 'respawn'),
    ...DECIDED,
  }),
  backoff: Object.freeze({
    ...ALIVE,
    restart: row('spawning', 'restartNow'),
    'exit-heard': stay('announceRestart'),
    'restart-heard': stay('retryLater'),
    retry: row('spawning', 'spawn'),
  }),
  stopping: Object.freeze({
    start: stay('startAfterStop'),
    stop: stay('escalate'),
    restart: stay('refuseRestart'),
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
