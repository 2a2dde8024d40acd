import { spawn } from 'node:child_process'
import { getProcessInfo, isProcessRunning, type ProcessInfo } from 'procward'
import { expect, it } from 'vitest'

it('imports by name from ESM and answers about a real process', async () => {
  const child = spawn('sleep', ['100'], { stdio: 'ignore' })
  const pid = child.pid as number
  const info: ProcessInfo | null = getProcessInfo(pid)
  expect(info?.name).toBe('sleep')
  expect(isProcessRunning(pid, info?.identity)).toBe(true)
  child.kill('SIGKILL')
  await new Promise((r) => child.once('exit', r))
  expect(isProcessRunning(pid)).toBe(false)
})

it('supervises and stops a real child through the packed package', async () => {
  const { spawnSupervised, stopSupervisedProcess } = await import('procward')
  const child = spawnSupervised('sleep', ['100'], { stdio: 'ignore' })
  expect(isProcessRunning(child.pid, child.identity)).toBe(true)
  const result = await stopSupervisedProcess(child, { graceMs: 2000 })
  expect(result.outcome).toBe('exited')
  expect(result.exit).toEqual({ pid: child.pid, code: null, signal: 'SIGTERM' })
  expect(isProcessRunning(child.pid)).toBe(false)
})
