// One attempt of a Supervisor: a child it spawned, or a dead predecessor's
// orphan it adopted, from its start to its exit. What the attempt records
// for a successor, and how it is signalled and stopped. The machine's
// phases (life.js, health.js, exit.js, stopping.js) decide when; this says
// how.

const { constants } = require('node:os')
const validate = require('../validate')
const { CGROUP_RECORD, stopSupervisedProcess } = require('../supervised')
const { waitForExit } = require('../wait')
const procfs = require('./procfs')
const { killRecorded } = require('./takeover')
const { exitInfo } = require('./words')

const noop = () => {}
const SIGCONT = constants.signals.SIGCONT

/**
 * What every attempt has, whichever process it is about: aborting `ac`
 * ends its ready check and its timers.
 */
class Run {
  ac = new AbortController()
  /** Set when our own stop() or restart() ends it. */
  expected = false
  exited = false
  /** Signal names sent through kill(): an exit by one is not a failure. */
  sent = new Set()
  readyFailure = null
  /** The failed health check that had it stopped (the crash it counts as), or null. */
  healthFailure = null
  /** Failed health checks in a row, and the last check as the record shows it ({ ok, at, error, failures }), or null. */
  healthFailures = 0
  health = null
  /** When it became ready: performance.now(), and as an ISO time for the record. */
  readyAt = null
  readyAtIso = null
  /** The application's fields (setMeta) and the child's status text, while it runs. */
  meta = null
  status = null
  /** What the stateFile says of it (without aliveAt), once it runs. */
  record = null
  /** The exit policy's verdict on its end (see exit.js), once judged: null until then, and for an end we caused. */
  verdict = null
  /** Resolves once its end has been announced ('exit' emitted, its record rewritten before). */
  heard
  /** Resolves `heard`. */
  hear

  constructor() {
    this.heard = new Promise((resolve) => {
      this.hear = resolve
    })
  }

  /** Whether its process runs now (an attempt whose spawn failed never had one). */
  get live() {
    return !this.exited && this.record !== null
  }

  get pid() {
    return this.record?.pid ?? null
  }

  get identity() {
    return this.record?.identity ?? null
  }
}

/** An attempt of our own: a child we spawn (`child` null until the spawn succeeded). */
class OwnRun extends Run {
  child = null
  /** The child's own NOTIFY_SOCKET (notify-in.js), or null. */
  notify = null
  /** A line ready check's listener (see readiness). */
  onLine = null

  get adopted() {
    return false
  }

  /** The spawn gave `child` (command, args, at startedAt): its record. */
  spawned(child, command, args, startedAt) {
    this.child = child
    this.record = {
      pid: child.pid,
      identity: child.identity,
      pgid: child.pgid,
      session: procfs.childSession(child.pid),
      command,
      args: [...args],
      startedAt,
      cgroup: child[CGROUP_RECORD] ?? null,
    }
  }

  /** Signals the child (`num` a signal number); false when none runs. */
  signal(num) {
    if (this.child === null) return false
    this.sent.add(validate.signalName(num) ?? String(num))
    return this.child.kill(num)
  }

  /** Stops the child, waiting for its exit; null when none was spawned. */
  async retire(opts) {
    return this.child === null ? null : this.child.stop(opts)
  }

  /**
   * SIGCONT to the child's group (or the child): a SIGSTOPped daemon
   * being stopped acts on its SIGTERM now, not at the SIGKILL after the
   * grace (systemd does the same). The group's id is the child's pid,
   * held until we reap it: never another's group.
   */
  resume() {
    const c = this.child
    if (c === null || c.exitInfo !== null) return
    try {
      if (c.pgid === c.pid) process.kill(-c.pgid, 'SIGCONT')
      else c.kill('SIGCONT')
    } catch {
      // gone meanwhile
    }
  }

  /** A second stop while one runs: passes on what it asks for more (a SIGKILL, a shorter grace). */
  escalate(opts) {
    if (this.child === null) return
    this.child.stop(opts).catch(noop)
    if (isKill(opts)) this.child.kill('SIGKILL')
  }
}

/**
 * An attempt that keeps a predecessor's recorded child `c` (alive): not
 * our child, watched with waitForExit; `onExit(info)` once it has exited
 * and its recorded cgroup (if any) has been killed, as for a child of our
 * own.
 */
class AdoptedRun extends Run {
  #orphan
  #waitAc = new AbortController()
  /** Resolves once the orphan's exit has been handled. */
  #done

  constructor(c, killTimeoutMs, onExit) {
    super()
    this.#orphan = Object.freeze({ pid: c.pid, identity: c.identity, pgid: c.pgid })
    this.record = {
      pid: c.pid,
      identity: c.identity,
      pgid: c.pgid,
      session: c.session,
      command: c.command,
      args: c.args,
      startedAt: c.startedAt,
      cgroup: c.cgroup ?? null,
    }
    this.#done = waitForExit(c.pid, { identity: c.identity, signal: this.#waitAc.signal }).then(
      async (r) => {
        await killRecorded(c.cgroup, killTimeoutMs).catch(noop)
        onExit(exitInfo({ pid: c.pid, code: r.exit?.code, signal: r.exit?.signal }))
      },
      noop, // aborted: an unkillable orphan we stopped waiting for
    )
  }

  get adopted() {
    return true
  }

  /** No child of ours. */
  get child() {
    return null
  }

  /** Signals the orphan, identity checked: not our child, its pid may be reused the moment it exits. */
  signal(num) {
    this.sent.add(validate.signalName(num) ?? String(num))
    return procfs.signalIdentified(this.#orphan.pid, this.#orphan.identity, num)
  }

  /** Stops the orphan with its group, waiting for its exit (or giving up on an unkillable one). */
  async retire(opts) {
    const result = await stopSupervisedProcess(this.#orphan.pid, { ...opts, ...this.#target() })
    if (result.outcome === 'unkillable') this.#waitAc.abort()
    else await this.#done
    return result
  }

  escalate(opts) {
    if (isKill(opts)) stopSupervisedProcess(this.#orphan.pid, { signal: 'SIGKILL', ...this.#target() }).catch(noop)
  }

  /** SIGCONT to the orphan itself, identity checked (its group's id is not held by us: left alone). */
  resume() {
    procfs.signalIdentified(this.#orphan.pid, this.#orphan.identity, SIGCONT)
  }

  #target() {
    const { pid, identity, pgid } = this.#orphan
    return { identity, group: pgid === pid }
  }
}

function isKill(opts) {
  return opts.signal === 'SIGKILL' || opts.signal === 9
}

/**
 * SIGKILL to a child just spawned. Through its own handle, which never
 * signals a pid once reaped; its group is swept at its exit, before its
 * reap (killGroupOnExit), where the pid and the group are surely its own.
 */
function killSpawned(child) {
  try {
    child.kill('SIGKILL')
  } catch {
    // Dead already.
  }
}

module.exports = { killSpawned, OwnRun, AdoptedRun }
