// procward/pg when the holder's host is lost and when the server restarts.
// Host loss is simulated on loopback only: nftables drops the packets of the
// holder's connection on `lo` (its client port, both directions); the table
// is removed after every test, whatever happened.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it, type TestContext } from 'vitest'
import { acquirePgLock, tryPgLock } from '../../pg.js'
import { FIXTURES, run, trackProcesses } from '../helpers'
import {
  newKey,
  noSessionsLeft,
  PG_DIR,
  PG_SCRIPT,
  PG_SKIP_REASON,
  PG_URL,
  PROCWARD_PG,
  sql,
  waitForWaiters,
} from './pg-helpers'

const { others } = trackProcesses()
const NFT_TABLE = `procward_test_${process.pid}`

if (!PG_URL) {
  console.warn(`procward/pg tests skipped: ${PG_SKIP_REASON}`)
  it.skip(`procward/pg host loss and restart: skipped, ${PG_SKIP_REASON}`, () => {})
}

function nft(...args: string[]): void {
  execFileSync('nft', args, { stdio: ['ignore', 'ignore', 'pipe'] })
}

/** Why host loss cannot be simulated here, or null when it can. */
function nftUnavailable(): string | null {
  if (process.platform !== 'linux') return 'nftables is Linux only'
  try {
    nft('add', 'table', 'inet', NFT_TABLE)
    nft('delete', 'table', 'inet', NFT_TABLE)
    return null
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: Buffer }
    return e.code === 'ENOENT'
      ? 'nft (nftables) is not installed (Debian: apt-get install nftables)'
      : `nft cannot add a table here (root and CAP_NET_ADMIN are needed): ${String(e.stderr ?? e.message).trim()}`
  }
}

/** Skips the test (saying why on stderr) when host loss cannot be simulated here: true when it did. */
function skippedWithoutNft(ctx: TestContext): boolean {
  const why = nftUnavailable()
  if (why === null) return false
  console.warn(`host-loss test skipped: ${why}`)
  ctx.skip(why)
  return true
}

function dropNftTable(): void {
  try {
    nft('delete', 'table', 'inet', NFT_TABLE)
  } catch {
    // not there
  }
}

describe.skipIf(!PG_URL)('procward/pg: host loss and server restart', () => {
  afterEach(async () => {
    dropNftTable()
    await others.cleanup()
    expect(await noSessionsLeft()).toEqual([])
  })
  afterAll(dropNftTable)

  /**
   * One host loss: a holder at hostLossMs, a contender waiting, then every
   * packet of the holder's connection dropped. When the holder's signal
   * aborted and when the contender had the lock, from the drop.
   */
  async function hostLoss(hostLossMs: number): Promise<{ abortedMs: number | null; gotMs: number }> {
    const key = newKey('hostloss')
    const holder = await acquirePgLock({ connection: PG_URL, key, hostLossMs })
    let abortedAt: number | null = null
    holder.signal.addEventListener('abort', () => {
      abortedAt = performance.now()
    })
    try {
      const [row] = await sql<{ client_port: number }>('SELECT client_port FROM pg_stat_activity WHERE pid = $1', [
        holder.backendPid,
      ])
      const port = row?.client_port as number
      expect(port).toBeGreaterThan(0)
      let gotAt = 0
      const contender = acquirePgLock({ connection: PG_URL, key, wait: 60_000 }).then((l) => {
        gotAt = performance.now()
        return l
      })
      await waitForWaiters(key)
      // The holder's host is gone: nothing of its connection gets through.
      nft('add', 'table', 'inet', NFT_TABLE)
      nft('add', 'chain', 'inet', NFT_TABLE, 'out', '{ type filter hook output priority 0 ; policy accept ; }')
      nft('add', 'rule', 'inet', NFT_TABLE, 'out', 'oifname', 'lo', 'tcp', 'sport', String(port), 'drop')
      nft('add', 'rule', 'inet', NFT_TABLE, 'out', 'oifname', 'lo', 'tcp', 'dport', String(port), 'drop')
      const droppedAt = performance.now()
      const lock = await contender
      dropNftTable()
      const abortedMs = abortedAt === null ? null : (abortedAt as number) - droppedAt
      const gotMs = gotAt - droppedAt
      console.log(
        `host loss (hostLossMs ${hostLossMs}): holder's signal aborted ${abortedMs === null ? 'never' : `${abortedMs.toFixed(0)} ms`}, contender had the lock ${gotMs.toFixed(0)} ms after the drop`,
      )
      try {
        expect(holder.signal.reason).toMatchObject({ code: 'ERR_PROCWARD_PG_LOCK_LOST', key })
        expect(lock.fence).toBe(holder.fence + 1n)
        expect(lock.reclaimedFrom?.pid).toBe(process.pid)
      } finally {
        await lock.release()
      }
      return { abortedMs, gotMs }
    } finally {
      dropNftTable()
      await holder.release()
    }
  }

  it('host lost: the server frees the lock within hostLossMs, and the old holder’s signal aborted before the new holder got it', async (ctx) => {
    if (skippedWithoutNft(ctx)) return
    const HOST_LOSS_MS = 6000
    const { abortedMs, gotMs } = await hostLoss(HOST_LOSS_MS)
    expect(abortedMs).not.toBeNull()
    // The order that makes the lock safe: the old holder knew first.
    expect(abortedMs as number).toBeLessThan(gotMs)
    // The server let go within hostLossMs of the drop (the holder's last
    // packet came before it), the contender's own round trip included.
    expect(gotMs).toBeLessThan(HOST_LOSS_MS)
  })

  it('at the smallest hostLossMs, 3000, over several host losses: freed within it every time, the holder aborted first', async (ctx) => {
    if (skippedWithoutNft(ctx)) return
    const HOST_LOSS_MS = 3000
    // The smallest: below it keepalives (whole seconds, 2 s at the soonest)
    // leave no margin.
    await expect(tryPgLock({ connection: PG_URL, key: newKey(), hostLossMs: HOST_LOSS_MS - 1 })).rejects.toMatchObject({
      name: 'RangeError',
      code: 'ERR_OUT_OF_RANGE',
    })
    for (let trial = 0; trial < 5; trial++) {
      const { abortedMs, gotMs } = await hostLoss(HOST_LOSS_MS)
      expect(abortedMs, `trial ${trial}`).not.toBeNull()
      expect(abortedMs as number, `trial ${trial}`).toBeLessThan(gotMs)
      expect(gotMs, `trial ${trial}`).toBeLessThan(HOST_LOSS_MS)
    }
  })

  it('server restart: the holder’s signal aborts, release() resolves, and fences keep increasing across it, over several processes', async () => {
    expect(PG_DIR).not.toBe('')
    const key = newKey('restart')
    const dir = mkdtempSync(join(tmpdir(), 'procward-pg-restart-'))
    try {
      const file = join(dir, 'counter')
      writeFileSync(file, '0')
      const counters = async (n: number, m: number) => {
        const results = await Promise.all(
          Array.from({ length: n }, () =>
            run(process.execPath, [join(FIXTURES, 'pg-counter.cjs'), PROCWARD_PG, PG_URL, key, file, String(m)], {
              env: { ...process.env, PROCWARD_TEST_TAG: others.tag },
            }),
          ),
        )
        return results.flatMap((r) => JSON.parse(r.stdout) as [number, string][])
      }
      const before = await counters(3, 5)

      const lock = await acquirePgLock({ connection: PG_URL, key })
      const aborted = new Promise<void>((r) => lock.signal.addEventListener('abort', () => r()))
      await run('bash', [PG_SCRIPT, 'restart', PG_DIR])
      await aborted
      expect(lock.signal.reason).toMatchObject({ code: 'ERR_PROCWARD_PG_LOCK_LOST', key })
      await lock.release()
      expect(lock.released).toBe(true)

      const after = await counters(3, 5)
      const again = await acquirePgLock({ connection: PG_URL, key })
      await again.release()

      const all = [...before, ...after].map(([v, f]) => [v, BigInt(f)] as const).sort((a, b) => a[0] - b[0])
      expect(readFileSync(file, 'utf8')).toBe('30')
      expect(all.map(([v]) => v)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1))
      const fences = [
        ...all.slice(0, 15).map(([, f]) => f),
        lock.fence,
        ...all.slice(15).map(([, f]) => f),
        again.fence,
      ]
      for (let i = 1; i < fences.length; i++) expect(fences[i] as bigint).toBeGreaterThan(fences[i - 1] as bigint)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

beforeAll(() => dropNftTable())
