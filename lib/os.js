// What this platform supports and what the kernel says of processes, asked
// of the binding: the one place in lib/ that knows which OS it runs on, so
// that no other file tests process.platform or reads /proc. The binding
// decided it when it was built (src/binding/os.rs over proc_info::facts);
// where there is no /proc, every answer below is "cannot tell" (null, or
// nothing found), as it is on Linux when /proc cannot be read, and the
// callers do without.

const native = require('../binding.js')

const facts = native.platformFacts()

/**
 * Node on Windows: signals are emulated (SIGBREAK; SIGHUP and SIGBREAK
 * cannot be raised) and the console is written asynchronously.
 */
const WINDOWS = facts.windows

/**
 * The process table can be read (Linux's /proc): a process's session and
 * group, the marks in its environment, who holds a socket; the stray
 * sweep, pidfd-checked signals and the reaping of orphans rest on it.
 */
const PROCFS = facts.procfs

/** `fn(...args)`, or `fallback` where it throws (gone or unreadable: cannot tell). */
function told(fallback, fn, ...args) {
  try {
    return fn(...args)
  } catch {
    return fallback
  }
}

/** As `told`, for a native promise. */
async function toldLater(fallback, fn, ...args) {
  try {
    return await fn(...args)
  } catch {
    return fallback
  }
}

/**
 * `pid`'s stat line: { state, running, ppid, pgid, session, ttyNr, tpgid },
 * or null when it is gone or cannot be read.
 */
function processStat(pid) {
  return told(null, native.processStat, pid)
}

/**
 * This process's signal masks and effective capabilities, as bigints with
 * bit n-1 for signal (capability) n: { pending (this thread's: SigPnd),
 * sharedPending (ShdPnd), ignored, caught, capEff }; null where unknown.
 */
function ownStatus() {
  return told(null, native.ownStatus)
}

/** `pid`'s name (comm), or null. */
function commOf(pid) {
  return told(null, native.processComm, pid)
}

/** The uid that owns process `pid`, or null where it cannot be told. */
function processOwner(pid) {
  return told(null, native.processOwner, pid)
}

/** `pid`'s command line as argv, or null when it is gone or cannot be read. */
function argvOf(pid) {
  return toldLater(null, native.processArgv, pid)
}

/**
 * `pid`'s cgroup v2 ({ path, id }: its directory under the cgroup2 mount and
 * that directory's inode, the cgroup id), or null where there is none to tell.
 */
function cgroupOf(pid) {
  return toldLater(null, native.processCgroup, pid)
}

/** Where the cgroup2 hierarchy is mounted, or null. */
function cgroup2Mount() {
  return told(null, native.cgroup2Mount)
}

/**
 * Is a thread of this process other than the JS thread runnable now (woken,
 * not yet run)? false where that cannot be told.
 */
function otherThreadsRunnable() {
  return told(false, native.otherThreadsRunnable)
}

/**
 * This process's pid namespace (its inode: `pid:[N]` as readlink shows
 * it), or null where there is none to tell. Pids recorded in another one
 * name other processes here.
 */
function ownPidNamespace() {
  return told(null, native.ownPidNamespace)
}

/**
 * A non-blocking file description of our own for the terminal open on
 * `fd` (an fd the caller now owns), or null: not a terminal, or no way
 * here to open one anew.
 */
function openOwnTerminal(fd) {
  return told(null, native.openOwnTerminal, fd)
}

/**
 * The inodes (decimal strings) of the TCP sockets listening on `port` in
 * our network namespace, as a Set; null where that cannot be told.
 */
async function listeningInodes(port) {
  const inodes = await toldLater(null, native.portListeners, port)
  return inodes === null ? null : new Set(inodes)
}

/**
 * Does process `pid`, or a member of its process group `pgid` (or null),
 * hold a socket listening on `port`? true, false, or null where it cannot
 * be told (no listener seen, fds we may not read).
 */
function childListens(pid, pgid, port) {
  return toldLater(null, native.childListens, pid, pgid, port)
}

/**
 * Was our connection from local port `peer` to `port` accepted by `pid`
 * or a member of its group `pgid`? true, false, or null where it cannot be
 * told.
 */
function childAccepted(pid, pgid, port, peer) {
  return toldLater(null, native.childAccepted, pid, pgid, port, peer)
}

/**
 * The running processes whose environment, as exec gave it, holds `entry`
 * ("NAME=value"): [{ pid, ppid, pgid, session, identity }], the identity
 * that of the process whose environment held it. Processes whose
 * environment we may not read are not seen; [] where none can be.
 */
function markedProcesses(entry) {
  return toldLater([], native.markedProcesses, entry)
}

/**
 * What the processes in process group `pgid` use now, read off the JS
 * thread: { memoryBytes (their summed RSS), cpuUsec (the CPU time of those
 * alive), processes }; null when none is left, or where it cannot be told.
 */
function groupUsage(pgid) {
  return toldLater(null, native.groupUsage, pgid)
}

/** As groupUsage, for the processes of the cgroup at `dir` (a path under the cgroup2 mount). */
function cgroupUsage(dir) {
  return toldLater(null, native.cgroupUsage, dir)
}

/**
 * Who the kernel says is at the other end of `fd`, a connected unix socket
 * of ours: { pid, uid, gid } (SO_PEERCRED), or null where it cannot tell.
 */
function peerCredentials(fd) {
  return told(null, native.peerCredentials, fd)
}

module.exports = {
  WINDOWS,
  PROCFS,
  processStat,
  ownStatus,
  commOf,
  processOwner,
  argvOf,
  cgroupOf,
  cgroup2Mount,
  ownPidNamespace,
  otherThreadsRunnable,
  openOwnTerminal,
  listeningInodes,
  childListens,
  childAccepted,
  markedProcesses,
  groupUsage,
  cgroupUsage,
  peerCredentials,
}
