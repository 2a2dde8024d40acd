// procward status for a group: `-f FILE` (its config: each daemon's state
// file as the group gives it) or a DIR (its stateDir: each NAME.json in it),
// one row per daemon as `pm2 ls` shows them — name, state, pid, uptime,
// restarts, CPU, memory, health — each judged now as `procward status`
// judges one file (./status.js). `--json`: { daemons: { NAME: what
// `procward status --json` prints for that state file } }. Exit status: the
// worst of the daemons' (4 unknown, then 3 not running, else 0). Anything
// else is `procward status` of one file.

const fs = require('node:fs')
const path = require('node:path')
const { parse, UsageError } = require('./args.js')
const common = require('./common.js')
const { configFile, expandShort, loadConfig, stateFiles } = require('./group-file.js')
const single = require('./status.js')

const COLUMNS = ['name', 'state', 'pid', 'uptime', 'restarts', 'cpu', 'memory', 'health']

function isDirectory(p) {
  try {
    return fs.statSync(p).isDirectory()
  } catch {
    return false
  }
}

/** A group's stateDir: each `NAME.json` in it, as [[NAME, file]] by name. */
function recordsIn(dir) {
  let names
  try {
    names = fs.readdirSync(dir)
  } catch (err) {
    throw new UsageError('status', `${dir}: ${common.describe(err)}`)
  }
  return names
    .filter((n) => n.endsWith('.json') && n.length > '.json'.length)
    .sort()
    .map((n) => [n.slice(0, -'.json'.length), path.join(dir, n)])
}

/**
 * What the running child's tree uses now: its cgroup's counters where it
 * was contained (as `procward status` reads them), else its process
 * group's members from /proc; null when it does not run.
 */
async function usageOf(r) {
  if (r?.child?.running !== true) return null
  const contained = single.cgroupUsage(r.child.cgroup)
  if (contained !== null) return contained
  const pgid = r.child.pgid === r.child.pid ? r.child.pgid : null
  const tree = pgid === null ? null : await common.os().groupUsage(pgid)
  return tree === null
    ? null
    : { path: null, tasks: tree.processes, memoryBytes: tree.memoryBytes, cpuUsec: tree.cpuUsec }
}

/** One daemon's state file read and judged now: { name, file, r, j, usage }. */
async function daemonState(name, file, ns) {
  if (file === null) {
    return { name, file, r: null, j: { active: 'unknown', sub: 'no state file', code: single.judge(null).code } }
  }
  let r
  try {
    r = common.procward().readSupervisorState(file)
  } catch (err) {
    return { name, file, r: null, j: { active: 'unknown', sub: common.describe(err), code: single.judge(null).code } }
  }
  const j = single.judge(r, ns)
  return { name, file, r, j, usage: await usageOf(r) }
}

/** One row of the table, as text in each column. */
function row(d, now) {
  const { r, j, usage } = d
  const dash = (v) => (v === null || v === undefined || v === '' ? '-' : String(v))
  const since = r === null ? null : single.sinceOf(r, j)
  const running = j.active === 'active'
  const health = running ? single.healthText(r.child?.health ?? null, now) : null
  return {
    name: d.name,
    state: running ? 'running' : `${j.active} (${j.sub})`,
    pid: dash(r?.child?.running ? r.child.pid : null),
    uptime: dash(running && since !== null ? single.age(now - Date.parse(since)) : null),
    restarts: dash(r?.restarts),
    cpu: dash(usage?.cpuUsec == null ? null : `${(usage.cpuUsec / 1e6).toFixed(2)}s`),
    memory: dash(usage?.memoryBytes == null ? null : single.bytes(usage.memoryBytes)),
    // The first words: `ok`, or `failing (2 in a row)`.
    health: dash(health === null ? null : health.split(/,|:/, 1)[0]),
  }
}

function table(rows) {
  const width = Object.fromEntries(COLUMNS.map((c) => [c, Math.max(c.length, ...rows.map((r) => r[c].length))]))
  const line = (cells) =>
    COLUMNS.map((c) => cells[c].padEnd(width[c]))
      .join('  ')
      .trimEnd()
  return [line(Object.fromEntries(COLUMNS.map((c) => [c, c.toUpperCase()]))), ...rows.map(line)]
}

/** Rows (or --json) for `files` ([[NAME, file | null]]); the worst status. */
async function groupStatus(files, json) {
  const ns = common.os().ownPidNamespace()
  const now = Date.now()
  const states = await Promise.all(files.map(([name, file]) => daemonState(name, file, ns)))
  if (json) {
    const daemons = {}
    for (const d of states) daemons[d.name] = single.jsonOf(d.r, d.j, d.usage ?? null, now)
    process.stdout.write(`${JSON.stringify({ daemons }, null, 2)}\n`)
  } else if (states.length === 0) {
    process.stderr.write('procward: no daemon recorded there\n')
  } else {
    // Names and states come from files: their control characters escaped.
    process.stdout.write(
      `${table(states.map((d) => row(d, now)))
        .map(common.escapeControl)
        .join('\n')}\n`,
    )
  }
  // 0 running < 3 not running < 4 unknown: the worst.
  return states.length === 0 ? single.judge(null).code : Math.max(...states.map((d) => d.j.code))
}

async function main(argv, context) {
  const { opts, positional } = parse('status', expandShort(argv), { json: 'flag', file: 'value' })
  if (opts.help) return context.help()
  if (opts.file !== undefined) {
    if (positional.length > 0) throw new UsageError('status', '-f FILE or a STATE_FILE: not both')
    const file = configFile('status', opts.file)
    return groupStatus(stateFiles('status', file, await loadConfig('status', file)), opts.json === true)
  }
  if (positional.length === 1 && positional[0] !== '' && isDirectory(positional[0])) {
    return groupStatus(recordsIn(positional[0]), opts.json === true)
  }
  return single.main(argv, context)
}

module.exports = { main }
