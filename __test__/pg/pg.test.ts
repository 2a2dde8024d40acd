// procward/pg against a real PostgreSQL server: who holds the lock is the
// server's judgment (pg_locks), processes are real, and every test leaves no
// procward session of this process behind.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { getProcessInfo } from '../../index.js'
import {
  type AcquirePgLockOptions,
  acquirePgLock,
  advisoryKey,
  type PgLock,
  type PgLockInfo,
  readPgLock,
  tryPgLock,
} from '../../pg.js'
import {
  FIXTURES,
  fdsLeftSince,
  freePort,
  lines,
  openFds,
  procState,
  run,
  sleep,
  trackProcesses,
  waitFor,
} from '../helpers'
import {
  LIB_PG,
  lockSessions,
  newKey,
  noSessionsLeft,
  PG_SKIP_REASON,
  PG_URL,
  PROCWARD_PG,
  pg,
  sessionsOf,
  sql,
  timing,
  waitForWaiters,
} from './pg-helpers'

const { others } = trackProcesses()
const fixture = (name: string) => join(FIXTURES, name)

if (!PG_URL) {
  console.warn(`procward/pg tests skipped: ${PG_SKIP_REASON}`)
  it.skip(`procward/pg: skipped, ${PG_SKIP_REASON}`, () => {})
}

/** A holder process (pg-holder.cjs); resolves once it holds the lock. */
async function startHolder(key: string, opts: Record<string, unknown> = {}) {
  const child = others.spawn(
    process.execPath,
    [fixture('pg-holder.cjs'), PROCWARD_PG, PG_URL, key, JSON.stringify(opts)],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  )
  const next = lines(child)
  const info = JSON.parse(await next()) as { pid: number; fence: string; backendPid: number }
  if (!info.pid) throw new Error(`the holder failed: ${JSON.stringify(info)}`)
  return { child, next, ...info }
}

describe.skipIf(!PG_URL)('procward/pg', () => {
  let fdsBefore: string[]
  let dir: string
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'procward-pg-'))
  })
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true })
  })
  beforeAll(async () => {
    // Warm: pg's modules and the fence table, so the fd baseline is stable.
    await (await acquirePgLock({ connection: PG_URL, key: newKey('warm') })).release()
    fdsBefore = openFds()
  })
  afterEach(async () => {
    // Children first (their stdio pipes are sockets too), then what is ours.
    await others.cleanup()
    expect(await noSessionsLeft()).toEqual([])
    expect(await fdsLeftSince(fdsBefore)).toEqual([])
  })

  describe('taking, reading, releasing', () => {
    it('takes a free lock: fence, holder, backend, application_name; another session cannot have it', async () => {
      const key = newKey()
      const lock = await acquirePgLock({ connection: PG_URL, key, purpose: 'resync alice' })
      try {
        expect(lock.key).toBe(key)
        expect(typeof lock.fence).toBe('bigint')
        expect(lock.fence).toBe(1n)
        expect(lock.holder).toEqual({
          pid: process.pid,
          identity: getProcessInfo(process.pid)?.identity,
          hostname: hostname(),
          acquiredAt: expect.any(String),
          purpose: 'resync alice',
        })
        expect(Number.isNaN(Date.parse(lock.holder.acquiredAt))).toBe(false)
        expect(lock.reclaimedFrom).toBeNull()
        expect(lock.released).toBe(false)
        expect(lock.signal.aborted).toBe(false)
        // The server's view: this backend holds it, and is named for us.
        expect((await lockSessions(key)).granted).toEqual([lock.backendPid])
        expect(await sessionsOf(process.pid)).toEqual([lock.backendPid])
        // Nobody else gets it.
        expect(await tryPgLock({ connection: PG_URL, key })).toBeNull()
        const err = await acquirePgLock({ connection: PG_URL, key }).catch((e) => e)
        expect(err).toMatchObject({ code: 'ELOCKED', key, holderRunning: null })
        expect(err.holder).toEqual(lock.holder)
        expect(err.message).toContain(`pid ${process.pid} (resync alice)`)
        const info: PgLockInfo = await readPgLock({ connection: PG_URL, key })
        expect(info).toEqual({ held: true, holder: lock.holder, holderRunning: null })
      } finally {
        await lock.release()
      }
      expect(lock.released).toBe(true)
      expect(lock.signal.aborted).toBe(true)
      expect(lock.signal.reason).toMatchObject({ code: 'ERR_PROCWARD_PG_LOCK_RELEASED' })
      expect((await lockSessions(key)).granted).toEqual([])
      expect(await readPgLock({ connection: PG_URL, key })).toEqual({ held: false, holder: null, holderRunning: null })
      await lock.release() // idempotent
    })

    it('tryPgLock and await using; the next acquisition gets the next fence and no reclaimedFrom after a release', async () => {
      const key = newKey()
      {
        const lock = await tryPgLock({ connection: PG_URL, key })
        expect(lock).not.toBeNull()
        await using _l = lock as PgLock
        expect(lock?.fence).toBe(1n)
      }
      const again = (await tryPgLock({ connection: PG_URL, key })) as PgLock
      expect(again.fence).toBe(2n)
      expect(again.reclaimedFrom).toBeNull()
      await again.release()
    })

    it('the advisory key is the documented hash, the same in SQL', async () => {
      const keys = ['abc', 'resync:alice@example.com', 'ключ-🔑', 'x'.repeat(1024)]
      for (const key of keys) {
        const [row] = await sql<{ k: string }>(
          `SELECT (('x' || left(encode(sha256(convert_to($1::text, 'UTF8')), 'hex'), 16))::bit(64)::bigint)::text AS k`,
          [key],
        )
        expect(advisoryKey(key)).toBe(BigInt(row?.k as string))
      }
      expect(advisoryKey('abc')).toBe(-5010229573455851542n)
      // And a psql user locking that key holds procward's lock.
      const key = newKey('psql')
      const client = new pg.Client(PG_URL)
      await client.connect()
      try {
        await client.query('SELECT pg_advisory_lock($1::bigint)', [String(advisoryKey(key))])
        expect(await tryPgLock({ connection: PG_URL, key })).toBeNull()
        // Held, by a session that left no record: no holder.
        expect(await readPgLock({ connection: PG_URL, key })).toEqual({ held: true, holder: null, holderRunning: null })
      } finally {
        await client.end()
      }
    })

    it('the fence table lives in the schema given; a connection given as a config object works', async () => {
      await sql('CREATE SCHEMA IF NOT EXISTS procward_test_schema')
      const key = newKey()
      const url = new URL(PG_URL)
      const connection = { host: url.hostname, port: Number(url.port), user: url.username, database: 'postgres' }
      const lock = await acquirePgLock({ connection, key, schema: 'procward_test_schema' })
      try {
        const rows = await sql<{ fence: string; backend_pid: number; holder: { pid: number } }>(
          'SELECT fence::text, backend_pid, holder FROM procward_test_schema.procward_lock_fence WHERE key = $1',
          [key],
        )
        expect(rows).toEqual([{ fence: '1', backend_pid: lock.backendPid, holder: { ...lock.holder } }])
        expect(await readPgLock({ connection, key, schema: 'procward_test_schema' })).toMatchObject({
          held: true,
          holder: lock.holder,
        })
      } finally {
        await lock.release()
      }
    })

    it('a bounded wait ends in ELOCKED from the server (lock_timeout), naming the holder', async () => {
      const key = newKey()
      const lock = await acquirePgLock({ connection: PG_URL, key, purpose: 'long job' })
      try {
        const err = await acquirePgLock({ connection: PG_URL, key, wait: 150 }).catch((e) => e)
        expect(err).toMatchObject({ code: 'ELOCKED', key, holder: lock.holder })
        expect(err).toBeInstanceOf(Error)
      } finally {
        await lock.release()
      }
    })

    it('a waiter gets the lock as the holder releases it', async () => {
      const key = newKey()
      const first = await acquirePgLock({ connection: PG_URL, key })
      const second = acquirePgLock({ connection: PG_URL, key, wait: true })
      await waitForWaiters(key)
      await first.release()
      const lock = await second
      expect(lock.fence).toBe(first.fence + 1n)
      expect(lock.reclaimedFrom).toBeNull()
      await lock.release()
    })
  })

  describe('the holder process', () => {
    it('SIGKILLed: a waiting contender has the lock within milliseconds, far inside hostLossMs', async () => {
      const key = newKey()
      const holder = await startHolder(key, { hostLossMs: 120_000, purpose: 'to be killed' })
      const contender = acquirePgLock({ connection: PG_URL, key, wait: 60_000 })
      await waitForWaiters(key)
      const t0 = performance.now()
      holder.child.kill('SIGKILL')
      const lock = await contender
      const ms = performance.now() - t0
      try {
        // Only the closed socket explains a takeover this soon (keepalives
        // would take a minute): the bound is generous for a loaded machine.
        expect(ms).toBeLessThan(10_000)
        expect(lock.fence).toBe(BigInt(holder.fence) + 1n)
        expect(lock.reclaimedFrom).toMatchObject({ pid: holder.pid, purpose: 'to be killed' })
      } finally {
        await lock.release()
      }
    })

    it('SIGKILLed and left an unreaped zombie: the contender has it while the holder is still a zombie', async () => {
      const key = newKey()
      // A parent that never reaps: the holder stays a zombie once killed.
      const parent = others.spawn(
        'sh',
        [
          '-c',
          'node "$0" "$1" "$2" "$3" "$4" & echo $!; exec sleep 1000',
          fixture('pg-holder.cjs'),
          PROCWARD_PG,
          PG_URL,
          key,
          '{"hostLossMs":120000}',
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      )
      const next = lines(parent)
      const pid = Number(await next())
      others.track(pid)
      const info = JSON.parse(await next())
      expect(info.pid).toBe(pid)
      const contender = acquirePgLock({ connection: PG_URL, key, wait: 60_000 })
      await waitForWaiters(key)
      process.kill(pid, 'SIGKILL')
      const lock = await contender
      const state = procState(pid)
      try {
        expect(state).toBe('Z')
        expect(lock.reclaimedFrom?.pid).toBe(pid)
      } finally {
        await lock.release()
      }
    })

    it('SIGSTOPped for longer than hostLossMs: keeps the lock (its kernel still answers)', async () => {
      const key = newKey()
      const holder = await startHolder(key, { hostLossMs: 2000 })
      process.kill(holder.pid, 'SIGSTOP')
      try {
        await sleep(3500)
        expect(await tryPgLock({ connection: PG_URL, key })).toBeNull()
        const info = await readPgLock({ connection: PG_URL, key })
        expect(info.held).toBe(true)
        expect(info.holder?.pid).toBe(holder.pid)
        expect((await lockSessions(key)).granted).toEqual([holder.backendPid])
      } finally {
        process.kill(holder.pid, 'SIGCONT')
      }
    })

    it('a dead holder’s record stays in the table but never reads as held', async () => {
      const key = newKey()
      const holder = await startHolder(key, { purpose: 'dies' })
      holder.child.kill('SIGKILL')
      await new Promise((r) => holder.child.once('exit', r))
      for (let i = 0; i < 500 && (await lockSessions(key)).granted.length > 0; i++) await sleep(10)
      const [row] = await sql<{ holder: { pid: number } | null }>(
        'SELECT holder FROM public.procward_lock_fence WHERE key = $1',
        [key],
      )
      expect(row?.holder?.pid).toBe(holder.pid)
      expect(await readPgLock({ connection: PG_URL, key })).toEqual({ held: false, holder: null, holderRunning: null })
    })
  })

  describe('many contenders', () => {
    it('N processes × M read-modify-writes of one file under the lock lose nothing; fences strictly increase', async () => {
      const key = newKey()
      const file = join(dir, 'counter')
      writeFileSync(file, '0')
      const N = 4
      const M = 15
      const results = await Promise.all(
        Array.from({ length: N }, () =>
          run(process.execPath, [fixture('pg-counter.cjs'), PROCWARD_PG, PG_URL, key, file, String(M)], {
            env: { ...process.env, PROCWARD_TEST_TAG: others.tag },
          }),
        ),
      )
      expect(readFileSync(file, 'utf8')).toBe(String(N * M))
      const all = results
        .flatMap((r) => JSON.parse(r.stdout) as [number, string][])
        .map(([value, fence]) => [value, BigInt(fence)] as const)
        .sort((a, b) => a[0] - b[0])
      expect(all.map(([v]) => v)).toEqual(Array.from({ length: N * M }, (_, i) => i + 1))
      for (let i = 1; i < all.length; i++)
        expect((all[i] as readonly [number, bigint])[1]).toBeGreaterThan((all[i - 1] as readonly [number, bigint])[1])
    })

    it('an AbortSignal cancels a wait in the server and leaves no lock or session behind', async () => {
      const key = newKey()
      const holder = await acquirePgLock({ connection: PG_URL, key })
      try {
        const ac = new AbortController()
        const waiting = acquirePgLock({ connection: PG_URL, key, wait: true, signal: ac.signal })
        await waitForWaiters(key)
        ac.abort(new Error('enough'))
        const err = await waiting.catch((e) => e)
        expect(err).toMatchObject({ name: 'AbortError', code: 'ABORT_ERR' })
        expect(err.cause?.message).toBe('enough')
        expect(await lockSessions(key)).toEqual({ granted: [holder.backendPid], waiting: [] })
        expect(await sessionsOf(process.pid)).toEqual([holder.backendPid])
        // Already aborted: rejected before connecting.
        await expect(acquirePgLock({ connection: PG_URL, key, wait: true, signal: ac.signal })).rejects.toMatchObject({
          name: 'AbortError',
        })
      } finally {
        await holder.release()
      }
      const after = await tryPgLock({ connection: PG_URL, key })
      expect(after).not.toBeNull()
      await after?.release()
    })

    it('an abort racing the grant: rejects unless it had already resolved, and never leaves the lock held', async () => {
      const key = newKey()
      let rejected = 0
      for (let i = 0; i < 16; i++) {
        const holder = await acquirePgLock({ connection: PG_URL, key })
        const ac = new AbortController()
        let resolvedFirst = false
        const waiting = acquirePgLock({ connection: PG_URL, key, wait: true, signal: ac.signal })
        waiting.then(
          () => {
            resolvedFirst = !ac.signal.aborted
          },
          () => {},
        )
        await waitForWaiters(key)
        const releasing = holder.release()
        await sleep(i % 4) // around the unlock's round trip and the grant
        ac.abort()
        const outcome = await waiting.catch((e) => e)
        if (resolvedFirst) {
          await (outcome as PgLock).release()
        } else {
          expect(outcome).toMatchObject({ name: 'AbortError' })
          rejected++
        }
        await releasing
        const free = await tryPgLock({ connection: PG_URL, key })
        expect(free).not.toBeNull()
        await free?.release()
      }
      expect(rejected).toBeGreaterThan(0)
    })
  })

  describe('bad input and failures: clear errors, nothing left open', () => {
    it('refuses a pool, a client and other session holders with a TypeError', async () => {
      const pool = new pg.Pool({ connectionString: PG_URL })
      const client = new pg.Client(PG_URL)
      try {
        for (const connection of [pool, client, { query() {}, release() {} }]) {
          const err = await acquirePgLock({ connection: connection as never, key: 'k' }).catch((e) => e)
          expect(err).toBeInstanceOf(TypeError)
          expect(err.code).toBe('ERR_INVALID_ARG_TYPE')
          expect(err.message).toMatch(/not a (pg\.Pool|pg\.Client|pooled client)/)
          await expect(tryPgLock({ connection: connection as never, key: 'k' })).rejects.toBeInstanceOf(TypeError)
          await expect(readPgLock({ connection: connection as never, key: 'k' })).rejects.toBeInstanceOf(TypeError)
        }
      } finally {
        await pool.end()
      }
    })

    it('bad URLs, keys and options are TypeError/RangeError before connecting', async () => {
      const bad: [AcquirePgLockOptions | undefined, string, string][] = [
        [{ connection: 'not a url', key: 'k' }, 'TypeError', 'ERR_INVALID_URL'],
        [{ connection: 'http://user:secret@127.0.0.1/db', key: 'k' }, 'TypeError', 'ERR_INVALID_URL'],
        [{ connection: { connectionString: 'nope' }, key: 'k' }, 'TypeError', 'ERR_INVALID_URL'],
        [{ connection: 42 as never, key: 'k' }, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
        [{ connection: PG_URL, key: '' }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
        [{ connection: PG_URL, key: 7 as never }, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
        [{ connection: PG_URL, key: 'a\0b' }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
        [{ connection: PG_URL, key: 'a\ud800' }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
        [{ connection: PG_URL, key: 'x'.repeat(1025) }, 'RangeError', 'ERR_OUT_OF_RANGE'],
        [{ connection: PG_URL, key: 'k', hostLossMs: 1999 }, 'RangeError', 'ERR_OUT_OF_RANGE'],
        [{ connection: PG_URL, key: 'k', hostLossMs: Number.NaN }, 'RangeError', 'ERR_OUT_OF_RANGE'],
        [{ connection: PG_URL, key: 'k', hostLossMs: '5000' as never }, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
        [{ connection: PG_URL, key: 'k', wait: -1 }, 'RangeError', 'ERR_OUT_OF_RANGE'],
        [{ connection: PG_URL, key: 'k', wait: 'yes' as never }, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
        [{ connection: PG_URL, key: 'k', signal: {} as never }, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
        [{ connection: PG_URL, key: 'k', purpose: 5 as never }, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
        // jsonb refuses both: never a lock taken first and an error after.
        [{ connection: PG_URL, key: 'k', purpose: 'a\0b' }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
        [{ connection: PG_URL, key: 'k', purpose: 'a\ud800' }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
        [{ connection: PG_URL, key: 'k', schema: '' }, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
        [{ connection: PG_URL, key: 'k', nope: 1 } as never, 'TypeError', 'ERR_INVALID_ARG_VALUE'],
        [undefined, 'TypeError', 'ERR_INVALID_ARG_TYPE'],
      ]
      for (const [options, name, code] of bad) {
        const err = await acquirePgLock(options as AcquirePgLockOptions).catch((e) => e)
        expect(err?.name, JSON.stringify(options)).toBe(name)
        expect(err?.code, JSON.stringify(options)).toBe(code)
        // A password in a URL is never echoed.
        expect(err.message).not.toContain('secret')
      }
      expect(() => advisoryKey('')).toThrow(TypeError)
    })

    it('a refusing server: ERR_PROCWARD_PG_CONNECTION with pg’s error as cause', async () => {
      const port = await freePort()
      const err = await acquirePgLock({ connection: `postgres://u:secret@127.0.0.1:${port}/db`, key: 'k' }).catch(
        (e) => e,
      )
      expect(err).toBeInstanceOf(Error)
      expect(err.code).toBe('ERR_PROCWARD_PG_CONNECTION')
      expect(err.cause?.code).toBe('ECONNREFUSED')
      expect(err.message).toContain(`127.0.0.1:${port}`)
      expect(err.message).not.toContain('secret')
      await expect(readPgLock({ connection: `postgres://127.0.0.1:${port}/db`, key: 'k' })).rejects.toMatchObject({
        code: 'ERR_PROCWARD_PG_CONNECTION',
        cause: { code: 'ECONNREFUSED' },
      })
    })

    it('a server that never answers: an abort ends the connect; otherwise connectionTimeoutMillis (default hostLossMs)', async () => {
      // Accepts connections, says nothing.
      const sockets = new Set<import('node:net').Socket>()
      const silent = net.createServer((s) => {
        sockets.add(s)
        s.on('error', () => {})
      })
      await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()))
      const port = (silent.address() as import('node:net').AddressInfo).port
      try {
        const url = `postgres://u@127.0.0.1:${port}/db`
        const ac = new AbortController()
        const waiting = acquirePgLock({ connection: url, key: 'k', wait: true, signal: ac.signal })
        await waitFor(() => sockets.size === 1, 5000, 'the connection')
        ac.abort()
        await expect(waiting).rejects.toMatchObject({ name: 'AbortError' })
        const t0 = performance.now()
        const err = await tryPgLock({ connection: url, key: 'k', hostLossMs: 2000 }).catch((e) => e)
        expect(err).toMatchObject({ code: 'ERR_PROCWARD_PG_CONNECTION' })
        expect(err.cause).toBeInstanceOf(Error)
        // It gave up by itself (a bound on correctness: not before its timeout).
        expect(performance.now() - t0).toBeGreaterThanOrEqual(1900)
      } finally {
        for (const s of sockets) s.destroy()
        await new Promise((r) => silent.close(r))
      }
    })

    it('a database that does not exist, a schema that does not exist: the server’s error as cause, no lock kept', async () => {
      const url = new URL(PG_URL)
      url.pathname = '/procward_no_such_db'
      const err = await acquirePgLock({ connection: url.href, key: 'k' }).catch((e) => e)
      expect(err).toMatchObject({ code: 'ERR_PROCWARD_PG_CONNECTION', cause: { code: '3D000' } })
      const key = newKey()
      const err2 = await acquirePgLock({ connection: PG_URL, key, schema: 'procward_no_such_schema' }).catch((e) => e)
      expect(err2).toMatchObject({ code: 'ERR_PROCWARD_PG_QUERY', cause: { code: '3F000' } })
      expect(err2.message).toContain('procward_no_such_schema')
      expect((await lockSessions(key)).granted).toEqual([])
    })
  })

  describe('an abort after the grant', () => {
    it('while the fence row is locked by another transaction: rejects at once, and leaves no lock, record or session', async () => {
      const key = newKey()
      await (await acquirePgLock({ connection: PG_URL, key })).release()
      const admin = new pg.Client({ connectionString: PG_URL, application_name: 'procward-test-admin' })
      admin.on('error', () => {})
      await admin.connect()
      try {
        await admin.query('BEGIN')
        await admin.query('SELECT 1 FROM public.procward_lock_fence WHERE key = $1 FOR UPDATE', [key])
        const ac = new AbortController()
        const acquiring = acquirePgLock({ connection: PG_URL, key, wait: true, signal: ac.signal, purpose: 'aborted' })
        // Granted, and blocked on the row: its session waits for a lock in the server.
        for (;;) {
          const [row] = await sql<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
            [`procward:${hostname()}:${process.pid}`],
          )
          if (row?.n === 1) break
          await sleep(10)
        }
        expect((await lockSessions(key)).granted).toHaveLength(1)
        ac.abort()
        // Settles while the row is still locked.
        await expect(acquiring).rejects.toMatchObject({ name: 'AbortError' })
        expect(await noSessionsLeft()).toEqual([])
      } finally {
        await admin.query('ROLLBACK')
        await admin.end()
      }
      expect((await lockSessions(key)).granted).toEqual([])
      const [row] = await sql<{ holder: unknown; fence: string }>(
        'SELECT holder, fence::text FROM public.procward_lock_fence WHERE key = $1',
        [key],
      )
      expect(row).toEqual({ holder: null, fence: '1' })
      const next = await acquirePgLock({ connection: PG_URL, key })
      expect(next.reclaimedFrom).toBeNull()
      expect(next.fence).toBe(2n)
      await next.release()
    })
  })

  describe('the lock may be lost', () => {
    it('its session terminated by the server: the signal aborts with the cause; release() resolves', async () => {
      const key = newKey()
      const lock = await acquirePgLock({ connection: PG_URL, key })
      const aborted = new Promise((r) => lock.signal.addEventListener('abort', r))
      await sql('SELECT pg_terminate_backend($1)', [lock.backendPid])
      await aborted
      expect(lock.signal.reason).toMatchObject({ code: 'ERR_PROCWARD_PG_LOCK_LOST', key })
      expect(lock.signal.reason.message).toMatch(/may have been lost/)
      await lock.release()
      expect(lock.released).toBe(true)
    })
  })

  describe('a stalled holder sees the loss before it works again', () => {
    it('an event loop blocked longer than the window: the first look at lock.signal says lost, before any timer ran', async () => {
      const key = newKey()
      const { windowMs } = timing(2000)
      for (const look of ['aborted', 'throwIfAborted'] as const) {
        const lock = await acquirePgLock({ connection: PG_URL, key, hostLossMs: 2000 })
        try {
          // Busy: no probe is sent or answered, no timer runs. Every probe
          // answered so far was sent before t0.
          const t0 = performance.now()
          while (performance.now() - t0 <= windowMs) {
            // stalled
          }
          if (look === 'aborted') expect(lock.signal.aborted).toBe(true)
          else expect(() => lock.signal.throwIfAborted()).toThrow(/may have been lost/)
          expect(lock.signal.reason).toMatchObject({ code: 'ERR_PROCWARD_PG_LOCK_LOST', key })
        } finally {
          await lock.release()
        }
      }
    })

    it('SIGSTOPped for longer than hostLossMs: on SIGCONT its first work tick sees the signal aborted', async () => {
      const key = newKey()
      const child = others.spawn(
        process.execPath,
        [fixture('pg-worker.cjs'), PROCWARD_PG, PG_URL, key, '2000', '2000'],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      )
      const next = lines(child)
      const { ready } = JSON.parse(await next()) as { ready: number }
      process.kill(ready, 'SIGSTOP')
      try {
        await sleep(2500)
      } finally {
        process.kill(ready, 'SIGCONT')
      }
      expect(JSON.parse(await next())).toEqual({ afterGap: true, reason: 'ERR_PROCWARD_PG_LOCK_LOST' })
      await new Promise((r) => child.once('exit', r))
    })
  })

  describe('the CLI form (runPgLock)', () => {
    const cli = (opts: Record<string, unknown>) =>
      others.spawn(process.execPath, [fixture('pg-cli.cjs'), LIB_PG, JSON.stringify({ url: PG_URL, ...opts })], {
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    const finished = (child: ReturnType<typeof cli>) =>
      new Promise<{ code: number | null; stderr: string; stdout: string }>((resolve) => {
        let stderr = ''
        let stdout = ''
        child.stderr?.on('data', (d) => {
          stderr += d
        })
        child.stdout?.on('data', (d) => {
          stdout += d
        })
        child.once('close', (code) => resolve({ code, stderr, stdout }))
      })

    it('runs the command under the lock and exits with its status', async () => {
      const key = newKey()
      const r = await finished(
        cli({ key, command: 'sh', args: ['-c', 'echo "$0"; exit 7', 'hello'], stdio: 'inherit' }),
      )
      expect(r).toMatchObject({ code: 7, stdout: 'hello\n' })
    })

    it('exits 75 when the lock is held (and after a bounded wait)', async () => {
      const key = newKey()
      const lock = await acquirePgLock({ connection: PG_URL, key, purpose: 'busy' })
      try {
        const r = await finished(cli({ key, command: 'true' }))
        expect(r.code).toBe(75)
        expect(r.stderr).toContain('ELOCKED')
        expect(r.stderr).toContain('busy')
        const r2 = await finished(cli({ key, command: 'true', wait: 100 }))
        expect(r2.code).toBe(75)
      } finally {
        await lock.release()
      }
    })

    it('SIGTERM while waiting ends the wait: 143, and the waiting session is gone', async () => {
      const key = newKey()
      const lock = await acquirePgLock({ connection: PG_URL, key })
      try {
        const child = cli({ key, command: 'true', wait: true })
        const done = finished(child)
        await waitForWaiters(key)
        child.kill('SIGTERM')
        expect((await done).code).toBe(143)
        expect(await noSessionsLeft(child.pid as number)).toEqual([])
        expect((await lockSessions(key)).waiting).toEqual([])
      } finally {
        await lock.release()
      }
    })

    it('a command line longer than a purpose runs (its record is cut); not found exits 127, not executable 126; the lock is freed', async () => {
      const key = newKey()
      const r = await finished(cli({ key, command: 'sh', args: ['-c', 'exit 3', 'x'.repeat(5000)] }))
      expect(r).toMatchObject({ code: 3, stderr: '' })
      const r2 = await finished(cli({ key, command: 'procward-no-such-command' }))
      expect(r2.code).toBe(127)
      expect(r2.stderr).toContain('procward-no-such-command')
      const file = join(dir, 'not-executable')
      writeFileSync(file, 'exit 0\n')
      const r3 = await finished(cli({ key, command: file }))
      expect(r3.code).toBe(126)
      expect(r3.stderr).toContain(file)
      expect((await lockSessions(key)).granted).toEqual([])
    })

    it('stops the command’s process group when the lock is lost, and exits 75', async () => {
      const key = newKey()
      const child = cli({ key, command: 'sh', args: ['-c', 'sleep 1000 & echo $!; wait'] })
      const done = finished(child)
      // The CLI passes its stdout to the command: the grandchild's pid.
      const next = lines(child)
      const sleeper = Number(await next())
      others.track(sleeper)
      const [backend] = await sessionsOf(child.pid as number)
      expect(backend).toBeGreaterThan(0)
      await sql('SELECT pg_terminate_backend($1)', [backend])
      const r = await done
      expect(r.code).toBe(75)
      expect(r.stderr).toMatch(/may have been lost.*stopping sh/)
      expect(['Z', null]).toContain(procState(sleeper))
    })
  })

  it('importing procward/pg without pg installed throws one clear error naming it (CommonJS and ESM)', async () => {
    for (const mode of ['cjs', 'esm']) {
      const { stdout } = await run(process.execPath, [fixture('pg-missing.cjs'), mode])
      const out = JSON.parse(stdout)
      expect(out).toMatchObject({ code: 'ERR_PROCWARD_PG_MISSING', cause: 'MODULE_NOT_FOUND' })
      expect(out.message).toContain("'pg'")
    }
  })
})
