// A group's voice to the service manager that started this process (a
// systemd Type=notify unit running `procward up`): one main process for all
// the daemons. READY=1 once every daemon is ready (the group's start()
// resolved), STATUS= with how many run after each daemon's event,
// STOPPING=1 when the group stops, and WATCHDOG=1 at half WATCHDOG_USEC
// while this loop turns. The daemons' own Supervisors stay silent (a
// daemon with `notify: true` in a group that speaks is refused).
//
// The manager is taken at the first start, before any daemon is spawned:
// its variables leave process.env then (notify-out.js), so that no daemon
// speaks to our manager as if it were us.

const { notifyServiceManager } = require('../supervisor/notify-out')

/** The events after which STATUS= is said again. */
const STATUS_EVENTS = ['running', 'exit', 'restart', 'failed', 'stopped']

class GroupSpeaker {
  #group
  #watchdog = null
  #begun = false
  #stopping = false

  constructor(group) {
    this.#group = group
    for (const event of STATUS_EVENTS) {
      group.on(event, (e) => {
        if (this.#begun) this.#status(`${e.name}: ${event}`)
      })
    }
  }

  /** A start begins: the manager is taken now (before any spawn), and the watchdog fed from now on. */
  starting() {
    // Read before the take, which removes them.
    const usec = process.env.WATCHDOG_USEC
    const wpid = process.env.WATCHDOG_PID
    this.#begun = true
    this.#stopping = false
    this.#send({ STATUS: `starting ${this.#group.supervisors.size} daemons` })
    if (this.#watchdog !== null || usec === undefined || !/^\d+$/.test(usec) || Number(usec) <= 0) return
    if (wpid !== undefined && wpid !== '' && wpid !== String(process.pid)) return
    const ms = Math.min(Math.max(Math.floor(Number(usec) / 2000), 1), 2 ** 31 - 1)
    this.#watchdog = setInterval(() => this.#send({ WATCHDOG: '1' }), ms)
    this.#watchdog.unref()
  }

  /** Every daemon is ready. */
  ready() {
    this.#send({ READY: '1', STATUS: this.#counts() })
  }

  /** The group stops (once per stop). */
  stopping() {
    if (!this.#begun || this.#stopping) return
    this.#stopping = true
    this.#send({ STOPPING: '1', STATUS: `stopping: ${this.#counts()}` })
  }

  /** The group has stopped: no more pings. */
  stopped() {
    clearInterval(this.#watchdog)
    this.#watchdog = null
    if (this.#begun) this.#send({ STATUS: 'stopped' })
    this.#begun = false
  }

  /** "2 of 3 running (db, web); cache backoff". */
  #counts() {
    const sups = [...this.#group.supervisors]
    const running = sups.filter(([, s]) => s.state === 'running').map(([n]) => n)
    const others = sups.filter(([, s]) => s.state !== 'running').map(([n, s]) => `${n} ${s.state}`)
    const text = `${running.length} of ${sups.length} running${running.length ? ` (${running.join(', ')})` : ''}`
    return others.length ? `${text}; ${others.join(', ')}` : text
  }

  #status(last) {
    this.#send({ STATUS: `${this.#counts()} (last: ${last})` })
  }

  #send(fields) {
    try {
      notifyServiceManager(fields)
    } catch {
      // A text the protocol cannot carry: not said.
    }
  }
}

module.exports = { GroupSpeaker }
