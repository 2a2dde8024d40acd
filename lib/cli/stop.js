// procward stop: stops what a state file records. A live supervisor is
// asked (SIGTERM, pid and identity checked) and given the time its own stop
// needs; whatever the record still names as running afterwards (or at once,
// when the supervisor is dead) is stopped directly: the child's group, and
// its cgroup if it had one.

const { parse, integer, MAX_MS, UsageError } = require('./args.js')
const common = require('./common.js')

/** The library's stop defaults, for a record that does not carry its own. */
const DEFAULT_GRACE_MS = 5000
const DEFAULT_KILL_TIMEOUT_MS = 2000
/** What a supervisor needs beyond its child's stop: its last record written, its lock released. */
const SUPERVISOR_MARGIN_MS = 2000

async function main(argv, { help }) {
  const { opts, positional } = parse('stop', argv, { grace: 'value' })
  if (opts.help) return help()
  if (positional.length !== 1) throw new UsageError('stop', 'one STATE_FILE is needed')
  if (positional[0] === '') throw new UsageError('stop', 'STATE_FILE must not be empty')
  const explicitGrace = opts.grace === undefined ? null : integer('stop', opts.grace, 'grace', 0, MAX_MS)
  const file = positional[0]
  const procward = common.procward()
  let r = procward.readSupervisorState(file)
  if (r === null) {
    process.stderr.write(`procward: ${file}: ${common.noRecord(file)}\n`)
    return 1
  }
  const refused = procward.distrustSupervisorState(file, r)
  if (refused !== null) {
    process.stderr.write(`procward: ${file}: not acting on this record: ${refused}\n`)
    return 1
  }
  // The supervisor's own stop settings, as it recorded them; --grace wins.
  const recorded = r.stop ?? {}
  const graceMs = explicitGrace ?? validMs(recorded.graceMs) ?? DEFAULT_GRACE_MS
  const killTimeoutMs = validMs(recorded.killTimeoutMs) ?? DEFAULT_KILL_TIMEOUT_MS
  let status = 0
  let acted = false
  if (r.supervisor.running && r.supervisor.pid !== process.pid) {
    // It stops its child in graceMs + killTimeoutMs, then writes and exits.
    const res = await procward.stopSupervisedProcess(r.supervisor.pid, {
      graceMs: Math.min(MAX_MS, graceMs + killTimeoutMs + SUPERVISOR_MARGIN_MS),
      killTimeoutMs,
      ...(r.supervisor.identity ? { identity: r.supervisor.identity } : {}),
    })
    process.stderr.write(`procward: supervisor pid ${r.supervisor.pid}: ${res.outcome}\n`)
    if (res.outcome === 'unkillable') status = 1
    acted = true
    const again = procward.readSupervisorState(file)
    if (again !== null) {
      // Read anew, so judged anew: the file may have been replaced meanwhile.
      const refusedNow = procward.distrustSupervisorState(file, again)
      if (refusedNow !== null) {
        process.stderr.write(`procward: ${file}: not acting on this record: ${refusedNow}\n`)
        return 1
      }
      r = again
    }
  }
  if (!acted && !r.child?.running) {
    process.stderr.write(`procward: ${file}: nothing running (${r.name}: ${r.state})\n`)
  }
  if (r.child?.running) {
    const c = r.child
    const info = procward.getProcessInfo(c.pid)
    const res = await procward.stopSupervisedProcess(c.pid, {
      graceMs,
      killTimeoutMs,
      identity: c.identity,
      group: info !== null && info.pgid === c.pid,
    })
    process.stderr.write(`procward: child pid ${c.pid}: ${res.outcome}\n`)
    if (res.outcome === 'unkillable') status = 1
  }
  // A contained daemon's cgroup holds whatever it started, however far that
  // strayed from its group: ended whole (if it is still the one recorded).
  const cg = r.child?.cgroup ?? null
  if (cg !== null && (await procward.killRecordedCgroup(cg))) {
    process.stderr.write(`procward: cgroup ${cg.path}: killed\n`)
  }
  return status
}

/** A recorded duration, if it is one. */
function validMs(v) {
  return Number.isInteger(v) && v >= 0 && v <= MAX_MS ? v : null
}

module.exports = { main }
