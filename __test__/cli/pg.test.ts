// procward lock --postgres URL --key KEY: the lock for more than one host,
// from the command line. Needs a server (PROCWARD_TEST_PG_URL).
import { describe, expect, it } from 'vitest'
import { tempDirs, trackProcesses, waitFor } from '../helpers'
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
    ] as const) {
      const r = await cli([...args])
      expect(r.code, args.join(' ')).toBe(2)
      expect(r.err).toMatch(pattern)
      expect(r.err).toMatch(/try 'procward lock --help'\n$/)
    }
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

  it('a command that cannot be found: 127', async () => {
    const r = await cli(['lock', '--postgres', PG_URL, '--key', newKey('cli'), '--', 'no-such-command-procward'])
    expect(r.code).toBe(127)
    expect(r.err).toBe('procward: no-such-command-procward: command not found\n')
  })
})
