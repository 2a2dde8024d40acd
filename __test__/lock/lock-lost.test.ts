// ProcessLock.signal: aborted when the path no longer names the locked file
// while it is held (removed, renamed over or away, its directory removed —
// a unit's RuntimeDirectory= on stop and restart).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { chmodSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type ProcessLock, readLock, tryLock } from '../../index.js'
import { CLI, lines, NODE, openFds, PROCWARD, run, trackProcesses } from '../helpers'

const { others } = trackProcesses()
const FIXTURE = (name: string) => join(__dirname, 'fixtures', name)

let root: string
let n = 0
/** A fresh directory per test, as a unit's RuntimeDirectory= would be. */
const freshDir = () => {
  const d = join(root, `d${++n}`)
  mkdirSync(d)
  return d
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'procward-lock-lost-'))
})
afterAll(() => {
  rmSync(root, { recursive: true, force: true })
})

interface Lost {
  code: string
  path: string
  message: string
}

/** Starts watching-holder.cjs on `path`; resolves once it holds the lock and watches it. */
async function startHolder(path: string) {
  const child = others.spawn(NODE, [FIXTURE('watching-holder.cjs'), PROCWARD, path], {
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const next = lines(child)
  const info = JSON.parse(await next()) as { pid: number; aborted: boolean }
  expect(info.aborted).toBe(false)
  const lost = async () => (JSON.parse(await next()) as { lost: Lost }).lost
  return { child, info, next, lost }
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode)
    else child.once('exit', (code) => resolve(code))
  })
}

/** The first abort of `signal` (its reason). */
function aborted(signal: AbortSignal): Promise<Error & Record<string, unknown>> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason)
    else signal.addEventListener('abort', () => resolve(signal.reason), { once: true })
  })
}

/** This process's fds (no pidfd here: it spawns with child_process only). */
const fds = () => openFds().sort()
const inotifyFds = () => fds().filter((f) => f.endsWith('anon_inode:inotify'))

function expectLost(lost: Lost, path: string, how: RegExp) {
  expect(lost.code).toBe('ERR_PROCWARD_LOCK_LOST')
  expect(lost.path).toBe(path)
  expect(lost.message).toContain(path)
  expect(lost.message).toMatch(how)
}

describe('the holder learns that its file went away', () => {
  it('removed (rm): its signal aborts naming the path, and readLock names no holder', async () => {
    const path = join(freshDir(), 'resync.lock')
    const holder = await startHolder(path)
    expect(readLock(path)).toMatchObject({ held: true, holder: { pid: holder.info.pid } })
    expect(spawnSync('rm', [path]).status).toBe(0)
    expectLost(await holder.lost(), path, /removed/)
    expect(readLock(path)).toEqual({ held: false, holder: null, holderRunning: null })
  })

  it('renamed over (another file renamed onto the path)', async () => {
    const dir = freshDir()
    const path = join(dir, 'resync.lock')
    const holder = await startHolder(path)
    writeFileSync(join(dir, 'new'), '')
    renameSync(join(dir, 'new'), path)
    expectLost(await holder.lost(), path, /replaced by another file/)
    expect(readLock(path)).toEqual({ held: false, holder: null, holderRunning: null })
  })

  it('renamed away', async () => {
    const dir = freshDir()
    const path = join(dir, 'resync.lock')
    const holder = await startHolder(path)
    renameSync(path, join(dir, 'moved.lock'))
    expectLost(await holder.lost(), path, /removed/)
    // The record went with the file; the path names nothing.
    expect(readLock(path)).toEqual({ held: false, holder: null, holderRunning: null })
    expect(readLock(join(dir, 'moved.lock'))).toMatchObject({ held: true, holder: { pid: holder.info.pid } })
  })

  it('its directory removed (rm -rf, as systemd removes a RuntimeDirectory= on stop)', async () => {
    const dir = freshDir()
    const path = join(dir, 'resync.lock')
    const holder = await startHolder(path)
    expect(spawnSync('rm', ['-rf', dir]).status).toBe(0)
    expectLost(await holder.lost(), path, /removed/)
  })

  it('its directory renamed', async () => {
    const dir = freshDir()
    const path = join(dir, 'resync.lock')
    const holder = await startHolder(path)
    renameSync(dir, `${dir}.old`)
    expectLost(await holder.lost(), path, /removed/)
  })

  it('a second holder takes the new file (a restart of the unit): the old one learns it, readLock names the new', async () => {
    const dir = freshDir()
    const path = join(dir, 'resync.lock')
    const old = await startHolder(path)
    // systemctl restart: the directory goes and comes back; the old holder still runs.
    rmSync(dir, { recursive: true })
    mkdirSync(dir)
    const second = await startHolder(path)
    expect(second.info.pid).not.toBe(old.info.pid)
    expectLost(await old.lost(), path, /removed/)
    expect(readLock(path)).toMatchObject({ held: true, holder: { pid: second.info.pid }, holderRunning: true })
    // The new holder's file is where it was: it goes on, unaborted.
    second.child.stdin?.write('release\n')
    expect(await second.next()).toBe('released')
    expect(await exited(second.child)).toBe(0)
  })

  it('a file already gone when the signal is first read: aborted at once', () => {
    const path = join(freshDir(), 'l.lock')
    const lock = tryLock(path) as ProcessLock
    rmSync(path)
    const { signal } = lock
    expect(signal.aborted).toBe(true)
    expect(signal.reason).toMatchObject({ code: 'ERR_PROCWARD_LOCK_LOST', path })
    expect(lock.signal).toBe(signal)
    lock.release()
  })
})

describe('and only then', () => {
  it('the same file changed (its mode, other names of its directory) is not gone', async () => {
    const dir = freshDir()
    const a = tryLock(join(dir, 'a.lock')) as ProcessLock
    const b = tryLock(join(dir, 'b.lock')) as ProcessLock
    const [sa, sb] = [a.signal, b.signal]
    chmodSync(join(dir, 'a.lock'), 0o640)
    writeFileSync(join(dir, 'other'), 'x')
    renameSync(join(dir, 'other'), join(dir, 'other2'))
    rmSync(join(dir, 'other2'))
    // One reader, in order: once b's removal is told, a's hints were judged.
    rmSync(join(dir, 'b.lock'))
    expect((await aborted(sb)).path).toBe(join(dir, 'b.lock'))
    expect(sa.aborted).toBe(false)
    a.release()
    b.release()
  })

  it('a lock released normally never aborts, not even when its file is removed after', async () => {
    const dir = freshDir()
    const a = tryLock(join(dir, 'a.lock')) as ProcessLock
    const b = tryLock(join(dir, 'b.lock')) as ProcessLock
    const [sa, sb] = [a.signal, b.signal]
    a.release()
    expect(sa.aborted).toBe(false)
    rmSync(join(dir, 'a.lock'))
    rmSync(join(dir, 'b.lock'))
    await aborted(sb)
    expect(sa.aborted).toBe(false)
    b.release()
    // Read first after the release: never watched, never aborted.
    const c = tryLock(join(dir, 'c.lock')) as ProcessLock
    c.release()
    rmSync(join(dir, 'c.lock'))
    expect(c.signal.aborted).toBe(false)
  })
})

describe('resources', () => {
  it('one inotify fd while locks are watched, none once the last is released', () => {
    const before = fds()
    expect(inotifyFds()).toEqual([])
    const dir = freshDir()
    const a = tryLock(join(dir, 'a.lock')) as ProcessLock
    const b = tryLock(join(dir, 'b.lock')) as ProcessLock
    expect(inotifyFds()).toEqual([])
    void a.signal
    void b.signal
    expect(inotifyFds()).toHaveLength(1)
    a.release()
    expect(inotifyFds()).toHaveLength(1)
    b.release()
    // Closed by the release itself, not later.
    expect(fds()).toEqual(before)
  })

  it('200 locks watched at once: 200 lock fds and one inotify fd; every one told', async () => {
    const before = fds().length
    const dir = freshDir()
    const locks = Array.from({ length: 200 }, (_, i) => tryLock(join(dir, `l${i}.lock`)) as ProcessLock)
    const signals = locks.map((l) => l.signal)
    expect(fds().length).toBe(before + 201)
    expect(signals.every((s) => !s.aborted)).toBe(true)
    rmSync(dir, { recursive: true })
    const reasons = await Promise.all(signals.map(aborted))
    expect(reasons.map((r) => r.path)).toEqual(locks.map((l) => l.path))
    for (const l of locks) l.release()
    expect(fds().length).toBe(before)
  })

  it('does not keep its process alive', async () => {
    const dir = freshDir()
    const code = `const { tryLock } = require(${JSON.stringify(PROCWARD)})
      const lock = tryLock(${JSON.stringify(join(dir, 'l.lock'))})
      console.log(lock.signal.aborted)`
    const { stdout } = await run(NODE, ['-e', code])
    expect(stdout.trim()).toBe('false')
  })

  it('a worker that ends with a watched lock releases it; its watch ends with it', async () => {
    const dir = freshDir()
    const path = join(dir, 'l.lock')
    const before = inotifyFds()
    const worker = new Worker(
      `const { parentPort } = require('node:worker_threads')
       const { tryLock } = require(${JSON.stringify(PROCWARD)})
       const lock = tryLock(${JSON.stringify(path)})
       parentPort.postMessage(lock.signal.aborted)`,
      { eval: true },
    )
    const said = await new Promise((resolve) => worker.once('message', resolve))
    expect(said).toBe(false)
    await new Promise((resolve) => worker.once('exit', resolve))
    expect(readLock(path).held).toBe(false)
    rmSync(path)
    expect(inotifyFds()).toEqual(before)
  })

  it('with no fd for a watch: a warning naming the path, a signal that never aborts; the next one is watched', async () => {
    const dir = freshDir()
    const { stdout } = await run('sh', [
      '-c',
      'ulimit -n 64 && exec "$0" "$@"',
      NODE,
      FIXTURE('unwatched.cjs'),
      PROCWARD,
      dir,
    ])
    const out = JSON.parse(stdout) as {
      warnings: { code: string; message: string }[]
      aborted: boolean
      watchedLater: boolean
    }
    expect(out.warnings).toHaveLength(1)
    expect(out.warnings[0]?.code).toBe('PROCWARD_LOCK_UNWATCHED')
    expect(out.warnings[0]?.message).toContain(join(dir, 'a.lock'))
    expect(out.warnings[0]?.message).toContain('EMFILE')
    expect(out.aborted).toBe(false)
    expect(out.watchedLater).toBe(true)
  })
})

describe('procward lock FILE -- COMMAND when FILE goes away', () => {
  it('stops COMMAND and exits 75: another holder may have the new file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'procward-cli-lost-'))
    try {
      const file = join(dir, 'resync.lock')
      const p = spawn(process.execPath, [CLI, 'lock', file, '--', 'sh', '-c', 'echo up; exec sleep 1000'], {
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      let out = ''
      let err = ''
      p.stdout?.on('data', (d) => (out += d))
      p.stderr?.on('data', (d) => (err += d))
      const done = new Promise<number | null>((r) => p.once('close', (c) => r(c)))
      const t0 = Date.now()
      while (!out.includes('up') && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 10))
      rmSync(file)
      expect(await done).toBe(75)
      expect(err).toContain(file)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
