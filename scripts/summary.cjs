// Adds up what scripts/test.sh ran: cargo's "test result" lines and the
// vitest JSON reports, into one closing line.
const fs = require('node:fs')
const path = require('node:path')

const dir = process.argv[2]
let passed = 0
let failed = 0
let skipped = 0
for (const file of fs.readdirSync(dir)) {
  const full = path.join(dir, file)
  if (file.endsWith('.json')) {
    const r = JSON.parse(fs.readFileSync(full, 'utf8'))
    passed += r.numPassedTests
    failed += r.numFailedTests
    skipped += r.numPendingTests + (r.numTodoTests ?? 0)
  } else if (file === 'cargo.txt') {
    for (const m of fs
      .readFileSync(full, 'utf8')
      .matchAll(/test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored/g)) {
      passed += Number(m[1])
      failed += Number(m[2])
      skipped += Number(m[3])
    }
  }
}
console.log(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped`)
if (passed === 0 || failed > 0) process.exitCode = 1
