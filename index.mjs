// ESM entry: the same objects as the CommonJS entry, re-exported by name.
// Loaded with require() rather than `import ... from './index.js'`: on Node
// 20 an ESM import of a CommonJS module that throws (no binary for this
// platform) rejects the import *and* reports the error as uncaught, which
// kills a process that caught it.
import { createRequire } from 'node:module'

const procward = createRequire(import.meta.url)('./index.js')

export const isProcessRunning = procward.isProcessRunning
export const getProcessInfo = procward.getProcessInfo
export const cgroupSupport = procward.cgroupSupport
export const spawnSupervised = procward.spawnSupervised
export const stopSupervisedProcess = procward.stopSupervisedProcess
export const SupervisedProcess = procward.SupervisedProcess
export const waitForExit = procward.waitForExit
export const Supervisor = procward.Supervisor
export const readSupervisorState = procward.readSupervisorState
export const distrustSupervisorState = procward.distrustSupervisorState
export const killRecordedCgroup = procward.killRecordedCgroup
export const acquireLock = procward.acquireLock
export const tryLock = procward.tryLock
export const readLock = procward.readLock
export const lockPath = procward.lockPath
export const ProcessLock = procward.ProcessLock
export const isLockedError = procward.isLockedError
export default procward
