// A daemon's memoryLimit: its tree (its process group) over the limit is
// stopped with its group and restarted as a crash, reason 'memory' in
// 'exit' and in its state file; a daemon under its limit runs on. This
// host's cgroup2 has no memory controller: the /proc sampler is what runs.
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { readSupervisorState } from '../../index.js'
import { aliveInProcTable, tempDirs, trackProcesses, waitFor } from '../helpers'
import { GROUP_FIXTURES, next, trackGroups } from './helpers'

trackProcesses()
const tempDir = tempDirs('procward-group-memory-')
const group = trackGroups()

const MB = 1024 * 1024
const GROW = join(GROUP_FIXTURES, 'grow.cjs')

/** A daemon growing by `step` MB every 50 ms up to `cap` MB (0: without end). */
function grower(step: number, cap: number, mode = '') {
  return {
    command: process.execPath,
    args: [GROW, String(step), '50', String(cap), mode],
    ready: { stdout: 'ready' },
    backoff: { initialMs: 50 },
  }
}

it('a daemon over its memoryLimit is stopped and restarted as a crash, reason memory in exit and record', async () => {
  const dir = tempDir()
  const g = group({ stateDir: dir, daemons: { big: { ...grower(8, 0), memoryLimit: 150 * MB } } })
  const over = next(g, 'memory', 'big')
  const exit = next(g, 'exit', 'big')
  const restart = next(g, 'restart', 'big')
  await g.start()
  const first = g.supervisors.get('big')?.status().pid
  const o = await over
  expect(o.pid).toBe(first)
  expect(o.limit).toBe(150 * MB)
  expect(o.bytes).toBeGreaterThan(150 * MB)
  const e = await exit
  expect(e).toMatchObject({ pid: first, reason: 'memory', signal: 'SIGTERM', expected: false })
  expect((await restart).lastExit).toMatchObject({ reason: 'memory' })
  const respawned = await next(g, 'spawn', 'big')
  expect(respawned.child.pid).not.toBe(first)
  expect(aliveInProcTable(first as number)).toBe(false)
  const rec = await readSupervisorState(join(dir, 'big.json'))
  expect(rec?.lastExit).toMatchObject({ pid: first, reason: 'memory' })
})

it("the tree is the daemon's process group: a small leader with a growing worker is stopped, worker too", async () => {
  // sh (a few hundred KiB) waits on its child, which grows: only the sum
  // of the group passes the limit.
  const g = group({
    daemons: {
      tree: {
        command: 'sh',
        args: ['-c', `"${process.execPath}" "${GROW}" 8 50 0 & echo worker $!; wait`],
        ready: { stdout: 'ready' },
        restart: 'never',
        memoryLimit: 120 * MB,
      },
    },
  })
  let worker = 0
  g.on('stdout', ({ line }) => {
    if (line.startsWith('worker ')) worker = Number(line.slice(7))
  })
  const exit = next(g, 'exit', 'tree')
  const failed = next(g, 'failed', 'tree')
  await g.start()
  const o = await next(g, 'memory', 'tree')
  expect(o.bytes).toBeGreaterThan(120 * MB)
  expect(await exit).toMatchObject({ reason: 'memory' })
  // restart: 'never' and a crash: it fails, in words that say why.
  expect((await failed).error.message).toMatch(/stopped over its memory limit/)
  expect(worker).toBeGreaterThan(0)
  await waitFor(() => !aliveInProcTable(worker), 5000, 'the worker gone')
})

it('a daemon that exits 0 at its SIGTERM is still a crash (restart: on-failure restarts it)', async () => {
  const g = group({ daemons: { grace: { ...grower(8, 0, 'exit0'), restart: 'on-failure', memoryLimit: 100 * MB } } })
  const exit = next(g, 'exit', 'grace')
  const restart = next(g, 'restart', 'grace')
  await g.start()
  expect(await exit).toMatchObject({ code: 0, signal: null, reason: 'memory' })
  expect((await restart).lastExit).toMatchObject({ code: 0, reason: 'memory' })
})

it('a daemon under its limit runs on; its exit has no reason', async () => {
  // Grows to 40 MB and holds; limit 200 MB. Stopped by the group: no reason.
  const g = group({ daemons: { small: { ...grower(8, 40), memoryLimit: 200 * MB } } })
  let overs = 0
  g.on('memory', () => overs++)
  // Until it has grown all it will (its stdout says so), and four samples later.
  const grown = new Promise<void>((resolve) =>
    g.on('stdout', ({ line }) => {
      if (line === 'grown 40') setTimeout(resolve, 1000)
    }),
  )
  await g.start()
  const sup = g.supervisors.get('small')
  await grown
  expect(sup?.state).toBe('running')
  expect(sup?.status().restarts).toBe(0)
  const exit = next(g, 'exit', 'small')
  await g.stop()
  expect(await exit).not.toHaveProperty('reason')
  expect(overs).toBe(0)
})

it('refuses a memoryLimit that is not a positive integer, or a daemon with no tree to measure', () => {
  const d = { command: 'sleep', args: ['1'] }
  expect(() => group({ daemons: { a: { ...d, memoryLimit: 0 } } })).toThrow(/daemons\.a\.memoryLimit/)
  expect(() => group({ daemons: { a: { ...d, memoryLimit: 1.5 } } })).toThrow(/daemons\.a\.memoryLimit/)
  expect(() => group({ daemons: { a: { ...d, memoryLimit: '1G' as never } } })).toThrow(/daemons\.a\.memoryLimit/)
  expect(() => group({ daemons: { a: { ...d, spawn: { processGroup: false }, memoryLimit: 10 * MB } } })).toThrow(
    /daemons\.a\.memoryLimit: .*process group or cgroup/,
  )
})
