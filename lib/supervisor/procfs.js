// What the supervisor learns from the process table, in one place behind a
// small interface, so that any part of it can become a native call. Linux
// reads /proc (here, or natively through procStat, sweepStrays and
// signalIdentified, which the binding has on Linux only). Elsewhere every
// answer is "cannot tell" and the callers do without: a port check trusts
// whatever listens, a record carries no session (so no stray sweep), an
// adopted orphan is signalled by pid after a liveness check.

const fs = require('node:fs')
const fsp = require('node:fs/promises')
const native = require('../../binding.js')
const { callNative, fromNative } = require('../errors')

/** Decided once: the binding has the /proc helpers on Linux, and only there. */
const LINUX = process.platform === 'linux'

/** The inodes of the TCP sockets listening on `port` in our network namespace; null where /proc cannot tell. */
async function listeningInodes(port) {
  if (!LINUX) return null
  const inodes = new Set()
  let readable = false
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text
    try {
      text = await fsp.readFile(table, 'latin1')
    } catch {
      continue
    }
    readable = true
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const f = line.trim().split(/\s+/)
      if (f.length < 10 || f[3] !== '0A') continue
      if (Number.parseInt(f[1].slice(f[1].lastIndexOf(':') + 1), 16) === port) inodes.add(f[9])
    }
  }
  return readable ? inodes : null
}

/** Does `pid` hold one of `inodes` open? null when its fds cannot be read. */
async function holdsSocket(pid, inodes) {
  let fds
  try {
    fds = await fsp.readdir(`/proc/${pid}/fd`)
  } catch (err) {
    return err.code === 'ENOENT' ? false : null
  }
  for (const fd of fds) {
    let target
    try {
      target = await fsp.readlink(`/proc/${pid}/fd/${fd}`)
    } catch {
      continue
    }
    if (target.startsWith('socket:[') && inodes.has(target.slice(8, -1))) return true
  }
  return false
}

/** The processes in process group `pgid` now (a /proc scan). */
async function groupMembers(pgid) {
  let names
  try {
    names = await fsp.readdir('/proc')
  } catch {
    return []
  }
  const members = []
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = await fsp.readFile(`/proc/${name}/stat`, 'latin1')
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (Number(f[2]) === pgid) members.push(Number(name))
    } catch {
      // gone
    }
  }
  return members
}

/**
 * Is the listener on `port` the child's (it or a member of its group holds
 * the listening socket)? A stale daemon that still listens there must not
 * make a new child look ready. true, false, or null where it cannot be told
 * (no /proc, no listener in our network namespace, fds we may not read).
 */
async function childListens(child, port) {
  const inodes = await listeningInodes(port)
  if (inodes === null || inodes.size === 0) return null
  let unknown = false
  const leader = await holdsSocket(child.pid, inodes)
  if (leader) return true
  if (leader === null) unknown = true
  if (child.pgid !== null) {
    for (const pid of await groupMembers(child.pgid)) {
      if (pid === child.pid) continue
      const held = await holdsSocket(pid, inodes)
      if (held) return true
      if (held === null) unknown = true
    }
  }
  return unknown ? null : false
}

/**
 * The session a freshly spawned child runs in, for its record: its own, or
 * (exited already) ours, which it inherited. null where it cannot be told:
 * the record then allows no stray sweep.
 */
function childSession(pid) {
  if (!LINUX) return null
  try {
    return (native.procStat(pid) ?? native.procStat(process.pid))?.session ?? null
  } catch {
    return null
  }
}

/** This process's session, or null where it cannot be told. */
function ownSession() {
  if (!LINUX) return null
  try {
    return native.procStat(process.pid)?.session ?? null
  } catch {
    return null
  }
}

/** Can a dead predecessor's stray group members be found (a scan of /proc)? */
const CAN_SWEEP = LINUX

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
 * Signals `pid` only if it is still the process `identity` names. On Linux
 * through a pidfd checked against the identity, so a pid reused since is
 * never hit; elsewhere by pid, after a liveness check (a narrow window
 * remains there). false when it has exited or cannot be signalled.
 */
function signalIdentified(pid, identity, signal) {
  if (LINUX) {
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

/** The uid that owns process `pid`, or null where it cannot be told (gone, no /proc). */
function processOwner(pid) {
  if (!LINUX) return null
  try {
    return fs.statSync(`/proc/${pid}`).uid
  } catch {
    return null
  }
}

module.exports = {
  listeningInodes,
  childListens,
  childSession,
  ownSession,
  CAN_SWEEP,
  sweepStrays,
  signalIdentified,
  processOwner,
}
