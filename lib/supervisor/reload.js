// reload(): a replacement no client sees. With held sockets (sockets.js),
// the successor starts on the same sockets while the daemon it replaces
// still serves; once the successor is ready it becomes the running child
// and the old one is stopped (SIGTERM and its grace: a daemon stops
// accepting and finishes its requests). A successor that never gets ready
// is stopped, and the old one serves on.
//
// The overlap, and how each event ends it with one daemon serving:
// - the successor ready: the swap (the 'reload-ready' row);
// - its ready check failed, or it exited first: it is stopped (if need
//   be), and reload() rejects once it has exited;
// - the old one exited first (a crash, a failed health check): the
//   successor is promoted (the 'promote' row): it is the attempt now,
//   awaiting its ready as any new child does, and reload() settles with
//   that ready;
// - stop() and restart(): the successor is stopped beside the old one
//   (abandon), and reload() rejects;
// - a second reload(): joins the first.
// A supervisor killed in the overlap leaves both children to their death
// signal; the record names the successor as `next`, and a successor
// supervisor's takeover stops whatever carries its mark.

const { OwnRun } = require('./attempt')
const { exited } = require('./exit')
const life = require('./life')
const { dispatch, dispatchFor, emit, liveRun, nextReady, writeState } = require('./machine')
const { whenReady } = require('./readiness')
const { nowIso } = require('./state-file')
const { describeExit, messageOf, supervisorError } = require('./words')

const noop = () => {}

/** reload() while a child runs: its successor spawned beside it (a reload under way is joined). */
function reload(m, o) {
  if (m.reloading !== null) return m.reloading.promise
  if (o.args !== undefined) m.args = o.args
  if (o.env !== undefined) m.env = o.env
  const r = { from: m.run, next: new OwnRun(), failed: false, abandoned: null }
  r.promise = new Promise((resolve, reject) => {
    r.resolve = resolve
    r.reject = reject
  })
  const next = r.next
  m.manager?.reloading()
  let child
  try {
    child = life.spawnChild(m, next, false)
  } catch (err) {
    finish(m, r, err)
    return r.promise
  }
  m.reloading = r
  next.spawned(child, m.o.command, m.args, nowIso())
  child.once('exit', (info) => successorExited(m, r, info))
  next.notify?.watch(child, next.ac.signal, (text) => m.run === next && life.childStatus(m, text))
  life.pipeLines(m, next)
  // Records before events: the record names the successor, then 'spawn'.
  writeState(m)
  emit(m, 'spawn', child)
  const checked =
    m.o.ready === null ? Promise.resolve() : whenReady(m.o.ready, next, m.o.readyTimeoutMs, m.o.name, { shared: true })
  checked.then(
    () => successorReady(m, r),
    (err) => successorNotReady(m, r, err),
  )
  return r.promise
}

function successorReady(m, r) {
  const next = r.next
  next.isReady = true
  // Promoted (its predecessor exited first): an attempt as any other.
  if (m.run === next) dispatchFor(m, next, 'ready')
  else if (m.reloading === r) dispatch(m, 'reload-ready', r)
}

function successorNotReady(m, r, err) {
  const next = r.next
  if (m.run === next) {
    dispatchFor(m, next, 'ready-failed', err)
    return
  }
  if (m.reloading !== r) return
  r.failed = true
  next.readyFailure = err
  retireSuccessor(r, m.o.stopDefaults)
}

/** Stops the successor (its exit ends the reload); resolves once that exit has been announced. */
function retireSuccessor(r, opts) {
  const next = r.next
  next.expected = true
  next.ac.abort()
  return next
    .retire(opts)
    .catch(noop)
    .then(() => (next.exited ? next.heard : undefined))
}

function successorExited(m, r, info) {
  const next = r.next
  // As any child's end: the record rewritten, 'exit' emitted; judged by
  // the policy only once promoted (the machine's attempt).
  exited(m, next, info)
  if (m.reloading !== r) return
  m.reloading = null
  writeState(m)
  let err = next.readyFailure
  if (r.abandoned !== null) {
    err = supervisorError('ERR_RELOAD_ABANDONED', `${m.o.name}'s reload was ended by ${r.abandoned}`)
  } else if (err === null) {
    const why = info === null ? 'ended' : describeExit(info)
    err = supervisorError('ERR_RELOAD_FAILED', `${m.o.name}'s successor ${why} before it was ready`)
  }
  finish(m, r, err)
}

/** The successor is ready: it is the running child; the old one is stopped. */
function swap(m, r) {
  const old = m.run
  const next = r.next
  m.reloading = null
  old.expected = true
  old.ac.abort()
  m.run = next
  m.startedAt = next.record.startedAt
  // As any child that became ready: readyAt, meta, the record, then
  // 'ready' and 'running', then its health checks.
  life.becameReady(m, next)
  // Draining: a stop() waits for it too (see drained()).
  m.draining.add(old)
  old
    .retire(m.o.stopDefaults)
    .catch(noop)
    .then(() => (old.exited ? old.heard : undefined))
    .then(() => m.draining.delete(old))
  writeState(m).then(() => finish(m, r, null))
}

/**
 * The child it replaces exited first (decided in exit.js: no verdict of
 * the policy): the successor is the attempt now, starting as a new child
 * does; reload() settles with its ready.
 */
function promote(m) {
  const r = m.reloading
  const next = r.next
  m.reloading = null
  m.run = next
  m.startedAt = next.record.startedAt
  m.restarts++
  writeState(m)
  nextReady(m).then(
    () => finish(m, r, null),
    (err) => finish(m, r, err),
  )
  // Already ready while the old one's end was judged: said now.
  if (next.isReady) setImmediate(() => dispatchFor(m, next, 'ready'))
}

/**
 * stop() or restart() during the overlap (`why`: which): the successor is
 * stopped with `opts`; resolves once its exit has been announced.
 */
function abandon(m, why, opts) {
  const r = m.reloading
  if (r === null) return Promise.resolve()
  r.abandoned = why
  return retireSuccessor(r, opts)
}

/**
 * stop(): the children reloads replaced that are still finishing their
 * requests get what the stop asks for more (a SIGKILL, a shorter grace);
 * resolves once every one has exited.
 */
function drained(m, opts) {
  const runs = [...m.draining]
  for (const run of runs) run.escalate(opts)
  return Promise.all(runs.map((run) => run.heard))
}

/** The reload's outcome: the record, the 'reload' event, then reload()'s promise. */
function finish(m, r, err) {
  said(m, r.from?.pid ?? null, r.next.pid, err)
  if (err === null) r.resolve()
  else r.reject(err)
}

/** A reload's outcome, as the record (lastReload) and the 'reload' event say it. */
function said(m, from, to, err) {
  m.lastReload = { at: nowIso(), ok: err === null, from, to, error: err === null ? null : messageOf(err) }
  writeState(m)
  emit(m, 'reload', { from, to, ok: err === null, error: err })
}

/**
 * reload() where no daemon serves (starting, backoff, stopped) or a
 * restart is under way: `ready`, the restart standing for it, is its
 * answer; its outcome is said as a reload's (the record, 'reload', and the
 * service manager's RELOADING=1 … READY=1), so that `procward reload` and
 * `systemctl reload` hear one whatever the state.
 */
function standIn(m, ready) {
  m.manager?.reloading()
  const from = liveRun(m)?.pid ?? null
  return ready.then(
    () => said(m, from, liveRun(m)?.pid ?? null, null),
    (err) => {
      said(m, from, null, err)
      throw err
    },
  )
}

/** The actions of a reload. */
const actions = { reload, swap, promote }

module.exports = { actions, abandon, drained, standIn }
