// procward status -f FILE | DIR: one row per daemon of a group (as pm2 ls),
// each judged now as `procward status` judges its state file; --json is
// { daemons: { NAME: what procward status --json prints for that file } }.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { tempDirs, trackProcesses, waitFor } from '../helpers'
import { Cli, cli } from './cli-process'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-up-status-')

interface Status {
  child?: { pid: number; running: boolean }
  restarts?: number
  judgement: {
    active: string
    sub: string
    exitCode: number
    resources: { tasks: number | null; memoryBytes: number | null; cpuUsec: number | null } | null
  }
}

function rows(out: string): Record<string, Record<string, string>> {
  const [head, ...lines] = out.trimEnd().split('\n')
  const cols = (head ?? '').split(/\s{2,}/)
  const byName: Record<string, Record<string, string>> = {}
  for (const l of lines) {
    const cells = l.split(/\s{2,}/)
    byName[cells[0] ?? ''] = Object.fromEntries(cols.map((c, i) => [c, cells[i] ?? '']))
  }
  return byName
}

it('rows of a running group by its file and by its stateDir; --json per daemon as procward status --json; then all dead', async () => {
  const dir = tempDir()
  const stateDir = join(dir, 'state')
  const file = join(dir, 'group.json')
  writeFileSync(
    file,
    JSON.stringify({
      stateDir,
      daemons: {
        db: { command: 'sh', args: ['-c', 'exec sleep 1000'] },
        // Two processes in its group: the tree, not the leader, is measured.
        web: { command: 'sh', args: ['-c', 'sleep 1000 & exec sleep 1000'], after: ['db'] },
      },
    }),
  )
  const up = new Cli(others, ['up', '-f', file])
  await waitFor(() => up.err.includes('procward: ready'), 10_000, 'the group ready')
  const [dbPid, webPid] = up.pids('spawn')

  const byFile = await cli(others, ['status', '-f', file])
  expect(byFile.code).toBe(0)
  const r = rows(byFile.out)
  expect(Object.keys(r)).toEqual(['db', 'web'])
  expect(r.db).toMatchObject({ STATE: 'running', PID: String(dbPid), RESTARTS: '0', HEALTH: '-' })
  expect(r.web).toMatchObject({ STATE: 'running', PID: String(webPid) })
  expect(r.web?.MEMORY).toMatch(/^[\d.]+[KMG]$/)
  expect(r.web?.CPU).toMatch(/^\d+\.\d\ds$/)

  const byDir = await cli(others, ['status', stateDir])
  expect(byDir.code).toBe(0)
  // The same rows (the times and counters read again, a moment later).
  const steady = (rs: Record<string, Record<string, string>>) =>
    Object.values(rs).map(({ NAME, STATE, PID, RESTARTS }) => ({ NAME, STATE, PID, RESTARTS }))
  expect(steady(rows(byDir.out))).toEqual(steady(r))

  const json = await cli(others, ['status', '-f', file, '--json'])
  const daemons = (JSON.parse(json.out) as { daemons: Record<string, Status> }).daemons
  expect(Object.keys(daemons)).toEqual(['db', 'web'])
  expect(daemons.web?.judgement.resources?.tasks).toBe(2)
  expect(daemons.db?.judgement.resources?.tasks).toBe(1)
  for (const name of ['db', 'web']) {
    const alone = JSON.parse((await cli(others, ['status', join(stateDir, `${name}.json`), '--json'])).out) as Status
    const { judgement: a, ...recordAlone } = alone
    const { judgement: g, ...recordInGroup } = daemons[name] as Status
    expect(recordInGroup).toEqual(recordAlone)
    expect({ active: g.active, sub: g.sub, exitCode: g.exitCode }).toEqual({
      active: a.active,
      sub: a.sub,
      exitCode: a.exitCode,
    })
  }

  up.proc.kill('SIGTERM')
  await up.done
  const dead = await cli(others, ['status', '-f', file])
  expect(dead.code).toBe(3)
  for (const row of Object.values(rows(dead.out))) expect(row).toMatchObject({ STATE: 'inactive (dead)', PID: '-' })
})

it('a daemon without a state file is unknown (4); a config that is not one is bad usage (2)', async () => {
  const dir = tempDir()
  const file = join(dir, 'nostate.json')
  writeFileSync(file, JSON.stringify({ daemons: { a: { command: 'true' } } }))
  const r = await cli(others, ['status', '-f', file])
  expect(r.code).toBe(4)
  expect(rows(r.out).a).toMatchObject({ STATE: 'unknown (no state file)' })
  writeFileSync(file, JSON.stringify({ daemons: [] }))
  const bad = await cli(others, ['status', '-f', file])
  expect(bad.code).toBe(2)
  expect(bad.err).toMatch(/nostate\.json: daemons must be an object/)
})
