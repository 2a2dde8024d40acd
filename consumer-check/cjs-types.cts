// Type-checked only (tsc): the public types as a CommonJS consumer sees them.
import procward = require('procward')
import procwardPg = require('procward/pg')

const running: boolean = procward.isProcessRunning(process.pid)
const info: procward.ProcessInfo | null = procward.getProcessInfo(process.pid)
function holderOf(err: unknown): procward.LockHolder | null | undefined {
  return procward.isLockedError(err) ? err.holder : undefined
}
function onExit(sup: procward.Supervisor): void {
  sup.on('exit', (e: procward.SupervisorExit) => void e.expected)
  // @ts-expect-error no such event
  sup.on('exitt', () => {})
}
function fenceOf(lock: procwardPg.PgLock): bigint {
  return lock.fence
}
export = { running, info, holderOf, onExit, fenceOf }
