// An attempt's life, from its spawn (or the adoption of a predecessor's
// orphan) to its running: the spawn and its failure, the ready check, the
// announcements (records before events: each is emitted once the record
// says what it announces), the settle that forgives the backoff, and what
// the child says of itself (its STATUS= lines) and the application of it
// (options.meta). The attempt itself (what it records, how it is signalled
// and stopped) is attempt.js's; its end is exit.js's.

const { spawnSupervised } = require('../supervised')
const { AdoptedRun, killSpawned, OwnRun } = require('./attempt')
const { exited } = require('./exit')
const { dispatch, dispatchFor, emit, recordOnRun, settle, writeState } = require('./machine')
const notifyIn = require('./notify-in')
const { checkChildStatus, checkMeta, spawnOptions } = require('./options')
const { relayOutput } = require('./output')
const { spawnFailure } = require('./policy')
const { whenReady } = require('./readiness')
const { nowIso } = require('./state-file')

const noop = () => {}

/**
 * Spawns the child of attempt `run` (throws where the spawn fails). With
 * held sockets, they are handed over; `alone`: no other child of ours is
 * serving on them (not a reload's overlap), so they are handed blocking.
 */
function spawnChild(m, run, alone) {
  run.notify = notifyIn.listen(m.o.ready) // the child's own NOTIFY_SOCKET, or null
  try {
    const held = m.sockets?.spawnOption(alone) ?? null
    const child = spawnSupervised(m.o.command, m.args, spawnOptions(m.o, m.env, m.mark, run.notify, held))
    // Its identity now, while the pid is surely its own: the record (and a
    // successor's takeover) cannot do without it. Unreadable (/proc out
    // of reach: EMFILE), the spawn failed for a reason of ours, and the
    // child goes with its group.
    try {
      void child.identity
    } catch (err) {
      killSpawned(child)
      throw err
    }
    return child
  } catch (err) {
    run.notify?.close()
    throw err
  }
}

function spawn(m) {
  const run = new OwnRun()
  m.run = run
  let child
  try {
    // Alone on the sockets unless a daemon a reload replaced still drains.
    child = spawnChild(m, run, m.draining.size === 0)
  } catch (err) {
    // Heard on the next turn: so that a start() caller has its listeners
    // on, and a zero backoff never recurses.
    setImmediate(() => dispatchFor(m, run, 'spawn-failed', err))
    return
  }
  m.startedAt = nowIso()
  run.spawned(child, m.o.command, m.args, m.startedAt)
  child.once('exit', (info) => exited(m, run, info))
  run.notify?.watch(child, run.ac.signal, (text) => m.run === run && childStatus(m, text))
  pipeLines(m, run)
  dispatch(m, 'spawned', run)
}

function spawned(m, run) {
  writeState(m)
  emit(m, 'spawn', run.child)
  dispatchFor(m, run, 'spawn-heard')
}

/** Failed at once where no wait can heal (policy.js), else counted as a crash: an end for the policy. */
function spawnFailed(m, run, err) {
  const failed = spawnFailure(err, m.o.name)
  if (failed !== null) dispatch(m, 'fail', failed)
  else exited(m, run, null, err)
}

/**
 * A line ready check's stream: fed to the check, then on as line events,
 * or copied byte for byte to our own stream when no one listens (see
 * output.js).
 */
function pipeLines(m, run) {
  if (m.o.ready?.kind !== 'line') return
  const kind = m.o.ready.stream
  const stream = run.child[kind]
  if (stream === null) return
  relayOutput(stream, kind === 'stdout' ? 1 : 2, {
    check: () => run.onLine,
    listening: () => m.face.listenerCount(kind) > 0,
    line: (line) => emit(m, kind, line),
  })
}

function checkReady(m, run) {
  if (m.o.ready === null) {
    dispatchFor(m, run, 'ready')
    return
  }
  whenReady(m.o.ready, run, m.o.readyTimeoutMs, m.o.name).then(
    () => dispatchFor(m, run, 'ready'),
    (err) => dispatchFor(m, run, 'ready-failed', err),
  )
}

/** A failed ready check counts as a crash: the child is stopped, and its exit decides. */
function readyFailed(m, run, err) {
  run.readyFailure = err
  run.ac.abort()
  run.child.stop(m.o.stopDefaults).catch(noop)
}

function becameReady(m, run) {
  const at = nowIso()
  run.readyAtIso = at
  run.readyAt = performance.now()
  m.readyAt = at
  publishMeta(m, run)
  settleLater(m, run)
  // Records before events: start() and restart() resolve, 'ready' and
  // 'running' fire, once the record reads running.
  writeState(m).then(() => dispatchFor(m, run, 'ready-recorded'))
}

function announceReady(m, run) {
  settle(m, undefined, null)
  emit(m, 'ready', run.child)
  dispatchFor(m, run, 'ready-heard')
}

function announceRunning(m, run) {
  emit(m, 'running', { pid: run.pid, identity: run.identity, adopted: false })
  dispatchFor(m, run, 'running-heard')
}

/** Keeps a dead predecessor's still-running child `c` as ours (takeover 'adopt'). */
function adopt(m, c) {
  const run = new AdoptedRun(c, m.o.stopDefaults.killTimeoutMs, (info) => exited(m, run, info))
  m.run = run
  m.records.owned = true
  m.startedAt = c.startedAt ?? null
  run.readyAt = performance.now()
  m.readyAt = nowIso()
  run.readyAtIso = m.readyAt
  publishMeta(m, run)
  settleLater(m, run)
  emit(m, 'takeover', { pid: c.pid, identity: c.identity, action: 'adopted', result: null, suspects: [] })
  // Records before events: 'running' once the record names the orphan.
  writeState(m).then(() => dispatchFor(m, run, 'adopt-recorded'))
}

function announceAdopted(m, run) {
  settle(m, undefined, null)
  emit(m, 'running', { pid: run.pid, identity: run.identity, adopted: true })
  dispatchFor(m, run, 'running-heard')
}

/**
 * options.meta, published with `run` as it begins to run (before the
 * record that says so is written); a function that throws or returns no
 * meta is an uncaught exception, as a throwing listener is, and the
 * child runs without.
 */
function publishMeta(m, run) {
  const meta = m.o.meta
  if (typeof meta !== 'function') return
  try {
    run.meta = checkMeta(meta({ pid: run.pid, identity: run.identity, adopted: run.adopted }))
  } catch (err) {
    process.nextTick(() => {
      throw err
    })
  }
}

/**
 * Once a child has stayed ready `resetAfterMs`, the backoff count starts
 * again, and the record is rewritten: its `aliveAt` then vouches for every
 * worker the daemon started in its first `resetAfterMs` (see the stray
 * sweep). The timer does not hold the process open.
 */
function settleLater(m, run) {
  const t = setTimeout(() => dispatchFor(m, run, 'settled'), m.o.backoff.resetAfterMs)
  t.unref()
  run.ac.signal.addEventListener('abort', () => clearTimeout(t), { once: true })
}

function settled(m) {
  m.attempt = 0
  writeState(m)
}

/**
 * The child's own status text (a notify `STATUS=` line; null clears),
 * recorded as `child.status` until it exits, and passed on to our own
 * service manager. false when no child runs.
 */
function childStatus(m, text) {
  const value = checkChildStatus(text)
  return recordOnRun(m, (run) => {
    run.status = value
    m.manager?.childStatus(value)
  })
}

/** The actions of an attempt's life. */
const actions = {
  spawn,
  spawned,
  spawnFailed,
  checkReady,
  readyFailed,
  ready: becameReady,
  announceReady,
  announceRunning,
  adopt,
  announceAdopted,
  settled,
}

module.exports = { actions, becameReady, childStatus, pipeLines, spawn, spawnChild }
