#!/usr/bin/env node
// procward: the command line. A thin parser over the library — every verb
// is a few calls of the public API, never a second implementation.

const { constants } = require('node:os')
const procward = require('..')

const USAGE = {
  run: `usage: procward run [--name N] [--restart always|on-failure|never] [--state-file F]
                    [--ready-port P] [--grace MS] [--max-restarts N] [--cgroup] [--json]
                    -- COMMAND [ARGS...]

Runs COMMAND under a supervisor in the foreground: restarted when it exits
(with backoff; given up after a crash loop), stopped with its process group on
SIGTERM or SIGINT (a second one kills at once). One line per lifecycle event on
stderr (--json: one JSON object per line). With --restart never, exits with the
child's status (128 + n when killed by signal n).

  --name N            name in the log lines and the state file (default: COMMAND's basename)
  --restart POLICY    always (default), on-failure or never
  --state-file F      record the state in F (and lock F.lock: one supervisor per file);
                      a dead predecessor's child recorded there is stopped first
  --ready-port P      ready once something accepts connections on 127.0.0.1:P
  --grace MS          time the child gets to exit after SIGTERM (default 5000)
  --max-restarts N    restarts allowed within 60 s before giving up (default 5)
  --cgroup            contain the child in a cgroup of its own (where supported)
  --json              log events as JSON lines`,
  status: `usage: procward status STATE_FILE [--json]

Prints the state a supervisor recorded in STATE_FILE, with liveness judged now.
Exit status (LSB): 0 running, 3 not running, 4 unknown (no record).

  --json    print the record as JSON`,
  stop: `usage: procward stop STATE_FILE [--grace MS]

Stops what STATE_FILE records. A live supervisor gets SIGTERM (pid and identity
checked) and is waited for; the child it recorded is stopped directly if it
still runs afterwards, or if the supervisor is dead.

  --grace MS    time each gets to exit after SIGTERM before SIGKILL (default 10000)`,
  lock: `usage: procward lock FILE [--wait[=MS]] -- COMMAND [ARGS...]

Runs COMMAND while holding an exclusive lock on FILE (flock(2), as flock(1)
does), with a holder record in FILE. Exits with COMMAND's status, or 75 when
the lock is held by another process. SIGTERM and SIGHUP are passed on to
COMMAND (SIGINT from a terminal reaches it directly); the lock is held until
COMMAND has exited, and a second signal SIGKILLs it.

  --wait[=MS]   wait for the lock (at most MS milliseconds) instead of failing at once`,
}

const MAIN_USAGE = `usage: procward <command> [options]

commands:
  run      run a command under a supervisor, in the foreground
  status   show a supervisor's recorded state (exit 0 running, 3 not, 4 unknown)
  stop     stop a supervisor (or its orphaned child) by its state file
  lock     run a command while holding a file lock

procward <command> --help shows a command's options.`

class UsageError extends Error {}

function usageError(message) {
  return new UsageError(message)
}

/**
 * Splits argv into options (as declared) and positionals; everything after
 * `--`, or from the first positional that starts a command, is the command.
 */
function parse(argv, spec, { command = false } = {}) {
  const opts = {}
  const positional = []
  let rest = null
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === '--') {
      rest = argv.slice(i + 1)
      break
    }
    if (arg === '--help' || arg === '-h') {
      opts.help = true
      continue
    }
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=')
      const name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2)
      const kind = spec[name]
      if (kind === undefined) throw usageError(`unknown option --${name}`)
      if (kind === 'flag') {
        if (eq >= 0) throw usageError(`--${name} takes no value`)
        opts[name] = true
      } else if (kind === 'optional') {
        opts[name] = eq >= 0 ? arg.slice(eq + 1) : true
      } else {
        let value
        if (eq >= 0) value = arg.slice(eq + 1)
        else if (i + 1 < argv.length) value = argv[++i]
        else throw usageError(`--${name} needs a value`)
        opts[name] = value
      }
      continue
    }
    if (arg.startsWith('-') && arg !== '-') throw usageError(`unknown option ${arg}`)
    if (command && positional.length === (command === true ? 0 : command)) {
      // Without `--`: the command starts here, and its own options
      // (`node server.js --port 8080`) are its, not ours.
      rest = argv.slice(i)
      break
    }
    positional.push(arg)
  }
  return { opts, positional, rest: rest ?? [] }
}

function integer(value, name, min, max) {
  if (!/^\d+$/.test(String(value))) throw usageError(`--${name} must be a whole number, got ${JSON.stringify(value)}`)
  const n = Number(value)
  if (n < min || n > max) throw usageError(`--${name} must be in ${min}..${max}, got ${n}`)
  return n
}

const MAX_MS = 2 ** 31 - 1

// ---- run --------------------------------------------------------------------

function logger(name, json) {
  return (event, fields = {}, text = '') => {
    if (json) {
      process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), name, event, ...fields })}\n`)
    } else {
      process.stderr.write(`procward: ${name}: ${event}${text ? ` ${text}` : ''}\n`)
    }
  }
}

function exitText(e) {
  if (e === null) return 'unknown status'
  if (e.signal) return `killed by ${e.signal}`
  if (e.code === null) return 'status unknown'
  return `code ${e.code}`
}

function statusOf(exit) {
  if (exit === null) return 1
  if (exit.signal) return 128 + (constants.signals[exit.signal] ?? 0)
  return exit.code ?? 1
}

async function run(argv) {
  const { opts, rest } = parse(
    argv,
    {
      name: 'value',
      restart: 'value',
      'state-file': 'value',
      'ready-port': 'value',
      grace: 'value',
      'max-restarts': 'value',
      cgroup: 'flag',
      json: 'flag',
    },
    { command: true },
  )
  if (opts.help) return help('run')
  if (rest.length === 0) throw usageError('a COMMAND is needed (after --)')
  const [command, ...args] = rest
  if (opts.restart !== undefined && !['always', 'on-failure', 'never'].includes(opts.restart)) {
    throw usageError(`--restart must be always, on-failure or never, got ${JSON.stringify(opts.restart)}`)
  }
  const spawn = {}
  if (opts.grace !== undefined) spawn.stop = { graceMs: integer(opts.grace, 'grace', 0, MAX_MS) }
  if (opts.cgroup) spawn.cgroup = true
  const options = {
    command,
    args,
    spawn,
    handleSignals: true,
  }
  if (opts.name !== undefined) options.name = opts.name
  if (opts.restart !== undefined) options.restart = opts.restart
  if (opts['state-file'] !== undefined) options.stateFile = opts['state-file']
  if (opts['ready-port'] !== undefined) options.ready = { port: integer(opts['ready-port'], 'ready-port', 1, 65535) }
  if (opts['max-restarts'] !== undefined) {
    options.crashLoop = { maxRestarts: integer(opts['max-restarts'], 'max-restarts', 0, MAX_MS) }
  }

  let sup
  try {
    sup = new procward.Supervisor(options)
  } catch (err) {
    // A value the library refused is bad usage (--name ''); anything else
    // (--cgroup where unsupported, say) is a failure.
    if (err instanceof TypeError || err instanceof RangeError) throw usageError(err.message)
    fail(err)
    return
  }
  const log = logger(sup.name, opts.json)
  sup.on('spawn', (c) => log('spawn', { pid: c.pid }, `pid ${c.pid}: ${[command, ...args].join(' ')}`))
  sup.on('ready', (c) => log('ready', { pid: c.pid }, `pid ${c.pid}`))
  sup.on('exit', (e) => log('exit', { ...e }, `pid ${e.pid} ${exitText(e)}${e.expected ? '' : ' (unexpected)'}`))
  sup.on('restart', (r) => log('restart', { ...r }, `attempt ${r.attempt} in ${r.delayMs} ms`))
  sup.on('takeover', (t) =>
    log(
      'takeover',
      { ...t },
      `${t.action} pid ${t.pid}${t.suspects.length ? ` (suspects, left alone: ${t.suspects.join(' ')})` : ''}`,
    ),
  )
  sup.on('failed', (err) => log('failed', { message: err.message, code: err.code }, err.message))
  sup.on('stopped', (r) => log('stopped', { result: r }, r ? r.outcome : ''))
  const ended = new Promise((resolve) => {
    sup.once('failed', () => resolve('failed'))
    sup.once('stopped', () => resolve('stopped'))
  })
  sup.start().catch(() => {
    // Reported by 'failed' (or the signal that stopped it).
  })
  const how = await ended
  if (options.restart === 'never' && sup.status().lastExit !== null) {
    process.exitCode = statusOf(sup.status().lastExit)
  } else {
    process.exitCode = how === 'failed' ? 1 : 0
  }
}

// ---- status -------------------------------------------------------------------

function status(argv) {
  const { opts, positional } = parse(argv, { json: 'flag' })
  if (opts.help) return help('status')
  if (positional.length !== 1) throw usageError('one STATE_FILE is needed')
  let r = null
  try {
    r = procward.readSupervisorState(positional[0])
  } catch (err) {
    process.stderr.write(`procward: ${positional[0]}: ${err.message}\n`)
    process.exitCode = 4
    return
  }
  if (r === null) {
    if (opts.json) process.stdout.write('null\n')
    else process.stderr.write(`procward: ${positional[0]}: no supervisor state recorded\n`)
    process.exitCode = 4
    return
  }
  const running = r.supervisor.running && r.child?.running === true
  if (opts.json) process.stdout.write(`${JSON.stringify(r, null, 2)}\n`)
  else {
    const lines = [
      `${r.name}: ${r.state}${r.supervisor.running ? '' : ' (supervisor not running)'}`,
      `  supervisor: pid ${r.supervisor.pid}, ${r.supervisor.running ? 'running' : 'gone'}`,
      r.child
        ? `  child:      pid ${r.child.pid}, ${r.child.running ? 'running' : 'gone'}, started ${r.child.startedAt}: ${[r.child.command, ...r.child.args].join(' ')}`
        : '  child:      none',
      `  restarts:   ${r.restarts}`,
      `  last exit:  ${r.lastExit ? `pid ${r.lastExit.pid}, ${exitText(r.lastExit)}` : 'none'}`,
      `  updated:    ${r.updatedAt}`,
    ]
    process.stdout.write(`${lines.join('\n')}\n`)
  }
  process.exitCode = running ? 0 : 3
}

// ---- stop ---------------------------------------------------------------------

async function stop(argv) {
  const { opts, positional } = parse(argv, { grace: 'value' })
  if (opts.help) return help('stop')
  if (positional.length !== 1) throw usageError('one STATE_FILE is needed')
  const graceMs = opts.grace === undefined ? 10_000 : integer(opts.grace, 'grace', 0, MAX_MS)
  const file = positional[0]
  let r = procward.readSupervisorState(file)
  if (r === null) {
    process.stderr.write(`procward: ${file}: no supervisor state recorded\n`)
    process.exitCode = 1
    return
  }
  const refused = procward.distrustSupervisorState(file, r)
  if (refused !== null) {
    process.stderr.write(`procward: ${file}: not acting on this record: ${refused}\n`)
    process.exitCode = 1
    return
  }
  let stopped = false
  if (r.supervisor.running && r.supervisor.pid !== process.pid) {
    const res = await procward.stopSupervisedProcess(r.supervisor.pid, {
      graceMs,
      ...(r.supervisor.identity ? { identity: r.supervisor.identity } : {}),
    })
    process.stderr.write(`procward: supervisor pid ${r.supervisor.pid}: ${res.outcome}\n`)
    stopped = true
    const again = procward.readSupervisorState(file)
    if (again !== null) {
      // Read anew, so judged anew: the file may have been replaced meanwhile.
      const refusedNow = procward.distrustSupervisorState(file, again)
      if (refusedNow !== null) {
        process.stderr.write(`procward: ${file}: not acting on this record: ${refusedNow}\n`)
        process.exitCode = 1
        return
      }
      r = again
    }
  }
  if (!stopped && !r.child?.running) {
    process.stderr.write(`procward: ${file}: nothing running (${r.name}: ${r.state})\n`)
  }
  if (r.child?.running) {
    const c = r.child
    const info = procward.getProcessInfo(c.pid)
    const res = await procward.stopSupervisedProcess(c.pid, {
      graceMs,
      identity: c.identity,
      group: info !== null && info.pgid === c.pid,
    })
    process.stderr.write(`procward: child pid ${c.pid}: ${res.outcome}\n`)
    if (res.outcome === 'unkillable') process.exitCode = 1
  }
  // A contained daemon's cgroup holds whatever it started, however far that
  // strayed from its group: ended whole (if it is still the one recorded).
  const cg = r.child?.cgroup ?? null
  if (cg !== null && (await procward.killRecordedCgroup(cg))) {
    process.stderr.write(`procward: cgroup ${cg.path}: killed\n`)
  }
}

// ---- lock ---------------------------------------------------------------------

async function lock(argv) {
  const { opts, positional, rest } = parse(argv, { wait: 'optional' }, { command: 1 })
  if (opts.help) return help('lock')
  if (positional.length !== 1) throw usageError('one FILE is needed')
  if (rest.length === 0) throw usageError('a COMMAND is needed (after --)')
  let wait = false
  if (opts.wait === true) wait = true
  else if (opts.wait !== undefined) wait = integer(opts.wait, 'wait', 0, MAX_MS)
  const [command, ...args] = rest
  let held
  try {
    held = await procward.acquireLock(positional[0], { wait, purpose: [command, ...args].join(' ') })
  } catch (err) {
    if (err.code === 'ELOCKED') {
      process.stderr.write(`procward: ${err.message}\n`)
      process.exitCode = 75 // EX_TEMPFAIL, as flock(1) -E would be told to use
      return
    }
    throw err
  }
  // SIGTERM and SIGHUP sent to us are passed on; SIGINT from a terminal has
  // reached the child already (same group). We exit once it has: the lock
  // must outlive the command. A second signal SIGKILLs it (a command that
  // ignores signals would otherwise hold the lock until the end of time).
  // Listening from before the spawn: a signal that arrives as the command
  // starts is passed on too, never the end of us.
  let child = null
  let signals = 0
  let pending = null
  const forward = (sig) => () => {
    signals++
    if (child === null) pending = sig
    else if (signals > 1) child.kill('SIGKILL')
    else if (sig !== 'SIGINT') child.kill(sig)
  }
  const handlers = { SIGTERM: forward('SIGTERM'), SIGHUP: forward('SIGHUP'), SIGINT: forward('SIGINT') }
  const unlisten = () => {
    for (const [sig, h] of Object.entries(handlers)) process.removeListener(sig, h)
  }
  for (const [sig, h] of Object.entries(handlers)) process.on(sig, h)
  try {
    // In our process group, as flock(1) runs it: a terminal's Ctrl-C
    // reaches it directly.
    child = procward.spawnSupervised(command, args, { stdio: 'inherit', processGroup: false })
  } catch (err) {
    held.release()
    unlisten()
    throw err
  }
  if (pending !== null) child.kill(signals > 1 ? 'SIGKILL' : pending)
  const exit = await child.exited
  held.release()
  unlisten()
  process.exitCode = statusOf(exit)
}

// ---- main -----------------------------------------------------------------------

const COMMANDS = { run, status, stop, lock }

function help(cmd) {
  process.stdout.write(`${cmd ? USAGE[cmd] : MAIN_USAGE}\n`)
}

function fail(err) {
  process.stderr.write(`procward: ${err.message}\n`)
  process.exitCode = 1
}

async function main(argv) {
  const [cmd, ...rest] = argv
  if (cmd === '--help' || cmd === '-h' || cmd === 'help') return help(rest[0] in USAGE ? rest[0] : undefined)
  const fn = COMMANDS[cmd]
  try {
    if (fn === undefined) throw usageError(cmd === undefined ? 'a command is needed' : `unknown command ${cmd}`)
    await fn(rest)
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`procward: ${err.message}\n${fn ? USAGE[cmd] : MAIN_USAGE}\n`)
      process.exitCode = 2
    } else {
      fail(err)
    }
  }
}

main(process.argv.slice(2))
