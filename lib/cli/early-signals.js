// The first thing bin/procward.js loads, before any other module: the
// signals that must be handled from the first moment the command runs.
// Node builtins only, so that the window before these listeners exist is
// Node's own start-up and nothing of ours.
//
// SIGUSR1: Node opens its inspector (a debugger on 127.0.0.1:9229 that
// evaluates any code as this process) on SIGUSR1 unless a listener takes
// the signal. procward often runs as root (a unit, a container's PID 1),
// so any local user who can connect to loopback would own it. A listener
// from the first line takes SIGUSR1 for good; `procward run` and
// `procward lock` pass it on to their command (nginx reopens its logs on
// USR1), the other verbs drop it. An inspector opened anyway — by a
// SIGUSR1 in the few milliseconds of Node's own start-up, or by
// NODE_OPTIONS=--inspect meant for a Node daemon — is closed at once,
// unless procward's own command line asked for it (`node --inspect
// procward.js`: debugging procward itself).
//
// PID 1 of a pid namespace (a container's entrypoint): a signal with no
// handler is dropped by the kernel, so a `docker stop` in the moment
// procward is still loading would be lost and the daemon started anyway.
// Listening from the first line keeps it for the handlers the verb
// installs (`procward run` calls release() once its own are in place).
//
// Earlier still, Node's own SIGINT/SIGTERM handler (installed before any
// JS runs, to restore the terminal) may have taken one: it resets itself
// after one use and re-raises the signal, which the kernel drops for a PID
// 1. Its mark is left in SigCgt: Node installs the two together, so one of
// them caught and the other not means the other was taken; it is sent
// again once the verb's handlers listen. (Both gone: no such handler here,
// or both taken; nothing is known, nothing is sent.)

/** SIGUSR1's taker until a verb sets one: none (dropped). */
let onUsr1 = null
process.on('SIGUSR1', () => onUsr1?.())

const held = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT']
const hold = () => {}
let taken = []
if (process.pid === 1) {
  taken = takenAtStartup()
  for (const sig of held) process.on(sig, hold)
}

/** The one of SIGTERM and SIGINT that Node's start-up handler took, as a list. */
function takenAtStartup() {
  let caught
  try {
    const status = require('node:fs').readFileSync('/proc/self/status', 'latin1')
    caught = BigInt(`0x${/^SigCgt:\s*([0-9a-fA-F]+)$/m.exec(status)?.[1] ?? '0'}`)
  } catch {
    return []
  }
  const has = (n) => ((caught >> BigInt(n - 1)) & 1n) === 1n
  const term = has(15)
  const int = has(2)
  if (term && !int) return ['SIGINT']
  if (int && !term) return ['SIGTERM']
  return []
}

/**
 * The verb's own handlers are in place: the PID 1 holders step aside, and a
 * signal they kept pending (or that Node's start-up handler took) reaches
 * those handlers. Once only.
 */
function release() {
  for (const sig of held) process.removeListener(sig, hold)
  const again = taken
  taken = []
  for (const sig of again) process.kill(process.pid, sig)
}

/** From now on SIGUSR1 calls `fn` (null: dropped). Our listener stays: it is what keeps the inspector shut. */
function onSigusr1(fn) {
  onUsr1 = fn
}

/** Did procward's own command line (not NODE_OPTIONS) ask for the inspector? */
function inspectorAsked() {
  return process.execArgv.some((a) => /^--inspect(-brk|-wait)?(=|$)/.test(a))
}

/**
 * Closes an inspector that opened without procward's command line asking
 * for it (see the top of this file), saying so once on stderr.
 */
function closeUnaskedInspector() {
  if (process.versions.bun !== undefined || inspectorAsked()) return
  let inspector
  try {
    inspector = require('node:inspector')
    if (inspector.url() === undefined) return
    inspector.close()
  } catch {
    // A Node without an inspector: nothing can open.
    return
  }
  process.stderr.write(
    "procward: Node's inspector was opened in procward itself (by NODE_OPTIONS or a signal at start-up); closed: it would let any local user run code as this process. NODE_OPTIONS still reaches COMMAND.\n",
  )
}

closeUnaskedInspector()
// A SIGUSR1 that came during Node's start-up, before our listener, opens
// the inspector asynchronously (a thread of Node's wakes and interrupts
// the main thread): looked at again once that has had time to happen.
setImmediate(closeUnaskedInspector)
for (const ms of [50, 500]) setTimeout(closeUnaskedInspector, ms).unref()

module.exports = { release, onSigusr1 }
