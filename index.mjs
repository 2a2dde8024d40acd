// ESM entry: the same objects as the CommonJS entry, re-exported by name.
import procward from './index.js'

export const isProcessRunning = procward.isProcessRunning
export const getProcessInfo = procward.getProcessInfo
export const spawnSupervised = procward.spawnSupervised
export const stopSupervisedProcess = procward.stopSupervisedProcess
export const SupervisedProcess = procward.SupervisedProcess
export const acquireLock = procward.acquireLock
export const tryLock = procward.tryLock
export const readLock = procward.readLock
export const ProcessLock = procward.ProcessLock
export default procward
