// A running group's control socket (`procward up`, the server side):
// `procward restart|reload|stop NAME -f FILE` (./control-client.js) acts on
// one daemon through it. It lives in the group's stateDir, a directory only
// its owner may enter (mode 0700, ours: checked, never assumed), as
// `procward.sock`, mode 0600. Each connection's peer is asked of the kernel
// (SO_PEERCRED): only this process's uid, or root, is answered; anyone else
// is refused, whatever reached the socket.
//
// The protocol: one JSON line each way. Asked `{ verb, name }`; answered
// `{ ok: true, name, state, pid }` once done (a restart once the new child
// is ready), or `{ ok: false, error, code }`.

const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const common = require('./common.js')

const SOCKET_NAME = 'procward.sock'
/** A request longer than this is no request. */
const MAX_REQUEST = 4096
const VERBS = ['restart', 'reload', 'stop']

/** The control socket of the group whose stateDir is `stateDir`. */
function socketPath(stateDir) {
  return path.join(stateDir, SOCKET_NAME)
}

/** Why `dir` is no place for the socket (not ours, or others may enter it), or null. */
function notOwnerOnly(dir) {
  const st = fs.statSync(dir)
  if (!st.isDirectory()) return `${dir} is not a directory`
  if (st.uid !== process.getuid()) return `${dir} belongs to uid ${st.uid}, not to us (uid ${process.getuid()})`
  if ((st.mode & 0o077) !== 0) return `${dir} is open to others (mode ${(st.mode & 0o777).toString(8)}): chmod 700 it`
  return null
}

/** Whether a live server answers at `file` (another procward up of this group). */
function answered(file) {
  return new Promise((resolve) => {
    const s = net.connect(file)
    s.once('connect', () => {
      s.destroy()
      resolve(true)
    })
    s.once('error', () => resolve(false))
  })
}

/** What the daemon's Supervisor is asked; its answer. */
async function act(group, verb, name) {
  const sup = group.supervisors.get(name)
  if (sup === undefined) {
    return {
      ok: false,
      code: 'ERR_UNKNOWN_DAEMON',
      error: `no daemon ${name} in this group (${[...group.supervisors.keys()].join(', ')})`,
    }
  }
  if (verb === 'restart') {
    // A stopped (or failed) daemon is started again.
    if (['idle', 'stopped', 'failed'].includes(sup.state)) await sup.start()
    else await sup.restart()
  } else if (verb === 'stop') {
    await sup.stop()
  } else {
    // Without its listen, refused (ERR_RELOAD_WITHOUT_LISTEN): said as the answer.
    await sup.reload()
  }
  const st = sup.status()
  return { ok: true, name, state: st.state, pid: st.pid }
}

/**
 * Listens on the control socket of `group` in `stateDir`; `log(text)` says
 * what it did and what it refused. Resolves to { close() }, or null where
 * there is none (the place is not owner-only, another server answers there).
 */
async function openControl(group, stateDir, log) {
  const file = socketPath(stateDir)
  let why
  try {
    why = notOwnerOnly(stateDir)
  } catch (err) {
    why = common.describe(err)
  }
  if (why !== null) {
    log(`no control socket: ${why}`)
    return null
  }
  if (fs.existsSync(file)) {
    if (await answered(file)) {
      log(`no control socket: another procward answers at ${file}`)
      return null
    }
    // A dead server's: ours to replace.
    fs.rmSync(file, { force: true })
  }
  const me = process.getuid()
  const server = net.createServer((socket) => serve(socket, group, me, log))
  try {
    await new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen(file, resolve)
    })
  } catch (err) {
    log(`no control socket: ${common.describe(err)}`)
    return null
  }
  // The directory is ours alone already; the socket too.
  fs.chmodSync(file, 0o600)
  server.unref()
  return {
    path: file,
    close() {
      server.close()
      fs.rmSync(file, { force: true })
    },
  }
}

function serve(socket, group, me, log) {
  const reply = (answer) => socket.end(`${JSON.stringify(answer)}\n`)
  socket.on('error', () => {})
  // Node keeps a unix socket's fd on its handle: the kernel is asked who connected.
  const peer = common.os().peerCredentials(socket._handle?.fd ?? -1)
  if (peer === null || (peer.uid !== me && peer.uid !== 0)) {
    const who = peer === null ? 'a peer the kernel does not name' : `uid ${peer.uid} (pid ${peer.pid})`
    log(`refused ${who}: not this group's owner (uid ${me})`)
    reply({ ok: false, code: 'EPERM', error: `refused: ${who} is not this group's owner (uid ${me})` })
    return
  }
  let text = ''
  socket.setEncoding('utf8')
  socket.on('data', (chunk) => {
    text += chunk
    const nl = text.indexOf('\n')
    if (nl === -1) {
      if (text.length > MAX_REQUEST) reply({ ok: false, code: 'ERR_INVALID_ARG_VALUE', error: 'request too long' })
      return
    }
    socket.removeAllListeners('data')
    let req
    try {
      req = JSON.parse(text.slice(0, nl))
    } catch {
      req = null
    }
    if (req === null || typeof req !== 'object' || !VERBS.includes(req.verb) || typeof req.name !== 'string') {
      reply({ ok: false, code: 'ERR_INVALID_ARG_VALUE', error: `a request is { verb: ${VERBS.join('|')}, name }` })
      return
    }
    log(`${req.verb} ${req.name} (uid ${peer.uid}, pid ${peer.pid})`)
    act(group, req.verb, req.name).then(reply, (err) =>
      reply({ ok: false, code: err?.code ?? 'ERR_FAILED', error: common.describe(err) }),
    )
  })
}

module.exports = { openControl, socketPath }
