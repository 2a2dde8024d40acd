// The file lock whose holder is a process (lib/lock.js, lib/lock-path.js).

/**
 * The lock file for `name` in `dir`: `dir/<name, encoded>.lock`, so a lock
 * per user, per identity (`resync:${identity}`) or per URL needs no
 * file-name encoding of your own. Any non-empty string is a name. The
 * encoding is one to one (two names never share a file) and stable (a lock
 * is found again by the same name in a later release): letters, digits,
 * `-`, `_` and `.` (not leading) stay, every other UTF-8 byte becomes `%xx`;
 * a name longer than 160 encoded characters keeps a readable head and a
 * SHA-256 of the whole. The result never holds a separator or NUL, is never
 * `.`/`..`, and stays within 255 bytes. Nothing is created.
 * @throws {TypeError} `dir` not a non-empty string without NUL; `name` not a
 *   non-empty string, or with a lone surrogate (it has no UTF-8).
 */
export declare function lockPath(dir: string, name: string): string

/**
 * Takes the lock on `path`: an exclusive `flock(2)` on a fresh open of the
 * file, so the kernel judges who holds it and drops it when the holder's
 * descriptor closes — on `release()`, on exit by any cause, on SIGKILL, even
 * while the dead holder is still an unreaped zombie. No heartbeat or mtime:
 * a stalled event loop never loses a live holder its lock. `flock(1)`,
 * Python's `fcntl.flock` and Go's and Rust's file locks take the same lock.
 * Two acquires in one process (one thread or two workers) exclude each other.
 *
 * The file is created if missing (`mode`, default 0o600, before the umask;
 * the directory must exist), then holds the holder's record as JSON. The
 * file is procward's: empty or a record — acquiring overwrites it and
 * `release()` empties it, so never lock a data file itself. It must not be
 * removed or replaced while held: the next acquirer then takes what the path
 * names now, and the old holder's lock no longer counts (`lock.signal`
 * aborts). A lock ends with `release()` or with its process or worker
 * thread, never with a garbage collection.
 *
 * Linux and macOS take it with `flock`; Windows with `LockFileEx` (an
 * exclusive lock on one byte far past the record, so the record stays
 * readable), where `mode`, `allowNetworkFs` and following a replaced file
 * while waiting do not apply (docs/platforms.md).
 *
 * @throws {TypeError} a non-string, empty or NUL-containing path; bad or
 *   unknown options (`code: 'ERR_INVALID_ARG_TYPE' | 'ERR_INVALID_ARG_VALUE'`).
 * @throws {RangeError} `wait` outside 0..2^31−1 ms, `mode` outside 0..0o777
 *   or without owner read and write (0o600).
 * @throws {LockedError} `code: 'ELOCKED'` when held (after `wait` ms, if given).
 * @throws {Error} `name: 'AbortError'` when `signal` aborts first.
 * @throws {Error} `code: 'ELOOP'` (a symlink), `'EISDIR'` / `'EINVAL'` (not a
 *   regular file, or a file on a kernel pseudo-filesystem: proc, sysfs,
 *   cgroup…; on macOS devfs, fdesc), `'EINVAL'` with `syscall: 'pread'` (not empty and not a
 *   procward record: left untouched), `'EPERM'` (owned by another uid and we
 *   are not root, or more than one hard link), `'ENOTSUP'` (a network
 *   filesystem), `'EAGAIN'` (the file kept being replaced; for a wait: no
 *   free real-time signal on Linux, or 1024 waits in progress), `'ENOENT'`,
 *   `'EACCES'`…
 *   from the OS.
 */
export declare function acquireLock(path: string, options?: AcquireLockOptions): Promise<ProcessLock>

/**
 * Never waits: the lock, or null when another holder has it (also a foreign
 * shared flock). Kept out only by shared locks, it retries for up to 10 ms
 * (a `readLock` probe in the way). Throws as `acquireLock`.
 */
export declare function tryLock(path: string, options?: TryLockOptions): ProcessLock | null

/**
 * Never takes the lock, never blocks, never creates the file: a missing file
 * is not held. Throws for a symlink or a non-regular file, as `acquireLock`.
 */
export declare function readLock(path: string): LockInfo

export interface TryLockOptions {
  /** Free text stored with the holder, e.g. 'resync alice'. At most 4096 characters. */
  purpose?: string | null | undefined
  /**
   * File mode when the file is created, before the umask. Default 0o600;
   * must include owner read and write (0o600).
   */
  mode?: number | undefined
  /**
   * Lock a file on NFS, CIFS/SMB, AFS or 9p (macOS: nfs, smbfs, afpfs,
   * webdav, ftp) anyway. There flock is emulated
   * (NFS maps it to a whole-file lock on the server) and a network partition
   * can leave two holders. Default false: `ENOTSUP`.
   */
  allowNetworkFs?: boolean | undefined
}

export interface AcquireLockOptions extends TryLockOptions {
  /**
   * false (default) or 0: reject at once with ELOCKED when held (kept out
   * only by shared locks — a `readLock` probe — it waits those out for up to
   * 100 ms). true: wait until free. A number: wait at most that many ms, then
   * ELOCKED. Waiting
   * blocks in the kernel on a thread of its own: no polling, and the lock
   * is ours within microseconds of its release or its holder's death. A
   * timeout or an abort interrupts that thread with a signal: on Linux a
   * free real-time signal; on macOS SIGURG, every other SIGURG going on to
   * the handler that was there before (a `process.on('SIGURG')`, a Go
   * library).
   */
  wait?: boolean | number | undefined
  /**
   * Abort while waiting ⇒ AbortError; nothing is left behind and the lock is
   * never taken later. Already aborted ⇒ AbortError, and the file is not touched.
   */
  signal?: AbortSignal | undefined
}

export interface LockHolder {
  pid: number
  /** The holder process's identity, as `getProcessInfo(pid).identity`. */
  identity: string
  hostname: string
  /** ISO 8601. */
  acquiredAt: string
  purpose: string | null
}

export interface LockInfo {
  /**
   * A process holds the lock exclusively right now. Another program's
   * shared flock (`flock -s`) reads as false, yet keeps acquirers out.
   */
  held: boolean
  /** The record in the file: the holder, or one that died without releasing. */
  holder: LockHolder | null
  /** Zombie- and reuse-aware; null when unknowable (another host, no record). */
  holderRunning: boolean | null
}

export declare class ProcessLock {
  private constructor()
  readonly path: string
  /** This process. */
  readonly holder: LockHolder
  /**
   * The record of a previous holder that died (or was killed) without
   * releasing; null after a clean release.
   */
  readonly reclaimedFrom: LockHolder | null
  readonly released: boolean
  /**
   * Aborts when the path no longer names the locked file while it is held:
   * the file removed, renamed away, or replaced by a rename over it, or its
   * directory removed or renamed (a systemd unit's `RuntimeDirectory=` on
   * stop and restart). Another process can then lock the file the path
   * names now, so the work this lock guards must stop. The reason is an
   * `Error` with `code: 'ERR_PROCWARD_LOCK_LOST'`, `path`, and a message
   * naming the path.
   *
   * Watched by the kernel (Linux: inotify; macOS: kqueue, which does not
   * see the directory renamed), not polled, from the first read of
   * `signal` on: a file already gone by then aborts it at once. One inotify
   * fd serves every watched lock of a process. A watch never keeps the
   * process alive and ends with `release()`, after which the signal never
   * aborts. Not watched on Windows (never aborts), nor where no watch can
   * be had (no fd or inotify watch left): then a warning
   * `PROCWARD_LOCK_UNWATCHED` names the path, and the signal never aborts.
   */
  readonly signal: AbortSignal
  /** Truncates the record, then unlocks. Idempotent. Ends the signal's watch. */
  release(): void
  /** `release()` */
  [Symbol.dispose](): void
  /** `release()` */
  [Symbol.asyncDispose](): Promise<void>
}

// Only what is marked `export` is public (the helper types stay private).
// biome-ignore lint/complexity/noUselessEmptyExport: not useless in a .d.ts
export {}
