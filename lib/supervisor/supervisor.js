// Supervisor: keeps one daemon running. Restarts it when it exits (the
// exit event is the reap, so the new child never meets its predecessor's
// workers), backs off and gives up on a crash loop, checks readiness,
// records its state for a successor, takes over from a dead predecessor,
// and restarts a running daemon that fails its health checks.
//
// This file is the public face (types/supervisor.d.ts, one to one): it
// checks a verb's arguments and hands it to the machine as an event. The
// machine (./machine.js) is the state as one plain object and dispatch(),
// which runs the row ./transitions.js has for the event in the current
// substate. The rows name actions; the actions live in the phase files:
// ./boot.js (the lock and the takeover), ./life.js (an attempt's spawn,
// ready check and running), ./health.js (checks after ready), ./exit.js
// (an end, judged by ./policy.js, a pure function, and what follows), and
// ./stopping.js (stop() and restart()), ./reload.js (reload()'s overlap
// on the held sockets of ./sockets.js); the record is state-file.js's
// recordOf. Beside them: options, one attempt (./attempt.js), readiness,
// the state file, takeover, process signals, notify, backoff, and what
// /proc says.

const { EventEmitter } = require('node:events')
const validate = require('../validate')
const boot = require('./boot')
const exit = require('./exit')
const health = require('./health')
const life = require('./life')
const { actionTable, createMachine, dispatch, liveRun, recordOnRun } = require('./machine')
const notifyOut = require('./notify-out')
const { checkMeta, checkOptions, restartOptions, stopOptions } = require('./options')
const reload = require('./reload')
const stopping = require('./stopping')
const { supervisorError } = require('./words')
const { PUBLIC } = require('./transitions')

const ACTIONS = actionTable(boot.actions, life.actions, health.actions, exit.actions, stopping.actions, reload.actions)
/** The public states in which a restart under way may be joined. */
const LIVE = new Set(['starting', 'running', 'backoff'])
const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')

/** A promise of `fn()`'s value, or of its throw (argument errors of a verb that returns a promise). */
function promised(fn) {
  try {
    return fn()
  } catch (err) {
    return Promise.reject(err)
  }
}

class Supervisor extends EventEmitter {
  /** The machine (machine.js): all of this supervisor's state. */
  #m

  constructor(options) {
    super()
    const o = checkOptions(options)
    this.#m = createMachine(this, o, ACTIONS)
    // Once the machine stands: the speaker reads this supervisor's name.
    // Without a service manager (no NOTIFY_SOCKET) there is none.
    if (o.notify) this.#m.manager = notifyOut.speakFor(this, { checked: o.ready !== null })
  }

  get name() {
    return this.#m.o.name
  }

  get state() {
    return PUBLIC[this.#m.sub]
  }

  /** The running child; null while none runs, and for an adopted orphan. */
  get child() {
    const c = this.#m.run?.child ?? null
    return c !== null && c.exitInfo === null ? c : null
  }

  /** The held sockets (options.listen) as bound: name and address (the real port of a port 0); empty while none are held. */
  get listening() {
    return this.#m.sockets?.listening ?? Object.freeze([])
  }

  status() {
    const m = this.#m
    const run = liveRun(m)
    const next = m.reloading?.next.live ? m.reloading.next : null
    return {
      name: m.o.name,
      state: this.state,
      pid: run?.pid ?? null,
      identity: run?.identity ?? null,
      adopted: run?.adopted ?? false,
      restarts: m.restarts,
      lastExit: m.lastExit,
      since: m.since,
      startedAt: m.startedAt,
      readyAt: m.readyAt,
      health: run?.health ?? null,
      next: next === null ? null : { pid: next.pid, identity: next.identity },
    }
  }

  // ---- the verbs: events of the machine ----

  start() {
    return dispatch(this.#m, 'start')
  }

  stop(options) {
    return promised(() => dispatch(this.#m, 'stop', stopOptions(this.#m.o, options)))
  }

  restart(options) {
    return promised(() => {
      const o = restartOptions(this.#m.o, options)
      // A restart under way is joined, not begun again.
      if (this.#m.restarting !== null && LIVE.has(this.state)) return this.#m.restarting
      return dispatch(this.#m, 'restart', o)
    })
  }

  /**
   * A replacement no client sees (options.listen): the successor (with
   * restart()'s new args or env) starts on the held sockets while the
   * running child serves, which is stopped once the successor is ready.
   * Resolves then; rejects when the successor never gets ready (the old
   * one serves on). Where no child runs, it is restart().
   */
  reload(options) {
    return promised(() => {
      const m = this.#m
      const o = restartOptions(m.o, options)
      if (m.o.listen === null && m.o.adopted === null) {
        throw supervisorError(
          'ERR_RELOAD_WITHOUT_LISTEN',
          `${m.o.name} holds no sockets (options.listen): a reload needs them to overlap two daemons; use restart()`,
        )
      }
      // A restart under way is joined; where no daemon serves, the restart
      // the table runs stands for the reload. Either way its outcome is
      // said as a reload's.
      if (m.restarting !== null && LIVE.has(this.state) && m.reloading === null) {
        return reload.standIn(m, m.restarting)
      }
      const overlaps = m.sub === 'running' || m.sub === 'unhealthy'
      const answer = dispatch(m, 'reload', o)
      return overlaps ? answer : reload.standIn(m, answer)
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
    return recordOnRun(this.#m, (run) => {
      run.meta = value
    })
  }

  kill(signal) {
    const num = validate.signal(signal)
    return liveRun(this.#m)?.signal(num) ?? false
  }

  async [asyncDispose]() {
    await this.stop()
  }
}

module.exports = { Supervisor }
