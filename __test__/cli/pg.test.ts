// procward lock --postgres URL --key KEY: the lock for more than one host,
// from the command line. Needs a server (PROCWARD_TEST_PG_URL).
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { acquirePgLock } from '../../pg.js'
import { lines, procState, tempDirs, trackProcesses, waitFor } from '../helpers'
import * as server from '../pg/pg-helpers'
import { newKey, PG_SKIP_REASON, PG_URL } from '../pg/pg-helpers'
import { Cli, cli as runCli } from './cli-process'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-cli-pg-')
const cli = (args: string[]) => runCli(others, args)

describe('procward lock --postgres: usage', () => {
  it('--key is required, FILE must be absent, --key needs --postgres', async () => {
    for (const [args, pattern] of [
      [['lock', '--postgres', 'postgres://127.0.0.1/x', '--', 'true'], /--key KEY is needed with --postgres/],
      [
        ['lock', `${tempDir()}/f`, '--postgres', 'postgres://127.0.0.1/x', '--key', 'k', 'true'],
        /no FILE with --postgres/,
      ],
      [['lock', `${tempDir()}/f`, '--key', 'k', 'true'], /--key goes with --postgres/],
      [['lock', '--postgres', 'postgres://127.0.0.1/x', '--key', 'k'], /a COMMAND is needed/],
      [['lock', '--postgres=', '--key', 'k', 'true'], /--postgres needs a URL/],
      [['lock', `${tempDir()}/f`, '--host-loss-ms', '5000', 'true'], /--host-loss-ms goes with --postgres/],
      [
        ['lock', '--postgres', 'postgres://127.0.0.1/x', '--key', 'k', '--host-loss-ms', '1999', 'true'],
        /--host-loss-ms must be in 3000\.\./,
      ],
      [
        ['lock', '--postgres', 'postgres://127.0.0.1/x', '--key', 'k', '--host-loss-ms', '3s', 'true'],
        /--host-loss-ms must be a whole number/,
      ],
    ] as const) {
      const r = await cli([...args])
      expect(r.code, args.join(' ')).toBe(2)
      expect(r.err).toMatch(pattern)
      expect(r.err).toMatch(/try 'procward lock --help'\n$/)
    }
  })

  it('--help states the floor --host-loss-ms is held to', async () => {
    const help = await cli(['lock', '--help'])
    const floor = help.out.match(/--host-loss-ms MS[^\n]*\n[^\n]*at least (\d+)/)?.[1]
    expect(floor, help.out).toBeDefined()
    // Port 1 on loopback: nothing listens there, so a value taken ends in a refused connection (exit 1).
    const url = 'postgres://procward@127.0.0.1:1/postgres'
    const run = (ms: number) =>
      cli(['lock', '--postgres', url, '--key', 'k', '--host-loss-ms', String(ms), '--', 'true'])
    const below = await run(Number(floor) - 1)
    expect(below.code).toBe(2)
    expect(below.err).toMatch(new RegExp(`--host-loss-ms must be in ${floor}\\.\\.`))
    expect((await run(Number(floor))).code).toBe(1)
  })

  it('a server that cannot be reached: its message, exit 1', async () => {
    // Port 1 on loopback: nothing listens there.
    const r = await cli(['lock', '--postgres', 'postgres://procward@127.0.0.1:1/postgres', '--key', 'k', '--', 'true'])
    expect(r.code).toBe(1)
    expect(r.err).toMatch(/^procward: .*(connect|ECONNREFUSED)/)
    expect(r.err.trimEnd().split('\n')).toHaveLength(1)
  })
})

if (!PG_URL) {
  console.warn(`procward lock --postgres tests skipped: ${PG_SKIP_REASON}`)
  it.skip(`procward lock --postgres against a server: skipped, ${PG_SKIP_REASON}`, () => {})
}

describe.skipIf(!PG_URL)('procward lock --postgres against a server', () => {
  it('runs the command under the lock, with its status; a second holder gets 75; --wait=MS', async () => {
    const key = newKey('cli')
    const ran = await cli(['lock', '--postgres', PG_URL, '--key', key, '--', 'sh', '-c', 'echo ran; exit 7'])
    expect(ran).toMatchObject({ code: 7, out: 'ran\n' })

    const holder = new Cli(others, [
      'lock',
      '--postgres',
      PG_URL,
      '--key',
      key,
      '--',
      'sh',
      '-c',
      'echo held; exec sleep 1000',
    ])
    await waitFor(() => holder.out.includes('held'), 20_000, 'the holder')
    const second = await cli(['lock', '--postgres', PG_URL, '--key', key, 'sh', '-c', 'echo ran'])
    expect(second.code).toBe(75)
    expect(second.out).toBe('')
    const waited = await cli(['lock', '--postgres', PG_URL, '--key', key, '--wait=100', '--', 'true'])
    expect(waited.code).toBe(75)
    holder.proc.kill('SIGTERM')
    expect((await holder.done).code).toBe(128 + 15)
    expect((await cli(['lock', '--postgres', PG_URL, '--key', key, '--', 'true'])).code).toBe(0)
  })

  const pgLock = (key: string, ...rest: string[]) => ['lock', '--postgres', PG_URL, '--key', key, ...rest]

  it('a command that cannot be found: 127', async () => {
    const r = await cli(pgLock(newKey('cli'), '--', 'no-such-command-procward'))
    expect(r.code).toBe(127)
    expect(r.err).toBe('procward: no-such-command-procward: command not found\n')
  })

  it('COMMAND gets the fence, the key and the holder (PROCWARD_LOCK_FENCE, _KEY, _HOLDER); fences increase', async () => {
    const key = newKey('cli')
    const env = ['--', 'sh', '-c', 'printf "%s\\n" "$PROCWARD_LOCK_FENCE" "$PROCWARD_LOCK_KEY" "$PROCWARD_LOCK_HOLDER"']
    const first = new Cli(others, pgLock(key, ...env))
    expect((await first.done).code).toBe(0)
    const [fence, gotKey, holder] = first.out.split('\n')
    expect(fence).toMatch(/^[1-9]\d*$/)
    expect(gotKey).toBe(key)
    expect(JSON.parse(holder as string)).toMatchObject({ pid: first.pid, purpose: env.slice(1).join(' ') })
    const again = await cli(pgLock(key, ...env))
    expect(again.code).toBe(0)
    expect(BigInt(again.out.split('\n')[0] as string)).toBe(BigInt(fence as string) + 1n)
  })

  it('held by another: 75, with the holder named (also after a bounded wait)', async () => {
    const key = newKey('cli')
    const lock = await acquirePgLock({ connection: PG_URL, key, purpose: 'busy' })
    try {
      const r = await cli(pgLock(key, '--', 'true'))
      expect(r.code).toBe(75)
      expect(r.err).toContain('ELOCKED')
      expect(r.err).toContain('busy')
      expect((await cli(pgLock(key, '--wait=100', '--', 'true'))).code).toBe(75)
    } finally {
      await lock.release()
    }
  })

  it('SIGTERM while waiting ends the wait: 143, and the waiting session is gone', async () => {
    const key = newKey('cli')
    const lock = await acquirePgLock({ connection: PG_URL, key })
    try {
      const waiting = new Cli(others, pgLock(key, '--wait', '--', 'true'))
      await server.waitForWaiters(key)
      waiting.proc.kill('SIGTERM')
      expect((await waiting.done).code).toBe(143)
      expect(await server.noSessionsLeft(waiting.pid)).toEqual([])
      expect((await server.lockSessions(key)).waiting).toEqual([])
    } finally {
      await lock.release()
    }
  })

  it('a command line longer than a purpose runs (its record is cut); not executable: 126; the lock is freed', async () => {
    const key = newKey('cli')
    expect(await cli(pgLock(key, '--', 'sh', '-c', 'exit 3', 'x'.repeat(5000)))).toMatchObject({ code: 3, err: '' })
    const file = join(tempDir(), 'not-executable')
    writeFileSync(file, 'exit 0\n')
    const r = await cli(pgLock(key, '--', file))
    expect(r.code).toBe(126)
    expect(r.err).toContain(file)
    expect((await server.lockSessions(key)).granted).toEqual([])
  })

  it('the lock lost: the command’s process group is stopped, exit 75', async () => {
    const key = newKey('cli')
    const c = new Cli(others, pgLock(key, '--', 'sh', '-c', 'sleep 1000 & echo $!; wait'))
    // The command's stdout is ours: the grandchild's pid.
    const sleeper = Number(await lines(c.proc)())
    others.track(sleeper)
    const [backend] = await server.sessionsOf(c.pid)
    expect(backend).toBeGreaterThan(0)
    await server.sql('SELECT pg_terminate_backend($1)', [backend])
    expect((await c.done).code).toBe(75)
    expect(c.err).toMatch(/may have been lost.*stopping sh/)
    // A member of the command's group: sent SIGKILL at the reap, dead a moment after.
    await waitFor(() => ['Z', null].includes(procState(sleeper)), 5000, 'the group member to die')
  })
})
