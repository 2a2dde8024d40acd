// The service manager's notify protocol (sd_notify(3)), spoken: `procward
// run` under a service manager (systemd `Type=notify`, or a container
// runtime that speaks the protocol). READY=1 once the daemon is ready,
// again after each restart's ready, STATUS= on each lifecycle event (each
// failed health check too), STOPPING=1 when the stop begins, and WATCHDOG=1
// at half WATCHDOG_USEC from start() to the end, in every state (starting,
// running, backoff, stopping): it says "procward's loop turns", from a
// timer on that loop, so a loop that is stuck sends nothing and the
// manager's watchdog sees it. A crash loop is reported by STATUS= and, when
// it gives up, by exiting, never by a watchdog kill of a healthy supervisor
// in the middle of a backoff. When WATCHDOG_PID or SYSTEMD_EXEC_PID (or,
// under systemd, our parent) shows the manager started another process
// (npx, a shell), it says so, with what to change: the manager hears only
// its main process. Sending never waits: a full queue drops the message
// (said once).
//
// A Supervisor with `notify: true` has a Speaker: it hears the
// supervisor's public events, and the supervisor tells it the three things
// no event says (a run begins, a stop begins, the child's own STATUS=). The
// manager hears one main process, so a process has one Speaker at a time:
// from its supervisor's construction to that supervisor's end (stopped or
// failed); a start() after that speaks again if no other took the place.
// The manager itself (its socket, its watchdog period) is taken once per
// process, by the first Speaker or notifyServiceManager() call.
//
// The other way, a child's READY=1 as a ready check, is notify-in.js.

const native = require('../../binding.js')
const { callNative, fromNative, typeError } = require('../errors')
const os = require('../os')
const validate = require('../validate')
const { describeExit } = require('./words')
const { MANAGER_VARS } = require('./notify-in')

/** What to change when procward is not the process the manager started (docs/service-manager.md). */
const MAIN_PROCESS_FIX =
  'make procward the main process: ExecStart=<app>/node_modules/.bin/procward run ... with ' +
  'WorkingDirectory=<app> (never npx, npm exec or a shell that stays: the manager takes READY=1 and ' +
  'watches the watchdog of the process it started)'

/**
 * Why `env` shows this process is not the one the service manager started
 * (and expects READY=1 and WATCHDOG=1 from), or null: WATCHDOG_PID or
 * systemd's SYSTEMD_EXEC_PID names another pid; or, under systemd
 * (INVOCATION_ID) without either, our parent is neither PID 1 nor a
 * systemd (a user manager) — an npx, npm or shell in between.
 */
function notMainProcess(env) {
  const own = String(process.pid)
  const wpid = env.WATCHDOG_PID
  if (wpid !== undefined && wpid !== '' && wpid !== own) {
    return `WATCHDOG_PID=${wpid} names another process, not procward (pid ${own}): no watchdog pings are sent, and the manager will kill the unit`
  }
  const exec = env.SYSTEMD_EXEC_PID
  if (exec !== undefined && exec !== '' && exec !== own) {
    return `the service manager started pid ${exec}, not procward (pid ${own}): it refuses READY=1 from any other process unless NotifyAccess=all`
  }
  if (exec === undefined && env.INVOCATION_ID !== undefined && os.PROCFS) {
    const ppid = process.ppid
    if (ppid !== 1 && os.commOf(ppid) !== 'systemd') {
      return `procward's parent is pid ${ppid} (${os.commOf(ppid) ?? '?'}), not the service manager: it refuses READY=1 from a process it did not start unless NotifyAccess=all`
    }
  }
  return null
}

/**
 * The manager that started this process, from `env` (NOTIFY_SOCKET,
 * WATCHDOG_USEC, WATCHDOG_PID), or null when there is none. The variables
 * are removed from `env` either way, as sd_notify's unset_environment does:
 * a child must never speak to our manager as if it were us, nor think a
 * watchdog it never hears of is kept. Taking them is what makes a problem
 * with the unit (not procward's main process) said once per process: the
 * next look finds no NOTIFY_SOCKET.
 *
 * `say(text)`: how a problem is reported (each at most once).
 */
function takeManager(env, say) {
  const socket = env.NOTIFY_SOCKET
  const usec = env.WATCHDOG_USEC
  const wpid = env.WATCHDOG_PID
  const notMain = socket === undefined || socket === '' ? null : notMainProcess(env)
  for (const k of MANAGER_VARS) delete env[k]
  if (socket === undefined || socket === '') return null
  if (notMain !== null) say(`${notMain}; ${MAIN_PROCESS_FIX}`)
  let sender
  try {
    sender = callNative(() => native.NotifySender.open(socket))
  } catch (err) {
    say(`NOTIFY_SOCKET not used: ${fromNative(err).message}`)
    return null
  }
  let watchdogMs = null
  if (usec !== undefined && (wpid === undefined || wpid === '' || wpid === String(process.pid))) {
    if (/^\d+$/.test(usec) && Number(usec) > 0) {
      // Half the period, as sd_watchdog_enabled(3) advises; at least 1 ms,
      // at most what a timer takes.
      watchdogMs = Math.min(Math.max(Math.floor(Number(usec) / 2000), 1), 2 ** 31 - 1)
    } else say(`WATCHDOG_USEC=${JSON.stringify(usec)} is not a number of microseconds: no watchdog pings`)
  }
  const said = new Set()
  const once = (key, text) => {
    if (said.has(key)) return
    said.add(key)
    say(text)
  }
  return {
    watchdogMs,
    /** Sends `lines` (KEY=VALUE strings) as one message; never waits, never throws. */
    send(...lines) {
      const text = lines.join('\n')
      let sent
      try {
        sent = sender.send(text)
      } catch (err) {
        const e = fromNative(err)
        once(e.code ?? e.message, `could not notify the service manager (${socket}): ${e.message}`)
        return false
      }
      if (!sent) once('full', `the service manager's notify socket is full: dropped ${lines[0]} (said once)`)
      return sent
    },
    close() {
      sender.close()
    },
  }
}

/** How long a child without a ready check must run before the manager hears it is ready. */
const SETTLE_MS = 1000

function statusText(text) {
  // One line: the protocol's separator is the newline.
  return `STATUS=${String(text).replace(/\n/g, ' ')}`
}

/** The Speaker of this process, or null (see speakFor). */
let owner = null
/** The manager, once taken (takeManager's answer: null when there is none); undefined before. */
let taken

/** How a problem with the manager's socket or the unit is said: a process warning, unless the CLI says it its way. */
let report = (text) => process.emitWarning(`procward: ${text}`, { code: 'PROCWARD_NOTIFY' })

/** Says the problems of the manager (each at most once) with `say(text)` instead of a process warning. */
function reportWith(say) {
  report = say
}

/**
 * The manager that started this process (see takeManager); null when none
 * did. Taken once: the variables leave process.env as they are taken. A
 * NOTIFY_SOCKET set again later (a test's stand-in manager) is taken anew.
 */
function manager() {
  const again = process.env.NOTIFY_SOCKET !== undefined && process.env.NOTIFY_SOCKET !== ''
  if (taken === undefined || again) {
    const previous = taken
    taken = takeManager(process.env, (text) => report(text))
    // Unless a Speaker still speaks through it.
    if (owner === null) previous?.close()
  }
  return taken
}

/**
 * Speaks for one supervisor to the manager (from takeManager). `checked`:
 * whether the supervisor has a ready check. Without one a child is ready
 * the moment it is spawned, which says nothing of a daemon that dies at
 * start-up, so the manager hears READY=1 only once it has run SETTLE_MS (a
 * crash loop is never reported ready).
 */
class Speaker {
  #sup
  #manager
  #checked
  /** The pending READY=1 of a child without a ready check (SETTLE_MS), or null. */
  #settle = null
  /** STOPPING=1 is said (a stop began, or the supervisor ended); a new spawn clears it. */
  #stopping = false
  /** The WATCHDOG=1 timer: from starting() to the supervisor's end. */
  #watchdog = null
  /** starting() came: a stop from now on is one of a run. */
  #begun = false
  /** [event, listener] pairs on the supervisor, for close(). */
  #heard = []

  constructor(sup, checked) {
    this.#sup = sup
    this.#checked = checked
    const name = sup.name
    const send = (...lines) => this.#send(...lines)
    this.#hear('spawn', (c) => {
      this.#stopping = false
      send(statusText(`${name} starting, pid ${c.pid}`))
    })
    this.#hear('running', ({ pid, adopted }) => this.#running(pid, adopted))
    this.#hear('exit', (e) => {
      this.#clearSettle()
      send(statusText(`${name} pid ${e.pid} ${describeExit(e)}`))
    })
    // Health after ready: each failed check, and a recovery.
    this.#hear('unhealthy', (u) =>
      send(
        statusText(`${name} unhealthy, pid ${u.pid}: ${u.failures} of ${u.limit} checks failed: ${u.error.message}`),
      ),
    )
    this.#hear('healthy', (h) => send(statusText(`${name} running, pid ${h.pid} (healthy again)`)))
    this.#hear('restart', (r) => send(statusText(`${name} restarting in ${r.delayMs} ms (attempt ${r.attempt})`)))
    this.#hear('takeover', (t) => send(statusText(`${name} took over pid ${t.pid} (${t.action})`)))
    // The end of a reload (Type=notify-reload waits for READY=1 after
    // RELOADING=1): a successor's 'running' says it once it serves; a
    // failed one leaves the old daemon serving, ready as it was.
    this.#hear('reload', (r) => {
      if (!r.ok) send('READY=1', statusText(`${name} reload failed, pid ${r.from} serves on: ${r.error?.message}`))
    })
    this.#hear('failed', (err) => this.#end(`${name} failed: ${err.message}`))
    this.#hear('stopped', () => this.#end(`${name} stopped`))
  }

  /** The supervisor speaking (its name). */
  get name() {
    return this.#sup.name
  }

  /**
   * A run begins (start()): the watchdog is fed from now on, in every
   * state, and only while this loop turns — a stuck loop sends nothing,
   * which is what the manager's watchdog is for.
   */
  starting() {
    // Taken at the first start, not at construction: what is said of it
    // then names a supervisor that stands.
    if (this.#manager === undefined) this.#manager = manager()
    if (owner === null) owner = this
    else if (owner !== this)
      report(`${owner.name} speaks to the service manager: ${this.name} stays silent (one supervisor per process)`)
    this.#begun = true
    if (this.#watchdog !== null || this.#manager === null || this.#manager.watchdogMs === null) return
    this.#watchdog = setInterval(() => this.#send('WATCHDOG=1'), this.#manager.watchdogMs)
    this.#watchdog.unref()
  }

  /**
   * A reload begins: RELOADING=1 with the monotonic time, as
   * `Type=notify-reload` asks (the READY=1 that ends it comes with the
   * successor's 'running', or the failed 'reload').
   */
  reloading() {
    if (!this.#begun || this.#stopping) return
    this.#clearSettle()
    const usec = process.hrtime.bigint() / 1000n
    this.#send('RELOADING=1', `MONOTONIC_USEC=${usec}`, statusText(`${this.#sup.name} reloading`))
  }

  /** A stop of the run begins (nothing before starting(), nothing twice). */
  stopping() {
    if (!this.#begun) return
    this.#clearSettle()
    if (this.#stopping) return
    this.#stopping = true
    this.#send('STOPPING=1', statusText(`${this.#sup.name} stopping`))
  }

  /**
   * The child's own STATUS= (notify in; null clears), passed on as it said
   * it: what the manager would show had it started the daemon itself.
   */
  childStatus(text) {
    if (text !== null) this.#send(statusText(text))
  }

  /** Stops speaking: the supervisor is no longer heard, and another Speaker may take this process's place. */
  close() {
    for (const [event, listener] of this.#heard.splice(0)) this.#sup.removeListener(event, listener)
    this.#clearSettle()
    clearInterval(this.#watchdog)
    this.#watchdog = null
    if (owner === this) owner = null
  }

  /** Sends while this Speaker has the place (see starting()), to the manager if there is one. */
  #send(...lines) {
    if (owner === this) this.#manager?.send(...lines)
  }

  #hear(event, listener) {
    this.#sup.on(event, listener)
    this.#heard.push([event, listener])
  }

  #ready(pid) {
    this.#send('READY=1', statusText(`${this.#sup.name} running, pid ${pid}`))
  }

  #running(pid, adopted) {
    this.#clearSettle()
    if (this.#checked || adopted) return this.#ready(pid)
    this.#send(statusText(`${this.#sup.name} running, pid ${pid} (ready once it has run ${SETTLE_MS} ms)`))
    this.#settle = setTimeout(() => {
      this.#settle = null
      if (this.#sup.state === 'running' && this.#sup.status().pid === pid) this.#ready(pid)
    }, SETTLE_MS)
    this.#settle.unref()
  }

  #clearSettle() {
    if (this.#settle !== null) clearTimeout(this.#settle)
    this.#settle = null
  }

  /** The supervisor ended (stopped or failed): no more pings; STOPPING=1 unless said already. */
  #end(text) {
    this.#clearSettle()
    clearInterval(this.#watchdog)
    this.#watchdog = null
    if (!this.#stopping) {
      this.#stopping = true
      this.#send('STOPPING=1', statusText(text))
    } else this.#send(statusText(text))
    // The run is over: another supervisor may speak from now on.
    if (owner === this) owner = null
  }
}

/**
 * Makes `sup` (a Supervisor with `notify: true`) speak to the service
 * manager that started this process, when one did (NOTIFY_SOCKET: see
 * takeManager; without one the Speaker says nothing, so that a program
 * behaves alike with and without a manager); returns its Speaker.
 * `checked`: `sup` has a ready check. The supervisor tells it what no event
 * says: starting() at start(), stopping() when a stop begins,
 * childStatus() with the child's own STATUS=.
 *
 * One Speaker per process (the manager hears one main process): another
 * while the first's supervisor has not ended throws, naming the first.
 */
function speakFor(sup, { checked }) {
  if (owner !== null) {
    throw typeError(
      `options.notify: ${owner.name} speaks to the service manager already, until it stops (one supervisor per process)`,
      'ERR_INVALID_ARG_VALUE',
    )
  }
  owner = new Speaker(sup, checked)
  return owner
}

/** An sd_notify(3) field name: upper-case letters, digits and underscores. */
const FIELD = /^[A-Z][A-Z0-9_]*$/

/**
 * Sends `fields` (e.g. `{ STATUS: 'resyncing' }`) to the service manager
 * that started this process, as one message; false when none did (no
 * NOTIFY_SOCKET) or its socket would not take it now. Never waits.
 */
function notifyServiceManager(fields) {
  validate.object(fields, 'fields')
  const lines = []
  for (const [key, value] of Object.entries(fields)) {
    if (!FIELD.test(key)) {
      throw typeError(
        `fields: ${JSON.stringify(key)} is not a notify field name (upper-case letters, digits and _)`,
        'ERR_INVALID_ARG_VALUE',
      )
    }
    if (typeof value !== 'string') throw typeError(`fields.${key} must be a string, got ${validate.describe(value)}`)
    if (value.includes('\n') || value.includes('\0')) {
      throw typeError(`fields.${key} must be one line (no newline or NUL)`, 'ERR_INVALID_ARG_VALUE')
    }
    lines.push(`${key}=${value}`)
  }
  if (lines.length === 0) throw typeError('fields must name at least one field', 'ERR_INVALID_ARG_VALUE')
  const m = manager()
  return m === null ? false : m.send(...lines)
}

module.exports = { notifyServiceManager, reportWith, speakFor }
