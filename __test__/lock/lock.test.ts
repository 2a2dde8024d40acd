import { type ChildProcess, spawnSync } from 'node:child_process'
import {
  chmodSync,
  chownSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import os, { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type AcquireLockOptions,
  acquireLock,
  getProcessInfo,
  isProcessRunning,
  type LockInfo,
  type ProcessLock,
  readLock,
  type TryLockOptions,
  tryLock,
} from '../../index.js'
import {
  aliveInProcTable,
  FIXTURES,
  isRoot,
  killZeroSaysAlive,
  leaderExited,
  lines,
  onLines,
  PROCWARD,
  procState,
  run,
  sleep,
  thrown,
  trackProcesses,
  waitFor,
} from '../helpers'

const { others } = trackProcesses()

let dir: string
let n = 0
/** A fresh lock path per test. */
const lockPath = () => join(dir, `l${++n}.lock`)

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'procward-lock-'))
})
afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
})

interface HolderInfo {
  pid: number
  identity: string
  reclaimedFrom: { pid: number } | null
  supervised?: number
  childProcess?: number
}

/** Starts lock-holder.cjs on `path` and waits until it holds the lock. */
async function startHolder(path: string, options: object = {}) {
  const child = others.spawn(
    process.execPath,
    [join(FIXTURES, 'lock-holder.cjs'), PROCWARD, path, JSON.stringify(options)],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  )
  const next = lines(child)
  const info = JSON.parse(await next()) as HolderInfo
  return { child, next, info }
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve()
    else child.once('exit', () => resolve())
  })
}

async function rejection(p: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  try {
    await p
  } catch (e) {
    return e as Error & Record<string, unknown>
  }
  throw new Error('did not reject')
}

const threads = () => readdirSync('/proc/self/task').length
/** procward's lock waiter threads in this process (by their name). */
const lockWaiters = () =>
  readdirSync('/proc/self/task').filter((t) => {
    try {
      return readFileSync(`/proc/self/task/${t}/comm`, 'utf8').trim() === 'procward-lock'
    } catch {
      return false
    }
  }).length

/** Open fds, minus procward's bounded caches (pidfds, /proc/<pid>/stat). */
function fds(): string[] {
  const out: string[] = []
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`)
      if (/pidfd|^\/proc\/\d+\/stat$/.test(target)) continue
      out.push(`${fd} -> ${target}`)
    } catch {
      // the fd readdir itself used
    }
  }
  return out.sort()
}

/** Fds of `pid` open on `path`. */
function fdsOn(pid: number | 'self', path: string): string[] {
  const out: string[] = []
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`) === path) out.push(fd)
    } catch {
      // gone
    }
  }
  return out
}

describe('one holder at a time', () => {
  it('rejects ELOCKED naming the holding process: pid, identity, purpose, running', async () => {
    const path = lockPath()
    const { info } = await startHolder(path, { purpose: 'resync alice' })
    expect(info.identity).toBe(getProcessInfo(info.pid)?.identity)
    const err = await rejection(acquireLock(path))
    expect(err).toBeInstanceOf(Error)
    expect(err.code).toBe('ELOCKED')
    expect(err.path).toBe(path)
    expect(err.holder).toMatchObject({ pid: info.pid, identity: info.identity, purpose: 'resync alice' })
    expect(err.holderRunning).toBe(true)
    expect(err.message).toContain(`pid ${info.pid}`)
    expect(tryLock(path)).toBeNull()
    expect(readLock(path)).toMatchObject({ held: true, holder: { pid: info.pid }, holderRunning: true })
  })

  it('excludes flock(1), and is excluded by it', async () => {
    const path = lockPath()
    const lock = tryLock(path) as ProcessLock
    expect(lock).not.toBeNull()
    expect(spawnSync('flock', ['-n', path, 'true']).status).toBe(1)
    lock.release()
    expect(spawnSync('flock', ['-n', path, 'true']).status).toBe(0)

    const foreign = others.spawn('flock', [path, 'sh', '-c', 'echo locked; exec sleep 30'], { detached: true })
    const next = lines(foreign)
    expect(await next()).toBe('locked')
    expect(tryLock(path)).toBeNull()
    // Held, by a process that wrote no record.
    expect(readLock(path)).toEqual({ held: true, holder: null, holderRunning: null })
    const err = await rejection(acquireLock(path))
    expect(err).toMatchObject({ code: 'ELOCKED', holder: null, holderRunning: null })
    process.kill(-(foreign.pid as number), 'SIGKILL')
    await exited(foreign)
    // flock(1) passed its descriptor on to sleep: free once both are dead.
    await waitFor(() => !readLock(path).held, 5000, 'the flock(1) group to die')
    const mine = tryLock(path)
    expect(mine).not.toBeNull()
    mine?.release()
  })

  it('excludes a second acquire in the same process and thread', async () => {
    const path = lockPath()
    const a = await acquireLock(path)
    expect(tryLock(path)).toBeNull()
    await expect(acquireLock(path)).rejects.toMatchObject({ code: 'ELOCKED', holder: { pid: process.pid } })
    const waiting = acquireLock(path, { wait: true })
    await sleep(30)
    a.release()
    const b = await waiting
    expect(b.holder.pid).toBe(process.pid)
    expect(b.reclaimedFrom).toBeNull()
    b.release()
  })
})

describe('a dead holder never pins the lock', () => {
  it('is free when its holder is SIGKILLed and left a zombie, and stays free while it is one', async () => {
    const path = lockPath()
    const parent = others.spawn(join(FIXTURES, 'lock-zombie-parent.sh'), [PROCWARD, path, '{"purpose":"zombie"}'])
    const next = lines(parent)
    const holderPid = Number(await next())
    const info = JSON.parse(await next()) as HolderInfo
    expect(info.pid).toBe(holderPid)
    expect(readLock(path)).toMatchObject({ held: true, holderRunning: true })
    const waiting = acquireLock(path, { wait: true, purpose: 'after the zombie' })
    process.kill(holderPid, 'SIGKILL')
    const lock = await waiting
    expect(lock.reclaimedFrom).toMatchObject({ pid: holderPid, identity: info.identity, purpose: 'zombie' })
    // Its parent never reaps it. (Node's main thread can show Z while its
    // other threads still exit; the lock drops when the last one has closed
    // the files, before the process is a zombie as a whole.)
    await waitFor(() => procState(holderPid) === 'Z', 5000, 'the holder to become a zombie')
    // The pattern this replaces: kill(pid, 0) still calls it alive.
    expect(killZeroSaysAlive(holderPid)).toBe(true)
    lock.release()
    expect(readLock(path)).toEqual({ held: false, holder: null, holderRunning: null })
    // A dead-zombie record: free, not running, taken at once.
    const again = await startHolder(path, { purpose: 'second' })
    again.child.kill('SIGKILL')
    await exited(again.child)
    expect(procState(holderPid)).toBe('Z')
    const third = tryLock(path)
    expect(third?.reclaimedFrom).toMatchObject({ pid: again.info.pid, purpose: 'second' })
    third?.release()
  })

  it('passes to a waiter when the holder releases, with no reclaimedFrom', async () => {
    const path = lockPath()
    const holder = await startHolder(path)
    const waiting = acquireLock(path, { wait: true })
    await sleep(50)
    holder.child.stdin?.write('release\n')
    expect(await holder.next()).toBe('released')
    const lock = await waiting
    expect(lock.reclaimedFrom).toBeNull()
    expect(lock.holder).toMatchObject({ pid: process.pid, purpose: null })
    lock.release()
  })

  it('passes to a waiter when the holder is SIGKILLed, with reclaimedFrom', async () => {
    const path = lockPath()
    const holder = await startHolder(path, { purpose: 'doomed' })
    const waiting = acquireLock(path, { wait: true })
    await sleep(50)
    holder.child.kill('SIGKILL')
    const lock = await waiting
    expect(lock.reclaimedFrom).toMatchObject({ pid: holder.info.pid, purpose: 'doomed' })
    lock.release()
  })

  it.skipIf(process.platform !== 'linux')(
    'and the liveness API agrees with the lock about the dying holder at once (40 trials)',
    async () => {
      // The lock is free the moment the holder's files close in do_exit,
      // before it is a zombie and before a pidfd reports its exit: in that
      // moment isProcessRunning and getProcessInfo must not call it running.
      const disagreements: string[] = []
      for (let i = 0; i < 40; i++) {
        const path = lockPath()
        const holder = await startHolder(path, { purpose: `doomed ${i}` })
        const waiting = acquireLock(path, { wait: true })
        await sleep(20)
        holder.child.kill('SIGKILL')
        const lock = await waiting
        const { pid, identity } = holder.info
        const running = isProcessRunning(pid, identity)
        const runningBare = isProcessRunning(pid)
        const state = getProcessInfo(pid)?.state ?? 'gone'
        lock.release()
        if (lock.reclaimedFrom?.pid !== pid) disagreements.push(`trial ${i}: reclaimedFrom ${lock.reclaimedFrom?.pid}`)
        if (running || runningBare || !['exiting', 'zombie', 'dead', 'gone'].includes(state)) {
          disagreements.push(`trial ${i}: running ${running}/${runningBare}, state ${state}`)
        }
        await exited(holder.child)
      }
      expect(disagreements).toEqual([])
    },
    // 40 holders started (a Node each): a loaded machine takes more than the default 30 s.
    120_000,
  )

  it('is not kept by children the holder started', async () => {
    const path = lockPath()
    const holder = await startHolder(path, { children: true })
    const { supervised, childProcess } = holder.info as Required<HolderInfo>
    others.track(supervised)
    others.track(childProcess)
    // Neither child has the lock file open (O_CLOEXEC).
    expect(fdsOn(supervised, path)).toEqual([])
    expect(fdsOn(childProcess, path)).toEqual([])
    holder.child.kill('SIGKILL')
    await exited(holder.child)
    expect(aliveInProcTable(supervised)).toBe(true)
    expect(aliveInProcTable(childProcess)).toBe(true)
    const lock = tryLock(path)
    expect(lock?.reclaimedFrom?.pid).toBe(holder.info.pid)
    lock?.release()
  })

  it('Symbol.dispose and Symbol.asyncDispose release', async () => {
    const path = lockPath()
    const a = tryLock(path) as ProcessLock
    a[Symbol.dispose]()
    expect(a.released).toBe(true)
    const b = await acquireLock(path)
    await b[Symbol.asyncDispose]()
    expect(b.released).toBe(true)
    expect(readFileSync(path, 'utf8')).toBe('')
    expect(tryLock(path)?.release()).toBeUndefined()
  })

  it('a clean release leaves no record; a death leaves one', async () => {
    const path = lockPath()
    const first = await acquireLock(path, { purpose: 'clean' })
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual(first.holder)
    first.release()
    expect(first.released).toBe(true)
    first.release() // idempotent
    expect(readFileSync(path, 'utf8')).toBe('')
    expect(readLock(path)).toEqual({ held: false, holder: null, holderRunning: null })
    const second = await acquireLock(path)
    expect(second.reclaimedFrom).toBeNull()
    second.release()

    const dead = await startHolder(path, { purpose: 'dies' })
    dead.child.kill('SIGKILL')
    await exited(dead.child)
    const third = await acquireLock(path)
    expect(third.reclaimedFrom).toMatchObject({ pid: dead.info.pid, purpose: 'dies' })
    third.release()
  })
})

describe('stress', () => {
  it('4 processes × 250 cycles, holders SIGKILLed mid-run: no lost and no double increment', async () => {
    const path = lockPath()
    const counter = join(dir, 'counter')
    writeFileSync(counter, '')
    const CONTENDERS = 4
    const CYCLES = 250
    const values: number[] = []
    let reclaims = 0
    let kills = 0
    const done = Array(CONTENDERS).fill(0)

    const start = (i: number): Promise<void> => {
      const child = others.spawn(process.execPath, [
        join(FIXTURES, 'lock-counter.cjs'),
        PROCWARD,
        path,
        counter,
        String(CYCLES - done[i]),
      ])
      onLines(child.stdout, (line) => {
        const [v, r] = line.split(' ')
        values.push(Number(v))
        reclaims += Number(r)
        done[i]++
      })
      return new Promise((resolve, reject) => {
        child.once('exit', (code, signal) => {
          if (signal === 'SIGKILL') resolve(start(i))
          else if (code === 0) resolve()
          else reject(new Error(`contender ${i} exited with ${code ?? signal}`))
        })
      })
    }
    let finished = false
    const all = Promise.all(Array.from({ length: CONTENDERS }, (_, i) => start(i))).finally(() => {
      finished = true
    })
    // Kill whoever holds the lock, six times, spread over the run, while the
    // others wait.
    while (!finished && kills < 6) {
      const holder = readLock(path).holder
      if (holder && aliveInProcTable(holder.pid) && holder.pid !== process.pid) {
        process.kill(holder.pid, 'SIGKILL')
        kills++
        const seen = values.length
        await waitFor(() => finished || values.length >= seen + 60, 20_000, 'progress')
      } else {
        await sleep(2)
      }
    }
    await all
    const final = Number(readFileSync(counter, 'latin1').trim())
    expect(values.length).toBe(CONTENDERS * CYCLES)
    // No double increment: every reported value was written by one holder alone.
    expect(new Set(values).size).toBe(values.length)
    // No lost increment: the counter counts every completed cycle, plus at
    // most one per killed holder (written, then killed before reporting).
    expect(final).toBeGreaterThanOrEqual(values.length)
    expect(final - values.length).toBeLessThanOrEqual(kills)
    expect(Math.max(...values)).toBeLessThanOrEqual(final)
    expect(kills).toBeGreaterThan(0)
    console.log(`stress: ${values.length} cycles, ${kills} holders killed, ${reclaims} reclaims, counter ${final}`)
  })
})

describe('paths', () => {
  it('refuses a symlink with ELOOP and leaves its target alone', async () => {
    const target = join(dir, 'target')
    writeFileSync(target, 'precious')
    const link = join(dir, 'link')
    symlinkSync(target, link)
    expect(thrown(() => tryLock(link))).toMatchObject({ code: 'ELOOP', path: link })
    await expect(acquireLock(link)).rejects.toMatchObject({ code: 'ELOOP' })
    expect(thrown(() => readLock(link))).toMatchObject({ code: 'ELOOP' })
    expect(readFileSync(target, 'utf8')).toBe('precious')
    const dangling = join(dir, 'dangling')
    symlinkSync(join(dir, 'nowhere'), dangling)
    expect(thrown(() => tryLock(dangling))).toMatchObject({ code: 'ELOOP' })
    expect(existsSync(join(dir, 'nowhere'))).toBe(false)
  })

  it('refuses a directory and other non-regular files', () => {
    expect(thrown(() => tryLock(dir))).toMatchObject({ code: 'EISDIR', path: dir })
    expect(thrown(() => readLock(dir))).toMatchObject({ code: 'EISDIR' })
    const fifo = join(dir, 'fifo')
    spawnSync('mkfifo', [fifo])
    expect(thrown(() => tryLock(fifo))).toMatchObject({ code: 'EINVAL' })
    expect(thrown(() => tryLock('/dev/null'))).toMatchObject({ code: 'EINVAL' })
  })

  it('needs the parent directory to exist (ENOENT); readLock calls a missing file free', async () => {
    const path = join(dir, 'no', 'such', 'dir.lock')
    expect(thrown(() => tryLock(path))).toMatchObject({ code: 'ENOENT', syscall: 'open', path })
    await expect(acquireLock(path, { wait: true })).rejects.toMatchObject({ code: 'ENOENT' })
    const missing = join(dir, 'missing.lock')
    expect(readLock(missing)).toEqual({ held: false, holder: null, holderRunning: null })
    expect(existsSync(missing)).toBe(false)
  })

  it.each([
    ['a number', 1, TypeError, 'ERR_INVALID_ARG_TYPE'],
    ['undefined', undefined, TypeError, 'ERR_INVALID_ARG_TYPE'],
    ['a Buffer', Buffer.from('/tmp/x'), TypeError, 'ERR_INVALID_ARG_TYPE'],
    ['an empty string', '', TypeError, 'ERR_INVALID_ARG_VALUE'],
    ['a NUL byte', '/tmp/a\0b', TypeError, 'ERR_INVALID_ARG_VALUE'],
  ])('rejects %s as a path', async (_, bad, Err, code) => {
    const p = bad as string
    expect(thrown(() => tryLock(p))).toBeInstanceOf(Err)
    expect(thrown(() => tryLock(p))).toMatchObject({ code })
    expect(thrown(() => readLock(p))).toMatchObject({ code })
    const err = await rejection(acquireLock(p))
    expect(err).toBeInstanceOf(Err)
    expect(err.code).toBe(code)
  })

  it('creates the file 0600 unless mode says otherwise', () => {
    const a = lockPath()
    tryLock(a)?.release()
    expect(statSync(a).mode & 0o777).toBe(0o600)
    const b = lockPath()
    tryLock(b, { mode: 0o640 })?.release()
    expect(statSync(b).mode & 0o777).toBe(0o640 & ~process.umask())
    // An existing file keeps its mode.
    tryLock(a, { mode: 0o644 })?.release()
    expect(statSync(a).mode & 0o777).toBe(0o600)
  })

  it("refuses another uid's file with EPERM (unless root)", async (ctx) => {
    if (!isRoot) return ctx.skip('needs root to run a contender as nobody')
    const shared = join(dir, 'shared')
    mkdirSync(shared)
    chmodSync(dir, 0o755)
    chmodSync(shared, 0o777)
    const rootOwned = join(shared, 'root.lock')
    writeFileSync(rootOwned, '')
    chmodSync(rootOwned, 0o666) // writable by anyone: only the owner check refuses it
    const own = join(shared, 'own.lock')
    const script = `
      const { tryLock, readLock } = require(${JSON.stringify(PROCWARD)})
      const out = { uid: process.getuid() }
      try { tryLock(${JSON.stringify(rootOwned)}); out.root = 'locked' } catch (e) { out.root = e.code }
      out.read = readLock(${JSON.stringify(rootOwned)}).held
      const mine = tryLock(${JSON.stringify(own)})
      out.own = mine !== null
      mine?.release()
      console.log(JSON.stringify(out))
    `
    // This node, or (when nobody may not run it, e.g. one cached under
    // /root) the one on PATH: the lock is the same native code either way.
    let out = ''
    let failure = ''
    for (const node of [process.execPath, 'node']) {
      try {
        ;({ stdout: out } = await run(node, ['-e', script], { uid: 65534, gid: 65534 }))
        break
      } catch (e) {
        failure = (e as Error).message.split('\n')[0] ?? ''
      }
    }
    if (out === '') return ctx.skip(`cannot run node as nobody here: ${failure}`)
    expect(JSON.parse(out)).toEqual({ uid: 65534, root: 'EPERM', read: false, own: true })
    expect(statSync(own).uid).toBe(65534)
    // Root may lock a file someone else owns.
    chownSync(rootOwned, 65534, 65534)
    const lock = tryLock(rootOwned)
    expect(lock).not.toBeNull()
    lock?.release()
  })
})

describe('options', () => {
  it.each([
    ['{ wiat: true }', { wiat: true }, TypeError, 'ERR_INVALID_ARG_VALUE'],
    ['{ wait: -1 }', { wait: -1 }, RangeError, 'ERR_OUT_OF_RANGE'],
    ['{ wait: Number.NaN }', { wait: Number.NaN }, RangeError, 'ERR_OUT_OF_RANGE'],
    ['{ wait: Number.POSITIVE_INFINITY }', { wait: Number.POSITIVE_INFINITY }, RangeError, 'ERR_OUT_OF_RANGE'],
    ['{ wait: 2 ** 31 }', { wait: 2 ** 31 }, RangeError, 'ERR_OUT_OF_RANGE'],
    ["{ wait: '100' }", { wait: '100' }, TypeError, 'ERR_INVALID_ARG_TYPE'],
    ['{ mode: 0o1000 }', { mode: 0o1000 }, RangeError, 'ERR_OUT_OF_RANGE'],
    ['{ mode: -1 }', { mode: -1 }, RangeError, 'ERR_OUT_OF_RANGE'],
    ['{ mode: 1.5 }', { mode: 1.5 }, RangeError, 'ERR_OUT_OF_RANGE'],
    ['{ mode: 0 }', { mode: 0 }, RangeError, 'ERR_OUT_OF_RANGE'],
    ['{ mode: -0 }', { mode: -0 }, RangeError, 'ERR_OUT_OF_RANGE'],
    ['{ mode: 0o400 } (no owner write)', { mode: 0o400 }, RangeError, 'ERR_OUT_OF_RANGE'],
    ['{ mode: 0o277 } (no owner read)', { mode: 0o277 }, RangeError, 'ERR_OUT_OF_RANGE'],
    ["{ mode: '600' }", { mode: '600' }, TypeError, 'ERR_INVALID_ARG_TYPE'],
    ['{ purpose: 7 }', { purpose: 7 }, TypeError, 'ERR_INVALID_ARG_TYPE'],
    ['{ purpose: 4097 characters }', { purpose: 'x'.repeat(4097) }, RangeError, 'ERR_OUT_OF_RANGE'],
    ['{ signal: {} }', { signal: {} }, TypeError, 'ERR_INVALID_ARG_TYPE'],
    ["{ allowNetworkFs: 'yes' }", { allowNetworkFs: 'yes' }, TypeError, 'ERR_INVALID_ARG_TYPE'],
    ['null', null, TypeError, 'ERR_INVALID_ARG_TYPE'],
    ["'fast'", 'fast', TypeError, 'ERR_INVALID_ARG_TYPE'],
  ])('acquireLock rejects %s and creates nothing', async (_, options, Err, code) => {
    const path = lockPath()
    const err = await rejection(acquireLock(path, options as never))
    expect(err).toBeInstanceOf(Err)
    expect(err.code).toBe(code)
    expect(existsSync(path)).toBe(false)
  })

  it('takes undefined for every option (exactOptionalPropertyTypes)', async () => {
    const path = lockPath()
    const tryOptions: TryLockOptions = { purpose: undefined, mode: undefined, allowNetworkFs: undefined }
    const options: AcquireLockOptions = { ...tryOptions, wait: undefined, signal: undefined }
    const lock = await acquireLock(path, options)
    const info: LockInfo = readLock(path)
    expect(info.held).toBe(true)
    expect(tryLock(path, tryOptions)).toBeNull()
    lock.release()
  })

  it('tryLock takes only its own options', () => {
    const path = lockPath()
    expect(thrown(() => tryLock(path, { wait: true } as never))).toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' })
    expect(existsSync(path)).toBe(false)
    const lock = tryLock(path, { purpose: 'p', mode: 0o600, allowNetworkFs: false })
    expect(lock?.holder.purpose).toBe('p')
    lock?.release()
  })

  it('accepts the extremes: wait 0 (no wait) and 2^31-1', async () => {
    const path = lockPath()
    const lock = tryLock(path) as ProcessLock
    await expect(acquireLock(path, { wait: 0 })).rejects.toMatchObject({ code: 'ELOCKED' })
    const ac = new AbortController()
    const long = acquireLock(path, { wait: 2 ** 31 - 1, signal: ac.signal })
    ac.abort()
    await expect(long).rejects.toMatchObject({ name: 'AbortError' })
    lock.release()
  })
})

describe('waiting is bounded and leaves nothing behind', () => {
  it('wait: 50 on a held lock rejects ELOCKED after at least 50 ms', async () => {
    const path = lockPath()
    const { info } = await startHolder(path, { purpose: 'busy' })
    const t0 = performance.now()
    const err = await rejection(acquireLock(path, { wait: 50 }))
    expect(performance.now() - t0).toBeGreaterThanOrEqual(49.5)
    expect(err).toMatchObject({ code: 'ELOCKED', holder: { pid: info.pid, purpose: 'busy' }, holderRunning: true })
  })

  it('an already-aborted signal rejects AbortError without touching the file', async () => {
    const path = lockPath()
    const err = await rejection(acquireLock(path, { signal: AbortSignal.abort() }))
    expect(err.name).toBe('AbortError')
    expect(existsSync(path)).toBe(false)
  })

  it('after an abort or a timeout: no thread, no fd, and the lock is never taken later', async () => {
    const path = lockPath()
    const holder = await startHolder(path)
    // Warm up whatever starts lazily (napi's threads, libuv's pool).
    await rejection(acquireLock(path, { wait: 1 }))
    await sleep(20)
    const baseThreads = threads()
    const baseFds = fds()

    const ac = new AbortController()
    const aborted = acquireLock(path, { wait: true, signal: ac.signal, purpose: 'aborted' })
    const timedOut = acquireLock(path, { wait: 100, purpose: 'timed out' })
    // The two waiters, blocked in flock (threads of their own, started a moment after the calls).
    await waitFor(() => lockWaiters() >= 2 && fdsOn('self', path).length === 2, 5000, 'the two waiters')
    ac.abort(new Error('changed my mind'))
    const err = await rejection(aborted)
    expect(err).toMatchObject({ name: 'AbortError', code: 'ABORT_ERR' })
    expect((err.cause as Error).message).toBe('changed my mind')
    await expect(timedOut).rejects.toMatchObject({ code: 'ELOCKED' })
    // A waiter thread reports its result, then ends: a moment after the rejection.
    const ended = () => lockWaiters() === 0 && (process.versions.bun !== undefined || threads() === baseThreads)
    await waitFor(ended, 5000, 'the waiter threads to end')
    expect(fds()).toEqual(baseFds)
    expect(fdsOn('self', path)).toEqual([])

    // The holder lets go: nobody in this process picks the lock up.
    holder.child.stdin?.write('release\n')
    expect(await holder.next()).toBe('released')
    await sleep(50)
    expect(readLock(path)).toEqual({ held: false, holder: null, holderRunning: null })
    const other = await startHolder(path, { purpose: 'next' })
    expect(other.info.reclaimedFrom).toBeNull()
  })

  it('an abort racing the release never leaves the lock taken', async () => {
    const path = lockPath()
    for (let i = 0; i < 40; i++) {
      const holder = tryLock(path) as ProcessLock
      const ac = new AbortController()
      const waiting = acquireLock(path, { wait: true, signal: ac.signal })
      await sleep(i % 3)
      // Both in one turn: the grant and the abort arrive together.
      holder.release()
      ac.abort()
      await expect(waiting).rejects.toMatchObject({ name: 'AbortError' })
      // Whether the waiter had it or not, it is free now.
      const again = tryLock(path)
      expect(again).not.toBeNull()
      again?.release()
    }
  })
})

describe('readLock', () => {
  it('reports held / holder / holderRunning without taking or blocking', async () => {
    const path = lockPath()
    const { info } = await startHolder(path, { purpose: 'watched' })
    const seen = readLock(path)
    expect(seen).toEqual({
      held: true,
      holder: {
        pid: info.pid,
        identity: info.identity,
        hostname: expect.any(String),
        acquiredAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        purpose: 'watched',
      },
      holderRunning: true,
    })
  })

  it('reads a foreign file as no holder, and never overwrites it', async () => {
    const path = lockPath()
    writeFileSync(path, '12345\n', { mode: 0o600 })
    expect(readLock(path)).toEqual({ held: false, holder: null, holderRunning: null })
    expect(thrown(() => tryLock(path))).toMatchObject({ code: 'EINVAL', syscall: 'pread', path })
    await expect(acquireLock(path, { wait: true })).rejects.toMatchObject({ code: 'EINVAL', path })
    expect(readFileSync(path, 'utf8')).toBe('12345\n')
  })

  it('takes over a record torn by a holder killed mid-write, as no holder', () => {
    for (const torn of ['{', '{"pid":', '{"pid":12', '{"pid":1,"identity":"p']) {
      const path = lockPath()
      writeFileSync(path, torn, { mode: 0o600 })
      expect(readLock(path)).toEqual({ held: false, holder: null, holderRunning: null })
      const lock = tryLock(path) as ProcessLock
      expect(lock.reclaimedFrom).toBeNull()
      lock.release()
    }
  })

  it("another program's shared lock: not held, yet it keeps acquirers out; wait: false waits it out briefly", async () => {
    const path = lockPath()
    writeFileSync(path, '', { mode: 0o600 })
    const shared = others.spawn('flock', ['-s', path, 'sh', '-c', 'echo locked; exec sleep 30'], { detached: true })
    expect(await lines(shared)()).toBe('locked')
    expect(readLock(path)).toEqual({ held: false, holder: null, holderRunning: null })
    expect(tryLock(path)).toBeNull()
    // Taken for a readLock probe at first: waited out in the kernel (up to
    // 100 ms) before ELOCKED. A lower bound only.
    const t0 = performance.now()
    const err = await rejection(acquireLock(path))
    expect(performance.now() - t0).toBeGreaterThanOrEqual(99)
    expect(err).toMatchObject({ code: 'ELOCKED', holder: null, holderRunning: null })
    process.kill(-(shared.pid as number), 'SIGKILL')
    await exited(shared)
    await waitFor(
      () => {
        const lock = tryLock(path)
        lock?.release()
        return lock !== null
      },
      5000,
      'the shared holders to die',
    )
  })

  it('acquirers racing readLock probes in another process still get the lock', async () => {
    const path = lockPath()
    const reader = (ms: number) =>
      others.spawn(process.execPath, [join(FIXTURES, 'lock-reader.cjs'), PROCWARD, path, String(ms)])
    // Correct answers from another process.
    const held = tryLock(path) as ProcessLock
    const one = reader(0)
    const oneLines = lines(one)
    await oneLines()
    expect(JSON.parse(await oneLines())).toEqual({ held: 1, free: 0 })
    held.release()

    // A reader probing as fast as it can; we take and release meanwhile.
    // Each acquire that meets a probe waits it out instead of reporting ELOCKED.
    const hammer = reader(1500)
    const next = lines(hammer)
    expect(await next()).toBe('started')
    let taken = 0
    const until = Date.now() + 1000
    while (Date.now() < until) {
      const lock = await acquireLock(path)
      lock.release()
      taken++
    }
    const counts = JSON.parse(await next())
    expect(counts.free).toBeGreaterThan(0)
    expect(taken).toBeGreaterThan(0)
  })
})

describe("the file is procward's", () => {
  for (const how of ['renamed over', 'removed'] as const) {
    it(`a waiter never ends up holding a file that was ${how} while it waited`, async () => {
      const path = lockPath()
      const holder = await startHolder(path)
      const waiting = acquireLock(path, { wait: true })
      await sleep(50)
      if (how === 'removed') rmSync(path)
      else {
        writeFileSync(`${path}.new`, '', { mode: 0o600 })
        renameSync(`${path}.new`, path)
      }
      holder.child.stdin?.write('release\n')
      expect(await holder.next()).toBe('released')
      const lock = await waiting
      // What the path names is what it holds: nobody else gets it now.
      expect(tryLock(path)).toBeNull()
      const other = await run(process.execPath, [
        '-e',
        `console.log(require(${JSON.stringify(PROCWARD)}).tryLock(${JSON.stringify(path)}) === null)`,
      ])
      expect(other.stdout.trim()).toBe('true')
      expect(readLock(path)).toMatchObject({ held: true, holder: { pid: process.pid } })
      lock.release()
    })
  }

  it('a file replaced while held: the next acquirer takes the new file, the old lock no longer counts', () => {
    const path = lockPath()
    const a = tryLock(path) as ProcessLock
    writeFileSync(`${path}.new`, '', { mode: 0o600 })
    renameSync(`${path}.new`, path)
    expect(readLock(path)).toEqual({ held: false, holder: null, holderRunning: null })
    const b = tryLock(path) as ProcessLock
    expect(b).not.toBeNull()
    expect(readLock(path)).toMatchObject({ held: true, holder: { pid: process.pid } })
    a.release()
    expect(readLock(path).held).toBe(true)
    b.release()
  })

  it('refuses a data file, a hard link and kernel files, and writes nothing into them', async () => {
    const data = lockPath()
    writeFileSync(data, 'important', { mode: 0o600 })
    expect(thrown(() => tryLock(data))).toMatchObject({ code: 'EINVAL', path: data })
    expect(readFileSync(data, 'utf8')).toBe('important')

    const target = lockPath()
    writeFileSync(target, '', { mode: 0o600 })
    const link = lockPath()
    linkSync(target, link)
    expect(thrown(() => tryLock(link))).toMatchObject({ code: 'EPERM', syscall: 'open', path: link })
    await expect(acquireLock(target, { wait: true })).rejects.toMatchObject({ code: 'EPERM' })
    expect(readFileSync(target, 'utf8')).toBe('')

    // Not 'flock': refused before any read.
    expect(thrown(() => tryLock('/proc/self/status'))).toMatchObject({ code: 'EINVAL', syscall: 'open' })
    const hostname = readFileSync('/proc/sys/kernel/hostname', 'utf8')
    const err = thrown(() => tryLock('/proc/sys/kernel/hostname'))
    // As root: refused as a kernel file; otherwise already as another uid's.
    expect(err).toMatchObject({ code: isRoot ? 'EINVAL' : 'EPERM' })
    expect(readFileSync('/proc/sys/kernel/hostname', 'utf8')).toBe(hostname)
  })
})

describe('worker threads', () => {
  function worker(path: string, name: string) {
    const w = new Worker(join(FIXTURES, 'lock-worker.cjs'), { workerData: { procward: PROCWARD, path, name } })
    const replies: ((m: { op: string; ok?: boolean; error?: string; reclaimed?: boolean }) => void)[] = []
    w.on('message', (m) => replies.shift()?.(m))
    const ready = new Promise((r) => replies.push(r))
    const ask = (msg: object) =>
      new Promise<{ op: string; ok?: boolean; error?: string; reclaimed?: boolean }>((resolve) => {
        replies.push(resolve)
        w.postMessage(msg)
      })
    return { w, ready, ask }
  }

  it('two workers exclude each other, and a waiter in one gets it from the other', async () => {
    const path = lockPath()
    const a = worker(path, 'a')
    const b = worker(path, 'b')
    await Promise.all([a.ready, b.ready])
    expect(await a.ask({ op: 'acquire', wait: false })).toMatchObject({ ok: true })
    expect(await b.ask({ op: 'try' })).toMatchObject({ ok: false })
    expect(await b.ask({ op: 'acquire', wait: false })).toMatchObject({ ok: false, error: 'ELOCKED' })
    expect(tryLock(path)).toBeNull()
    const waiting = b.ask({ op: 'acquire', wait: true })
    await sleep(30)
    await a.ask({ op: 'release' })
    expect(await waiting).toMatchObject({ ok: true, reclaimed: false })
    expect(readLock(path).holder?.purpose).toBe('b')
    await b.ask({ op: 'release' })
    await Promise.all([a.w.terminate(), b.w.terminate()])
  })

  it('a worker that ends releases its lock; one that ends while waiting leaves no thread and takes nothing', async () => {
    const path = lockPath()
    const baseThreads = threads()
    const a = worker(path, 'holder')
    await a.ready
    expect(await a.ask({ op: 'acquire', wait: false })).toMatchObject({ ok: true })
    await a.w.terminate()
    expect(readLock(path)).toEqual({ held: false, holder: null, holderRunning: null })

    const holder = tryLock(path) as ProcessLock
    const b = worker(path, 'waiter')
    await b.ready
    b.w.postMessage({ op: 'acquire', wait: true })
    await sleep(50)
    await b.w.terminate()
    // Bun starts threads of its own at will (its pools), so there only
    // procward's waiter threads are counted.
    const ended = () => lockWaiters() === 0 && (process.versions.bun !== undefined || threads() === baseThreads)
    await waitFor(ended, 5000, 'the worker and its waiter thread to end')
    holder.release()
    await sleep(50)
    expect(readLock(path).held).toBe(false)
    const again = tryLock(path)
    expect(again?.reclaimedFrom).toBeNull()
    again?.release()
  })
})

describe('the signal that interrupts a wait', () => {
  /** Signals this process has a handler for (`SigCgt` of /proc/self/status). */
  function caughtSignals(): Set<number> {
    const line = readFileSync('/proc/self/status', 'utf8').match(/^SigCgt:\s*([0-9a-f]+)$/m)
    const mask = BigInt(`0x${line?.[1] ?? '0'}`)
    const out = new Set<number>()
    for (let sig = 1; sig <= 64; sig++) if ((mask >> BigInt(sig - 1)) & 1n) out.add(sig)
    return out
  }
  const SIGURG = 23

  it('is the one PROCWARD_LOCK_INTERRUPT chose: SIGURG (macOS) or a real-time signal (Linux)', async () => {
    const path = lockPath()
    const holder = tryLock(path) as ProcessLock
    const ac = new AbortController()
    const waiting = acquireLock(path, { wait: true, signal: ac.signal })
    await sleep(20)
    ac.abort()
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' })
    holder.release()
    const caught = caughtSignals()
    if (process.env.PROCWARD_LOCK_INTERRUPT === 'sigurg') {
      expect(caught.has(SIGURG)).toBe(true)
    } else {
      expect(caught.has(SIGURG)).toBe(false)
      expect([...caught].some((sig) => sig >= 34)).toBe(true)
    }
  })

  // In a process of its own, SIGURG flavour whatever this run uses: the
  // order in which the user's handler and ours arrive is the test.
  const script = (listenFirst: boolean) => `
    const procward = require(${JSON.stringify(PROCWARD)})
    const path = ${JSON.stringify(join(dir, `sigurg-${listenFirst}.lock`))}
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
    let urgent = 0
    const listen = () => process.on('SIGURG', () => urgent++)
    async function abortedWait(whileWaiting) {
      const ac = new AbortController()
      const waiting = procward.acquireLock(path, { wait: true, signal: ac.signal })
      await sleep(30)
      await whileWaiting()
      let settled = false
      waiting.then(() => (settled = true), () => (settled = true))
      await sleep(30)
      if (settled) throw new Error('the wait ended without an abort')
      ac.abort()
      try { await waiting; throw new Error('resolved') } catch (e) { if (e.name !== 'AbortError') throw e }
    }
    async function sigurg(expected) {
      process.kill(process.pid, 'SIGURG')
      for (let i = 0; i < 200 && urgent < expected; i++) await sleep(5)
      if (urgent !== expected) throw new Error('SIGURG listener saw ' + urgent + ', expected ' + expected)
    }
    ;(async () => {
      const holder = procward.tryLock(path)
      if (${listenFirst}) {
        listen()
        // A SIGURG while waiting reaches the listener; the wait goes on.
        await abortedWait(() => sigurg(1))
        await sigurg(2)
      } else {
        // Nobody listens: ignored, as by default; the wait goes on.
        await abortedWait(async () => process.kill(process.pid, 'SIGURG'))
        listen() // Node takes SIGURG over from us...
        await sigurg(1)
        // ...and our next cancel takes it back, chaining to Node's.
        await abortedWait(async () => {})
        await sigurg(2)
      }
      await abortedWait(() => sigurg(3))
      holder.release()
      const again = procward.tryLock(path)
      if (again === null) throw new Error('an aborted waiter kept the lock')
      again.release()
      console.log('ok ' + urgent)
    })().catch((e) => { console.error(e); process.exit(1) })
  `

  it.each([
    ['a SIGURG listener set before the first wait', true],
    ['a SIGURG listener set after it, and no handler before it', false],
  ])('shares SIGURG with %s: every SIGURG reaches it, every abort still ends its wait', async (_, listenFirst) => {
    const { stdout } = await run(process.execPath, ['-e', script(listenFirst)], {
      env: { ...process.env, PROCWARD_LOCK_INTERRUPT: 'sigurg' },
      timeout: 20_000,
    })
    expect(stdout.trim()).toBe('ok 3')
  })
})

describe('holderRunning of a holder whose main thread is gone', () => {
  it('is true while another thread of it runs and the lock is held; false once it is killed and the lock free', async (ctx) => {
    const path = lockPath()
    const pid = await leaderExited(others, path, dir, (pid) => {
      // The record procward writes, for this holder (taken while it runs whole).
      const identity = getProcessInfo(pid)?.identity
      const record = { pid, identity, hostname: os.hostname(), acquiredAt: new Date().toISOString(), purpose: null }
      writeFileSync(path, `${JSON.stringify(record)}\n`)
    })
    if (pid === null) return ctx.skip('needs cc to build fixtures/leader-exits.c')
    // Its main thread is a zombie and exiting; the other thread holds the flock.
    expect(readLock(path)).toMatchObject({ held: true, holder: { pid }, holderRunning: true })
    process.kill(pid, 'SIGKILL')
    await waitFor(() => !readLock(path).held, 5000, 'the lock to be free')
    await waitFor(() => readLock(path).holderRunning === false, 5000, 'the holder to be gone')
  })
})
