// The service manager's notify protocol (sd_notify(3)), both ways.
//
// In: `ready: { notify: true }`. Each attempt gets a socket of its own
// (abstract, random name) as the child's NOTIFY_SOCKET; the child is ready
// at the first `READY=1` sent by the child itself, a process descending
// from it, or a process in its cgroup (judged natively, by the
// kernel-attached credentials, the moment the message is read); its
// `STATUS=` lines become the record's child.status. Anything else is
// ignored and counted. The socket closes when the attempt ends (the child's
// exit, a stop, a restart, a failed ready check).
//
// Out: `procward run` under a service manager (systemd `Type=notify`, or a
// container runtime that speaks the protocol). READY=1 once the daemon is
// ready, again after each restart's ready, STATUS= on each lifecycle event (each failed health check too),
// STOPPING=1 when the stop begins, and WATCHDOG=1 at half WATCHDOG_USEC
// from start() to the end, in every state (starting, running, backoff,
// stopping): it says "procward's loop turns", from a timer on that loop, so
// a loop that is stuck sends nothing and the manager's watchdog sees it. A
// crash loop is reported by STATUS= and, when it gives up, by exiting, never
// by a watchdog kill of a healthy supervisor in the middle of a backoff.
// When WATCHDOG_PID or SYSTEMD_EXEC_PID (or, under systemd, our parent)
// shows the manager started another process (npx, a shell), it says so
// once, with what to change: the manager hears only its main process. Sending never
// waits: a full queue drops the message (said once).

const fs = require('node:fs')
const native = require('../../binding.js')
const { brand, callNative, fromNative, typeError } = require('../errors')
const { abortError } = require('../validate')
const { describeExit } = require('./attempt')

/** The manager's variables: ours to read, never a child's to inherit. */
const MANAGER_VARS = Object.freeze(['NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID'])

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

let mainProcessSaid = false

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
    // The child and its descendants (judged by their parent chain), and its
    // cgroup; never its process group as such, which anyone of our session
    // may join.
    const peers = { child: child.pid }
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
          const why = m.oversized ? 'longer than 4096 bytes' : 'not the child, a descendant of it or in its cgroup'
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
  const notMain = socket === undefined || socket === '' ? null : notMainProcess(env)
  for (const k of MANAGER_VARS) delete env[k]
  if (socket === undefined || socket === '') return null
  if (notMain !== null && !mainProcessSaid) {
    // Once per process: the unit is wrong, not this supervisor.
    mainProcessSaid = true
    say(`${notMain}; ${MAIN_PROCESS_FIX}`)
  }
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
 * never reported ready). Returns `starting()` and `stopping()`, for the
 * start of a run and of a stop.
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
  // In every state, and only while this loop turns: a stuck loop sends
  // nothing, which is what the manager's watchdog is for. Started with
  // start(), ended with the supervisor (stopped or failed).
  const watch = () => {
    if (watchdog !== null || manager.watchdogMs === null) return
    watchdog = setInterval(() => manager.send('WATCHDOG=1'), manager.watchdogMs)
    watchdog.unref()
  }
  const ready = (pid) => manager.send('READY=1', statusText(`${name} running, pid ${pid}`))
  sup.on('spawn', (c) => {
    stopping = false
    manager.send(statusText(`${name} starting, pid ${c.pid}`))
  })
  sup.on('running', ({ pid, adopted }) => {
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
  // Health after ready: each failed check, and a recovery.
  sup.on('unhealthy', (u) =>
    manager.send(
      statusText(`${name} unhealthy, pid ${u.pid}: ${u.failures} of ${u.limit} checks failed: ${u.error.message}`),
    ),
  )
  sup.on('healthy', (h) => manager.send(statusText(`${name} running, pid ${h.pid} (healthy again)`)))
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
    /** start() begins a run: the watchdog is fed from now on. */
    starting() {
      watch()
    },
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

/** The SERVICE_MANAGER option, read once by options.js: null (not asked for), or `{ say }`. */
function checkServiceManager(value) {
  if (value === undefined) return null
  if (value === null || typeof value !== 'object' || typeof value.say !== 'function') {
    throw typeError('the service manager option must be { say(text) }')
  }
  return { say: value.say }
}

/**
 * The supervisor's voice to its manager (speakFor's), when its options
 * asked for one (`asked`: checkServiceManager's) and a manager started us;
 * else null. `checked`: it has a ready check.
 */
function speaker(sup, asked, checked) {
  if (asked === null) return null
  const manager = serviceManager(process.env, asked.say)
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
  checkServiceManager,
  checkNotifyReady,
  fields,
  supported,
}
