#!/usr/bin/env node
// procward: the command line. A thin parser over the library's public
// exports — every verb is a few calls of the API, never a second
// implementation. One file per verb under lib/cli/.

require('../lib/cli/main.js').main(process.argv.slice(2))
