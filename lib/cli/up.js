// procward up: a SupervisorGroup from a config file, in the foreground, as
// `docker compose up` runs a compose file. Each daemon's output is copied
// with its name before each line (coloured on a terminal); our own lines
// say each daemon's events, as `procward run` says its one's. SIGTERM,
// SIGINT, SIGHUP and SIGQUIT stop every daemon in reverse order, then end
// procward with that signal (128 + n; as PID 1, that status); a second one
// kills at once. Under a service manager the group is one Type=notify main
// process (lib/group/speaker.js). As PID 1 of a pid namespace (or --init),
// it reaps orphans as `procward run` does.
//
// A file that cannot be read, or a config the group refuses, is bad usage:
// one line naming the file and the problem, exit 2, nothing started.

const path = require('node:path')
const { parse, UsageError } = require('./args.js')
const common = require('./common.js')
const { openControl } = require('./control.js')
const earlySignals = require('./early-signals.js')
const { configFile, expandShort, loadConfig } = require('./group-file.js')
const { createOutput, underJournal } = require('./output.js')

const SPEC = { file: 'value', json: 'flag', init: 'flag' }
/** The signals that stop the group and then end procward. */
const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT']
/** Cyan, yellow, green, magenta, blue, red: a daemon's name in its colour. */
const COLOURS = [36, 33, 32, 35, 34, 31]

/**
 * The group's config as `up` runs it: it speaks to the service manager,
 * and each daemon's stdout and stderr are pipes `up` copies, unless the
 * daemon sets its own stdio or has a log.
 */
function upConfig(config) {
  if (config === null || typeof config !== 'object' || Array.isArray(config)) return config
  const daemons = config.daemons
  if (daemons === null || typeof daemons !== 'object' || Array.isArray(daemons)) return { ...config, notify: true }
  const out = {}
  for (const [name, d] of Object.entries(daemons)) {
    const plain = d !== null && typeof d === 'object' && !Array.isArray(d)
    const spawn = plain && d.spawn !== null && typeof d.spawn === 'object' ? d.spawn : undefined
    if (!plain || d.log !== undefined || spawn?.stdio !== undefined || (d.spawn !== undefined && spawn === undefined)) {
      out[name] = d
    } else out[name] = { ...d, spawn: { ...spawn, stdio: ['ignore', 'pipe', 'pipe'] } }
  }
  return { notify: true, ...config, daemons: out }
}

/** `name` as its lines show it: padded to the longest, in its colour on a terminal. */
function labels(names) {
  const width = Math.max(...names.map((n) => n.length))
  const colour = process.stdout.isTTY && !process.env.NO_COLOR
  return new Map(
    names.map((n, i) => [
      n,
      colour ? `\x1b[${COLOURS[i % COLOURS.length]}m${n.padEnd(width)}\x1b[0m` : n.padEnd(width),
    ]),
  )
}

/** The --json form of an error. */
function errorFields(err) {
  return { message: err?.message ?? String(err), code: err?.code }
}

async function main(argv, { help }) {
  const { opts, positional } = parse('up', expandShort(argv), SPEC)
  if (opts.help) return help()
  if (positional.length > 0) throw new UsageError('up', `unexpected argument ${positional[0]}`)
  const file = configFile('up', opts.file)
  const config = upConfig(await loadConfig('up', file))
  const { SupervisorGroup } = common.procward()
  let group
  try {
    group = new SupervisorGroup(config)
  } catch (err) {
    if (err instanceof TypeError || err instanceof RangeError)
      throw new UsageError('up', `${file}: ${err.message}`, { hint: false })
    throw err
  }
  const output = createOutput({ stamp: !opts.json && !underJournal(), prefix: true })
  const names = [...group.supervisors.keys()]
  const label = labels(names)
  // A daemon's event (`name`), or the group's own (null: no name).
  const log = (name, event, fields = {}, text = '') => {
    if (opts.json) {
      const who = name === null ? {} : { name }
      output.line(JSON.stringify({ time: new Date().toISOString(), ...who, event, ...fields }))
    } else output.line(`procward: ${name === null ? '' : `${name}: `}${event}${text ? ` ${text}` : ''}`)
  }
  require('../supervisor/notify-out.js').reportWith((text) => log(null, 'notify', { message: text }, text))

  // Listened to, so that no Supervisor copies a ready check's stream by
  // itself: every stream is copied below, with its daemon's name.
  group.on('stdout', () => {})
  group.on('stderr', () => {})
  group.on('spawn', ({ name, child }) => {
    output.pipe(child, label.get(name))
    log(name, 'spawn', { pid: child.pid }, `pid ${child.pid}`)
  })
  group.on('ready', ({ name, child }) =>
    log(name, 'ready', { pid: child?.pid ?? null }, child ? `pid ${child.pid}` : ''),
  )
  group.on('exit', (e) => {
    const { name, ...info } = e
    const restart = config.daemons[name]?.restart
    log(name, 'exit', info, `pid ${e.pid} ${common.exitText(e)}${common.exitNote(e, restart)}`)
  })
  group.on('memory', (m) => log(m.name, 'memory', { ...m }, `pid ${m.pid} uses ${m.bytes} bytes, over ${m.limit}`))
  group.on('unhealthy', (u) =>
    log(
      u.name,
      'unhealthy',
      { pid: u.pid, failures: u.failures, error: errorFields(u.error) },
      common.describe(u.error),
    ),
  )
  group.on('restart', (r) => log(r.name, 'restart', { attempt: r.attempt }, `attempt ${r.attempt} in ${r.delayMs} ms`))
  group.on('takeover', (t) => log(t.name, 'takeover', { pid: t.pid, action: t.action }, `${t.action} pid ${t.pid}`))
  group.on('failed', ({ name, error }) => log(name, 'failed', errorFields(error), common.describe(error)))
  group.on('stopped', ({ name }) => log(name, 'stopped'))

  // The end: a stop signal (status: its death), or every daemon ended by
  // itself (0, or 1 when one failed), or the start failed (1).
  let stopping = null
  let control = null
  const ended = new Promise((resolve) => {
    const onSignal = (sig) => {
      if (stopping !== null) {
        // A second signal: SIGKILL at once.
        output.abandon()
        for (const sup of group.supervisors.values())
          sup.stop({ signal: 'SIGKILL', killTimeoutMs: 2000 }).catch(() => {})
        return
      }
      log(null, 'signal', { signal: sig }, `${sig}: stopping ${names.length} daemons in reverse order`)
      stopping = group.stop().catch((err) => log(null, 'stop', errorFields(err), common.describe(err)))
      stopping.then(() => resolve({ signal: sig }))
    }
    for (const sig of STOP_SIGNALS) process.on(sig, onSignal)
    const settled = () => {
      if (stopping !== null) return
      const states = [...group.supervisors.values()].map((s) => s.state)
      if (!states.every((s) => s === 'stopped' || s === 'failed')) return
      stopping = group.stop().catch(() => {})
      stopping.then(() => resolve({ status: states.includes('failed') ? 1 : 0 }))
    }
    group.on('failed', () => setImmediate(settled))
    group.on('stopped', () => setImmediate(settled))
    // As PID 1 (or --init): the orphans the kernel hands us are reaped.
    const init = require('../init.js')
    if (opts.init || init.isPidOne()) init.startInitDuties({ subreaper: !init.isPidOne() })
    // Our signal listeners are in place: a signal held since start-up (PID 1) reaches them.
    earlySignals.release()
    group.start().then(
      async () => {
        log(null, 'ready', { daemons: names.length }, `(${names.length} daemons)`)
        // The group's control socket (procward restart NAME -f FILE), where it has a stateDir.
        if (typeof config.stateDir !== 'string' || stopping !== null) return
        const say = (text) => log(null, 'control', { message: text }, text)
        control = await openControl(group, path.resolve(config.stateDir), say)
        if (control !== null) log(null, 'control', { path: control.path }, `listening on ${control.path}`)
        if (stopping !== null) control?.close()
      },
      (err) => {
        if (err?.name === 'AbortError') return // a stop signal came first
        log(null, 'failed', errorFields(err), common.describe(err))
        stopping ??= group.stop().catch(() => {})
        stopping.then(() => resolve({ status: 1 }))
      },
    )
  })
  const end = await ended
  control?.close()
  await output.settle()
  if (end.signal === undefined) return end.status
  for (const sig of STOP_SIGNALS) process.removeAllListeners(sig)
  // Die of the signal (128 + n, as a shell reports it); PID 1 cannot (the
  // kernel drops a signal init has no handler for): that status instead.
  const number = require('node:os').constants.signals[end.signal] ?? 15
  if (process.pid === 1) return 128 + number
  process.kill(process.pid, end.signal)
  // Where the signal does not end us at once, that status.
  return 128 + number
}

module.exports = { main, upConfig }
