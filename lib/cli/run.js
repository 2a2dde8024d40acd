// procward run: a foreground supervisor. Its signal handling is the
// library's handleSignals (every signal that would end us stops the child's
// whole group first, then ends us with that signal), and so is its speech
// to a service manager that started it (NOTIFY_SOCKET: READY=1, STATUS=,
// STOPPING=1, WATCHDOG=1; the variables are not passed on to the child);
// this file parses, logs and chooses the exit status.

const { parse, integer, oneOf, MAX_MS, UsageError } = require('./args.js')
const common = require('./common.js')
const { createOutput, underJournal } = require('./output.js')

const SPEC = {
  name: 'value',
  restart: 'value',
  'state-file': 'value',
  'ready-port': 'value',
  'ready-notify': 'flag',
  grace: 'value',
  'max-restarts': 'value',
  cgroup: 'flag',
  hup: 'value',
  prefix: 'flag',
  json: 'flag',
}

// The library's package-internal Supervisor option that makes it speak to
// the service manager that started this process (see lib/supervisor/notify.js).
const SERVICE_MANAGER = Symbol.for('procward.serviceManager')

/** The --json form of an error: message and code, and its cause's. */
function errorFields(err) {
  const o = { message: err.message, code: err.code }
  if (err.cause != null) o.cause = { message: err.cause.message ?? String(err.cause), code: err.cause.code }
  return o
}

async function main(argv, { help }) {
  const { opts, rest } = parse('run', argv, SPEC, { command: 0 })
  if (opts.help) return help()
  if (rest === null || rest.length === 0) throw new UsageError('run', 'a COMMAND is needed (after --)')
  const [command, ...args] = rest
  const spawn = {}
  if (opts.grace !== undefined) spawn.stop = { graceMs: integer('run', opts.grace, 'grace', 0, MAX_MS) }
  if (opts.cgroup) spawn.cgroup = true
  if (opts.prefix) spawn.stdio = ['ignore', 'pipe', 'pipe']
  const hup = opts.hup === undefined ? 'stop' : oneOf('run', opts.hup, 'hup', ['stop', 'forward'])
  const options = { command, args, spawn, handleSignals: { hup } }
  if (opts.name !== undefined) options.name = opts.name
  if (opts.restart !== undefined) {
    options.restart = oneOf('run', opts.restart, 'restart', ['always', 'on-failure', 'never'])
  }
  if (opts['state-file'] !== undefined) options.stateFile = opts['state-file']
  if (opts['ready-port'] !== undefined && opts['ready-notify']) {
    throw new UsageError('run', '--ready-port and --ready-notify are two ready checks: choose one')
  }
  if (opts['ready-port'] !== undefined) {
    options.ready = { port: integer('run', opts['ready-port'], 'ready-port', 1, 65535) }
  }
  if (opts['ready-notify']) options.ready = { notify: true }
  // What the manager's socket had to say before the log was set up.
  const early = []
  let say = (text) => early.push(text)
  options[SERVICE_MANAGER] = { say: (text) => say(text) }
  if (opts['max-restarts'] !== undefined) {
    options.crashLoop = { maxRestarts: integer('run', opts['max-restarts'], 'max-restarts', 0, MAX_MS) }
  }

  const output = createOutput({ stamp: !opts.json && !underJournal(), prefix: opts.prefix === true })
  const { Supervisor } = common.procward()

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
    if (err instanceof TypeError || err instanceof RangeError) throw new UsageError('run', err.message)
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
  say = (text) => log('notify', { message: text }, text)
  for (const text of early.splice(0)) say(text)
  const { exitText } = common
  sup.on('spawn', (c) => {
    output.pipe(c, name)
    log('spawn', { pid: c.pid }, `pid ${c.pid}: ${[command, ...args].join(' ')}`)
  })
  sup.on('ready', (c) => log('ready', { pid: c?.pid ?? null }, c ? `pid ${c.pid}` : ''))
  sup.on('exit', (e) => log('exit', { ...e }, `pid ${e.pid} ${exitText(e)}${common.exitNote(e, options.restart)}`))
  sup.on('restart', (r) => log('restart', { ...r }, `attempt ${r.attempt} in ${r.delayMs} ms`))
  sup.on('takeover', (t) =>
    log(
      'takeover',
      { ...t },
      `${t.action} pid ${t.pid}${t.suspects.length ? ` (suspects, left alone: ${t.suspects.join(' ')})` : ''}`,
    ),
  )
  sup.on('failed', (err) => log('failed', errorFields(err), common.describe(err)))
  sup.on('stopped', (r) => log('stopped', { result: r }, r ? r.outcome : ''))
  const ended = new Promise((resolve) => {
    sup.once('failed', (err) => resolve(err))
    sup.once('stopped', () => resolve(null))
  })
  sup.start().catch(() => {
    // Reported by 'failed' (or the signal that stopped it).
  })
  const failure = await ended
  await output.settle()
  const lastExit = sup.status().lastExit
  if (failure !== null) {
    const spawned = common.spawnFailureStatus(failure)
    if (spawned !== null) return spawned
  }
  if (sup.status().state !== 'stopped' && sup.status().state !== 'failed') return 0
  if (options.restart === 'never' && lastExit !== null) return common.statusOf(lastExit)
  return failure === null ? 0 : 1
}

module.exports = { main }
