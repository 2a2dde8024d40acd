// The ready checks: a port that accepts connections (and is the child's),
// a line on stdout or stderr, a newline on a notify pipe, or a function.
// Each is a promise that resolves once ready and rejects when its signal
// aborts (the attempt ended, or the ready timeout hit: the machine decides).

const http = require('node:http')
const https = require('node:https')
const net = require('node:net')
const { NOTIFY_STREAM } = require('../supervised')
const { abortError } = require('../validate')
const { messageOf, supervisorError } = require('./words')
const procfs = require('./procfs')

const noop = () => {}

function sleepFor(delayMs, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(abortError(signal))
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, delayMs)
    const onAbort = () => {
      clearTimeout(t)
      reject(abortError(signal))
    }
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

/**
 * One connection to `host:port`, closed at once: resolves null once it is
 * accepted, or the error (an AbortError when `signal` aborts first).
 */
function tryConnect(port, host, signal) {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(abortError(signal))
    const sock = net.connect({ port, host })
    const done = (err) => {
      signal.removeEventListener('abort', onAbort)
      sock.destroy()
      resolve(err)
    }
    const onAbort = () => done(abortError(signal))
    sock.once('connect', () => done(null))
    sock.once('error', (err) => done(err))
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

async function connects(port, host, signal) {
  return (await tryConnect(port, host, signal)) === null
}

/**
 * Ready once something accepts a connection and, where /proc can tell, the
 * listener is not a leftover: held by the child's group, or opened since
 * the check began (a proxy the child had started, like docker-proxy for
 * `docker run -p`). A listening socket that was there before — a stale
 * daemon still on the port — never counts. Probes at 1 ms, doubling to
 * 20 ms (100 ms while only a leftover answers).
 */
async function portReady(child, port, host, signal) {
  // Right after the spawn: what listened before the child could have.
  const before = await procfs.listeningInodes(port)
  // Leftover listeners found not to be the child's group's. A socket opened
  // before the check cannot become the group's later (short of fd passing),
  // so each is judged once: a /proc scan per leftover, not per probe. While
  // only those listen, a probe is one read of /proc/net/tcp{,6}, no connect.
  const foreign = new Set()
  let delay = 1
  for (;;) {
    if (signal.aborted) throw abortError(signal)
    let leftover = false
    const listening = foreign.size > 0 ? await procfs.listeningInodes(port) : null
    if (listening !== null && listening.size > 0 && [...listening].every((i) => foreign.has(i))) {
      leftover = true
    } else if (await connects(port, host, signal)) {
      const now = await procfs.listeningInodes(port)
      if (now === null || before === null || [...now].some((i) => !before.has(i))) return
      if ((await procfs.childListens(child, port)) !== false) return
      for (const i of now) foreign.add(i)
      leftover = true
    }
    await sleepFor(leftover ? 100 : delay, signal)
    delay = Math.min(delay * 2, 20)
  }
}

/** A probe's error: the daemon beside the one checked answered it. */
const OTHER_ANSWERED = 'PROCWARD_OTHER_ANSWERED'

/**
 * `url` as errors show it: without its user, password, query and fragment
 * (the error goes to the record, `procward status`, logs and STATUS=).
 */
function shown(url) {
  try {
    const u = new URL(url)
    return `${u.protocol}//${u.host}${u.pathname}`
  } catch {
    return '(the health URL)'
  }
}

/** GET `url`: resolves at an answer with `status` (any 2xx when null), rejects otherwise. */
function httpCheck(url, status, signal, answeredBy = null) {
  return new Promise((resolve, reject) => {
    const get = url.startsWith('https:') ? https.get : http.get
    // agent: false: a connection of its own, closed after; a pooled one
    // kept alive to a hung daemon would hide nothing, but would outlive it.
    // Asking who answered: the connection kept alive, so that the server
    // still holds its side when asked (with `close` it may be gone).
    const headers = { 'user-agent': 'procward-health' }
    if (answeredBy !== null) headers.connection = 'keep-alive'
    const req = get(url, { agent: false, signal, headers }, (res) => {
      const code = res.statusCode
      const ok = status === null ? code >= 200 && code < 300 : code === status
      const verdict = () => {
        if (ok) resolve()
        else reject(new Error(`GET ${shown(url)} answered ${code}${status === null ? '' : `, not ${status}`}`))
      }
      // The status line is the answer: the body is not read. Who answered
      // is asked while the connection is still open (its server side is
      // then held by whoever accepted it).
      const sock = res.socket
      const close = () => {
        res.destroy()
        req.destroy()
      }
      if (answeredBy === null || !ok || sock?.remotePort === undefined) {
        close()
        return verdict()
      }
      answeredBy(sock.remotePort, sock.localPort).then(
        (ours) => {
          close()
          if (ours === false) {
            const other = new Error(`GET ${shown(url)} was answered by another process`)
            other.code = OTHER_ANSWERED
            reject(other)
          } else verdict()
        },
        (err) => {
          close()
          reject(err)
        },
      )
    })
    req.once('error', (err) =>
      reject(err.name === 'AbortError' ? err : new Error(`GET ${shown(url)}: ${err.message}`, { cause: err })),
    )
  })
}

/**
 * Ready at the first answer to a GET of `url` with `status` (any 2xx when
 * null). On a held socket the request waits in the backlog until the
 * daemon accepts it; on a port the daemon binds itself, a refused connect
 * (or an answer with another status) is tried again, at 1 ms doubling to
 * 100 ms.
 */
async function httpReady(url, status, signal, answeredBy) {
  let delay = 1
  for (;;) {
    try {
      await httpCheck(url, status, signal, answeredBy)
      return
    } catch (err) {
      if (signal.aborted) throw abortError(signal)
      if (err?.name === 'AbortError') throw err
      // Answered, by the daemon a reload replaces: asked again at once. A
      // fresh successor loses most races for the shared socket's accepts
      // to the warm daemon beside it; each probe is one cheap request.
      if (err?.code === OTHER_ANSWERED) delay = 1
    }
    await sleepFor(delay, signal)
    delay = Math.min(delay * 2, 100)
  }
}

/** s6 style: ready at the first newline the child writes to the notify pipe. */
function notifyReady(stream, signal) {
  return new Promise((resolve, reject) => {
    if (stream === null) return reject(new Error('no notify pipe'))
    const finish = (fn, arg) => {
      signal.removeEventListener('abort', onAbort)
      stream.destroy()
      fn(arg)
    }
    const onAbort = () => finish(reject, abortError(signal))
    stream.on('data', (d) => {
      if (String(d).includes('\n')) finish(resolve)
    })
    // EOF without a newline: the daemon never said it is ready; the ready
    // timeout (or its exit) decides.
    stream.on('error', noop)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

/** Ready at the first line `match` accepts; `lines` is the attempt, fed through its `onLine`. */
function lineReady(lines, match, signal) {
  return new Promise((resolve, reject) => {
    lines.onLine = (line) => {
      if (match(line)) {
        lines.onLine = null
        resolve()
      }
    }
    signal.addEventListener('abort', () => reject(abortError(signal)), { once: true })
  })
}

/**
 * The check `ready` (options.ready, normalised) of `run`'s child, until
 * `signal` aborts. A line check reads what the output relay (output.js)
 * feeds `run.onLine`. `shared`: the child is a reload's successor, on held
 * sockets another daemon of ours still serves.
 */
function readyCheck(ready, run, signal, shared) {
  switch (ready.kind) {
    case 'port':
      return portReady(run.child, ready.port, ready.host, signal)
    case 'http':
      // A reload's successor shares the held sockets with the daemon it
      // replaces, which may be the one that answers: only an answer from a
      // connection the successor (or its group) accepted counts.
      return httpReady(
        ready.url,
        ready.status,
        signal,
        // Only a proven answer counts: "cannot tell" (the kernel's tables
        // unreadable meanwhile) is asked again, never taken for ready.
        shared ? async (port, peer) => (await procfs.childAccepted(run.child, port, peer)) === true : null,
      )
    case 'line':
      return lineReady(run, ready.match, signal)
    case 'notify':
      return notifyReady(run.child[NOTIFY_STREAM], signal)
    case 'sd-notify': // READY=1 on the attempt's own socket (notify-in.js)
      return run.notify.ready(signal)
    default:
      return Promise.resolve().then(() => ready.fn(run.child, signal))
  }
}

/**
 * Runs the check `ready` on `run` within `timeoutMs` (false: no limit),
 * aborting the attempt's check when the time is up. Rejects with
 * ERR_READY_TIMEOUT or ERR_READY_FAILED, worded with the supervisor's `name`.
 */
function whenReady(ready, run, timeoutMs, name, { shared = false } = {}) {
  let timedOut = false
  const timer =
    timeoutMs === false
      ? null
      : setTimeout(() => {
          timedOut = true
          run.ac.abort()
        }, timeoutMs)
  return readyCheck(ready, run, run.ac.signal, shared).then(
    () => clearTimeout(timer),
    (err) => {
      clearTimeout(timer)
      throw timedOut
        ? supervisorError('ERR_READY_TIMEOUT', `${name} was not ready within ${timeoutMs} ms`)
        : supervisorError('ERR_READY_FAILED', `${name}'s ready check failed: ${messageOf(err)}`, { cause: err })
    },
  )
}

module.exports = { httpCheck, whenReady, tryConnect }
