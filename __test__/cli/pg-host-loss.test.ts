// procward lock --postgres when the holder's host is lost: its COMMAND must
// be gone before the server can free the lock, whatever it does with
// SIGTERM. Host loss is simulated on loopback only: nftables drops the
// packets of the holder's connection on `lo`; the table is removed after
// every test, whatever happened.
import { spawnSync } from 'node:child_process'
import { afterEach, describe, expect, it } from 'vitest'
import { trackProcesses, waitFor } from '../helpers'
import * as server from '../pg/pg-helpers'
import { newKey, PG_SKIP_REASON, PG_URL } from '../pg/pg-helpers'
import { Cli } from './cli-process'

const { others } = trackProcesses()
const TABLE = `procward_cli_test_${process.pid}`

/** Runs an nft script; the error's words, or null when it ran. */
function nftScript(script: string): string | null {
  const r = spawnSync('nft', ['-f', '-'], { input: script, encoding: 'utf8' })
  if (r.error) return (r.error as NodeJS.ErrnoException).code === 'ENOENT' ? 'nft is not installed' : r.error.message
  return r.status === 0 ? null : `nft: ${r.stderr.trim()}`
}

/** Every packet of loopback TCP port `port` dropped, both ways: that host is gone. */
const cutOff = (port: number) =>
  nftScript(`table inet ${TABLE} {
  chain out {
    type filter hook output priority 0; policy accept;
    oifname "lo" tcp sport ${port} drop
    oifname "lo" tcp dport ${port} drop
  }
}`)
const reconnect = () => nftScript(`delete table inet ${TABLE}`)

if (!PG_URL) {
  console.warn(`procward lock --postgres host-loss tests skipped: ${PG_SKIP_REASON}`)
  it.skip(`procward lock --postgres host loss: skipped, ${PG_SKIP_REASON}`, () => {})
}

describe.skipIf(!PG_URL)('procward lock --postgres: the holder’s host lost', () => {
  afterEach(() => {
    reconnect()
  })

  it('a COMMAND that ignores SIGTERM is gone before a waiting contender’s COMMAND starts', async (ctx) => {
    const why = cutOff(1) ?? reconnect()
    if (why !== null) {
      console.warn(`host-loss test skipped: ${why}`)
      ctx.skip(why)
      return
    }
    const key = newKey('cli-hostloss')
    const lock = (...rest: string[]) => ['lock', '--postgres', PG_URL, '--key', key, '--host-loss-ms', '3000', ...rest]
    // A's COMMAND would take its time after SIGTERM: it ignores it (and so
    // do its children, which inherit that).
    const a = new Cli(others, lock('--', 'sh', '-c', "trap '' TERM; echo $$; while :; do sleep 0.05; done"))
    await waitFor(() => a.out.includes('\n'), 20_000, 'A’s command')
    const aCommand = Number(a.out.trim())
    others.track(aCommand)
    const [backend] = await server.sessionsOf(a.pid)
    const [row] = await server.sql<{ client_port: number }>('SELECT client_port FROM pg_stat_activity WHERE pid = $1', [
      backend,
    ])
    const port = row?.client_port as number
    expect(port).toBeGreaterThan(0)
    // B waits; its COMMAND says what A's COMMAND is at the moment it starts
    // (its /proc state; a zombie runs no more).
    const b = new Cli(
      others,
      lock('--wait', '--', 'sh', '-c', `s=$(cut -d' ' -f3 /proc/${aCommand}/stat 2>/dev/null); echo "A:\${s:-gone}"`),
    )
    await server.waitForWaiters(key)
    expect(cutOff(port)).toBeNull()
    expect(await b.done).toMatchObject({ code: 0 })
    expect(b.out).toMatch(/^A:(gone|Z)\n$/)
    reconnect()
    expect((await a.done).code).toBe(75)
    expect(a.err).toMatch(/stopping sh/)
  })
})
