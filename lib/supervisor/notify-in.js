// The service manager's notify protocol (sd_notify(3)), read: a child's
// `READY=1` as a ready check, `ready: { notify: true }`.
//
// Each attempt gets a socket of its own (abstract, random name) as the
// child's NOTIFY_SOCKET; the child is ready at the first `READY=1` sent by
// the child itself, a process descending from it, or a process in its
// cgroup (judged natively, by the kernel-attached credentials, the moment
// the message is read); its `STATUS=` lines become the record's
// child.status. Anything else is ignored and counted. The socket closes
// when the attempt ends (the child's exit, a stop, a restart, a failed
// ready check).
//
// The other way, procward speaking to the manager that started it, is
// notify-out.js.

const native = require('../../binding.js')
const { callNative, fromNative } = require('../errors')
const { abortError } = require('../validate')

/**
 * The manager's variables: the speaker's to take (notify-out.js), never a
 * child's to inherit — a child given a socket of ours gets none of them.
 */
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

// A refused message is reported as a process warning, and those are the
// process's: said once per process, as Node says its own (every attempt's
// socket, of every supervisor, shares this).
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

module.exports = { MANAGER_VARS, NotifyIn, listen, fields, supported }
