// Issue 23 item 14: SupervisorOptions.meta, published for every child once
// it runs (as setMeta() does for one), with no 'running' listener of the
// application's.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { SupervisorOptions, SupervisorRunning } from '../../index.js'
import { tempDirs, trackProcesses, waitFor } from '../helpers'
import { trackSupervisors } from './helpers'

trackProcesses()
const tempDir = tempDirs('procward-meta-option-')
const supervisor = trackSupervisors()

type Raw = { state: string; child: { pid: number } | null; meta: unknown }
const raw = (file: string): Raw => JSON.parse(readFileSync(file, 'utf8'))

/** What the file said at each 'running', for three children (two SIGKILLed). */
async function metaAtRunning(options: SupervisorOptions & { stateFile: string }): Promise<string[]> {
  const sup = supervisor({ ...options, backoff: { initialMs: 0 } })
  const seen: string[] = []
  sup.on('running', ({ pid }) => {
    const r = raw(options.stateFile)
    seen.push(`${r.state} ${r.child?.pid === pid} ${JSON.stringify(r.meta)}`)
  })
  await sup.start()
  for (let i = 1; i < 3; i++) {
    process.kill(sup.status().pid as number, 'SIGKILL')
    await waitFor(() => seen.length === i + 1, 10_000, `child ${i + 1}`)
  }
  return seen
}

describe('the meta option', () => {
  it('an object: in the record that first reads running, for every child', async () => {
    const stateFile = join(tempDir(), 'svc.json')
    const seen = await metaAtRunning({ command: 'sleep', args: ['100'], stateFile, meta: { version: '1.4' } })
    expect(seen).toEqual(Array(3).fill('running true {"version":"1.4"}'))
  })

  it("a function: called with what 'running' carries, its value for that child", async () => {
    const stateFile = join(tempDir(), 'svc.json')
    const calls: SupervisorRunning[] = []
    const meta = (c: SupervisorRunning) => {
      calls.push(c)
      return { port: c.pid }
    }
    const seen = await metaAtRunning({ command: 'sleep', args: ['100'], stateFile, meta })
    expect(calls).toHaveLength(3)
    expect(calls.map((c) => c.adopted)).toEqual([false, false, false])
    expect(seen).toEqual(calls.map((c) => `running true {"port":${c.pid}}`))
  })

  it('is refused at construction when it is neither an object nor a function', () => {
    for (const bad of [[1], 'port', 5, true]) {
      expect(() => supervisor({ command: 'sleep', meta: bad as unknown as Record<string, unknown> })).toThrow(TypeError)
    }
    expect(() => supervisor({ command: 'sleep', meta: { big: 'x'.repeat(70_000) } })).toThrow(RangeError)
    // A Promise is an object whose JSON is {}: refused by name, not published empty.
    const pending = Promise.resolve({ port: 1 })
    expect(() => supervisor({ command: 'sleep', meta: pending as unknown as Record<string, unknown> })).toThrow(
      /got a Promise/,
    )
  })
})
