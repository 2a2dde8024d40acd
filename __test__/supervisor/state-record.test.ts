// Acting on a supervisor's stateFile from outside (as `procward stop`
// does): whether its record may be trusted, and ending the cgroup it
// recorded. Real files, a real supervisor, real cgroups where there are any.
import { chmodSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import * as procward from '../../index.js'
import { cgroupSupport, readSupervisorState, type SupervisorStateRecord } from '../../index.js'
import { aliveInProcTable, tempDirs, trackProcesses, waitFor } from '../helpers'
import { trackSupervisors } from './helpers'

trackProcesses()

const tempDir = tempDirs('procward-record-')
const supervisor = trackSupervisors()

function record(child: { pid: number; running: boolean } | null, supervisorPid = 999_999): SupervisorStateRecord {
  return {
    version: 1,
    name: 'x',
    supervisor: { pid: supervisorPid, identity: '', running: false },
    child:
      child === null
        ? null
        : {
            ...child,
            identity: 'id',
            pgid: child.pid,
            session: 1,
            command: 'sleep',
            args: [],
            startedAt: new Date().toISOString(),
            aliveAt: new Date().toISOString(),
            cgroup: null,
            readyAt: null,
            status: null,
          },
    state: 'running',
    restarts: 0,
    lastExit: null,
    stop: { graceMs: 5000, killTimeoutMs: 2000 },
    meta: null,
    updatedAt: new Date().toISOString(),
  }
}

function file(mode = 0o600): string {
  const f = join(tempDir(), 'state.json')
  writeFileSync(f, '{}', { mode })
  chmodSync(f, mode)
  return f
}

describe('distrustSupervisorState', () => {
  it('trusts a live supervisor’s own record, and names its child running', async () => {
    const stateFile = join(tempDir(), 'state.json')
    const sup = supervisor({ command: 'sleep', args: ['100'], stateFile })
    await sup.start()
    const pid = sup.status().pid as number
    let r: SupervisorStateRecord | null = null
    await waitFor(() => {
      r = readSupervisorState(stateFile)
      return r?.child?.pid === pid
    })
    const rec = r as unknown as SupervisorStateRecord
    expect(rec.supervisor.running).toBe(true)
    expect(rec.child?.running).toBe(true)
    // It names this very process (the supervisor runs here): never acted on.
    expect(procward.distrustSupervisorState(stateFile, rec)).toMatch(/this process/)
    // The same file, its supervisor judged gone: the child may be acted on.
    expect(
      procward.distrustSupervisorState(stateFile, { ...rec, supervisor: { ...rec.supervisor, running: false } }),
    ).toBeNull()
    expect(aliveInProcTable(pid)).toBe(true)
  })

  it('refuses a record naming pid 1 or this process, whatever the file', () => {
    const f = file()
    expect(procward.distrustSupervisorState(f, record({ pid: 1, running: true }))).toMatch(/pid 1/)
    expect(procward.distrustSupervisorState(f, record({ pid: process.pid, running: true }))).toMatch(/this process/)
    // Not running: named, but nothing would be signalled.
    expect(procward.distrustSupervisorState(f, record({ pid: 1, running: false }))).toBeNull()
  })

  it('refuses a file others may write, and a symbolic link', () => {
    expect(procward.distrustSupervisorState(file(0o666), record(null))).toMatch(/others may write it \(mode 0666\)/)
    const target = file()
    const link = join(tempDir(), 'link.json')
    symlinkSync(target, link)
    expect(procward.distrustSupervisorState(link, record(null))).toBe('it is a symbolic link')
  })

  it('throws ENOENT for a missing file, and TypeError for bad arguments', () => {
    expect(() => procward.distrustSupervisorState(join(tempDir(), 'none'), record(null))).toThrow(
      expect.objectContaining({ code: 'ENOENT' }),
    )
    for (const [f, r] of [
      ['', record(null)],
      [42, record(null)],
      [file(), null],
      [file(), { supervisor: null, child: null }],
      [file(), { supervisor: {}, child: 'x' }],
    ]) {
      expect(
        () => procward.distrustSupervisorState(f as string, r as SupervisorStateRecord),
        JSON.stringify([f, r]),
      ).toThrow(TypeError)
    }
  })
})

describe('killRecordedCgroup', () => {
  it('refuses what cannot be a recorded cgroup, before anything is touched', async () => {
    const bad: [unknown, unknown, string][] = [
      [null, undefined, 'ERR_INVALID_ARG_TYPE'],
      [{ path: 5, id: 1 }, undefined, 'ERR_INVALID_ARG_TYPE'],
      [{ path: '', id: 1 }, undefined, 'ERR_INVALID_ARG_VALUE'],
      [{ path: 'relative/x', id: 1 }, undefined, 'ERR_INVALID_ARG_VALUE'],
      [{ path: '/sys/fs/cgroup/x\0y', id: 1 }, undefined, 'ERR_INVALID_ARG_VALUE'],
      [{ path: '/sys/fs/cgroup/x', id: 0 }, undefined, 'ERR_OUT_OF_RANGE'],
      [{ path: '/sys/fs/cgroup/x', id: 1.5 }, undefined, 'ERR_OUT_OF_RANGE'],
      [{ path: '/sys/fs/cgroup/x', id: '1' }, undefined, 'ERR_INVALID_ARG_TYPE'],
      [{ path: '/sys/fs/cgroup/x', id: 1 }, -1, 'ERR_OUT_OF_RANGE'],
    ]
    for (const [cg, ms, code] of bad) {
      await expect(
        procward.killRecordedCgroup(cg as { path: string; id: number }, ms as number),
        JSON.stringify([cg, ms]),
      ).rejects.toMatchObject({ code })
    }
  })

  it('is false for a cgroup that is gone', async () => {
    const parent = cgroupSupport().parent ?? '/sys/fs/cgroup'
    await expect(procward.killRecordedCgroup({ path: join(parent, 'procward-gone-0'), id: 123456789 })).resolves.toBe(
      false,
    )
  })
})
