#!/usr/bin/env node
// procward: the command line. A thin parser over the library's public
// exports — every verb is a few calls of the API, never a second
// implementation. One file per verb under lib/cli/.

// First, before anything else loads: the signals that must be handled from
// the first moment (SIGUSR1 would open Node's inspector; as PID 1, a stop
// signal with no handler is dropped). See lib/cli/early-signals.js.
require('../lib/cli/early-signals.js')

require('../lib/cli/main.js').main(process.argv.slice(2))
