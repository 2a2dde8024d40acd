// Takeover: at start(), what a dead predecessor recorded in the stateFile
// is acted on before anything overwrites it. Its child, if still running
// (pid + identity), is stopped with its group — or adopted (boot.js
// decides, life.js keeps it) — and what the group left behind is ended:
// the recorded cgroup whole, or else the group members proven to be the
// predecessor's (see procfs.sweepStrays); others are reported as suspects,
// never signalled.

const native = require('../../binding.js')
const { callNative, fromNative, typeError } = require('../errors')
const validate = require('../validate')
const { stopSupervisedProcess } = require('../supervised')
const procfs = require('./procfs')
const { untouchable } = procfs
const { isRunning, MARK_VAR, parseRecord, readRecordFile } = require('./state-file')

/** Whether `pid` leads its own process group now (so a stop takes the group). */
function leadsGroup(pid) {
  try {
    return callNative(native.getProcessInfo, pid)?.pgid === pid
  } catch {
    return false
  }
}

/**
 * Kills a recorded cgroup whole, if it is still the one recorded: true
 * killed; false gone, or not ours; null where the record holds none (or
 * nothing that could be one: records are read as found).
 */
async function killRecorded(cg, killTimeoutMs = 2000) {
  if (cg === null || typeof cg !== 'object' || typeof cg.path !== 'string' || !Number.isSafeInteger(cg.id)) {
    return null
  }
  try {
    return await native.killRecordedCgroup(cg.path, cg.id, killTimeoutMs)
  } catch (err) {
    throw fromNative(err)
  }
}

/**
 * Kills a cgroup a supervisor recorded (a SupervisorStateRecord's
 * `child.cgroup`) whole, if it is still that cgroup (same id) and one
 * procward made: `cgroup.kill`, then waits up to `killTimeoutMs` (2000)
 * for it to empty, and removes it. Resolves true when it was killed; false
 * when it is gone or not procward's (always, where there are no cgroups).
 */
async function killRecordedCgroup(cgroup, killTimeoutMs) {
  validate.object(cgroup, 'cgroup')
  const p = validate.nonEmptyString(cgroup.path, 'cgroup.path')
  if (!p.startsWith('/'))
    throw typeError(`cgroup.path must be an absolute path, got ${JSON.stringify(p)}`, 'ERR_INVALID_ARG_VALUE')
  validate.integer(cgroup.id, 'cgroup.id', 1, Number.MAX_SAFE_INTEGER)
  return killRecorded(cgroup, validate.duration(killTimeoutMs, 'killTimeoutMs', 2000))
}

/**
 * What the predecessor's record in `stateFile` asks of us: null (no
 * record), { refused: why } (not to be acted on; said once by the caller,
 * then overwritten), or { child, alive, supervisor } (child null when the
 * record names none; supervisor: the record's, its mark and session).
 */
async function predecessor(stateFile) {
  const file = await readRecordFile(stateFile)
  if (file === null) return null
  if (file.untrusted) return { refused: file.untrusted }
  const r = parseRecord(file.text)
  if (r === null) return null
  const c = r.child
  if (c === null) return { child: null, alive: false, supervisor: r.supervisor }
  const alive = isRunning(c.pid, c.identity)
  const refused = alive ? untouchable(c.pid) : null
  if (refused !== null) return { refused: `it names pid ${c.pid}, and ${refused}` }
  return { child: c, alive, supervisor: r.supervisor }
}

/**
 * The daemons a dead predecessor (`sup`: its record's supervisor) spawned
 * that its record may not name — it was killed between a spawn and the
 * record's write. Found by the mark its children carry in their
 * environment (MARK_VAR), in its session (a daemon that left the session
 * escaped by design, as one that forks away does): the top of each marked
 * tree (a daemon reparented at its supervisor's death, or a worker that
 * outlived its daemon), never what is the kept child's own (`exclude`,
 * see keptOwn) nor anything untouchable. [{ pid, identity, pgid, session }]
 */
async function unrecordedDaemons(sup, exclude) {
  if (sup.mark === undefined) return []
  const marked = await procfs.markedProcesses(`${MARK_VAR}=${sup.mark}`)
  const pids = new Set(marked.map((p) => p.pid))
  const found = []
  for (const p of marked) {
    if (pids.has(p.ppid) || (await keptOwn(p, exclude))) continue
    if (typeof sup.session === 'number' && p.session !== sup.session) continue
    if (untouchable(p.pid) !== null) continue
    // The identity is the marked process's own (read with its mark): if it
    // is gone by now, its pid may be another's, never to be acted on.
    if (isRunning(p.pid, p.identity)) found.push(p)
  }
  return found
}

/**
 * `pid`'s cgroup, for ending it with the daemon: null unless it is one
 * procward made (killRecorded checks the name and id too), and never ours
 * or one holding us (a supervisor that is itself a contained daemon).
 */
async function daemonCgroup(pid) {
  const cg = await procfs.cgroupOf(pid)
  if (cg === null) return null
  const own = await procfs.cgroupOf(process.pid)
  if (own !== null && (own.path === cg.path || own.path.startsWith(`${cg.path}/`))) return null
  return cg
}

/**
 * Whether marked process `p` is the kept child's own (`kept`: a record's
 * child, or null): the child itself, or in its group (where it leads one)
 * or its cgroup. Each spawn has a group and a cgroup of its own, so what is
 * in the kept child's is that child's (a worker it forked away, a member
 * that left its group), never a second daemon to stop.
 */
async function keptOwn(p, kept) {
  if (kept == null) return false
  if (p.pid === kept.pid) return true
  if (kept.pgid === kept.pid && p.pgid === kept.pgid) return true
  const cg = kept.cgroup?.path
  return typeof cg === 'string' && (await procfs.cgroupOf(p.pid))?.path === cg
}

/** `found` (unrecordedDaemons) without what is `kept`'s own (see keptOwn). */
async function withoutKept(found, kept) {
  const rest = []
  for (const d of found) if (!(await keptOwn(d, kept))) rest.push(d)
  return rest
}

/** A record for adopting an unrecorded daemon `d` (see unrecordedDaemons), as the predecessor would have written it; null once `d` is gone. */
async function adoptionRecord(d) {
  const argv = (await procfs.argvOf(d.pid)) ?? []
  const cgroup = await daemonCgroup(d.pid)
  // Read by pid: only worth anything if the pid is still the daemon's.
  if (!isRunning(d.pid, d.identity)) return null
  const now = new Date().toISOString()
  return {
    pid: d.pid,
    identity: d.identity,
    pgid: d.pgid,
    session: d.session,
    command: argv[0] ?? '',
    args: argv.slice(1),
    startedAt: null,
    aliveAt: now,
    cgroup,
  }
}

/**
 * Stops an unrecorded daemon `d` with its group (identity checked), then
 * its cgroup if procward made one for it. `track` as for stopPredecessor.
 * Resolves the 'takeover' event.
 */
async function stopUnrecorded(d, stopDefaults, track) {
  let cgroup = await daemonCgroup(d.pid)
  // Read by pid: only the daemon's if the pid still is.
  if (!isRunning(d.pid, d.identity)) cgroup = null
  const target = { identity: d.identity, group: d.pgid === d.pid }
  track({ pid: d.pid, target })
  let result
  try {
    result = await stopSupervisedProcess(d.pid, { ...stopDefaults, ...target })
  } finally {
    track(null)
  }
  await killRecorded(cgroup, stopDefaults.killTimeoutMs).catch(() => null)
  return { pid: d.pid, identity: d.identity, action: 'stopped', result, suspects: [] }
}

/**
 * Stops the predecessor's recorded child `c` (if `alive`) with its group,
 * then ends what it left: its cgroup, or the proven strays of its group.
 * `track` is told the stop's target while it runs (null after), so that a
 * stop() of ours can escalate it. Resolves the 'takeover' event, or null
 * when there was nothing to end.
 */
async function stopPredecessor(c, alive, stopDefaults, track) {
  let result = null
  if (alive) {
    const target = { identity: c.identity, group: leadsGroup(c.pid) }
    track({ pid: c.pid, target })
    try {
      result = await stopSupervisedProcess(c.pid, { ...stopDefaults, ...target })
    } finally {
      track(null)
    }
  }
  let swept = { killed: [], suspects: [] }
  const aliveAtMs = Date.parse(c.aliveAt)
  // A recorded cgroup holds every member, however far it strayed from the
  // group: killing it leaves no stray to sweep (and one already removed
  // had no member left).
  const cgroupKilled = await killRecorded(c.cgroup, stopDefaults.killTimeoutMs)
  if (
    cgroupKilled === null &&
    procfs.CAN_SWEEP &&
    c.pgid !== null &&
    c.session !== null &&
    c.session >= 0 &&
    Number.isFinite(aliveAtMs)
  ) {
    swept = await procfs.sweepStrays(
      { pgid: c.pgid, session: c.session, identity: c.identity, aliveAtMs },
      stopDefaults.killTimeoutMs ?? 2000,
    )
  }
  if (!alive && cgroupKilled !== true && swept.killed.length === 0 && swept.suspects.length === 0) return null
  return { pid: c.pid, identity: c.identity, action: 'stopped', result, suspects: swept.suspects }
}

module.exports = {
  untouchable,
  killRecorded,
  killRecordedCgroup,
  predecessor,
  stopPredecessor,
  unrecordedDaemons,
  withoutKept,
  adoptionRecord,
  stopUnrecorded,
}
