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
