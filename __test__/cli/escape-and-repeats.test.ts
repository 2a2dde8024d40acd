// What a name or a command holds is shown, never obeyed: control
// characters in status and the run log are escaped as systemctl escapes
// them. An option given twice is refused (which one was meant is not ours
// to guess). A clean exit under --restart never is no surprise.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { getProcessInfo } from '../../index.js'
import { tempDirs, trackProcesses } from '../helpers'
import { cli } from './cli-process'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-cli-escape-')

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what must not appear
const RAW_CONTROL = /[\x00-\x09\x0b-\x1f\x7f]/

describe('control characters are escaped', () => {
  it('the run log escapes them in --name and the command', async () => {
    const r = await cli(others, ['run', '--restart', 'never', '--name', 'a\x1b[31mb\nFAKE', '--', 'true', 'x\ty\rz'])
    expect(r.code).toBe(0)
    expect(r.err).not.toMatch(RAW_CONTROL)
    // One line per event: a newline in the name forged none.
    expect(r.err).not.toMatch(/^FAKE/m)
    expect(r.err).toContain('a\\x1b[31mb\\nFAKE')
    expect(r.err).toContain('x\\ty\\rz')
  })

  it('status escapes them in the name and the command', async () => {
    if (process.platform === 'win32') return
    const p = others.spawn('sleep', ['1000'], { stdio: 'ignore' })
    const pid = p.pid as number
    const identity = getProcessInfo(pid)?.identity as string
    const now = new Date().toISOString()
    const file = join(tempDir(), 'state.json')
    writeFileSync(
      file,
      JSON.stringify({
        version: 1,
        name: 'svc\x1b]0;pwned\x07\nActive: active (running)',
        state: 'running',
        supervisor: { pid: 4194304, identity: '' },
        child: {
          pid,
          identity,
          pgid: null,
          session: null,
          command: 'sleep\x1b[2J',
          args: ['1000\n'],
          aliveAt: now,
          startedAt: now,
        },
        restarts: 0,
        lastExit: null,
        updatedAt: now,
      }),
      { mode: 0o600 },
    )
    const r = await cli(others, ['status', file])
    expect(r.code).toBe(3)
    expect(r.out).not.toMatch(RAW_CONTROL)
    expect(r.out).not.toMatch(/^\s*Active: active/m)
    expect(r.out).toContain('svc\\x1b]0;pwned\\x07\\nActive: active (running)')
    expect(r.out).toContain('sleep\\x1b[2J 1000\\n')
  })
})

describe('an option given twice', () => {
  for (const args of [
    ['run', '--grace', '5', '--grace', '6', '--', 'true'],
    ['run', '--name=a', '--name', 'b', '--', 'true'],
    ['stop', '--grace', '5', '--grace=6', 'x.json'],
    ['status', '--json', '--json', 'x.json'],
  ]) {
    it(`is refused: ${args.join(' ')}`, async () => {
      const r = await cli(others, args)
      expect(r.code).toBe(2)
      expect(r.out).toBe('')
      expect(r.err).toMatch(/--(grace|name|json) is given more than once/)
    })
  }
})

describe('the exit label', () => {
  it('--restart never: a clean exit 0 is not "(unexpected)"; a failing one is', async () => {
    const ok = await cli(others, ['run', '--restart', 'never', '--', 'true'])
    expect(ok.code).toBe(0)
    expect(ok.err).toMatch(/exit pid \d+ code 0/)
    expect(ok.err).not.toMatch(/unexpected/)
    const bad = await cli(others, ['run', '--restart', 'never', '--', 'sh', '-c', 'exit 3'])
    expect(bad.code).toBe(3)
    expect(bad.err).toMatch(/exit pid \d+ code 3 \(unexpected\)/)
  })
})
