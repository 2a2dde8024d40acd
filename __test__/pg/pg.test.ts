// procward/pg against a real PostgreSQL server: who holds the lock is the
// server's judgment (pg_locks), processes are real, and every test leaves no
// procward session of this process behind.
import type { ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
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
  lockSessions,
  newKey,
  noSessionsLeft,
  PG_SKIP_REASON,
  PG_URL,
  type PgClient,
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

/**
 * A raw session (no procward) whose backend has pid `x`: the kernel is told
 * to hand out x next (ns_last_pid, root in the server's pid namespace), and
 * we connect until the server's fork gets it (another fork on the machine
 * may take it first). A string says why it cannot be done here.
 */
async function sessionWithPid(x: number): Promise<PgClient | string> {
  const knob = '/proc/sys/kernel/ns_last_pid'
  for (let attempt = 0; attempt < 200; attempt++) {
    try {
      writeFileSync(knob, String(x - 1))
    } catch (err) {
      return `cannot choose the next pid (${knob}: ${(err as NodeJS.ErrnoException).code}): root is needed`
    }
    const client = new pg.Client({ connectionString: PG_URL, application_name: 'procward-test-raw' })
    client.on('error', () => {})
    await client.connect()
    const [row] = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows
    if (row?.pid === x) return client
    await client.end()
  }
  throw new Error(`no session got backend pid ${x} in 200 tries`)
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

    it('a fence table of an older procward (no backend_start) gets the column from the next holder, and then names it', async () => {
      const schema = `procward_test_old_${process.pid}`
      await sql(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      await sql(`CREATE SCHEMA ${schema}`)
      try {
        await sql(
          `CREATE TABLE ${schema}.procward_lock_fence (key text PRIMARY KEY, fence bigint NOT NULL, holder jsonb, backend_pid integer)`,
        )
        const key = newKey('old-table')
        await sql(`INSERT INTO ${schema}.procward_lock_fence VALUES ($1, 41, NULL, NULL)`, [key])
        const lock = await acquirePgLock({ connection: PG_URL, key, schema, purpose: 'after the upgrade' })
        try {
          expect(lock.fence).toBe(42n)
          const [row] = await sql<{ started: boolean }>(
            `SELECT f.backend_start = a.backend_start AS started FROM ${schema}.procward_lock_fence f JOIN pg_stat_activity a ON a.pid = f.backend_pid WHERE f.key = $1`,
            [key],
          )
          expect(row?.started).toBe(true)
          expect(await readPgLock({ connection: PG_URL, key, schema })).toMatchObject({
            held: true,
            holder: { pid: process.pid, purpose: 'after the upgrade' },
          })
        } finally {
          await lock.release()
        }
      } finally {
        await sql(`DROP SCHEMA ${schema} CASCADE`)
      }
    })

    it('an older fence table its role may not alter: the lock works, its record names no holder', async () => {
      const schema = `procward_test_ro_${process.pid}`
      const role = `procward_test_app_${process.pid}`
      await sql(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      await sql(`DROP ROLE IF EXISTS ${role}`)
      await sql(`CREATE ROLE ${role} LOGIN`)
      await sql(`CREATE SCHEMA ${schema}`)
      try {
        await sql(
          `CREATE TABLE ${schema}.procward_lock_fence (key text PRIMARY KEY, fence bigint NOT NULL, holder jsonb, backend_pid integer)`,
        )
        await sql(`GRANT USAGE ON SCHEMA ${schema} TO ${role}`)
        await sql(`GRANT SELECT, INSERT, UPDATE ON ${schema}.procward_lock_fence TO ${role}`)
        const url = new URL(PG_URL)
        url.username = role
        const connection = url.toString()
        const key = newKey('not-owner')
        const lock = await acquirePgLock({ connection, key, schema })
        try {
          expect(lock.fence).toBe(1n)
          expect(await readPgLock({ connection, key, schema })).toEqual({
            held: true,
            holder: null,
            holderRunning: null,
          })
          const [col] = await sql<{ n: string }>(
            `SELECT count(*)::text AS n FROM information_schema.columns WHERE table_schema = $1 AND column_name = 'backend_start'`,
            [schema],
          )
          expect(col?.n).toBe('0')
        } finally {
          await lock.release()
        }
        expect(await readPgLock({ connection, key, schema })).toEqual({
          held: false,
          holder: null,
          holderRunning: null,
        })
      } finally {
        await sql(`DROP SCHEMA ${schema} CASCADE`)
        await sql(`DROP ROLE ${role}`)
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
      try {
        // Its connection closed as its files did, in the exit: it is a
        // zombie (its parent never waits) a moment after, if not yet.
        await waitFor(() => procState(pid) === 'Z', 5000, 'the holder to be a zombie')
        expect(lock.reclaimedFrom?.pid).toBe(pid)
      } finally {
        await lock.release()
      }
    })

    it('SIGSTOPped for longer than hostLossMs: keeps the lock (its kernel still answers)', async () => {
      const key = newKey()
      const holder = await startHolder(key, { hostLossMs: 3000 })
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

    it('a dead holder’s backend pid reused by a later session that holds the key: no holder named, ELOCKED says another session', async (ctx) => {
      const key = newKey('reused')
      const holder = await startHolder(key, { purpose: 'dies' })
      const x = holder.backendPid
      holder.child.kill('SIGKILL')
      await new Promise((r) => holder.child.once('exit', r))
      // Its backend is gone and reaped: pid x is free.
      await waitFor(() => !existsSync(`/proc/${x}`), 10_000, `backend ${x} to be gone`)
      const raw = await sessionWithPid(x)
      if (typeof raw === 'string') {
        console.warn(`pid reuse test skipped: ${raw}`)
        ctx.skip(raw)
        return
      }
      try {
        await raw.query('SELECT pg_advisory_lock($1::bigint)', [String(advisoryKey(key))])
        // The row names the dead holder and pid x, which holds the key now.
        const [row] = await sql<{ holder: { pid: number } | null; backend_pid: number }>(
          'SELECT holder, backend_pid FROM public.procward_lock_fence WHERE key = $1',
          [key],
        )
        expect(row).toMatchObject({ holder: { pid: holder.pid }, backend_pid: x })
        expect((await lockSessions(key)).granted).toEqual([x])
        expect(await readPgLock({ connection: PG_URL, key })).toEqual({ held: true, holder: null, holderRunning: null })
        const err = await acquirePgLock({ connection: PG_URL, key }).catch((e) => e)
        expect(err).toMatchObject({ code: 'ELOCKED', key, holder: null })
        expect(err.message).toMatch(/held by another session$/)
      } finally {
        await raw.end()
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
        // Below 3000 the server cannot be held to the bound with a margin.
        [{ connection: PG_URL, key: 'k', hostLossMs: 2999 }, 'RangeError', 'ERR_OUT_OF_RANGE'],
        [{ connection: PG_URL, key: 'k', hostLossMs: 2000 }, 'RangeError', 'ERR_OUT_OF_RANGE'],
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
        const err = await tryPgLock({ connection: url, key: 'k', hostLossMs: 3000 }).catch((e) => e)
        expect(err).toMatchObject({ code: 'ERR_PROCWARD_PG_CONNECTION' })
        expect(err.cause).toBeInstanceOf(Error)
        // It gave up by itself (a bound on correctness: not before its timeout).
        expect(performance.now() - t0).toBeGreaterThanOrEqual(2900)
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
    /** `child` SIGSTOPped for 3.5 s once it printed `{ ready }`: its next line says the loss, then it exits. */
    async function stoppedPastTheWindow(child: ChildProcess) {
      const next = lines(child)
      const { ready } = JSON.parse(await next()) as { ready: number }
      process.kill(ready, 'SIGSTOP')
      try {
        await sleep(3500)
      } finally {
        process.kill(ready, 'SIGCONT')
      }
      expect(JSON.parse(await next())).toEqual({ afterGap: true, reason: 'ERR_PROCWARD_PG_LOCK_LOST' })
      await new Promise((r) => child.once('exit', r))
    }

    it('an event loop blocked longer than the window: the first look at lock.signal says lost, before any timer ran', async () => {
      const key = newKey()
      const { windowMs } = timing(3000)
      for (const look of ['aborted', 'throwIfAborted'] as const) {
        const lock = await acquirePgLock({ connection: PG_URL, key, hostLossMs: 3000 })
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

    it('a stall past the window: in the first timer after it, signals derived from lock.signal are aborted too', async () => {
      const HOST_LOSS_MS = 4000
      expect(timing(HOST_LOSS_MS).windowMs).toBeLessThan(2500)
      // A timer armed before the stall (due during it), and one armed right
      // after it (ordered by the loop's stale time): either is the first
      // callback to run after the stall.
      for (const armed of ['before', 'after'] as const) {
        const lock = await acquirePgLock({ connection: PG_URL, key: newKey('stall'), hostLossMs: HOST_LOSS_MS })
        try {
          const any = AbortSignal.any([lock.signal])
          const withTimeout = AbortSignal.any([lock.signal, AbortSignal.timeout(60_000)])
          const listened: string[] = []
          withTimeout.addEventListener('abort', () => listened.push('abort'))
          // The very first callback after the stall, cleared by a listener
          // of the abort that runs just before it: it must not run, and
          // nothing may throw.
          let doomedRan = false
          const doomed = setTimeout(() => {
            doomedRan = true
          }, 1)
          lock.signal.addEventListener('abort', () => clearTimeout(doomed))
          const seen = await new Promise<Record<string, unknown>>((resolve) => {
            // Looks at the derived signals only, never at lock.signal first
            // (a look at lock.signal judges the window itself).
            const look = () =>
              resolve({
                any: any.aborted,
                withTimeout: withTimeout.aborted,
                reason: (withTimeout.reason as { code?: string } | undefined)?.code,
                listened: [...listened],
                doomedRan,
              })
            if (armed === 'before') setTimeout(look, 1)
            const t0 = performance.now()
            while (performance.now() - t0 < 2500) {
              // a busy loop: no timer, no probe answer, no I/O
            }
            if (armed === 'after') setTimeout(look, 0)
          })
          expect(seen, `timer armed ${armed} the stall`).toEqual({
            any: true,
            withTimeout: true,
            reason: 'ERR_PROCWARD_PG_LOCK_LOST',
            listened: ['abort'],
            doomedRan: false,
          })
        } finally {
          await lock.release()
        }
      }
    })

    it('SIGSTOPped past the window: on SIGCONT its first work tick finds a signal derived from lock.signal aborted', async () => {
      const key = newKey()
      // A user's loop: it looks at the derived signal only (never at
      // lock.signal, whose own look would judge the window itself).
      const script = `
const { acquirePgLock } = require(process.argv[1])
acquirePgLock({ connection: process.argv[2], key: process.argv[3], hostLossMs: 3000 }).then((lock) => {
  const derived = AbortSignal.any([lock.signal, AbortSignal.timeout(600000)])
  let last = performance.now()
  const work = setInterval(() => {
    const now = performance.now()
    if (now - last > 2000) {
      console.log(JSON.stringify({ afterGap: derived.aborted, reason: derived.reason?.code ?? null }))
      clearInterval(work)
      lock.release().then(() => process.exit(0))
    }
    last = now
  }, 10)
  console.log(JSON.stringify({ ready: process.pid }))
})`
      const child = others.spawn(process.execPath, ['-e', script, PROCWARD_PG, PG_URL, key], {
        stdio: ['ignore', 'pipe', 'inherit'],
      })
      await stoppedPastTheWindow(child)
    })

    it('SIGSTOPped for longer than hostLossMs: on SIGCONT its first work tick sees the signal aborted', async () => {
      const key = newKey()
      const child = others.spawn(
        process.execPath,
        [fixture('pg-worker.cjs'), PROCWARD_PG, PG_URL, key, '3000', '2000'],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      )
      await stoppedPastTheWindow(child)
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
