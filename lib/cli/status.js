// procward status: what a supervisor recorded, judged now, read as
// `systemctl status` reads: a headline true at this moment, since when, the
// main pid, restarts, the last exit, readiness, the child's own status
// text, and a contained child's tasks, memory and CPU. Exit status as LSB
// init scripts give it: 0 running, 3 not running, 4 unknown.

const fs = require('node:fs')
const path = require('node:path')
const { parse, UsageError } = require('./args.js')
const common = require('./common.js')

const RUNNING = 0
const NOT_RUNNING = 3
const UNKNOWN = 4

/**
 * The judgement of a record: { active, sub, code } where active is what
 * systemd would say (active, activating, deactivating, failed, inactive,
 * unknown). The record says what the supervisor last wrote; whether it and
 * its child are running is judged now (their pids and identities), and the
 * judgement never claims more than both say. `pidNamespace`: ours (null
 * where unknown); a record written in another one is not judged.
 */
function judge(r, pidNamespace = null) {
  if (r === null) return { active: 'unknown', sub: 'no record', code: UNKNOWN }
  const theirs = r.supervisor.pidNamespace
  if (Number.isSafeInteger(theirs) && theirs > 0 && pidNamespace !== null && theirs !== pidNamespace) {
    return {
      active: 'unknown',
      sub: 'recorded in another pid namespace',
      code: UNKNOWN,
      note: `recorded in pid:[${theirs}], read from pid:[${pidNamespace}]: its pids name other processes here; run it inside, e.g. docker exec`,
    }
  }
  // systemd's words for why a unit failed.
  const result =
    r.lastExit == null ? 'Result: start-failed' : r.lastExit.signal ? 'Result: signal' : 'Result: exit-code'
  const supervisor = r.supervisor.running
  const child = r.child?.running === true
  if (!supervisor) {
    if (child) return { active: 'failed', sub: 'supervisor gone, child running unsupervised', code: NOT_RUNNING }
    if (r.state === 'failed') return { active: 'failed', sub: result, code: NOT_RUNNING }
    if (r.state === 'stopped' || r.state === 'idle') return { active: 'inactive', sub: 'dead', code: NOT_RUNNING }
    // It died (SIGKILL, a crash) without writing its end: nothing runs.
    return { active: 'inactive', sub: 'dead', code: NOT_RUNNING, note: `the supervisor died while ${r.state}` }
  }
  switch (r.state) {
    case 'running':
      if (child) return { active: 'active', sub: 'running', code: RUNNING }
      // Its child has just gone, and the supervisor has not written what
      // it does about that yet.
      return { active: 'unknown', sub: 'child gone, not yet recorded', code: UNKNOWN }
    case 'starting':
      return { active: 'activating', sub: 'start', code: NOT_RUNNING }
    case 'backoff':
      return { active: 'activating', sub: 'auto-restart', code: NOT_RUNNING }
    case 'stopping':
      return { active: 'deactivating', sub: 'stop', code: NOT_RUNNING }
    case 'failed':
      return { active: 'failed', sub: result, code: NOT_RUNNING }
    default:
      return { active: 'inactive', sub: 'dead', code: NOT_RUNNING }
  }
}

/** `v` if the record holds a time there (a string), else null: records are read as found. */
function when(v) {
  return typeof v === 'string' && v !== '' ? v : null
}

/**
 * The record's `child.cgroup`: null (none), the cgroup ({ path, id }), or
 * 'malformed' (something else: a record written by hand, or tampered with).
 */
function recordedCgroup(cg) {
  if (cg == null) return null
  const ok =
    typeof cg === 'object' && typeof cg.path === 'string' && cg.path !== '' && Number.isSafeInteger(cg.id) && cg.id > 0
  return ok ? cg : 'malformed'
}

/** Since when the judgement holds, as far as the record tells. */
function sinceOf(r, j) {
  if (r === null) return null
  if (j.active === 'active' || j.active === 'activating' || j.active === 'deactivating') {
    return when(r.child?.readyAt) ?? when(r.child?.startedAt) ?? when(r.updatedAt)
  }
  return when(lastExitOf(r)?.at) ?? when(r.updatedAt)
}

/** The record's lastExit if it is an object (null otherwise). */
function lastExitOf(r) {
  return r.lastExit !== null && typeof r.lastExit === 'object' ? r.lastExit : null
}

/** "3min 2s", "2h 5min", "4 days 3h", as systemd words an age. */
function age(ms) {
  if (!Number.isFinite(ms) || ms < 0) return null
  const s = Math.floor(ms / 1000)
  if (s < 60) return s === 0 ? `${ms}ms` : `${s}s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m}min ${s % 60}s`
  const h = Math.floor(m / 60)
  if (h < 24) return `${h}h ${m % 60}min`
  const d = Math.floor(h / 24)
  return `${d} day${d === 1 ? '' : 's'} ${h % 24}h`
}

function ago(iso, now) {
  const t = Date.parse(iso)
  const a = age(now - t)
  return a === null ? '' : `; ${a} ago`
}

function readNumber(file, pick = (t) => t) {
  try {
    const n = Number(pick(fs.readFileSync(file, 'utf8')))
    return Number.isFinite(n) ? n : null
  } catch {
    return null
  }
}

/**
 * A recorded cgroup's tasks, memory and CPU, read now — when it is still
 * the one recorded (its id is the directory's inode); null otherwise.
 */
function cgroupUsage(recorded) {
  const cg = recordedCgroup(recorded)
  if (cg === null || cg === 'malformed') return null
  const mount = common.os().cgroup2Mount()
  if (mount === null) return null
  // A filesystem path (as spawnSupervised reports it), or one under the mount.
  const dir = cg.path.startsWith(`${mount}/`) ? path.normalize(cg.path) : path.join(mount, cg.path)
  if (!dir.startsWith(`${mount}/`)) return null
  try {
    if (fs.statSync(dir, { bigint: true }).ino !== BigInt(cg.id)) return null
  } catch {
    return null
  }
  let tasks = readNumber(path.join(dir, 'pids.current'))
  if (tasks === null) {
    try {
      tasks = fs.readFileSync(path.join(dir, 'cgroup.threads'), 'utf8').split('\n').filter(Boolean).length
    } catch {
      tasks = null
    }
  }
  return {
    path: dir,
    tasks,
    memoryBytes: readNumber(path.join(dir, 'memory.current')),
    cpuUsec: readNumber(path.join(dir, 'cpu.stat'), (t) => /^usage_usec (\d+)$/m.exec(t)?.[1]),
  }
}

function bytes(n) {
  if (n === null) return null
  const units = ['B', 'K', 'M', 'G', 'T']
  let v = n
  let u = 0
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024
    u++
  }
  return u === 0 ? `${v}B` : `${v.toFixed(1)}${units[u]}`
}

/** The record's last health check (`child.health`), in a few words; null when there is none (or it is garbled). */
function healthText(h, now) {
  if (h === null || typeof h !== 'object' || typeof h.ok !== 'boolean') return null
  const at = when(h.at)
  const time = at === null ? '' : `, at ${at}${ago(at, now)}`
  if (h.ok) return `ok${time}`
  const n = Number.isSafeInteger(h.failures) && h.failures > 0 ? ` (${h.failures} in a row)` : ''
  return `failing${n}${time}: ${typeof h.error === 'string' ? h.error : 'check failed'}`
}

function lines(file, r, j, usage, now) {
  // Pids of another pid namespace are neither running nor gone here.
  const unseen = j.sub === 'recorded in another pid namespace'
  const liveness = (running) => (unseen ? ' (not judged)' : running ? '' : ' (gone)')
  const since = sinceOf(r, j)
  const out = [`${r.name} - procward supervisor (${file})`]
  const field = (label, value) => {
    if (value !== null && value !== undefined && value !== '') out.push(`${label.padStart(12)}: ${value}`)
  }
  field('Active', `${j.active} (${j.sub})${since ? ` since ${since}${ago(since, now)}` : ''}`)
  if (j.note) field('Note', j.note)
  if (r.child) {
    const cmd = [r.child.command, ...r.child.args].join(' ')
    field('Main PID', `${r.child.pid}${liveness(r.child.running)}: ${cmd}`)
    // What the record knows (an adopted daemon's start is not known).
    const started = when(r.child.startedAt)
    const ready = when(r.child.readyAt)
    if (r.child.running && started !== null) field('Started', `${started}${ago(started, now)}`)
    if (r.child.running && ready !== null) field('Ready', `${ready}${ago(ready, now)}`)
    if (r.child.running && typeof r.child.status === 'string') field('Status', JSON.stringify(r.child.status))
    if (r.child.running) field('Health', healthText(r.child.health, now))
  }
  // A reload under way: its successor starts beside the main pid.
  if (r.next?.running) {
    field('Reloading', `pid ${r.next.pid}: ${[r.next.command, ...r.next.args].join(' ')} (starting)`)
  }
  field(
    'Supervisor',
    `pid ${r.supervisor.pid}, ${unseen ? 'not judged' : r.supervisor.running ? 'running' : 'gone'}; recorded state: ${r.state}`,
  )
  field('Restarts', String(r.restarts))
  const reload = r.lastReload
  if (reload && typeof reload === 'object' && when(reload.at) !== null) {
    const at = when(reload.at)
    field(
      'Last reload',
      reload.ok === true
        ? `pid ${reload.from} replaced by pid ${reload.to}, at ${at}${ago(at, now)}`
        : `failed (pid ${reload.from} served on): ${reload.error}, at ${at}${ago(at, now)}`,
    )
  }
  const lastExit = lastExitOf(r)
  if (lastExit !== null) {
    const exitAt = when(lastExit.at)
    const a = exitAt ? age(now - Date.parse(exitAt)) : null
    const at = exitAt ? `, at ${exitAt}${a === null ? '' : ` (${a} ago)`}` : ''
    const pid = Number.isSafeInteger(lastExit.pid) ? `pid ${lastExit.pid}, ` : ''
    const unhealthy = lastExit.reason === 'unhealthy' ? ', stopped as unhealthy' : ''
    field('Last exit', `${pid}${common.exitText(lastExit)}${unhealthy}${at}`)
  }
  if (r.meta != null && r.child?.running) field('Meta', JSON.stringify(r.meta))
  if (usage !== null) {
    field('Tasks', usage.tasks === null ? null : String(usage.tasks))
    field('Memory', bytes(usage.memoryBytes))
    field('CPU', usage.cpuUsec === null ? null : `${(usage.cpuUsec / 1e6).toFixed(3)}s`)
    field('CGroup', usage.path)
  } else if (r.child?.running) {
    const cg = recordedCgroup(r.child.cgroup)
    if (cg === 'malformed') field('CGroup', '(malformed in the record: not read)')
    else if (cg !== null) field('CGroup', `${cg.path} (not readable)`)
  }
  field('Updated', when(r.updatedAt))
  // Names, commands and paths come from the record and the command line:
  // their control characters are shown escaped, never sent to the terminal.
  return out.map(common.escapeControl)
}

/** What --json prints for one state file: the record with its judgement. */
function jsonOf(r, j, usage, now) {
  const since = sinceOf(r, j)
  const judgement = {
    active: j.active,
    sub: j.sub,
    ...(j.note ? { note: j.note } : {}),
    since,
    uptimeMs: since !== null && Number.isFinite(Date.parse(since)) ? Math.max(0, now - Date.parse(since)) : null,
    exitCode: j.code,
    resources: usage,
  }
  return { ...(r ?? {}), judgement }
}

async function main(argv, { help }) {
  const { opts, positional } = parse('status', argv, { json: 'flag' })
  if (opts.help) return help()
  if (positional.length !== 1) throw new UsageError('status', 'one STATE_FILE is needed')
  if (positional[0] === '') throw new UsageError('status', 'STATE_FILE must not be empty')
  const file = positional[0]
  let r
  try {
    r = common.procward().readSupervisorState(file)
  } catch (err) {
    if (err instanceof TypeError) throw new UsageError('status', err.message)
    process.stderr.write(`procward: ${file}: ${common.describe(err)}\n`)
    return UNKNOWN
  }
  const now = Date.now()
  const j = judge(r, common.os().ownPidNamespace())
  const usage = r?.child?.running ? cgroupUsage(r.child.cgroup) : null
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(jsonOf(r, j, usage, now), null, 2)}\n`)
  } else if (r === null) {
    process.stderr.write(`procward: ${file}: ${common.noRecord(file)}\n`)
  } else {
    process.stdout.write(`${lines(file, r, j, usage, now).join('\n')}\n`)
  }
  return j.code
}

module.exports = { main, judge, jsonOf, sinceOf, cgroupUsage, healthText, age, bytes }
