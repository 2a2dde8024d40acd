import { describe, expect, it } from 'vitest'
import { NODE, PROCWARD, trackProcesses, waitFor } from '../helpers'
import { onStalledTerminal } from './helpers'

const { others } = trackProcesses()

describe('the copy to a stalled terminal', () => {
  it('once stop() has resolved, nothing of the copy keeps the process alive', async () => {
    const app = [
      `const { Supervisor } = require(${JSON.stringify(PROCWARD)})`,
      "const fs = require('node:fs')",
      "const say = (s) => fs.writeSync(3, s + '\\n')",
      'const sup = new Supervisor({',
      "  command: 'sh', args: ['-c', 'echo ready; exec cat /dev/zero'],",
      "  ready: { stdout: 'ready' }, restart: 'never',",
      '})',
      "sup.on('ready', (c) => say('ready ' + c.pid))",
      // Long enough for the terminal to be full and a write to be blocked.
      "sup.start().then(() => setTimeout(() => sup.stop().then(() => say('stopped')), 1000))",
    ].join('\n')
    const py = onStalledTerminal(others, [NODE, '-e', app])
    let events = ''
    py.stdio[3]?.on('data', (d) => (events += d))
    let exited = false
    py.once('exit', () => (exited = true))
    await waitFor(() => events.includes('stopped'), 20_000, 'stop() to resolve')
    const daemon = Number(/ready (\d+)/.exec(events)?.[1])
    others.track(daemon)
    // Nothing is left to do: the app must end (its loop is empty).
    await waitFor(() => exited, 10_000, 'the application to exit once its supervisor stopped').catch(() => {})
    expect(exited).toBe(true)
  })
})
