// procward <verb>: dispatch, --help and --version, and how a verb's error
// ends the process (bad usage: one line, a hint, exit 2; a failure: its
// message and causes, exit 1 unless the verb set another status).

const { constants } = require('node:os')
const { UsageError } = require('./args.js')
const { describe } = require('./common.js')
const { USAGE, MAIN_USAGE } = require('./usage.js')

// Loaded when called: a verb's module may need the native binary, and
// --help must not.
const VERBS = {
  run: () => require('./run.js'),
  status: () => require('./status-group.js'),
  // With -f FILE, a daemon of a running group (its control socket); else a state file.
  stop: () => ({ main: require('./control-client.js').stop }),
  restart: () => ({ main: require('./control-client.js').restart }),
  reload: () => ({ main: require('./control-client.js').reload }),
  lock: () => require('./lock.js'),
  up: () => require('./up.js'),
}

function help(verb) {
  process.stdout.write(`${verb ? USAGE[verb] : MAIN_USAGE}\n`)
}

function usageError(verb, message, hint = true) {
  const where = verb ? `procward ${verb}` : 'procward'
  process.stderr.write(hint ? `${where}: ${message}\ntry '${where} --help'\n` : `${where}: ${message}\n`)
  process.exitCode = 2
}

/**
 * Our own output's failures (help, version, status: stdout). A reader that
 * is gone (EPIPE: `| head -0`) ends us quietly, with the status of a
 * process killed by SIGPIPE, as `ls | head -0` would be; any other failure
 * (ENOSPC: `> /dev/full`) is said once on stderr, status 1, as coreutils
 * do. Failures of stderr itself are ignored: there is nowhere to say them.
 */
function guardOutput() {
  let status = null
  process.stdout.on('error', (err) => {
    if (status !== null) return
    if (err?.code === 'EPIPE') status = 128 + constants.signals.SIGPIPE
    else {
      status = 1
      process.stderr.write(`procward: write error: ${err?.message ?? err}\n`)
    }
    process.exitCode = status
  })
  process.stderr.on('error', () => {})
  // Whatever the verb resolved to: what it wrote did not arrive.
  process.once('exit', () => {
    if (status !== null) process.exitCode = status
  })
}

async function main(argv) {
  guardOutput()
  const [verb, ...rest] = argv
  if (verb === '--help' || verb === '-h' || verb === 'help') {
    if (rest.length > 0 && !Object.hasOwn(USAGE, rest[0])) return usageError(null, `unknown command ${rest[0]}`)
    return help(rest[0])
  }
  if (verb === '--version' || verb === '-V' || verb === 'version') {
    process.stdout.write(`procward ${require('../../package.json').version}\n`)
    return
  }
  if (verb === undefined)
    return usageError(null, 'a command is needed (run, up, status, stop, restart, reload or lock)')
  if (!Object.hasOwn(VERBS, verb)) {
    return usageError(null, verb.startsWith('-') ? `unknown option ${verb}` : `unknown command ${verb}`)
  }
  try {
    const status = await VERBS[verb]().main(rest, { help: () => help(verb) })
    if (typeof status === 'number') process.exitCode = status
  } catch (err) {
    if (err instanceof UsageError) usageError(err.verb, err.message, err.hint)
    else if (/^ERR_INVALID_ARG_(VALUE|TYPE)$/.test(err?.code ?? '') || err?.code === 'ERR_OUT_OF_RANGE') {
      // An argument the library refused (an empty path): bad usage too.
      usageError(verb, err.message)
    } else {
      process.stderr.write(`procward: ${describe(err)}\n`)
      process.exitCode = 1
    }
  }
}

module.exports = { main }
