// GroupConfig, checked whole in SupervisorGroup's constructor, before
// anything starts: the names, each daemon's `after` and `log`, the order
// they start in (a cycle has none), and what each daemon's Supervisor is
// given. The Supervisor judges its own options (its constructor throws);
// its errors are renamed here to the field of the config they came from.

const path = require('node:path')
const { brand, isProcwardError, typeError } = require('../errors')
const validate = require('../validate')

const CONFIG_KEYS = ['stateDir', 'notify', 'daemons']
const GROUP_KEYS = ['after', 'memoryLimit', 'log']
const LOG_KEYS = ['path', 'maxBytes', 'keep']
const DEFAULT_KEEP = 5
const KEEP_MAX = 1000
/**
 * A daemon's name is a file name (`<stateDir>/<name>.json`) and a word on
 * a command line: letters, digits, `.`, `_`, `-`, not first a `.` or `-`.
 */
const NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/

function invalid(message) {
  return typeError(message, 'ERR_INVALID_ARG_VALUE')
}

/** `daemons.<name>.after`: the names it waits for, each once. */
function checkAfter(value, field) {
  if (value === undefined) return []
  return [...new Set(validate.stringArray(value, field))]
}

/** `daemons.<name>.log` → { path (absolute), maxBytes (Infinity: no rotation), keep }, or null. */
function checkLog(value, field) {
  if (value === undefined) return null
  validate.knownKeys(validate.object(value, field), LOG_KEYS, field)
  return {
    path: path.resolve(validate.nonEmptyString(value.path, `${field}.path`)),
    maxBytes:
      value.maxBytes === undefined
        ? Number.POSITIVE_INFINITY
        : validate.integer(value.maxBytes, `${field}.maxBytes`, 1, Number.MAX_SAFE_INTEGER),
    keep: value.keep === undefined ? DEFAULT_KEEP : validate.integer(value.keep, `${field}.keep`, 1, KEEP_MAX),
  }
}

/**
 * `daemons.<name>.memoryLimit`: bytes, or null. Its tree is its process
 * group or its cgroup: a daemon with neither has no tree to measure.
 */
function checkMemoryLimit(value, field, spawn) {
  if (value === undefined) return null
  const limit = validate.integer(value, field, 1, Number.MAX_SAFE_INTEGER)
  const s = spawn !== null && typeof spawn === 'object' ? spawn : {}
  if (s.processGroup === false && (s.cgroup === undefined || s.cgroup === false)) {
    throw invalid(
      `${field}: the daemon's tree is measured as its process group or cgroup: not with spawn.processGroup false and no spawn.cgroup`,
    )
  }
  return limit
}

/**
 * The spawn options of a daemon whose output goes to its log: stdout and
 * stderr piped (procward reads them), stdin as given ('ignore' by default).
 */
function loggedSpawn(spawn, field) {
  if (spawn === undefined || spawn === null || typeof spawn !== 'object' || Array.isArray(spawn)) {
    // Not an object: the Supervisor's own check says so.
    return spawn === undefined ? { stdio: ['ignore', 'pipe', 'pipe'] } : spawn
  }
  const stdio = spawn.stdio
  if (stdio === undefined) return { ...spawn, stdio: ['ignore', 'pipe', 'pipe'] }
  const entries = Array.isArray(stdio) ? stdio : [stdio, stdio, stdio]
  for (const i of [1, 2]) {
    if (entries[i] !== 'pipe') {
      throw invalid(
        `${field}.stdio[${i}]: the log (${field.replace(/\.spawn$/, '.log')}) takes stdout and stderr: give 'pipe' or leave stdio out`,
      )
    }
  }
  return spawn
}

/** The topological order of `after` (each daemon after those it names); a cycle throws, naming it. */
function startOrder(after) {
  const order = []
  const seen = new Map() // name → 'visiting' | 'done'
  const visit = (name, trail) => {
    const state = seen.get(name)
    if (state === 'done') return
    if (state === 'visiting') {
      const cycle = [...trail.slice(trail.indexOf(name)), name]
      throw invalid(`daemons: a cycle: ${cycle.join(' -> ')}`)
    }
    seen.set(name, 'visiting')
    trail.push(name)
    for (const dep of after.get(name)) visit(dep, trail)
    trail.pop()
    seen.set(name, 'done')
    order.push(name)
  }
  for (const name of after.keys()) visit(name, [])
  return order
}

/** Two daemons may not share a file: `pick(d)` is a daemon's path of that kind, or null. */
function refuseShared(daemons, pick, what) {
  const owner = new Map()
  for (const d of daemons) {
    const p = pick(d)
    if (p === null) continue
    const first = owner.get(p)
    if (first !== undefined) throw invalid(`daemons.${d.name}.${what}: ${p} is daemons.${first}'s already`)
    owner.set(p, d.name)
  }
}

/**
 * GroupConfig → { stateDir (absolute) | null, notify, daemons: [{ name, options,
 * after, dependents, log, memoryLimit (bytes or null) }] in start order }. `options` are the daemon's
 * SupervisorOptions as its Supervisor takes them (name and stateFile
 * defaulted, stdout and stderr piped for a log).
 */
function checkGroupConfig(config) {
  validate.knownKeys(validate.object(config, 'config'), CONFIG_KEYS, 'config')
  const stateDir =
    config.stateDir === undefined ? null : path.resolve(validate.nonEmptyString(config.stateDir, 'stateDir'))
  const entries = Object.entries(validate.object(config.daemons, 'daemons'))
  if (entries.length === 0) throw invalid('daemons must name at least one daemon')
  const daemons = new Map()
  for (const [name, entry] of entries) {
    if (!NAME.test(name)) {
      throw invalid(
        `daemons: ${JSON.stringify(name)} is not a daemon name (letters, digits, '.', '_', '-'; not first a '.' or '-')`,
      )
    }
    const field = `daemons.${name}`
    const { after, log, memoryLimit, ...options } = validate.object(entry, field)
    const d = { name, after: checkAfter(after, `${field}.after`), dependents: [], log: checkLog(log, `${field}.log`) }
    d.memoryLimit = checkMemoryLimit(memoryLimit, `${field}.memoryLimit`, options.spawn)
    d.options = { name, ...options }
    if (options.stateFile === undefined && stateDir !== null) d.options.stateFile = path.join(stateDir, `${name}.json`)
    if (d.log !== null) d.options.spawn = loggedSpawn(options.spawn, `${field}.spawn`)
    daemons.set(name, d)
  }
  for (const d of daemons.values()) {
    for (const dep of d.after) {
      if (!daemons.has(dep)) throw invalid(`daemons.${d.name}.after: unknown daemon '${dep}'`)
      daemons.get(dep).dependents.push(d.name)
    }
  }
  const order = startOrder(new Map([...daemons].map(([name, d]) => [name, d.after])))
  const list = order.map((name) => daemons.get(name))
  refuseShared(list, (d) => (d.log === null ? null : d.log.path), 'log.path')
  refuseShared(
    list,
    (d) => (typeof d.options.stateFile === 'string' ? path.resolve(d.options.stateFile) : null),
    'stateFile',
  )
  // One supervisor per process speaks to the service manager: a second
  // would throw in its constructor after the first took the place.
  const notify = validate.optionalBoolean(config.notify, 'notify') ?? false
  const speakers = list.filter((d) => d.options.notify === true)
  if (notify && speakers.length > 0) {
    throw invalid(
      `daemons.${speakers[0].name}.notify: the group speaks to the service manager (notify: true), not a daemon`,
    )
  }
  if (speakers.length > 1) {
    throw invalid(
      `daemons.${speakers[1].name}.notify: daemons.${speakers[0].name} speaks to the service manager already (one per process)`,
    )
  }
  return { stateDir, notify, daemons: list }
}

/**
 * An error of daemon `name`'s Supervisor constructor, as the config's: its
 * `options.x` is `daemons.<name>.x`; an unknown key lists the group's keys
 * too. Same class, code and brand.
 */
function daemonError(err, name) {
  if (!(err instanceof Error) || typeof err.message !== 'string') return err
  const unknown = /^options\.([^.\s]+) is not an option \((.*)\)$/s.exec(err.message)
  const message =
    unknown === null
      ? err.message.replace(/\boptions(?=[.:[])/g, `daemons.${name}`)
      : `daemons.${name}.${unknown[1]} is not an option of a daemon (${unknown[2]}, ${GROUP_KEYS.join(', ')})`
  const Class = err instanceof RangeError ? RangeError : err instanceof TypeError ? TypeError : Error
  const renamed = err.cause === undefined ? new Class(message) : new Class(message, { cause: err.cause })
  if (err.code !== undefined) renamed.code = err.code
  return isProcwardError(err) ? brand(renamed) : renamed
}

module.exports = { checkGroupConfig, daemonError }
