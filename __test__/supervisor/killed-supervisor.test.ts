// A supervisor SIGKILLed at any instant of a restart leaves at most one
// daemon, and its successor finds it (recorded or not): it stops it
// ('stop') or keeps it ('adopt'), and never runs a second one beside it.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { SupervisorOptions } from '../../index.js'
import {
  aliveInProcTable,
  FIXTURES,
  NODE,
  PROCWARD,
  runningWithArgv as running,
  tempDirs,
  trackProcesses,
  waitFor,
} from '../helpers'
import { trackSupervisors } from './helpers'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-killed-')

const KILLED = join(FIXTURES, 'supervisor-killed.cjs')

const supervisor = trackSupervisors()

/**
 * Processes in the middle of an exec: for a moment after the spawn returns
 * (the exec's close-on-exec pipe closes before the new program's argv is in
 * place), /proc/<pid>/cmdline reads empty. (Kernel threads always do.)
 */
function midExec(): number[] {
  const out: number[] = []
  for (const ent of readdirSync('/proc')) {
    if (!/^\d+$/.test(ent)) continue
    try {
      const stat = readFileSync(`/proc/${ent}/stat`, 'latin1')
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (f[0] === 'Z' || f[1] === '2' || ent === '2') continue
      if (readFileSync(`/proc/${ent}/cmdline`).length === 0) out.push(Number(ent))
    } catch {
      // gone
    }
  }
  return out
}

/** running(argv), once no process is in the middle of an exec. */
async function settledRunning(argv: string[]): Promise<number[]> {
  await waitFor(() => midExec().length === 0, 2000, 'execs to complete').catch(() => {})
  return running(argv)
}

let serial = 0

/** A predecessor that dies at `instant` of a restart; its daemons' argv. */
async function predecessorDiesAt(instant: string, options: object): Promise<void> {
  const p = others.spawn(NODE, [KILLED, PROCWARD, JSON.stringify(options), instant])
  let out = ''
  p.stdout?.on('data', (d) => (out += d))
  const exited = new Promise((r) => p.once('exit', r))
  if (instant === 'first-spawn') return void (await exited)
  await waitFor(() => out.includes('\n'), 10_000, 'the predecessor to start')
  const first = Number(/^started (\d+)/.exec(out)?.[1])
  expect(first).toBeGreaterThan(0)
  process.kill(first, 'SIGKILL')
  await exited
}

const INSTANTS = ['first-spawn', 'exit', 'restart', 'spawn', 'spawn+immediate', 'spawn+timeout']

describe('a supervisor SIGKILLed during a restart', () => {
  for (const takeover of ['stop', 'adopt'] as const) {
    for (const instant of INSTANTS) {
      it(`at '${instant}' (takeover '${takeover}'): the successor runs exactly one daemon`, async () => {
        const argv = ['sleep', String(3000 + process.pid * 10 + ++serial)]
        const options = {
          command: argv[0],
          args: argv.slice(1),
          stateFile: join(tempDir(), 'state.json'),
          takeover,
          spawn: { parentDeathSignal: false },
        }
        await predecessorDiesAt(instant, options)
        const left = await settledRunning(argv)
        for (const pid of left) others.track(pid)
        // At most one daemon left by the dead supervisor.
        expect(left.length).toBeLessThanOrEqual(1)

        const sup = supervisor(options as SupervisorOptions)
        const runningEvents: unknown[] = []
        sup.on('running', (e) => runningEvents.push(e))
        await sup.start()
        const status = sup.status()
        expect(await settledRunning(argv)).toEqual([status.pid])
        const adopted = takeover === 'adopt' && left.length === 1
        if (adopted) expect(status).toMatchObject({ pid: left[0], adopted: true })
        // One 'running' for the daemon that runs: the adopted one, or our own.
        expect(runningEvents).toEqual([{ pid: status.pid, identity: status.identity, adopted }])
        await sup.stop()
        expect(running(argv)).toEqual([])
      })
    }
  }
})

describe('the takeover of a daemon that forked a worker away', () => {
  const SUPERVISOR_PROCESS = join(FIXTURES, 'supervisor-process.cjs')

  /** A dead predecessor whose daemon (leading its group) left a worker reparented in that group. */
  async function predecessorWithWorker(takeover: 'stop' | 'adopt') {
    const tag = 4000 + process.pid * 10 + ++serial
    const worker = ['sleep', String(tag)]
    const options = {
      command: 'sh',
      args: ['-c', `(sleep ${tag} &); exec sleep ${tag + 1}`],
      stateFile: join(tempDir(), 'state.json'),
      restart: 'never',
      takeover,
      spawn: { parentDeathSignal: false },
    }
    const p = others.spawn(NODE, [SUPERVISOR_PROCESS, PROCWARD, JSON.stringify(options)])
    let out = ''
    p.stdout?.on('data', (d) => (out += d))
    await waitFor(() => out.includes('"started"'), 10_000, 'the predecessor to start')
    const daemon = ['sleep', String(tag + 1)]
    await waitFor(() => running(worker).length === 1 && running(daemon).length === 1, 5000, 'daemon and worker')
    const pids = [...running(worker), ...running(daemon)]
    for (const pid of pids) others.track(pid)
    p.kill('SIGKILL')
    await new Promise((r) => p.once('exit', r))
    return { options, worker, daemon, pids }
  }

  it("'adopt' keeps the daemon and the worker in its group: the worker is the daemon's, not a second daemon", async () => {
    const { options, worker, daemon, pids } = await predecessorWithWorker('adopt')
    const sup = supervisor(options as SupervisorOptions)
    const takeovers: { action: string; pid: number }[] = []
    sup.on('takeover', (t) => takeovers.push(t))
    await sup.start()
    expect(takeovers.map((t) => `${t.action} ${t.pid}`)).toEqual([`adopted ${running(daemon)[0]}`])
    expect(pids.filter(aliveInProcTable)).toHaveLength(2)
    // Ours now: its stop takes the group, the worker with it.
    await sup.stop()
    // The daemon is gone once stop() resolves; the worker, signalled with
    // its group at the same instant, may take a moment more on a loaded machine.
    expect(running(daemon)).toEqual([])
    await waitFor(() => running(worker).length === 0, 5000, 'the worker, signalled with its group')
  })

  it("'adopt' of a daemon its record does not name (killed at the spawn) keeps the worker in its group too", async () => {
    const tag = 4000 + process.pid * 10 + ++serial
    const [worker, daemon] = [
      ['sleep', String(tag)],
      ['sleep', String(tag + 1)],
    ]
    const options = {
      command: 'sh',
      args: ['-c', `(sleep ${tag} &); exec sleep ${tag + 1}`],
      stateFile: join(tempDir(), 'state.json'),
      restart: 'never',
      takeover: 'adopt',
      spawn: { parentDeathSignal: false },
    }
    await predecessorDiesAt('first-spawn', options)
    await waitFor(() => running(worker).length === 1 && running(daemon).length === 1, 5000, 'daemon and worker')
    for (const pid of [...running(worker), ...running(daemon)]) others.track(pid)
    const sup = supervisor(options as SupervisorOptions)
    const takeovers: { action: string; pid: number }[] = []
    sup.on('takeover', (t) => takeovers.push(t))
    await sup.start()
    expect(takeovers.map((t) => `${t.action} ${t.pid}`)).toEqual([`adopted ${running(daemon)[0]}`])
    expect(running(worker)).toHaveLength(1)
    await sup.stop()
    // The daemon is gone once stop() resolves; the worker, signalled with
    // its group at the same instant, may take a moment more on a loaded machine.
    expect(running(daemon)).toEqual([])
    await waitFor(() => running(worker).length === 0, 5000, 'the worker, signalled with its group')
  })

  it("'stop' ends the daemon and the worker it left in its group", async () => {
    const { options, pids } = await predecessorWithWorker('stop')
    const sup = supervisor({ ...(options as SupervisorOptions), command: 'sleep', args: ['1000'] })
    await sup.start()
    await waitFor(() => pids.filter(aliveInProcTable).length === 0, 5000, 'daemon and worker to be ended')
  })
})
