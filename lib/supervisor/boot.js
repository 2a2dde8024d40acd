// The boot: what start() begins before the first spawn. With a stateFile,
// its lock is taken, and what a dead predecessor recorded there is acted
// on before anything overwrites it (takeover.js: its child stopped, or
// kept as ours; the daemons its record does not name stopped, or one
// kept); then our own record, with our mark, is written, and the machine
// moves on (booted, or adopt). Without a stateFile, it passes at once.

const { dispatch, emit, nextReady, writeState } = require('./machine')
const signals = require('./signals')
const sockets = require('./sockets')
const { acquireRecordLock, removeStaleTemps } = require('./state-file')
const {
  adoptionRecord,
  predecessor,
  stopPredecessor,
  stopUnrecorded,
  unrecordedDaemons,
  withoutKept,
} = require('./takeover')

/** start(): the boot begins; the answer is the next ready. */
function begin(m) {
  const ready = nextReady(m)
  m.manager?.starting()
  if (m.o.handleSignals !== null) signals.enroll(m.face, m.o.handleSignals.hup)
  if (m.o.stateFile === null) booted(m)
  else {
    const boot = { ac: new AbortController(), done: null, target: null }
    m.boot = boot
    boot.done = booting(m, boot)
  }
  return ready
}

/** A start after a failure: the crash count begins again. */
function beginAgain(m) {
  m.window = []
  m.attempt = 0
  return begin(m)
}

async function booting(m, boot) {
  const { signal } = boot.ac
  try {
    if (m.lock === null || m.lock.released) {
      m.lock = await acquireRecordLock(m.o.stateFile, m.o.name)
    }
    if (signal.aborted) return
    await removeStaleTemps(m.o.stateFile)
    // Until the previous record has been acted on, nothing overwrites it:
    // a stop or a failure before then leaves it for the next successor.
    await takeover(m, boot)
    if (signal.aborted) return
    m.records.owned = true
    // Our mark is on disk before any child carries it: a child we spawn
    // and do not live to record is found by it.
    await writeState(m)
    booted(m)
  } catch (err) {
    // Heard only while still booting: a stop has taken over.
    dispatch(m, 'boot-failed', err)
  } finally {
    if (m.boot === boot) m.boot = null
  }
}

/**
 * The boot is done: the held sockets bound (after the takeover, which
 * stopped a predecessor's daemon serving on its own copy of them), then
 * the first spawn. A socket that cannot be bound fails the start, nothing
 * spawned.
 */
function booted(m) {
  if (m.sockets === null) {
    try {
      if (m.o.adopted !== null) m.sockets = m.o.adopted
      else if (m.o.listen !== null) m.sockets = sockets.bind(m.o.listen)
    } catch (err) {
      dispatch(m, 'boot-failed', err)
      return
    }
  }
  dispatch(m, 'booted')
}

async function takeover(m, boot) {
  const { signal } = boot.ac
  const prev = await predecessor(m.o.stateFile)
  if (prev === null) return
  if (prev.refused !== undefined) {
    // Said once, then overwritten by ours.
    process.emitWarning(`procward: not taking over from ${m.o.stateFile}: ${prev.refused}`, {
      code: 'PROCWARD_STATE_FILE',
    })
    return
  }
  if (signal.aborted) return // stopped before acting: the record stays for the next one
  const track = (t) => {
    boot.target = t
  }
  const adopt = m.o.takeover === 'adopt'
  const c = prev.child
  let keep = c !== null && prev.alive && adopt ? c : null
  if (c !== null && keep === null) {
    const event = await stopPredecessor(c, prev.alive, m.o.stopDefaults, track)
    if (event !== null) emit(m, 'takeover', event)
  }
  // What the record does not name: a daemon spawned in the instant
  // before the predecessor's death. Kept with 'adopt' when it is the
  // one daemon (leading its group) and the record's child is gone;
  // stopped otherwise: never a second daemon beside ours.
  if (signal.aborted) return
  let found = await unrecordedDaemons(prev.supervisor, keep)
  if (keep === null && adopt) {
    const leaders = found.filter((d) => d.pgid === d.pid)
    if (leaders.length === 1) {
      keep = await adoptionRecord(leaders[0])
      const rest = found.filter((d) => d !== leaders[0])
      found = await withoutKept(rest, keep)
    }
  }
  for (const d of found) {
    if (signal.aborted) return
    emit(m, 'takeover', await stopUnrecorded(d, m.o.stopDefaults, track))
  }
  if (keep !== null) dispatch(m, 'adopt', keep) // not after a stop: no row for it then
}

/** The actions of the boot, and of a start() that finds the machine alive. */
const actions = {
  begin,
  beginAgain,
  joinStart: (m) => nextReady(m),
  alreadyRunning: () => Promise.resolve(),
}

module.exports = { actions }
