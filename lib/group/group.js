// SupervisorGroup: several daemons from one config, each one Supervisor
// (its own state file, takeover, health, notify, exactly as alone),
// started in the order of their `after` once what they wait for is READY,
// stopped in reverse. The group adds the order, the log files
// (./log-file.js), and its events: each Supervisor's, as `{ name, ... }`.
// A daemon's crash is its Supervisor's business (it restarts alone; the
// daemons after it keep running); the group only orders starts and stops.

const { EventEmitter } = require('node:events')
const fs = require('node:fs/promises')
const { Supervisor } = require('../supervisor')
const { EXIT_REASON } = require('../supervisor/exit')
const { abortError } = require('../validate')
const { checkGroupConfig, daemonError } = require('./config')
const { LogFile } = require('./log-file')
const { MemoryWatch } = require('./memory')
const { GroupSpeaker } = require('./speaker')

const noop = () => {}

/** Events whose argument is an object: re-emitted as `{ name, ...it }`. */
const SPREAD = ['exit', 'unhealthy', 'healthy', 'restart', 'running', 'takeover']
/** Events whose argument is not: re-emitted as `{ name, [key]: it }`. */
const WRAPPED = { spawn: 'child', ready: 'child', failed: 'error', stopped: 'result' }
/**
 * The line events, `{ name, line }`. A Supervisor copies its piped stream to
 * this process's own stdout/stderr when no one listens to them, so the group
 * listens to a daemon's only while someone listens to the group's (or while
 * the daemon's output goes to its log: then it is never copied).
 */
const LINES = ['stdout', 'stderr']

/** The error of a group start that daemon `name` failed (`cause` why). */
function startError(name, cause) {
  const err = new Error(`${name} did not start: ${cause?.message ?? String(cause)}`, { cause })
  err.code = 'ERR_SUPERVISOR_FAILED'
  err.daemon = name
  return err
}

class SupervisorGroup extends EventEmitter {
  /** name → { name, sup, after, dependents, log (LogFile | null), memory (MemoryWatch | null), lines: { stdout, stderr } }, in start order. */
  #daemons = new Map()
  #supervisors
  #stateDir
  /** The group's voice to the service manager (config.notify), or null. */
  #speaker = null
  /** The start under way (its promise and its AbortController), the stop under way. */
  #starting = null
  #startAc = null
  #stopping = null
  /** Whether the daemons' line events are relayed now (someone listens to the group's). */
  #relaying = { stdout: false, stderr: false }

  constructor(config) {
    super()
    const c = checkGroupConfig(config)
    this.#stateDir = c.stateDir
    // The daemon that speaks to the service manager (at most one) last: a
    // Supervisor that throws after it would leave it holding that place.
    const speakerLast = [...c.daemons].sort(
      (a, b) => Number(a.options.notify === true) - Number(b.options.notify === true),
    )
    const sups = new Map()
    for (const d of speakerLast) {
      try {
        sups.set(d.name, new Supervisor(d.options))
      } catch (err) {
        throw daemonError(err, d.name)
      }
    }
    for (const d of c.daemons) {
      const daemon = { name: d.name, sup: sups.get(d.name), after: d.after, dependents: d.dependents }
      daemon.log = d.log === null ? null : new LogFile(d.log)
      daemon.memory = d.memoryLimit === null ? null : this.#watchMemory(daemon, d)
      this.#daemons.set(d.name, daemon)
      this.#forward(daemon)
    }
    this.#supervisors = new Map([...this.#daemons].map(([name, d]) => [name, d.sup]))
    if (c.notify) this.#speaker = new GroupSpeaker(this)
    this.#watchListeners()
  }

  /** Each daemon's Supervisor, by its name (its key in `daemons`). */
  get supervisors() {
    return this.#supervisors
  }

  /**
   * Starts each daemon once those in its `after` are ready, independent ones
   * together; resolves once all are ready. A daemon that does not start
   * (its Supervisor gave up, its log cannot be opened) stops the others,
   * dependents first, and rejects (`daemon`: its name, `cause`: why). A
   * stop() first rejects it with an AbortError. Joins a start under way;
   * after a stop under way, starts once it is done.
   */
  start() {
    if (this.#starting !== null) return this.#starting
    const ac = new AbortController()
    this.#startAc = ac
    const after = this.#stopping === null ? Promise.resolve() : this.#stopping.catch(noop)
    const p = after.then(() => this.#startAll(ac))
    this.#starting = p
    const clear = () => {
      if (this.#starting === p) this.#starting = null
    }
    p.then(clear, clear)
    return p
  }

  /**
   * Stops every daemon, each once the daemons after it have stopped, and
   * closes the logs; resolves when all have stopped. Ends a start under way.
   * A second call shares the first.
   */
  stop() {
    this.#startAc?.abort()
    if (this.#stopping === null) {
      const p = this.#stopAll()
      this.#stopping = p
      const clear = () => {
        if (this.#stopping === p) this.#stopping = null
      }
      p.then(clear, clear)
    }
    return this.#stopping
  }

  removeAllListeners(...args) {
    super.removeAllListeners(...args)
    // That may have taken our own listeners of listeners: back again.
    this.#watchListeners()
    return this
  }

  async #startAll(ac) {
    if (ac.signal.aborted) throw abortError()
    this.#speaker?.starting()
    if (this.#stateDir !== null) await fs.mkdir(this.#stateDir, { recursive: true, mode: 0o700 })
    let failure = null
    const ready = new Map()
    for (const d of this.#daemons.values()) {
      const p = this.#startOne(d, ready, ac)
      p.catch((err) => {
        // The first failure stops the rest; those after it fail in turn
        // (what they wait for will not be ready), and are no news.
        if (ac.signal.aborted) return
        failure = startError(d.name, err)
        this.stop().catch(noop)
      })
      ready.set(d.name, p)
    }
    await Promise.allSettled(ready.values())
    if (failure !== null) {
      await this.#stopping?.catch(noop)
      throw failure
    }
    if (ac.signal.aborted) throw abortError()
    this.#speaker?.ready()
  }

  async #startOne(d, ready, ac) {
    await Promise.all(d.after.map((name) => ready.get(name)))
    if (ac.signal.aborted) throw abortError()
    if (d.log !== null) {
      try {
        await d.log.open()
      } catch (err) {
        throw new Error(`cannot open its log: ${err.message}`, { cause: err })
      }
      if (ac.signal.aborted) throw abortError()
    }
    // Checked and started in one turn: a stop() after this point finds the
    // Supervisor starting, and stops it.
    await d.sup.start()
  }

  async #stopAll() {
    this.#speaker?.stopping()
    try {
      await this.#stopEach()
    } finally {
      this.#speaker?.stopped()
    }
  }

  async #stopEach() {
    const done = new Map()
    const errors = []
    for (const d of [...this.#daemons.values()].reverse()) {
      const stopped = (async () => {
        // Dependents come first in this loop: theirs are set.
        await Promise.all(d.dependents.map((name) => done.get(name)))
        d.memory?.close()
        try {
          await d.sup.stop()
        } catch (err) {
          errors.push(err)
        }
        await d.log?.close().catch((err) => errors.push(err))
      })()
      done.set(d.name, stopped)
    }
    await Promise.all(done.values())
    if (errors.length > 0) throw errors[0]
  }

  /**
   * `d`'s memoryLimit: each child its Supervisor spawns is watched; one
   * over the limit is stopped ('memory' emitted), and its exit is the
   * Supervisor's crash with reason 'memory'.
   */
  #watchMemory(daemon, d) {
    const { name, sup } = daemon
    const watch = new MemoryWatch(d.memoryLimit, d.options.spawn?.stop, (over) =>
      this.emit('memory', { name, ...over }),
    )
    sup[EXIT_REASON] = (info) => watch.reasonOf(info)
    sup.on('spawn', (child) => watch.watch(child))
    return watch
  }

  /** Re-emits `d`'s Supervisor's events as the group's, and feeds its log. */
  #forward(d) {
    const { name, sup, log } = d
    for (const event of SPREAD) sup.on(event, (info) => this.emit(event, { name, ...info }))
    for (const [event, key] of Object.entries(WRAPPED))
      sup.on(event, (value) => this.emit(event, { name, [key]: value }))
    d.lines = {}
    for (const event of LINES) d.lines[event] = (line) => this.emit(event, { name, line })
    if (log === null) return
    for (const event of LINES) sup.on(event, d.lines[event])
    sup.on('spawn', (child) => {
      log.attach(child.stdout)
      log.attach(child.stderr)
    })
  }

  /** Relays the line events `event` of the daemons without a log, or stops. */
  #relayLines(event, on) {
    if (this.#relaying[event] === on) return
    this.#relaying[event] = on
    for (const d of this.#daemons.values()) {
      if (d.log !== null) continue
      if (on) d.sup.on(event, d.lines[event])
      else d.sup.removeListener(event, d.lines[event])
    }
  }

  #onNewListener = (event) => {
    if (LINES.includes(event)) this.#relayLines(event, true)
  }

  #onRemoveListener = (event) => {
    if (LINES.includes(event) && this.listenerCount(event) === 0) this.#relayLines(event, false)
  }

  #watchListeners() {
    if (!this.listeners('newListener').includes(this.#onNewListener)) this.on('newListener', this.#onNewListener)
    if (!this.listeners('removeListener').includes(this.#onRemoveListener)) {
      this.on('removeListener', this.#onRemoveListener)
    }
    for (const event of LINES) this.#relayLines(event, this.listenerCount(event) > 0)
  }
}

module.exports = { SupervisorGroup }
