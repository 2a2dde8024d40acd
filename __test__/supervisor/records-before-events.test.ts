// Issue 23 item 13: records before events. The state file says what an
// event announces before the event is emitted or the promise resolves: an
// application that awaited start() may point a status tool at the file at
// once, and a reader that trusts the file never acts on a dead port.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { readSupervisorState, type Supervisor } from '../../index.js'
import { aliveInProcTable, lines, NODE, PROCWARD, tempDirs, trackProcesses, waitFor } from '../helpers'
import { trackSupervisors } from './helpers'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-records-events-')
const supervisor = trackSupervisors()

type Raw = { state: string; child: { pid: number } | null; meta: unknown }

/** The file as it is on disk now (no liveness judged). */
const raw = (file: string): Raw => JSON.parse(readFileSync(file, 'utf8'))

type Metered = Supervisor & { setMeta(m: object | null): boolean }

describe('records before events', () => {
  it("start() and restart() resolve, 'ready' and 'running' fire, once the file reads running", async () => {
    const stateFile = join(tempDir(), 'svc.json')
    const sup = supervisor({ command: 'sleep', args: ['100'], stateFile })
    const seen: string[] = []
    const check = (what: string) => {
      const r = raw(stateFile)
      seen.push(`${what} ${r.state} ${r.child?.pid === sup.status().pid}`)
    }
    sup.on('ready', () => check('ready'))
    sup.on('running', () => check('running'))
    await sup.start()
    check('start')
    for (let i = 0; i < 5; i++) {
      await sup.restart()
      check('restart')
    }
    expect(seen).toEqual([
      'ready running true',
      'running running true',
      'start running true',
      ...Array(5).fill(['ready running true', 'running running true', 'restart running true']).flat(),
    ])
  })

  it("a daemon's meta and child are out of the file before 'exit' is emitted", async () => {
    const stateFile = join(tempDir(), 'svc.json')
    const sup = supervisor({ command: 'sleep', args: ['100'], stateFile, backoff: { initialMs: 0 } }) as Metered
    sup.on('running', ({ pid }) => sup.setMeta({ port: pid }))
    const atExit: string[] = []
    sup.on('exit', (e) => {
      const r = raw(stateFile)
      atExit.push(`${e.pid}: child ${r.child?.pid === e.pid ? 'named' : 'gone'}, meta ${JSON.stringify(r.meta)}`)
    })
    await sup.start()
    const expected: string[] = []
    for (let i = 0; i < 5; i++) {
      const pid = sup.status().pid as number
      await waitFor(() => (raw(stateFile).meta as { port?: number } | null)?.port === pid, 5000, 'the meta')
      expected.push(`${pid}: child gone, meta null`)
      process.kill(pid, 'SIGKILL')
      await waitFor(() => atExit.length === i + 1 && sup.state === 'running', 10_000, 'the next child')
    }
    expect(atExit).toEqual(expected)
  })

  it('readSupervisorState gives no meta for a child that is not running, after the supervisor was SIGKILLed', async () => {
    const stateFile = join(tempDir(), 'svc.json')
    // A supervisor of its own, with meta published; then it dies by SIGKILL, and its daemon.
    const script = `
      const { Supervisor } = require(${JSON.stringify(PROCWARD)})
      const sup = new Supervisor({ command: 'sleep', args: ['100'], stateFile: ${JSON.stringify(stateFile)} })
      sup.start().then(() => { sup.setMeta({ port: 4242 }); setTimeout(() => console.log(sup.status().pid), 300) })
    `
    const proc = others.spawn(NODE, ['-e', script])
    const daemon = Number(await lines(proc)())
    others.track(daemon)
    expect(readSupervisorState(stateFile)?.meta).toEqual({ port: 4242 })
    proc.kill('SIGKILL')
    await waitFor(() => !aliveInProcTable(proc.pid as number), 5000, 'the supervisor to die')
    // Its daemon goes with it (or is killed now, where it outlived it).
    if (aliveInProcTable(daemon)) process.kill(daemon, 'SIGKILL')
    await waitFor(() => readSupervisorState(stateFile)?.child?.running === false, 5000, 'the daemon to die')
    expect(raw(stateFile).meta).toEqual({ port: 4242 }) // no one cleared it: the reader must judge
    expect(readSupervisorState(stateFile)?.meta).toBeNull()
  })
})

describe('a restart() while an end is judged', () => {
  it('starts a new child, whatever the policy would have made of the exit', async () => {
    const stateFile = join(tempDir(), 'svc.json')
    const sup = supervisor({ command: 'sleep', args: ['100'], stateFile, restart: 'never' })
    await sup.start()
    const first = sup.child
    let restarted: Promise<void> | null = null
    // The child's own 'exit' comes after the supervisor's: its end is being judged now.
    first?.once('exit', () => {
      restarted = sup.restart()
    })
    process.kill(first?.pid as number, 'SIGKILL')
    await waitFor(() => restarted !== null, 5000, 'the exit')
    await restarted
    expect(sup.state).toBe('running')
    expect(sup.status().pid).not.toBe(first?.pid)
    expect(raw(stateFile).child?.pid).toBe(sup.status().pid)
  })
})
