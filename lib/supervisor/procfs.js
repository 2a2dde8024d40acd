// What the supervisor learns from the process table, in one place behind a
// small interface, asked of lib/os.js (which asks the binding). Where the
// table cannot be read (no /proc: macOS, Windows) every answer is "cannot
// tell" and the callers do without: a port check trusts whatever listens, a
// record carries no session (so no stray sweep), an adopted orphan is
// signalled by pid after a liveness check.

const native = require('../../binding.js')
const { callNative, fromNative } = require('../errors')
const os = require('../os')

// Told by the binding as they are (see lib/os.js).
const { argvOf, cgroupOf, listeningInodes, markedProcesses, processOwner } = os

/**
 * Is the listener on `port` the child's (it or a member of its group holds
 * the listening socket)? A stale daemon that still listens there must not
 * make a new child look ready. true, false, or null where it cannot be told
 * (no /proc, no listener in our network namespace, fds we may not read).
 */
function childListens(child, port) {
  return os.childListens(child.pid, child.pgid, port)
}

/** Did `child` (or its group) accept our connection from local port `peer` to `port`? true, false, or null (cannot tell). */
function childAccepted(child, port, peer) {
  return os.childAccepted(child.pid, child.pgid, port, peer)
}

/**
 * The session a freshly spawned child runs in, for its record: its own, or
 * (exited already) ours, which it inherited. null where it cannot be told:
 * the record then allows no stray sweep.
 */
function childSession(pid) {
  const st = os.processStat(pid)
  return (st?.running ? st : os.processStat(process.pid))?.session ?? null
}

/** This process's session, or null where it cannot be told. */
function ownSession() {
  return os.processStat(process.pid)?.session ?? null
}

/**
 * Why a recorded process must never be stopped, adopted or signalled on a
 * record's word, or null: the trust rule of the takeover and of `procward
 * stop`, in one place. No daemon a supervisor spawned can be pid 1, this
 * process, one of its ancestors, or the leader of its group or session; a
 * record naming one is corrupt or forged (and a group stop of pid 1 would
 * reach every process).
 */
function untouchable(pid) {
  if (pid === 1) return 'it is pid 1 (init)'
  if (pid === process.pid) return 'it is this process'
  let own = null
  try {
    own = callNative(native.getProcessInfo, process.pid)
  } catch {
    // unknown: the ancestor walk below still runs
  }
  if (own !== null && pid === own.pgid) return "it leads this process's group"
  if (pid === ownSession()) return "it leads this process's session"
  let ppid = own?.ppid ?? process.ppid
  for (let i = 0; i < 128 && ppid > 1; i++) {
    if (ppid === pid) return 'it is an ancestor of this process'
    let info = null
    try {
      info = callNative(native.getProcessInfo, ppid)
    } catch {
      break
    }
    if (info === null) break
    ppid = info.ppid
  }
  return null
}

/** Can a dead predecessor's stray group members be found (a scan of /proc)? */
const CAN_SWEEP = os.PROCFS

/**
 * SIGKILLs the proven members of a dead predecessor's recorded group (see
 * the takeover) and waits up to `killTimeoutMs` for them to exit:
 * { killed, suspects }. Only where CAN_SWEEP.
 */
async function sweepStrays(group, killTimeoutMs) {
  try {
    return await native.sweepStrays(group, killTimeoutMs)
  } catch (err) {
    throw fromNative(err)
  }
}

/**
 * Signals `pid` only if it is still the process `identity` names. Where
 * the process table can be read (Linux) through a pidfd checked against
 * the identity, so a pid reused since is never hit; elsewhere by pid, after
 * a liveness check (a narrow window remains there). false when it has
 * exited or cannot be signalled.
 */
function signalIdentified(pid, identity, signal) {
  if (os.PROCFS) {
    try {
      return callNative(native.signalIdentified, pid, identity, signal)
    } catch {
      return false
    }
  }
  try {
    if (!callNative(native.isProcessRunning, pid, identity)) return false
    process.kill(pid, signal)
    return true
  } catch {
    return false
  }
}

module.exports = {
  listeningInodes,
  childListens,
  childAccepted,
  childSession,
  ownSession,
  untouchable,
  CAN_SWEEP,
  sweepStrays,
  markedProcesses,
  argvOf,
  cgroupOf,
  signalIdentified,
  processOwner,
}
