import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { isProcessRunning } from '../../index.js'
import { FIXTURES, firstLine, hasPython, isRoot, procState, sleep, trackProcesses, waitFor } from '../helpers'

const { sup, others } = trackProcesses()

describe('a child that exited on its own while a tracer holds its zombie', () => {
  it.skipIf(!isRoot || !hasPython())('is not signalled by kill() or stop(), which report it exited', async () => {
    // Exits 3 when told to (stdin), after the tracer has seized it.
    const p = sup('sh', ['-c', 'read x; exit 3'], { stdio: ['pipe', 'ignore', 'ignore'] })
    const pid = p.pid
    const tracer = others.spawn('python3', [join(FIXTURES, 'tracer.py'), String(pid)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    expect(await firstLine(tracer)).toBe('seized')
    p.stdin?.end('go\n')
    await waitFor(() => procState(pid) === 'Z', 5000, 'the traced child to exit')
    // It has exited; its pidfd is readable (the reaper was told).
    const liveness = isProcessRunning(pid)
    const killSent = p.kill('SIGTERM')
    const stopping = p.stop({ graceMs: 100, killTimeoutMs: 5000 })
    await sleep(400) // past the grace: the stop has escalated by now
    tracer.kill('SIGTERM') // the tracer lets go: the zombie can be reaped
    const result = await stopping
    const info = await p.exited
    expect(info).toEqual({ pid, code: 3, signal: null })
    expect({ liveness, killSent, outcome: result.outcome, signals: result.signals }).toEqual({
      liveness: false,
      killSent: false,
      outcome: 'already-exited',
      signals: [],
    })
  })
})

describe('a stop whose SIGKILL goes out as the child exits on its own', () => {
  // Statistical: the window is between the stop's has_exited() and its
  // SIGKILL (not one atomic step), so it needs many tries; ~1 in 300 here.
  it('never reports killed for a child that exited with a code', async () => {
    const wrong: unknown[] = []
    for (let batch = 0; batch < 12; batch++) {
      const kids = Array.from({ length: 50 }, (_, i) =>
        sup('sh', ['-c', `trap '' TERM; sleep 0.0${(i % 5) + 1}`], { stdio: 'ignore' }),
      )
      await sleep(5)
      const results = await Promise.all(kids.map((k, i) => k.stop({ graceMs: 10 + (i % 30), killTimeoutMs: 5000 })))
      const infos = await Promise.all(kids.map((k) => k.exited))
      results.forEach((r, i) => {
        if (r.outcome === 'killed' && infos[i]?.signal !== 'SIGKILL') wrong.push({ result: r, exit: infos[i] })
      })
    }
    expect(wrong).toEqual([])
  }, 120_000)
})
