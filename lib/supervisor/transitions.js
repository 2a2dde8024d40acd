// The Supervisor's states and every transition between them, in one table.
// A transition not listed cannot happen: `next()` answers undefined and the
// machine (supervisor.js) drops what it was about to do. So `stopped` and
// `failed` are left only by start(), and `stopping` only by the end of the
// stop.

/**
 * state → event → next state.
 *
 * Events: start (start()), ready (the ready check passed, or there is
 * none), adopt (takeover kept a predecessor's orphan), crash (the daemon
 * exited or failed its ready check, and the policy restarts it), retry (the
 * backoff delay is over), restart (restart()), stop (stop()), stopped (the
 * stop is done), fail (the policy gives up, or the start could not begin),
 * finish (a clean exit the policy does not restart).
 */
const TRANSITIONS = Object.freeze({
  idle: Object.freeze({ start: 'starting' }),
  starting: Object.freeze({
    ready: 'running',
    adopt: 'running',
    crash: 'backoff',
    restart: 'starting',
    stop: 'stopping',
    fail: 'failed',
    finish: 'stopped',
  }),
  running: Object.freeze({
    crash: 'backoff',
    restart: 'starting',
    stop: 'stopping',
    fail: 'failed',
    finish: 'stopped',
  }),
  backoff: Object.freeze({ retry: 'starting', restart: 'starting', stop: 'stopping' }),
  stopping: Object.freeze({ stopped: 'stopped' }),
  stopped: Object.freeze({ start: 'starting' }),
  failed: Object.freeze({ start: 'starting' }),
})

const STATES = Object.freeze(Object.keys(TRANSITIONS))

/** The state `event` leads to from `state`, or undefined where the table has no such move. */
function next(state, event) {
  return Object.hasOwn(TRANSITIONS[state], event) ? TRANSITIONS[state][event] : undefined
}

module.exports = { TRANSITIONS, STATES, next }
