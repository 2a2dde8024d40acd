// The lock across hosts, on PostgreSQL (procward/pg: lib/pg/).

import type { LockHolder } from './lock.js'

/**
 * How to open the lock's own connection: a connection string
 * (`postgres://user:password@host:port/database`) or a configuration as
 * `new pg.Client(config)` takes it. Never a `pg.Pool` or a client: a session
 * lock needs a session of its own (TypeError). procward sets
 * `application_name` (`procward:<hostname>:<pid>`), `keepAlive`,
 * `keepAliveInitialDelayMillis` and, unless given, `connectionTimeoutMillis`
 * (default: `hostLossMs`).
 */
export type PgConnection = string | PgClientConfig

/** The options of `new pg.Client(config)` (node-postgres), as far as procward passes them on. */
export interface PgClientConfig {
  connectionString?: string | undefined
  host?: string | undefined
  port?: number | undefined
  user?: string | undefined
  database?: string | undefined
  password?: string | (() => string | Promise<string>) | undefined
  ssl?: boolean | object | undefined
  connectionTimeoutMillis?: number | undefined
  [option: string]: unknown
}

export interface PgLockTarget {
  connection: PgConnection
  /**
   * Any non-empty string (at most 1024 UTF-8 bytes, no NUL, no lone
   * surrogate). The advisory key is the first 8 bytes of its SHA-256,
   * big-endian, signed (see `advisoryKey`). Locks are per database: every
   * contender must connect to the same one.
   */
  key: string
  /** Where the fence table `procward_lock_fence` lives (created on first use). Default 'public'. */
  schema?: string | undefined
}

export interface TryPgLockOptions extends PgLockTarget {
  /**
   * Bound on a takeover after the holder's host is lost or cut off, in ms
   * (3000..=2147483647, default 10000): the session's TCP keepalives and
   * tcp_user_timeout are set from it, and the holder probes its session so
   * that `lock.signal` aborts before the server can have released it.
   * Smaller: a faster takeover, more probes (four per safety window),
   * and a shorter stall (event loop, SIGSTOP) that already aborts the signal.
   */
  hostLossMs?: number | undefined
  /** Free text stored with the holder, e.g. 'resync alice' (at most 4096 characters, no NUL). */
  purpose?: string | undefined
}

export interface AcquirePgLockOptions extends TryPgLockOptions {
  /**
   * false or 0 (default): reject at once with ELOCKED when held; true: wait
   * until free; a number: wait at most that many ms (the server's
   * lock_timeout), then ELOCKED. The wait is in the server, never a poll.
   */
  wait?: boolean | number | undefined
  /** Abort while connecting or waiting: AbortError, and no lock left behind. */
  signal?: AbortSignal | undefined
}

export interface PgLockInfo {
  /** Some session holds the advisory lock of this key right now. */
  held: boolean
  /** The procward holder's record, while its very session (backend pid and backend_start) holds the lock; else null. */
  holder: LockHolder | null
  /** Always null: a holder on another host cannot be judged from here. */
  holderRunning: null
}

export declare class PgLock implements AsyncDisposable {
  private constructor()
  readonly key: string
  /**
   * Strictly increasing per key over every acquisition by anyone (a row of
   * `procward_lock_fence`, incremented in the lock's session right after
   * acquiring). Hand it to the resource the lock guards, which rejects a
   * fence older than one it has seen.
   */
  readonly fence: bigint
  /**
   * Aborts when the lock may have been lost: the session failed or ended
   * (server restart, failover, network), or a probe failed or was late
   * (reason code 'ERR_PROCWARD_PG_LOCK_LOST'); and at `release()`
   * ('ERR_PROCWARD_PG_LOCK_RELEASED'). It aborts before the server can have
   * given the lock to another holder. `aborted`, `reason` and
   * `throwIfAborted()` judge the safety window when read, so the first look
   * after a stall (blocked event loop, SIGSTOP) already sees the loss.
   * procward also aborts it before the first callback that runs after such
   * a stall, so signals derived from it (`AbortSignal.any`, fetch's, a child
   * process's) are aborted by then.
   */
  readonly signal: AbortSignal
  /** This process, as recorded beside the fence. */
  readonly holder: LockHolder
  /** The record of a previous holder whose session ended without releasing. */
  readonly reclaimedFrom: LockHolder | null
  /** The lock session's server process id (pg_backend_pid()). */
  readonly backendPid: number
  readonly released: boolean
  /**
   * Clears the record, unlocks and closes the session. Idempotent; never
   * rejects (a session that cannot be reached is cut, and the server drops
   * the lock with it).
   */
  release(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/**
 * Takes the lock on a connection of its own. Rejects with ELOCKED (a
 * `PgLockedError`: code 'ELOCKED', `.key`, `.holder`, `.holderRunning: null`) when held
 * and not waited for; 'ERR_PROCWARD_PG_CONNECTION' when the server cannot
 * be reached (pg's error as `cause`); 'ERR_PROCWARD_PG_QUERY' for an error
 * the server sent (e.g. no right to create the fence table; `cause`).
 */
export declare function acquirePgLock(options: AcquirePgLockOptions): Promise<PgLock>
/** Never waits: the lock, or null when another session holds it. */
export declare function tryPgLock(options: TryPgLockOptions): Promise<PgLock | null>
/** Never takes the lock. */
export declare function readPgLock(options: PgLockTarget): Promise<PgLockInfo>
/**
 * The 64-bit advisory key of a lock key: in SQL,
 * `('x' || left(encode(sha256(convert_to(key, 'UTF8')), 'hex'), 16))::bit(64)::bigint`.
 */
export declare function advisoryKey(key: string): bigint

// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}
