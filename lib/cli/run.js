// procward run: a foreground supervisor. Its signal handling is the
// library's handleSignals (every signal that would end us stops the child's
// whole group first, then ends us with that signal), and its speech to a
// service manager that started it (NOTIFY_SOCKET: READY=1, STATUS=,
// STOPPING=1, WATCHDOG=1; the variables are not passed on to the child) is
// the package's notify-out Speaker, attached here; this file parses, logs
// and chooses the exit status.

const tty = require('node:tty')
const { parse, commandOf, UsageError, wholeNumber } = require('./args.js')
const common = require('./common.js')
const earlySignals = require('./early-signals.js')
const { createOutput, underJournal } = require('./output.js')
const { UNIT_SPEC, unitSpawnOptions } = require('./unit-options.js')

/** The health check after ready: --health-port or --health-http, and how often, how long, how many. */
const HEALTH_SPEC = {
  'health-port': 'value',
  'health-http': 'value',
  'health-interval': 'value',
  'health-timeout': 'value',
  'health-failures': 'value',
  'health-start-period': 'value',
}

/**
 * options.health from the --health-* flags, or undefined without a check.
 * The flags' text is read here; the values are judged by the library (its
 * ranges, its defaults, timeout below interval), its words mapped to the
 * flags' by RUN_WORDS.
 */
function healthOptions(opts) {
  const port = opts['health-port']
  const url = opts['health-http']
  if (port !== undefined && url !== undefined) {
    throw new UsageError('run', '--health-port and --health-http are two health checks: choose one')
  }
  if (port === undefined && url === undefined) {
    for (const flag of ['health-interval', 'health-timeout', 'health-failures', 'health-start-period']) {
      if (opts[flag] !== undefined)
        throw new UsageError('run', `--${flag} needs a check: --health-port or --health-http`)
    }
    return undefined
  }
  const health = { check: port !== undefined ? { port: number(opts, 'health-port') } : { http: url } }
  health.intervalMs = number(opts, 'health-interval')
  health.timeoutMs = number(opts, 'health-timeout')
  health.failures = number(opts, 'health-failures')
  health.startPeriodMs = number(opts, 'health-start-period')
  return health
}

/** The whole number `--flag` gives, or undefined when not given (its range is the library's to judge). */
function number(opts, flag) {
  return opts[flag] === undefined ? undefined : wholeNumber('run', opts[flag], flag)
}

const SPEC = {
  name: 'value',
  restart: 'value',
  'state-file': 'value',
  'ready-port': 'value',
  'ready-notify': 'flag',
  'ready-http': 'value',
  listen: 'values',
  ...HEALTH_SPEC,
  grace: 'value',
  'max-restarts': 'value',
  cgroup: 'flag',
  hup: 'value',
  prefix: 'flag',
  json: 'flag',
  init: 'flag',
  ...UNIT_SPEC,
}

/** The Supervisor's options as this verb's arguments name them. */
const RUN_WORDS = {
  command: 'COMMAND',
  args: 'ARGS',
  name: '--name',
  restart: '--restart',
  'handleSignals.hup': '--hup',
  stateFile: '--state-file',
  ready: '--ready-port',
  'ready.port': '--ready-port',
  'ready.http': '--ready-http',
  listen: '--listen',
  'spawn.stop.graceMs': '--grace',
  'crashLoop.maxRestarts': '--max-restarts',
  'spawn.cwd': '--cwd',
  'spawn.umask': '--umask',
  'health.check.http': '--health-http',
  'health.check.port': '--health-port',
  'health.intervalMs': '--health-interval',
  'health.timeoutMs': '--health-timeout',
  'health.failures': '--health-failures',
  'health.startPeriodMs': '--health-start-period',
}

/**
 * A library message in this verb's words: its leading option, and every
 * other it names (`options.health.intervalMs` in a message about
 * timeoutMs), as the argument that gives it.
 */
function inRunWords(message) {
  return common
    .inOurWords(
      message.replace(/\boptions\.listen\[(\d+)\](?:\.(\w+))?/g, (_, i, field) =>
        field ? `the ${field} of the ${ordinal(i)} --listen` : `the ${ordinal(i)} --listen`,
      ),
      RUN_WORDS,
    )
    .replace(/\boptions\.[\w.]*\w/g, (name) => common.inOurWords(`${name} `, RUN_WORDS).trimEnd())
}

/**
 * What procward run uses of the package beside its public entry, loaded
 * with it (inside the verb: they need the native binary): an init's duties
 * (lib/init.js), the voice of notify-out.js for a problem with the service
 * manager, and the spawn option that gives COMMAND the terminal.
 */
function internals() {
  return {
    init: require('../init.js'),
    notifyOut: require('../supervisor/notify-out.js'),
    TAKE_TERMINAL: require('../spawn-options.js').TAKE_TERMINAL,
  }
}

/**
 * Is our stdin a terminal whose foreground is our group? Then COMMAND is
 * given it as tini gives it (its stdin, and the foreground for its own
 * group: an interactive shell or REPL can read it). A procward run in the
 * background of a shell leaves it alone, and COMMAND's stdin stays
 * /dev/null. Told by /proc (Linux); elsewhere: no.
 */
function inTerminalForeground(os) {
  if (!tty.isatty(0)) return false
  const stat = os.processStat(process.pid)
  return stat !== null && stat.ttyNr !== 0 && stat.tpgid === stat.pgid
}

function ordinal(i) {
  const n = Number(i) + 1
  return n === 1 ? 'first' : n === 2 ? 'second' : n === 3 ? 'third' : `${n}th`
}

/**
 * `--listen [HOST:]PORT|/PATH[=NAME]` → a `listen` entry (its values judged
 * by the library). An IPv6 host in brackets: `[::1]:8080`.
 */
function listenEntry(text) {
  let spec = text
  let name
  const eq = spec.lastIndexOf('=')
  if (eq >= 0) {
    name = spec.slice(eq + 1)
    spec = spec.slice(0, eq)
  }
  const entry = {}
  if (spec.startsWith('/')) entry.path = spec
  else {
    const m = /^(?:\[([^\]]+)\]:|([^:[\]]+):)?(\d+)$/.exec(spec)
    if (m === null) {
      throw new UsageError(
        'run',
        `--listen must be [HOST:]PORT or /PATH (an absolute path), optionally =NAME, got ${JSON.stringify(text)}`,
      )
    }
    entry.port = Number(m[3])
    const host = m[1] ?? m[2]
    if (host !== undefined) entry.host = host
  }
  if (name !== undefined) entry.name = name
  return entry
}

/**
 * The sockets a service manager handed us (a socket unit: LISTEN_FDS for
 * our own pid), or null. With --listen NAME…, only those named (by
 * LISTEN_FDNAMES) are passed on; the rest are closed.
 */
function activated(selected) {
  const env = process.env
  const ours = env.LISTEN_PID === String(process.pid) && /^[1-9]\d*$/.test(env.LISTEN_FDS ?? '')
  const count = Number(env.LISTEN_FDS)
  const names = (env.LISTEN_FDNAMES ?? '').split(':')
  // As sd_listen_fds(unset_environment=1), whoever they were meant for: no
  // child is told of fds it does not have.
  delete env.LISTEN_PID
  delete env.LISTEN_FDS
  delete env.LISTEN_FDNAMES
  if (!ours) return null
  const sockets = require('../supervisor/sockets.js')
  return sockets.adopt(count, names, selected)
}

/** The --json form of an error: message and code, and its cause's. */
function errorFields(err) {
  const o = { message: err.message, code: err.code }
  if (err.cause != null) o.cause = { message: err.cause.message ?? String(err.cause), code: err.cause.code }
  return o
}

async function main(argv, { help }) {
  const { opts, rest } = parse('run', argv, SPEC, { command: 0 })
  if (opts.help) return help()
  const [command, ...args] = commandOf('run', rest)
  // --cwd, --env, --env-file, --user, --umask: the daemon's, checked now.
  const spawn = unitSpawnOptions(opts)
  if (opts.grace !== undefined) spawn.stop = { graceMs: number(opts, 'grace') }
  if (opts.cgroup) spawn.cgroup = true
  if (opts.prefix) spawn.stdio = ['ignore', 'pipe', 'pipe']
  // --hup's default, as its help says: SIGHUP (a closed terminal) stops COMMAND.
  const options = { command, args, spawn, handleSignals: { hup: opts.hup ?? 'stop' }, notify: true }
  if (opts.name !== undefined) options.name = opts.name
  if (opts.restart !== undefined) options.restart = opts.restart
  if (opts['state-file'] !== undefined) options.stateFile = opts['state-file']
  const readies = ['ready-port', 'ready-notify', 'ready-http'].filter((f) => opts[f] !== undefined)
  if (readies.length > 1) {
    throw new UsageError('run', `${readies.map((f) => `--${f}`).join(' and ')} are two ready checks: choose one`)
  }
  if (opts['ready-port'] !== undefined) options.ready = { port: number(opts, 'ready-port') }
  if (opts['ready-notify']) options.ready = { notify: true }
  if (opts['ready-http'] !== undefined) options.ready = { http: opts['ready-http'] }
  // Under a socket unit, its sockets (--listen then names which); else ours to bind.
  const handed = activated(opts.listen ?? null)
  if (handed !== null) options[require('../supervisor/sockets.js').ADOPTED] = handed
  else if (opts.listen !== undefined) options.listen = opts.listen.map(listenEntry)
  const health = healthOptions(opts)
  if (health !== undefined) options.health = health
  if (opts['max-restarts'] !== undefined) options.crashLoop = { maxRestarts: number(opts, 'max-restarts') }

  const output = createOutput({ stamp: !opts.json && !underJournal(), prefix: opts.prefix === true })
  const { Supervisor } = common.procward()
  const { init, notifyOut, TAKE_TERMINAL } = internals()
  // Not with --restart always: a COMMAND with the terminal gets Ctrl-C in
  // our stead, and one that exits 0 on it (a server's graceful stop, a
  // shell's `exit`) would be restarted, and Ctrl-C would never end us.
  const terminal =
    !opts.prefix && options.restart !== undefined && options.restart !== 'always' && inTerminalForeground(common.os())
  if (terminal) {
    spawn.stdio = 'inherit'
    spawn[TAKE_TERMINAL] = true
  }
  // With --prefix, the child's last words are still in its pipes when it
  // has been reaped: a stop (the one handleSignals makes, before it raises
  // the signal that ends us) is over once they are written out. A second
  // signal (SIGKILL at once) waits for nothing.
  class Foreground extends Supervisor {
    stop(o) {
      if (o?.signal === 'SIGKILL') output.abandon()
      return super.stop(o).then(async (r) => {
        await output.settle()
        return r
      })
    }
  }

  let sup
  try {
    sup = new Foreground(options)
  } catch (err) {
    // A value the library refused is bad usage (--name ''); anything else
    // is a failure.
    if (err instanceof TypeError || err instanceof RangeError) {
      throw new UsageError('run', inRunWords(err.message))
    }
    throw err
  }
  const name = sup.name
  const log = (event, fields = {}, text = '') => {
    if (opts.json) {
      output.line(JSON.stringify({ time: new Date().toISOString(), name, event, ...fields }))
    } else {
      output.line(`procward: ${name}: ${event}${text ? ` ${text}` : ''}`)
    }
  }
  // A problem with the service manager's socket or the unit: a line of ours.
  notifyOut.reportWith((text) => log('notify', { message: text }, text))
  const { exitText } = common
  sup.on('spawn', (c) => {
    output.pipe(c, name)
    log('spawn', { pid: c.pid }, `pid ${c.pid}: ${[command, ...args].join(' ')}`)
  })
  sup.on('ready', (c) => log('ready', { pid: c?.pid ?? null }, c ? `pid ${c.pid}` : ''))
  sup.on('exit', (e) => log('exit', { ...e }, `pid ${e.pid} ${exitText(e)}${common.exitNote(e, options.restart)}`))
  // COMMAND in the terminal's foreground gets its Ctrl-C (Ctrl-\) in our
  // stead. Dead of it, it is not restarted: we stop as that key would have
  // stopped us (handleSignals: the stop, then we die of the signal), heard
  // now, before the restart begins. With --restart never its status is
  // ours already (130).
  sup.on('exit', (e) => {
    if (terminal && !e.expected && options.restart !== 'never' && (e.signal === 'SIGINT' || e.signal === 'SIGQUIT')) {
      process.emit(e.signal, e.signal)
    }
  })
  sup.on('unhealthy', (u) =>
    log(
      'unhealthy',
      { pid: u.pid, failures: u.failures, limit: u.limit, error: errorFields(u.error) },
      `pid ${u.pid} (${u.failures} of ${u.limit}): ${common.describe(u.error)}`,
    ),
  )
  sup.on('healthy', (h) => log('healthy', { ...h }, `pid ${h.pid} (after ${h.failures} failed)`))
  sup.on('restart', (r) => log('restart', { ...r }, `attempt ${r.attempt} in ${r.delayMs} ms`))
  sup.on('takeover', (t) =>
    log(
      'takeover',
      { ...t },
      `${t.action} pid ${t.pid}${t.suspects.length ? ` (suspects, left alone: ${t.suspects.join(' ')})` : ''}`,
    ),
  )
  sup.on('reload', (r) =>
    r.ok
      ? log('reload', { from: r.from, to: r.to, ok: true }, `pid ${r.from} replaced by pid ${r.to}`)
      : log(
          'reload',
          { from: r.from, to: r.to, ok: false, error: errorFields(r.error) },
          `failed${r.from === null ? '' : `, pid ${r.from} serves on`}: ${common.describe(r.error)}`,
        ),
  )
  sup.on('failed', (err) => log('failed', errorFields(err), common.describe(err)))
  sup.on('stopped', (r) => log('stopped', { result: r }, r ? r.outcome : ''))
  const ended = new Promise((resolve) => {
    sup.once('failed', (err) => resolve(err))
    sup.once('stopped', () => resolve(null))
  })
  // A container's entrypoint (PID 1 of its pid namespace), or --init: the
  // orphans the kernel hands us are reaped, as tini would (lib/init.js).
  if (opts.init || init.isPidOne()) init.startInitDuties({ subreaper: !init.isPidOne() })
  sup.start().catch(() => {
    // Reported by 'failed' (or the signal that stopped it).
  })
  // The supervisor's signal handlers are in place: the early listeners
  // (PID 1 only) step aside; a signal they kept pending reaches these.
  // SIGUSR1 goes to COMMAND, as tini passes it on (nginx reopens its logs);
  // our own listener stays, keeping Node's inspector shut.
  earlySignals.onSigusr1(() => sup.kill('SIGUSR1'))
  earlySignals.release()
  const failure = await ended
  await output.settle()
  const lastExit = sup.status().lastExit
  if (failure !== null) {
    const spawned = common.spawnFailureStatus(failure)
    if (spawned !== null) return spawned
  }
  if (sup.status().state !== 'stopped' && sup.status().state !== 'failed') return 0
  if (options.restart === 'never' && lastExit !== null) {
    // COMMAND's own status, unless that says nothing of the failure: we
    // stopped it for its failed ready or health checks (the status it gave
    // our SIGTERM is no verdict of its own), or it exited 0 before it was
    // ready.
    const status = common.statusOf(lastExit)
    if (failure !== null && (failure.cause !== undefined || status === 0)) return 1
    return status
  }
  return failure === null ? 0 : 1
}

module.exports = { main }
