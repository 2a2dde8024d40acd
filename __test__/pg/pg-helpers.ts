// Helpers for the tests of procward/pg against a real server: its URL comes
// from PROCWARD_TEST_PG_URL (scripts/pg-server.sh starts one; scripts/test.sh
// does it for the whole suite). Without it the tests are skipped, saying why.
import { createRequire } from 'node:module'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { advisoryKey } from '../../pg.js'

/** The little of node-postgres the tests use (the package ships no types). */
export interface PgClient {
  connect(): Promise<unknown>
  query<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<{ rows: R[] }>
  end(): Promise<void>
  on(event: 'error', listener: (err: Error) => void): unknown
}
interface PgModule {
  Client: new (config: string | Record<string, unknown>) => PgClient
  Pool: new (config: Record<string, unknown>) => { end(): Promise<void> }
}
export const pg = createRequire(__filename)('pg') as PgModule

export const PG_URL = process.env.PROCWARD_TEST_PG_URL ?? ''
export const PG_DIR = process.env.PROCWARD_TEST_PG_DIR ?? ''
export const PG_SKIP_REASON =
  'PROCWARD_TEST_PG_URL is not set, so there is no PostgreSQL server to test against: run `bash scripts/pg-server.sh with pnpm exec vitest run __test__/pg` (or scripts/test.sh)'
export const PG_SCRIPT = join(__dirname, '..', '..', 'scripts', 'pg-server.sh')
export const PROCWARD_PG = join(__dirname, '..', '..', 'pg.js')
export const LIB_PG = join(__dirname, '..', '..', 'lib', 'pg.js')
/** The holder's timings for a hostLossMs (lib/pg.js, not public). */
export const timing = (createRequire(__filename)(LIB_PG) as { timing: (hostLossMs: number) => { windowMs: number } })
  .timing

/** One statement on a fresh connection of the test's own (not a procward one). */
export async function sql<R = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: PG_URL, application_name: 'procward-test-admin' })
  client.on('error', () => {})
  await client.connect()
  try {
    return (await client.query<R>(text, params)).rows
  } finally {
    await client.end()
  }
}

let n = 0
/** A key no other test (or earlier run) used. */
export const newKey = (what = 'k') => `test:${what}:${process.pid}:${Date.now()}:${++n}`

function ids(key: string): [string, string] {
  const u = BigInt.asUintN(64, advisoryKey(key))
  return [String(u >> 32n), String(u & 0xffffffffn)]
}

/** Sessions of the key in pg_locks: granted (holders) and waiting. */
export async function lockSessions(key: string): Promise<{ granted: number[]; waiting: number[] }> {
  const rows = await sql<{ pid: number; granted: boolean }>(
    `SELECT pid, granted FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::oid AND objid = $2::oid AND objsubid = 1`,
    ids(key),
  )
  return {
    granted: rows.filter((r) => r.granted).map((r) => r.pid),
    waiting: rows.filter((r) => !r.granted).map((r) => r.pid),
  }
}

/** Until `count` sessions wait for the key in the server. */
export async function waitForWaiters(key: string, count = 1): Promise<void> {
  let seen = 0
  const deadline = Date.now() + 15_000
  while (seen < count) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${count} waiter(s) on ${key}`)
    seen = (await lockSessions(key)).waiting.length
    if (seen < count) await new Promise((r) => setTimeout(r, 10))
  }
}

/** Backend pids of procward sessions opened by process `pid` (its application_name). */
export async function sessionsOf(pid: number): Promise<number[]> {
  const rows = await sql<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [
    `procward:${hostname()}:${pid}`,
  ])
  return rows.map((r) => r.pid)
}

/** Until this process has no procward session left in the server. */
export async function noSessionsLeft(pid = process.pid): Promise<number[]> {
  let left: number[] = []
  const deadline = Date.now() + 5000
  for (;;) {
    left = await sessionsOf(pid)
    if (left.length === 0 || Date.now() > deadline) return left
    await new Promise((r) => setTimeout(r, 20))
  }
}
