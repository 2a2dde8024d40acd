// procward reload: asks the supervisor a state file records for a reload
// (SIGHUP, pid and identity checked; only one started with --hup reload,
// which a SIGHUP would otherwise stop), and waits for its outcome in the
// record: exit 0 once the successor serves, 1 with why when it failed (the
// old daemon serves on) or the supervisor is gone.

const { constants } = require('node:os')
const { parse, integer, MAX_MS, UsageError } = require('./args.js')
const common = require('./common.js')

/** The outcome is read from the record this often. */
const POLL_MS = 50
const DEFAULT_TIMEOUT_MS = 120_000

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function main(argv, { help }) {
  const { opts, positional } = parse('reload', argv, { timeout: 'value' })
  if (opts.help) return help()
  if (positional.length !== 1) throw new UsageError('reload', 'one STATE_FILE is needed')
  if (positional[0] === '') throw new UsageError('reload', 'STATE_FILE must not be empty')
  const timeoutMs =
    opts.timeout === undefined ? DEFAULT_TIMEOUT_MS : integer('reload', opts.timeout, 'timeout', 1, MAX_MS)
  const file = positional[0]
  const procward = common.procward()
  const say = (text) => process.stderr.write(`procward: ${file}: ${text}\n`)
  const r = procward.readSupervisorState(file)
  if (r === null) {
    say(common.noRecord(file))
    return 1
  }
  const refused = procward.distrustSupervisorState(file, r)
  if (refused !== null) {
    say(`not acting on this record: ${refused}`)
    return 1
  }
  if (!r.supervisor.running) {
    say(`its supervisor (pid ${r.supervisor.pid}) is not running`)
    return 1
  }
  if (r.supervisor.hup !== 'reload') {
    say(
      `its supervisor (pid ${r.supervisor.pid}) was not started with --hup reload: a SIGHUP would ${r.supervisor.hup === 'forward' ? 'go to its daemon' : 'stop it'}; nothing sent`,
    )
    return 1
  }
  const before = r.lastReload?.at ?? null
  // Through a pidfd checked against the recorded identity: a pid reused
  // since the record was written is never signalled.
  const { signalIdentified } = require('../supervisor/procfs.js')
  if (!signalIdentified(r.supervisor.pid, r.supervisor.identity, constants.signals.SIGHUP)) {
    say(`its supervisor (pid ${r.supervisor.pid}) is not running (or cannot be signalled)`)
    return 1
  }
  const deadline = Date.now() + timeoutMs
  for (;;) {
    await sleep(POLL_MS)
    const now = procward.readSupervisorState(file)
    const outcome = now?.lastReload ?? null
    if (outcome !== null && outcome.at !== before) {
      if (outcome.ok) {
        say(
          outcome.from === null
            ? `reloaded: pid ${outcome.to} serves (none served before)`
            : `reloaded: pid ${outcome.from} replaced by pid ${outcome.to}`,
        )
        return 0
      }
      say(`reload failed${outcome.from === null ? '' : `, pid ${outcome.from} serves on`}: ${outcome.error}`)
      return 1
    }
    if (now === null || !now.supervisor.running || now.supervisor.pid !== r.supervisor.pid) {
      say('its supervisor ended before the reload did')
      return 1
    }
    if (Date.now() > deadline) {
      say(`no outcome within ${timeoutMs} ms (the reload may still finish)`)
      return 1
    }
  }
}

module.exports = { main }
