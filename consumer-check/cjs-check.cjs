// Run by cjs.test.mts in a plain node process: a real CommonJS require().
const assert = require('node:assert')
const { spawnSync } = require('node:child_process')
const procward = require('procward')

assert.strictEqual(procward.isProcessRunning(process.pid), true)
assert.strictEqual(procward.getProcessInfo(process.pid).pid, process.pid)
assert.throws(() => procward.isProcessRunning(0), RangeError)
const done = spawnSync('true')
assert.strictEqual(procward.isProcessRunning(done.pid), false)
console.log('cjs ok')
