// procward restart|reload|stop NAME -f FILE: one daemon of the group a
// `procward up -f FILE` runs, through its control socket in the group's
// stateDir (./control.js, which asks the kernel who we are). Prints what
// the daemon is now; 0 once done, 1 when refused or failed (no group
// running, another user's, a daemon that did not restart), 2 for bad usage.
// `procward stop STATE_FILE` and `procward reload STATE_FILE` (no -f) are
// the other stop and reload: ./stop.js, ./reload.js.

const net = require('node:net')
const path = require('node:path')
const { parse, UsageError } = require('./args.js')
const common = require('./common.js')
const { socketPath } = require('./control.js')
const { configFile, expandShort, loadConfig } = require('./group-file.js')

/** How a failure to reach the socket reads. */
function unreachable(err, file, config) {
  if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') {
    return `no procward up runs ${config}'s group (nothing answers at ${file})`
  }
  if (err.code === 'EACCES') return `${file}: permission denied (a group's control socket is its owner's)`
  return `${file}: ${common.describe(err)}`
}

/** Sends `request` to the socket at `file`; the answer (an object), or throws with the words to say. */
function ask(file, request, config) {
  return new Promise((resolve, reject) => {
    const s = net.connect(file)
    let text = ''
    s.setEncoding('utf8')
    s.once('connect', () => s.write(`${JSON.stringify(request)}\n`))
    s.on('data', (d) => {
      text += d
    })
    s.once('error', (err) => reject(new Error(unreachable(err, file, config))))
    s.once('close', () => {
      try {
        resolve(JSON.parse(text))
      } catch {
        reject(new Error(`${file}: no answer (the group stopped meanwhile?)`))
      }
    })
  })
}

/** The `main` of verb `verb` (restart, reload, stop) over a group's control socket. */
function controlVerb(verb) {
  return async function main(argv, { help }) {
    const { opts, positional } = parse(verb, expandShort(argv), { file: 'value', json: 'flag' })
    if (opts.help) return help()
    if (positional.length !== 1 || positional[0] === '')
      throw new UsageError(verb, 'one NAME (a daemon of the group) is needed')
    const [name] = positional
    const file = configFile(verb, opts.file)
    const config = await loadConfig(verb, file)
    const stateDir = config !== null && typeof config === 'object' ? config.stateDir : undefined
    if (typeof stateDir !== 'string' || stateDir === '') {
      throw new UsageError(verb, `${file} has no stateDir: its group has no control socket`)
    }
    let answer
    try {
      answer = await ask(socketPath(path.resolve(stateDir)), { verb, name }, file)
    } catch (err) {
      process.stderr.write(`procward: ${err.message}\n`)
      return 1
    }
    if (opts.json) process.stdout.write(`${JSON.stringify(answer)}\n`)
    if (answer?.ok !== true) {
      process.stderr.write(`procward: ${name}: ${answer?.error ?? 'refused'}\n`)
      return 1
    }
    if (!opts.json) {
      const pid = answer.pid === null ? '' : `, pid ${answer.pid}`
      process.stdout.write(`procward: ${name}: ${answer.state}${pid}\n`)
    }
    return 0
  }
}

/** Does `argv` name a group's file (-f FILE, --file FILE)? */
function grouped(argv) {
  return argv.some((a) => a === '-f' || a === '--file' || a.startsWith('--file=') || /^-f./.test(a))
}

/** `procward stop`: a daemon of a group with -f FILE, else a state file (./stop.js). */
async function stop(argv, context) {
  if (grouped(argv)) return controlVerb('stop')(argv, context)
  return require('./stop.js').main(argv, context)
}

/** `procward reload`: a daemon of a group with -f FILE, else a state file's supervisor (./reload.js). */
async function reload(argv, context) {
  if (grouped(argv)) return controlVerb('reload')(argv, context)
  return require('./reload.js').main(argv, context)
}

module.exports = { restart: controlVerb('restart'), reload, stop }
