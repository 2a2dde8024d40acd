// A successor finds the daemons its dead predecessor spawned but did not
// record by the mark in their environment (procfs.markedProcesses, a /proc
// scan). The identity it acts on must be that of the process whose
// environment held the mark: if the marked process exits during the scan
// and its pid is reused, the newcomer is neither stopped nor adopted. The
// reuse is placed in that window deterministically: markedProcesses is
// wrapped, and the pid reused (ns_last_pid, root) just before the scan's
// answer is handed back.
import type { ChildProcess } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { aliveInProcTable, isRoot, spawnOnPid, tempDirs, trackProcesses, waitFor } from '../helpers'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-takeover-reuse-')
const req = createRequire(__filename)
const procward = req('../../index.js')
const procfs = req('../../lib/supervisor/procfs.js')
const realScan = procfs.markedProcesses

afterEach(() => {
  procfs.markedProcesses = realScan
})

function ownSession(): number {
  const stat = readFileSync('/proc/self/stat', 'latin1')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3])
}

describe('takeover of unrecorded daemons and pid reuse', () => {
  for (const takeover of ['stop', 'adopt'] as const) {
    it.skipIf(!isRoot)(
      `never signals a process that took a marked daemon's pid during the scan (${takeover})`,
      async () => {
        const mark = 'ab'.repeat(16)
        const stateFile = join(tempDir(), 'state.json')
        // A dead predecessor: its record names no child yet, only its mark.
        const gone = others.spawn('true', [])
        await new Promise((r) => gone.once('exit', r))
        writeFileSync(
          stateFile,
          JSON.stringify({
            version: 1,
            name: 'pred',
            state: 'running',
            supervisor: { pid: gone.pid, identity: '', running: true, mark, session: ownSession() },
            child: null,
            restarts: 0,
            lastExit: null,
            updatedAt: new Date().toISOString(),
          }),
          { mode: 0o600 },
        )
        // The daemon it spawned and did not live to record.
        const marked = others.spawn('sleep', ['1000'], {
          env: { ...process.env, PROCWARD_SUPERVISOR_MARK: mark },
          stdio: 'ignore',
        })
        const pid = marked.pid as number
        await waitFor(() => readFileSync(`/proc/${pid}/environ`).includes(Buffer.from(mark)), 5000, 'the exec')

        let stranger: ChildProcess | null = null
        procfs.markedProcesses = async (entry: string) => {
          const found = await realScan(entry)
          if (found.some((p: { pid: number }) => p.pid === pid)) {
            // The daemon exits, and an unrelated process gets its pid.
            marked.kill('SIGKILL')
            await new Promise((r) => marked.once('exit', r))
            stranger = await spawnOnPid(others, pid, 'sleep', ['1000'], { stdio: 'ignore' })
          }
          return found
        }

        const sup = new procward.Supervisor({
          command: 'sleep',
          args: ['1000'],
          stateFile,
          takeover,
          restart: 'never',
        })
        const takeovers: unknown[] = []
        sup.on('takeover', (t: unknown) => takeovers.push(t))
        try {
          await sup.start()
          expect(stranger).not.toBeNull()
          // The stranger carries no mark: it must be neither stopped nor adopted.
          expect(aliveInProcTable(pid)).toBe(true)
          expect(takeovers).toEqual([])
          expect(sup.status().pid).not.toBe(pid)
        } finally {
          await sup.stop()
        }
      },
    )
  }
})
