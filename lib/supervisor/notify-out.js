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
// A Speaker is attached to a Supervisor from outside: it hears the
// supervisor's public events, and its owner tells it the three things no
// event says (a run begins, a stop begins, the child's own STATUS=). The
// manager hears one main process, so a process has one Speaker at a time.
//
// The other way, a child's READY=1 as a ready check, is notify-in.js.

const fs = require('node:fs')
const native = require('../../binding.js')
const { callNative, fromNative } = require('../errors')
const { describeExit } = require('./attempt')
const { MANAGER_VARS } = require('./notify-in')

/** What to change when procward is not the process the manager started (docs/service-manager.md). */
const MAIN_PROCESS_FIX =
  'make procward the main process: ExecStart=<app>/node_modules/.bin/procward run ... with ' +
  'WorkingDirectory=<app> (never npx, npm exec or a shell that stays: the manager takes READY=1 and ' +
  'watches the watchdog of the process it started)'

/** A process's name (comm), or null. */
function commOf(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'latin1').trim()
  } catch {
    return null
  }
}

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
  if (exec === undefined && env.INVOCATION_ID !== undefined && process.platform === 'linux') {
    const ppid = process.ppid
    if (ppid !== 1 && commOf(ppid) !== 'systemd') {
      return `procward's parent is pid ${ppid} (${commOf(ppid) ?? '?'}), not the service manager: it refuses READY=1 from a process it did not start unless NotifyAccess=all`
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

  constructor(sup, manager, checked) {
    this.#sup = sup
    this.#manager = manager
    this.#checked = checked
    const name = sup.name
    const send = (...lines) => manager.send(...lines)
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
    this.#begun = true
    if (this.#watchdog !== null || this.#manager.watchdogMs === null) return
    this.#watchdog = setInterval(() => this.#manager.send('WATCHDOG=1'), this.#manager.watchdogMs)
    this.#watchdog.unref()
  }

  /** A stop of the run begins (nothing before starting(), nothing twice). */
  stopping() {
    if (!this.#begun) return
    this.#clearSettle()
    if (this.#stopping) return
    this.#stopping = true
    this.#manager.send('STOPPING=1', statusText(`${this.#sup.name} stopping`))
  }

  /**
   * The child's own STATUS= (notify in; null clears), passed on as it said
   * it: what the manager would show had it started the daemon itself.
   */
  childStatus(text) {
    if (text !== null) this.#manager.send(statusText(text))
  }

  /** Stops speaking: the supervisor is no longer heard, and another Speaker may take this process's place. */
  close() {
    for (const [event, listener] of this.#heard.splice(0)) this.#sup.removeListener(event, listener)
    this.#clearSettle()
    clearInterval(this.#watchdog)
    this.#watchdog = null
    this.#manager.close()
    if (owner === this) owner = null
  }

  #hear(event, listener) {
    this.#sup.on(event, listener)
    this.#heard.push([event, listener])
  }

  #ready(pid) {
    this.#manager.send('READY=1', statusText(`${this.#sup.name} running, pid ${pid}`))
  }

  #running(pid, adopted) {
    this.#clearSettle()
    if (this.#checked || adopted) return this.#ready(pid)
    this.#manager.send(statusText(`${this.#sup.name} running, pid ${pid} (ready once it has run ${SETTLE_MS} ms)`))
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
      this.#manager.send('STOPPING=1', statusText(text))
    } else this.#manager.send(statusText(text))
  }
}

/**
 * Makes `sup` (a Supervisor) speak to the service manager that started this
 * process, if one did (NOTIFY_SOCKET: see takeManager); returns its
 * Speaker, or null. `checked`: `sup` has a ready check. `say(text)`: how a
 * problem with the manager's socket or the unit is reported. Whoever
 * attaches it tells it what no event says: starting() before start(),
 * stopping() when a stop begins, childStatus() with the child's own
 * STATUS=.
 *
 * One Speaker per process (the manager hears one main process): a second
 * throws, naming the first, until the first is closed.
 */
function speakFor(sup, { checked, say }) {
  if (owner !== null) {
    throw new Error(`procward: ${owner.name} speaks to the service manager already (one supervisor per process)`)
  }
  const manager = takeManager(process.env, say)
  if (manager === null) return null
  owner = new Speaker(sup, manager, checked)
  return owner
}

module.exports = { speakFor }
