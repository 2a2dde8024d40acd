// The service manager's notify protocol (sd_notify(3)), both ways.
//
// In: `ready: { notify: true }`. Each attempt gets a socket of its own
// (abstract, random name) as the child's NOTIFY_SOCKET; the child is ready
// at the first `READY=1` sent by the child itself, a member of the process
// group it leads, or a process in its cgroup (judged natively, by the
// kernel-attached credentials, the moment the message is read); its
// `STATUS=` lines become the record's child.status. Anything else is
// ignored and counted. The socket closes when the attempt ends (the child's
// exit, a stop, a restart, a failed ready check).
//
// Out: `procward run` under a service manager (systemd `Type=notify`, or a
// container runtime that speaks the protocol). READY=1 once the daemon is
// ready, again after each restart's ready, STATUS= on each lifecycle event,
// STOPPING=1 when the stop begins, and WATCHDOG=1 at half WATCHDOG_USEC
// while a child runs — from a timer on our own event loop, so a loop that is
// stuck sends nothing and the manager's watchdog sees it. Sending never
// waits: a full queue drops the message (said once).

const native = require('../../binding.js')
const { brand, callNative, fromNative, typeError } = require('../errors')
const { abortError } = require('../validate')
const { describeExit } = require('./attempt')

/** The manager's variables: ours to read, never a child's to inherit. */
const MANAGER_VARS = Object.freeze(['NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID'])

/** Whether this OS speaks the protocol (Linux). */
function supported() {
  return native.notifySupported()
}

/** `KEY=VALUE` lines of one message → Map (the last of a key wins). */
function fields(text) {
  const out = new Map()
  for (const line of text.split('\n')) {
    const eq = line.indexOf('=')
    if (eq > 0) out.set(line.slice(0, eq), line.slice(eq + 1))
  }
  return out
}

let refusalSaid = false

/** One attempt's own notify socket (see the file's header). */
class NotifyIn {
  #rx
  #closed = false
  #ready = false
  #waiters = []
  #onStatus = null
  #failure = null
  /** Messages ignored: from a process that may not speak for the child, or too long. */
  refused = 0

  constructor() {
    this.#rx = callNative(() => native.NotifyReceiver.bind(null))
  }

  /** The child's NOTIFY_SOCKET value. */
  get address() {
    return this.#rx.address
  }

  /** `base` with our socket as NOTIFY_SOCKET, and without a manager's watchdog (we keep none). */
  env(base) {
    const env = { ...base }
    for (const k of MANAGER_VARS) delete env[k]
    env.NOTIFY_SOCKET = this.address
    return env
  }

  /**
   * Reads what `child` (and its group / cgroup) sends, until `signal`
   * aborts; `onStatus(text | null)` for each STATUS=.
   */
  watch(child, signal, onStatus) {
    if (this.#closed) return
    this.#onStatus = onStatus
    const peers = { child: child.pid }
    // Only a group the child leads: sharing ours, its "group" would be
    // every process of this one's, us included.
    if (child.pgid !== null && child.pgid === child.pid) peers.group = child.pgid
    if (child.cgroup !== null) peers.cgroup = child.cgroup
    try {
      callNative(() => this.#rx.start(peers, () => this.#drain()))
    } catch (err) {
      // (No thread or fd for the reader: EMFILE.) The ready check fails
      // with it, which counts as a crash, as a spawn that failed would.
      this.#failure = fromNative(err)
      this.close()
      for (const w of this.#waiters.splice(0)) w.fail(this.#failure)
      return
    }
    if (signal.aborted) this.close()
    else signal.addEventListener('abort', () => this.close(), { once: true })
  }

  /** Resolves at the first READY=1 from the child's side; rejects when `signal` aborts first. */
  ready(signal) {
    if (this.#ready) return Promise.resolve()
    if (this.#failure !== null) return Promise.reject(this.#failure)
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(abortError(signal))
      const onAbort = () => reject(abortError(signal))
      signal.addEventListener('abort', onAbort, { once: true })
      const done = (fn, arg) => {
        signal.removeEventListener('abort', onAbort)
        fn(arg)
      }
      this.#waiters.push({ ok: () => done(resolve), fail: (err) => done(reject, err) })
    })
  }

  #drain() {
    if (this.#closed) return
    for (const m of this.#rx.drain()) {
      if (!m.trusted) {
        this.refused++
        if (!refusalSaid) {
          refusalSaid = true
          const why = m.oversized ? 'longer than 4096 bytes' : 'not the child, its process group or its cgroup'
          process.emitWarning(`procward: ignored a notify message from pid ${m.pid}: ${why} (said once)`, {
            code: 'PROCWARD_NOTIFY_REFUSED',
          })
        }
        continue
      }
      const f = fields(m.text)
      if (f.has('STATUS')) {
        const status = f.get('STATUS')
        this.#onStatus?.(status === '' ? null : status)
      }
      if (f.get('READY') === '1' && !this.#ready) {
        this.#ready = true
        for (const w of this.#waiters.splice(0)) w.ok()
      }
      // Everything else a manager may take (MAINPID=, FDSTORE=1 with its
      // fds, which were closed unread, WATCHDOG=1, RELOADING=1) is not ours.
    }
  }

  close() {
    if (this.#closed) return
    this.#closed = true
    this.#waiters = []
    this.#rx.close()
  }
}

/** A NotifyIn when `ready` (normalised options.ready) asks for one, else null. */
function listen(ready) {
  return ready?.kind === 'sd-notify' ? new NotifyIn() : null
}

// ---- out: procward run under a service manager ----

/**
 * The manager that started this process, from `env` (NOTIFY_SOCKET,
 * WATCHDOG_USEC, WATCHDOG_PID), or null when there is none. The variables
 * are removed from `env` either way, as sd_notify's unset_environment does:
 * a child must never speak to our manager as if it were us, nor think a
 * watchdog it never hears of is kept.
 *
 * `say(text)`: how a problem is reported (each at most once).
 */
function serviceManager(env, say) {
  const socket = env.NOTIFY_SOCKET
  const usec = env.WATCHDOG_USEC
  const wpid = env.WATCHDOG_PID
  for (const k of MANAGER_VARS) delete env[k]
  if (socket === undefined || socket === '') return null
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

/**
 * Speaks for `sup` to `manager` (from serviceManager). `checked`: whether
 * the supervisor has a ready check. Without one a child is ready the moment
 * it is spawned, which says nothing of a daemon that dies at start-up, so
 * the manager hears READY=1 only once it has run SETTLE_MS (a crash loop is
 * never reported ready). Returns `stopping()`, for the start of a stop.
 */
function speakFor(sup, manager, checked) {
  const name = sup.name
  let settle = null
  let stopping = false
  let watchdog = null
  const clearSettle = () => {
    if (settle !== null) clearTimeout(settle)
    settle = null
  }
  // While a child runs, and only while this loop turns: a stuck loop sends
  // nothing, which is what the manager's watchdog is for. Started with the
  // first child (or adopted orphan), ended with the supervisor.
  const watch = () => {
    if (watchdog !== null || manager.watchdogMs === null) return
    watchdog = setInterval(() => {
      if (sup.status().pid !== null) manager.send('WATCHDOG=1')
    }, manager.watchdogMs)
    watchdog.unref()
  }
  const ready = (pid) => manager.send('READY=1', statusText(`${name} running, pid ${pid}`))
  sup.on('spawn', (c) => {
    stopping = false
    watch()
    manager.send(statusText(`${name} starting, pid ${c.pid}`))
  })
  sup.on('running', ({ pid, adopted }) => {
    watch()
    clearSettle()
    if (checked || adopted) return ready(pid)
    manager.send(statusText(`${name} running, pid ${pid} (ready once it has run ${SETTLE_MS} ms)`))
    settle = setTimeout(() => {
      settle = null
      if (sup.state === 'running' && sup.status().pid === pid) ready(pid)
    }, SETTLE_MS)
    settle.unref()
  })
  sup.on('exit', (e) => {
    clearSettle()
    manager.send(statusText(`${name} pid ${e.pid} ${describeExit(e)}`))
  })
  sup.on('restart', (r) => manager.send(statusText(`${name} restarting in ${r.delayMs} ms (attempt ${r.attempt})`)))
  sup.on('takeover', (t) => manager.send(statusText(`${name} took over pid ${t.pid} (${t.action})`)))
  const end = (text) => {
    clearSettle()
    clearInterval(watchdog)
    watchdog = null
    if (!stopping) {
      stopping = true
      manager.send('STOPPING=1', statusText(text))
    } else manager.send(statusText(text))
  }
  sup.on('failed', (err) => end(`${name} failed: ${err.message}`))
  sup.on('stopped', () => end(`${name} stopped`))
  return {
    /** A stop begins. */
    stopping() {
      clearSettle()
      if (stopping) return
      stopping = true
      manager.send('STOPPING=1', statusText(`${name} stopping`))
    },
    /** The child's own STATUS= (notify in), passed on as it said it: what the manager would show had it started the daemon itself. */
    childStatus(text) {
      if (text !== null) manager.send(statusText(text))
    },
  }
}

/**
 * Package-internal Supervisor option (what `procward run` sets): speak to
 * the service manager that started this process, if one did. Its value is
 * `{ say(text) }`, how a problem with the manager's socket is reported.
 */
const SERVICE_MANAGER = Symbol.for('procward.serviceManager')

/**
 * The supervisor's voice to its manager (speakFor's), when `options` asks
 * for one and a manager started us; else null. `checked`: it has a ready
 * check.
 */
function speaker(sup, options, checked) {
  const o = options[SERVICE_MANAGER]
  if (o === undefined) return null
  if (o === null || typeof o !== 'object' || typeof o.say !== 'function') {
    throw typeError('the service manager option must be { say(text) }')
  }
  const manager = serviceManager(process.env, o.say)
  return manager === null ? null : speakFor(sup, manager, checked)
}

/** options.ready.notify: only `true`, and only where the protocol exists. */
function checkNotifyReady(value, name) {
  if (value !== true) throw typeError(`${name} must be true`, 'ERR_INVALID_ARG_VALUE')
  if (!supported()) {
    const err = new Error(`${name}: the notify protocol needs Linux (unix datagram sockets with SCM_CREDENTIALS)`)
    err.code = 'ERR_NOTIFY_UNAVAILABLE'
    throw brand(err)
  }
  return { kind: 'sd-notify' }
}

module.exports = {
  MANAGER_VARS,
  SERVICE_MANAGER,
  NotifyIn,
  listen,
  serviceManager,
  speaker,
  checkNotifyReady,
  fields,
  supported,
}
