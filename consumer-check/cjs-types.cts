// Type-checked only (tsc): the public types as a CommonJS consumer sees them.
import procward = require('procward')

const running: boolean = procward.isProcessRunning(process.pid)
const info: procward.ProcessInfo | null = procward.getProcessInfo(process.pid)
export = { running, info }
