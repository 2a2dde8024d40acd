#!/usr/bin/env node
// procward: the command line. A thin parser over the library's public
// exports — every verb is a few calls of the API, never a second
// implementation. One file per verb under lib/cli/.

// As PID 1 of a pid namespace (a container's entrypoint) a signal with no
// handler is dropped by the kernel: a `docker stop` in the moment procward
// is still loading would be lost, and the daemon started anyway. Listening
// from the first line keeps it pending for the handlers the verb installs
// (procward run releases these once its own are in place).
//
// Earlier still, Node's own SIGINT/SIGTERM handler (installed before any
// JS runs, to restore the terminal) may have taken one: it resets itself
// after one use and re-raises the signal, which the kernel drops for a PID
// 1. Its mark is left in SigCgt: Node installs the two together, so one of
// them caught and the other not means the other was taken; it is sent
// again once the verb's handlers listen. (Both gone: no such handler here,
// or both taken; nothing is known, nothing is sent.)
if (process.pid === 1) {
  const hold = () => {}
  const held = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT']
  const taken = takenAtStartup()
  for (const sig of held) process.on(sig, hold)
  globalThis[Symbol.for('procward.heldSignals')] = () => {
    for (const sig of held) process.removeListener(sig, hold)
    for (const sig of taken) process.kill(process.pid, sig)
  }
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

require('../lib/cli/main.js').main(process.argv.slice(2))
