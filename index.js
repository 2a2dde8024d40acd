// The public face of procward: argument checks and JS-shaped errors over the
// native binding. Types live in index.d.ts.

const native = require('./binding.js')
const { callNative } = require('./lib/errors')
const validate = require('./lib/validate')
const { SupervisedProcess, spawnSupervised, stopSupervisedProcess } = require('./lib/supervised')
const { waitForExit } = require('./lib/wait')
const { Supervisor, readSupervisorState, distrustSupervisorState, killRecordedCgroup } = require('./lib/supervisor')
const { acquireLock, tryLock, readLock, ProcessLock } = require('./lib/lock')
const { exec, ExecError, isExecError } = require('./lib/exec')
const { notifyServiceManager } = require('./lib/supervisor/notify-out')

function isProcessRunning(pid, identity) {
  validate.pid(pid)
  validate.optionalString(identity, 'identity')
  return callNative(native.isProcessRunning, pid, identity)
}

function getProcessInfo(pid) {
  validate.pid(pid)
  return callNative(native.getProcessInfo, pid)
}

/** Can this process create child cgroups (Linux cgroup v2)? Says why not. */
function cgroupSupport() {
  const s = callNative(native.cgroupSupport)
  return { available: s.available, parent: s.parent ?? null, reason: s.reason ?? null }
}

exports.isProcessRunning = isProcessRunning
exports.getProcessInfo = getProcessInfo
exports.cgroupSupport = cgroupSupport
exports.spawnSupervised = spawnSupervised
exports.stopSupervisedProcess = stopSupervisedProcess
exports.SupervisedProcess = SupervisedProcess
exports.waitForExit = waitForExit
exports.Supervisor = Supervisor
exports.readSupervisorState = readSupervisorState
exports.distrustSupervisorState = distrustSupervisorState
exports.killRecordedCgroup = killRecordedCgroup
exports.notifyServiceManager = notifyServiceManager
exports.acquireLock = acquireLock
exports.tryLock = tryLock
exports.readLock = readLock
exports.ProcessLock = ProcessLock
exports.exec = exec
exports.ExecError = ExecError
exports.isExecError = isExecError
const guards = require('./lib/error-guards')
exports.isLockedError = guards.isLockedError
exports.isProcwardError = guards.isProcwardError
exports.isArgumentError = guards.isArgumentError
exports.isSupervisorError = guards.isSupervisorError
exports.isUnavailableError = guards.isUnavailableError
exports.isPgError = guards.isPgError
exports.lockPath = require('./lib/lock-path').lockPath
exports.SupervisorGroup = require('./lib/group/group').SupervisorGroup
