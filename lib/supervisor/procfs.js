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

// The kernel's sock_diag answers in microseconds; /proc/net/tcp walks every
// bucket of the TCP hash tables (about 12 ms of CPU a read on a large
// machine). The file is the fallback where netlink is refused (a seccomp
// profile, an old kernel), and that is decided once.
let sockDiag = LINUX

/** The inodes of the TCP sockets listening on `port` in our network namespace; null where it cannot be told. */
async function listeningInodes(port) {
  if (!LINUX) return null
  if (sockDiag) {
    try {
      return new Set(native.listeningInodes(port))
    } catch {
      sockDiag = false
    }
  }
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

/** `/proc/<pid>/stat`'s state, ppid, pgid and session, or null when gone. */
async function statOf(pid) {
  try {
    const stat = await fsp.readFile(`/proc/${pid}/stat`, 'latin1')
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return { state: f[0], ppid: Number(f[1]), pgid: Number(f[2]), session: Number(f[3]) }
  } catch {
    return null
  }
}

/** Does the environment block `env` (NUL-separated) hold the entry `needle` ("NAME=value\0")? */
function holdsEntry(env, needle) {
  for (let at = env.indexOf(needle); at >= 0; at = env.indexOf(needle, at + 1)) {
    if (at === 0 || env[at - 1] === 0) return true
  }
  return false
}

/** `pid`'s environment block, or null when gone or unreadable. */
async function environOf(pid) {
  try {
    return await fsp.readFile(`/proc/${pid}/environ`)
  } catch {
    return null
  }
}

/** `pid`'s identity (getProcessInfo), or null when gone or unreadable. */
function identityOf(pid) {
  try {
    return callNative(native.getProcessInfo, pid)?.identity ?? null
  } catch {
    return null
  }
}

/**
 * The entry for `pid` if its environment holds `needle`: null if not;
 * undefined while it reads empty. Its identity is read on both sides of a
 * second look at the environment: the same identity before and after ties
 * the mark to that process, not to one that took its pid meanwhile.
 */
async function markedOne(pid, needle) {
  const env = await environOf(pid)
  if (env === null) return null
  const st = env.length === 0 || holdsEntry(env, needle) ? await statOf(pid) : null
  if (st === null || st.state === 'Z' || st.state === 'X') return null
  // Empty: a kernel thread, a program started with no environment, or one
  // in the middle of its exec (the spawn returns when the close-on-exec
  // pipe closes, a moment before the new program's environment is in
  // place): looked at again.
  if (env.length === 0) return pid === 2 || st.ppid === 2 ? null : undefined
  const identity = identityOf(pid)
  if (identity === null) return null
  const again = await environOf(pid)
  if (again === null) return null
  // Empty again: it has exec'd since the first look (sh -c 'exec ...'),
  // and its next program's environment is not in place yet.
  if (again.length === 0) return undefined
  if (!holdsEntry(again, needle) || identityOf(pid) !== identity) return null
  return { pid, ppid: st.ppid, pgid: st.pgid, session: st.session, identity }
}

/**
 * The running processes (not zombies) whose environment, as exec gave it,
 * holds `entry` ("NAME=value"): [{ pid, ppid, pgid, session, identity }],
 * the identity that of the process whose environment held it. A /proc scan
 * (Linux; [] elsewhere); processes whose environment we may not read are
 * not seen. One whose environment reads empty is read again a few times,
 * 20 ms apart, for a process still in its exec.
 */
async function markedProcesses(entry) {
  if (!LINUX) return []
  let names
  try {
    names = await fsp.readdir('/proc')
  } catch {
    return []
  }
  const needle = Buffer.from(`${entry}\0`)
  const found = []
  let unsettled = []
  for (const name of names) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue
    const p = await markedOne(Number(name), needle)
    if (p === undefined) unsettled.push(Number(name))
    else if (p !== null) found.push(p)
  }
  for (let i = 0; i < 5 && unsettled.length > 0; i++) {
    await new Promise((r) => setTimeout(r, 20))
    const again = []
    for (const pid of unsettled) {
      const p = await markedOne(pid, needle)
      if (p === undefined) again.push(pid)
      else if (p !== null) found.push(p)
    }
    unsettled = again
  }
  return found
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

/** `pid`'s command line as argv, or null when gone. */
async function argvOf(pid) {
  try {
    const raw = await fsp.readFile(`/proc/${pid}/cmdline`, 'utf8')
    return raw.split('\0').slice(0, -1)
  } catch {
    return null
  }
}

/**
 * `pid`'s cgroup v2 as a record ({ path, id }: the directory under the
 * cgroup2 mount and its inode, the cgroup id), or null where there is none
 * to tell.
 */
async function cgroupOf(pid) {
  if (!LINUX) return null
  try {
    const text = await fsp.readFile(`/proc/${pid}/cgroup`, 'latin1')
    const line = text.split('\n').find((l) => l.startsWith('0::'))
    if (line === undefined) return null
    const dir = `/sys/fs/cgroup${line.slice(3)}`
    const st = await fsp.stat(dir, { bigint: true })
    return { path: dir, id: Number(st.ino) }
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
  untouchable,
  CAN_SWEEP,
  sweepStrays,
  markedProcesses,
  argvOf,
  cgroupOf,
  signalIdentified,
  processOwner,
}
