// ESM entry: the same objects as the CommonJS entry, re-exported by name.
import procward from './index.js'

export const isProcessRunning = procward.isProcessRunning
export const getProcessInfo = procward.getProcessInfo
export const spawnSupervised = procward.spawnSupervised
export const stopSupervisedProcess = procward.stopSupervisedProcess
export const SupervisedProcess = procward.SupervisedProcess
export const waitForExit = procward.waitForExit
export const Supervisor = procward.Supervisor
export const readSupervisorState = procward.readSupervisorState
export default procward
