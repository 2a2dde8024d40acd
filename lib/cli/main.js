// procward <verb>: dispatch, --help and --version, and how a verb's error
// ends the process (bad usage: one line, a hint, exit 2; a failure: its
// message and causes, exit 1 unless the verb set another status).

const { UsageError } = require('./args.js')
const { describe } = require('./common.js')
const { USAGE, MAIN_USAGE } = require('./usage.js')

// Loaded when called: a verb's module may need the native binary, and
// --help must not.
const VERBS = {
  run: () => require('./run.js'),
  status: () => require('./status.js'),
  stop: () => require('./stop.js'),
  lock: () => require('./lock.js'),
}

function help(verb) {
  process.stdout.write(`${verb ? USAGE[verb] : MAIN_USAGE}\n`)
}

function usageError(verb, message) {
  const where = verb ? `procward ${verb}` : 'procward'
  process.stderr.write(`${where}: ${message}\ntry '${where} --help'\n`)
  process.exitCode = 2
}

async function main(argv) {
  const [verb, ...rest] = argv
  if (verb === '--help' || verb === '-h' || verb === 'help') {
    if (rest.length > 0 && !Object.hasOwn(USAGE, rest[0])) return usageError(null, `unknown command ${rest[0]}`)
    return help(rest[0])
  }
  if (verb === '--version' || verb === '-V' || verb === 'version') {
    process.stdout.write(`procward ${require('../../package.json').version}\n`)
    return
  }
  if (verb === undefined) return usageError(null, 'a command is needed (run, status, stop or lock)')
  if (!Object.hasOwn(VERBS, verb)) {
    return usageError(null, verb.startsWith('-') ? `unknown option ${verb}` : `unknown command ${verb}`)
  }
  try {
    const status = await VERBS[verb]().main(rest, { help: () => help(verb) })
    if (typeof status === 'number') process.exitCode = status
  } catch (err) {
    if (err instanceof UsageError) usageError(err.verb, err.message)
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
