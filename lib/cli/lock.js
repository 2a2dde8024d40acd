// procward lock: runs a command while holding a lock, as flock(1) does —
// a file's (flock(2), with a holder record), or with --postgres a
// PostgreSQL session advisory lock (procward/pg, loaded only then).

const { parse, commandOf, integer, MAX_MS, UsageError } = require('./args.js')
const common = require('./common.js')
const { runLocked } = require('./locked-run.js')

const SPEC = { wait: 'optional', postgres: 'value', key: 'value', 'host-loss-ms': 'value' }

/** acquirePgLock's options as this verb's arguments name them. */
const PG_WORDS = {
  connection: '--postgres',
  key: '--key',
  hostLossMs: '--host-loss-ms',
  wait: '--wait',
  purpose: 'COMMAND',
}

// procward/pg's floor for hostLossMs (TCP keepalives count whole seconds;
// lib/pg/options.js) and its default, here as numbers: requiring lib/pg
// loads the driver, which a file lock must not need.
const MIN_HOST_LOSS_MS = 3000
const DEFAULT_HOST_LOSS_MS = 10_000

/** FILE's lock (flock(2), with a holder record): a signal during the wait ends us, as it would flock(1). */
function fileSource(path, { wait, purpose }) {
  return {
    waitEndsOnSignal: false,
    acquire: () =>
      common
        .procward()
        .acquireLock(path, { wait, purpose })
        .catch((err) => {
          if (err instanceof TypeError || err instanceof RangeError) {
            throw new UsageError('lock', common.inOurWords(err.message, { path: 'FILE', wait: '--wait' }))
          }
          throw err
        }),
    envOf: () => ({}),
  }
}

/**
 * The PostgreSQL lock KEY (procward/pg, loaded only now); its purpose is
 * cut to what a purpose holds. The command is told the fence, to fence its
 * own writes, the key and the holder's record (JSON).
 *
 * Once `lock.signal` aborts, the server may free the lock within the lead
 * that the lock keeps on it: `idle` s after the last answered probe was
 * sent, where the signal aborts at `windowMs`. The command gets SIGTERM,
 * then SIGKILL when half of that lead is left, so that the rest covers the
 * kill and the exit of its whole group.
 */
function pgSource(url, key, { wait, purpose, hostLossMs }) {
  const { acquirePgLock, timing, PURPOSE_MAX } = require('../pg.js')
  const t = timing(hostLossMs)
  return {
    waitEndsOnSignal: true,
    acquire: (signal) =>
      acquirePgLock({ connection: url, key, wait, signal, hostLossMs, purpose: cut(purpose, PURPOSE_MAX) }).catch(
        (err) => {
          // A value the library refused: bad usage, in this verb's words.
          if (err instanceof TypeError || err instanceof RangeError) {
            throw new UsageError('lock', common.inOurWords(err.message, PG_WORDS))
          }
          throw err
        },
      ),
    envOf: (lock) => ({
      PROCWARD_LOCK_FENCE: String(lock.fence),
      PROCWARD_LOCK_KEY: key,
      PROCWARD_LOCK_HOLDER: JSON.stringify(lock.holder),
    }),
    lossGraceMs: Math.max(0, Math.floor((t.idle * 1000 - t.windowMs) / 2)),
  }
}

/** `text` in at most `max` UTF-16 units, never cut inside a surrogate pair. */
function cut(text, max) {
  if (text.length <= max) return text
  const head = text.slice(0, max - 1)
  return `${/[\ud800-\udbff]$/.test(head) ? head.slice(0, -1) : head}…`
}

async function main(argv, { help }) {
  // The command starts at the first positional, or the second when the
  // first is FILE: --postgres before it says which.
  let p = parse('lock', argv, SPEC, { command: 0 })
  if (!p.opts.help && p.opts.postgres === undefined) p = parse('lock', argv, SPEC, { command: 1 })
  const { opts, positional, rest } = p
  if (opts.help) return help()
  let wait = false
  if (opts.wait === true) wait = true
  else if (opts.wait !== undefined) wait = integer('lock', opts.wait, 'wait', 0, MAX_MS)

  if (opts.postgres !== undefined) {
    if (positional.length > 0) throw new UsageError('lock', `no FILE with --postgres (got ${positional[0]})`)
    if (opts.key === undefined) throw new UsageError('lock', '--key KEY is needed with --postgres')
    if (opts.postgres === '') throw new UsageError('lock', '--postgres needs a URL')
  } else {
    if (opts.key !== undefined) throw new UsageError('lock', '--key goes with --postgres')
    if (opts['host-loss-ms'] !== undefined) throw new UsageError('lock', '--host-loss-ms goes with --postgres')
    if (positional.length !== 1) throw new UsageError('lock', 'one FILE is needed')
  }
  commandOf('lock', rest)
  const hostLossMs =
    opts['host-loss-ms'] === undefined
      ? DEFAULT_HOST_LOSS_MS
      : integer('lock', opts['host-loss-ms'], 'host-loss-ms', MIN_HOST_LOSS_MS, MAX_MS)
  const [command, ...args] = rest
  const purpose = rest.join(' ')
  const source =
    opts.postgres !== undefined
      ? pgSource(opts.postgres, opts.key, { wait, purpose, hostLossMs })
      : fileSource(positional[0], { wait, purpose })
  return runLocked(source, { command, args })
}

module.exports = { main }
