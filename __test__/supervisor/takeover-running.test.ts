// Issue 23 item 12: while a successor takes over a stateFile (it holds the
// lock, the record still names its dead predecessor), the record never
// says the dead predecessor is running: `supervisor.running` is true only
// while the lock's holder is the recorded supervisor itself.
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { readLock, readSupervisorState } from '../../index.js'
import { Cli, cli } from '../cli/cli-process'
import { aliveInProcTable, sleep, tempDirs, trackProcesses, waitFor } from '../helpers'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-takeover-running-')

// The daemon leaves a worker in its group that ignores SIGTERM: the
// successor's sweep of the dead predecessor's group takes its grace.
const DAEMON = ['sh', '-c', '(trap "" TERM; exec sleep 100) & exec sleep 100']

describe.skipIf(process.platform !== 'linux')('a takeover under way', () => {
  it('never names the dead predecessor running, in procward status nor in readSupervisorState', async () => {
    const stateFile = join(tempDir(), 'svc.json')
    const a = new Cli(others, ['run', '--grace', '300', '--state-file', stateFile, '--', ...DAEMON])
    await waitFor(() => readSupervisorState(stateFile)?.state === 'running', 10_000, 'the first supervisor to run')
    a.proc.kill('SIGKILL')
    // (Not a.done: the daemon's worker holds its output pipes open.)
    // (Its threads may outlive its main thread a moment, the lock with them.)
    await waitFor(() => readSupervisorState(stateFile)?.supervisor.running === false, 5000, 'the first one to die')
    expect(readSupervisorState(stateFile)?.supervisor.pid).toBe(a.pid)

    const b = new Cli(others, ['run', '--grace', '300', '--state-file', stateFile, '--', ...DAEMON])
    // Read often until the successor's own record is in place (not in a
    // tight loop: a lock probe is a shared lock, which the successor's
    // acquire waits out).
    let window = 0
    let status: Promise<{ out: string }> | null = null
    const wrong: unknown[] = []
    const deadline = Date.now() + 20_000
    for (; ; await sleep(2)) {
      if (Date.now() > deadline) throw new Error('the successor never wrote its record')
      const r = readSupervisorState(stateFile)
      if (r === null) continue
      if (r.supervisor.pid === b.pid) break
      if (readLock(`${stateFile}.lock`).holder?.pid === b.pid) {
        window++
        status ??= cli(others, ['status', stateFile])
      }
      if (r.supervisor.running) wrong.push(r.supervisor)
    }
    expect(window).toBeGreaterThan(0) // the takeover was seen under way
    expect(wrong).toEqual([])
    expect((await status)?.out).not.toMatch(new RegExp(`Supervisor: pid ${a.pid}, running`))
    await waitFor(() => readSupervisorState(stateFile)?.supervisor.running === true, 10_000, 'the successor running')
    b.proc.kill('SIGTERM')
    await b.done
    expect(aliveInProcTable(b.pid)).toBe(false)
  }, 60_000)
})
