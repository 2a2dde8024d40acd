// With a line ready check and no 'stdout' listener, the daemon's output is
// copied to our fd 1. If fd 1 is a terminal whose reader has stopped
// (Ctrl-S, a frozen terminal emulator, a pty nobody reads), the copy must
// not keep the application alive once stop() has resolved: with stdio
// 'inherit' (what the copy stands in for) only the daemon would block, and
// it is gone after stop(). (A write blocked in the threadpool would hold
// the loop for good.)
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { trackProcesses, waitFor } from '../helpers'

const { others } = trackProcesses()
const PROCWARD = join(__dirname, '..', '..', 'index.js')

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
    const holdPty = [
      'import os, pty, subprocess, sys',
      'm, s = pty.openpty()',
      'p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=s, stderr=s, pass_fds=(3,))',
      'os.close(s)',
      'sys.exit(p.wait())',
    ].join('\n')
    const py = others.spawn('python3', ['-c', holdPty, process.execPath, '-e', app], {
      stdio: ['ignore', 'ignore', 'inherit', 'pipe'],
    })
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
