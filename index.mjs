// ESM entry: the same objects as the CommonJS entry, re-exported by name.
// Loaded with require() rather than `import ... from './index.js'`: on Node
// 20 an ESM import of a CommonJS module that throws (no binary for this
// platform) rejects the import *and* reports the error as uncaught, which
// kills a process that caught it.
import { createRequire } from 'node:module'

const procward = createRequire(import.meta.url)('./index.js')

export const {
  isProcessRunning,
  getProcessInfo,
  cgroupSupport,
  spawnSupervised,
  stopSupervisedProcess,
  SupervisedProcess,
  waitForExit,
  Supervisor,
  SupervisorGroup,
  readSupervisorState,
  distrustSupervisorState,
  killRecordedCgroup,
  notifyServiceManager,
  acquireLock,
  tryLock,
  readLock,
  lockPath,
  ProcessLock,
  exec,
  ExecError,
  isExecError,
  isLockedError,
  isProcwardError,
  isArgumentError,
  isSupervisorError,
  isUnavailableError,
  isPgError,
} = procward
export default procward
