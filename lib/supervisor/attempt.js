// One attempt of a Supervisor: a child it spawned, or a dead predecessor's
// orphan it adopted, from its start to its exit. What the attempt records
// for a successor, how it is signalled and stopped, and how its end is
// worded. The machine (supervisor.js) decides when; this says how.

const validate = require('../validate')
const { CGROUP_RECORD, stopSupervisedProcess } = require('../supervised')
const { waitForExit } = require('../wait')
const procfs = require('./procfs')
const { killRecorded } = require('./takeover')

const noop = () => {}

function exitInfo(info) {
  return Object.freeze({ pid: info.pid, code: info.code ?? null, signal: info.signal ?? null })
}

function describeExit(info) {
  if (info === null) return 'could not be started'
  if (info.signal) return `was killed by ${info.signal}`
  if (info.code === null) return 'exited (status unknown)'
  return `exited with code ${info.code}`
}

function supervisorError(code, message, extra) {
  const err = new Error(message, extra?.cause ? { cause: extra.cause } : undefined)
  err.code = code
  if (extra && 'lastExit' in extra) err.lastExit = extra.lastExit
  return err
}

/** An attempt not begun yet (its spawn may still fail). Aborting `ac` ends its ready check. */
function newRun() {
  return {
    child: null,
    adopted: null,
    ac: new AbortController(),
    /** Set when our own stop() or restart() ends it. */
    expected: false,
    exited: false,
    /** Signal names sent through kill(): an exit by one is not a failure. */
    sent: new Set(),
    readyFailure: null,
    /** When it became ready: performance.now(), and as an ISO time for the record. */
    readyAt: null,
    readyAtIso: null,
    /** The application's fields (setMeta) and the child's status text, while it runs. */
    meta: null,
    status: null,
    /** What the stateFile says of it (without aliveAt), once it runs. */
    record: null,
    /** A line ready check's listener (see readiness). */
    onLine: null,
    /** Adopted: resolves once the orphan's exit has been handled. */
    adoptedDone: null,
    waitAc: null,
  }
}

/** `run` has spawned `child` (command, args, at startedAt): its record. */
function spawned(run, child, command, args, startedAt) {
  run.child = child
  run.record = {
    pid: child.pid,
    identity: child.identity,
    pgid: child.pgid,
    session: procfs.childSession(child.pid),
    command,
    args: [...args],
    startedAt,
    cgroup: child[CGROUP_RECORD] ?? null,
  }
  return run
}

/**
 * An attempt that keeps a predecessor's recorded child `c` (alive): watched
 * with waitForExit; `onExit(info)` once it has exited and its recorded
 * cgroup (if any) has been killed, as for a child of our own.
 */
function adopted(c, killTimeoutMs, onExit) {
  const run = newRun()
  run.adopted = Object.freeze({ pid: c.pid, identity: c.identity, pgid: c.pgid })
  run.record = {
    pid: c.pid,
    identity: c.identity,
    pgid: c.pgid,
    session: c.session,
    command: c.command,
    args: c.args,
    startedAt: c.startedAt,
    cgroup: c.cgroup ?? null,
  }
  run.waitAc = new AbortController()
  run.adoptedDone = waitForExit(c.pid, { identity: c.identity, signal: run.waitAc.signal }).then(
    async (r) => {
      await killRecorded(c.cgroup, killTimeoutMs).catch(noop)
      onExit(exitInfo({ pid: c.pid, code: r.exit?.code, signal: r.exit?.signal }))
    },
    noop, // aborted: an unkillable orphan we stopped waiting for
  )
  return run
}

/** Signals the attempt's process (`num` a signal number); false when none runs. */
function signal(run, num) {
  const name = validate.signalName(num) ?? String(num)
  if (run.child !== null) {
    run.sent.add(name)
    return run.child.kill(num)
  }
  if (run.adopted !== null) {
    // Not our child: its pid may be reused the moment it exits.
    run.sent.add(name)
    return procfs.signalIdentified(run.adopted.pid, run.adopted.identity, num)
  }
  return false
}

/** Stops the attempt's child or adopted orphan, waiting for its exit. */
async function retire(run, opts) {
  if (run.child !== null) return run.child.stop(opts)
  if (run.adopted !== null) {
    const { pid, identity, pgid } = run.adopted
    const result = await stopSupervisedProcess(pid, { ...opts, identity, group: pgid === pid })
    if (result.outcome === 'unkillable') run.waitAc.abort()
    else await run.adoptedDone
    return result
  }
  return null
}

/** A second stop while one runs: passes on what it asks for more (a SIGKILL, a shorter grace). */
function escalate(run, opts) {
  const kill = opts.signal === 'SIGKILL' || opts.signal === 9
  if (run.child !== null) {
    run.child.stop(opts).catch(noop)
    if (kill) run.child.kill('SIGKILL')
  } else if (run.adopted !== null && kill) {
    const { pid, identity, pgid } = run.adopted
    stopSupervisedProcess(pid, { signal: 'SIGKILL', identity, group: pgid === pid }).catch(noop)
  }
}

module.exports = {
  exitInfo,
  describeExit,
  supervisorError,
  newRun,
  spawned,
  adopted,
  signal,
  retire,
  escalate,
}
