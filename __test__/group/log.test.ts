// A daemon's log file: its stdout and stderr appended, rotated at maxBytes
// to path.1 … path.<keep> while it runs on (same pid, not restarted),
// byte-exact, no line split across files.
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { freePort, tempDirs, trackProcesses } from '../helpers'
import { GROUP_FIXTURES, listener, names, record, trackGroups } from './helpers'

trackProcesses()
const tempDir = tempDirs('procward-group-log-')
const group = trackGroups()

/** What fixtures/lines.cjs writes: its stdout's lines and its stderr's. */
function expectedLines(count: number, long = 0): { out: string[]; err: string[] } {
  const out: string[] = []
  const err: string[] = []
  for (let i = 0; i < count; i++) {
    out.push(`out ${i} ${'x'.repeat(i === 5 && long > 0 ? long : (i * 37) % 300)}`)
    if (i % 7 === 0) err.push(`err ${i}`)
  }
  err.push('written')
  return { out, err }
}

/** A daemon running fixtures/lines.cjs, ready once all it writes is in its pipes. */
function lines(count: number, log: { path: string; maxBytes?: number; keep?: number }, long = 0) {
  return {
    command: process.execPath,
    args: [join(GROUP_FIXTURES, 'lines.cjs'), String(count), String(long)],
    ready: { stderr: 'written' },
    log,
  }
}

/** The log's files, oldest first: path.<n> … path.1, path. */
function logFiles(path: string): string[] {
  const dir = join(path, '..')
  const base = path.slice(dir.length + 1)
  const rotated = readdirSync(dir)
    .filter((f) => f.startsWith(`${base}.`))
    .map((f) => Number(f.slice(base.length + 1)))
    .sort((a, b) => b - a)
  return [...rotated.map((n) => `${path}.${n}`), path]
}

it('rotates while the daemon runs on: the files, oldest first, are what it wrote, in whole lines', async () => {
  const path = join(tempDir(), 'app.log')
  const maxBytes = 16 * 1024
  const g = group({ daemons: { app: lines(2000, { path, maxBytes, keep: 1000 }) } })
  const { seen } = record(g)
  const stderr: string[] = []
  g.on('stderr', ({ line }) => stderr.push(line))
  await g.start()
  const pid = g.supervisors.get('app')?.child?.pid
  await g.stop()
  // One child, never restarted, that ran until our stop.
  expect(names(seen).filter((s) => s.startsWith('spawn'))).toEqual(['spawn app'])
  expect(seen.find((s) => s.event === 'exit')?.data).toMatchObject({ pid, expected: true })
  expect(g.supervisors.get('app')?.status().restarts).toBe(0)

  const files = logFiles(path)
  const { out, err } = expectedLines(2000)
  const bytes = [...out, ...err].reduce((n, l) => n + Buffer.byteLength(l) + 1, 0)
  // Rotated many times; each file whole lines, within maxBytes.
  expect(files.length).toBeGreaterThan(bytes / maxBytes)
  for (const f of files) {
    const size = statSync(f).size
    expect(size).toBeGreaterThan(0)
    expect(size).toBeLessThanOrEqual(maxBytes)
    expect(readFileSync(f, 'latin1').endsWith('\n')).toBe(true)
  }
  const all = files.map((f) => readFileSync(f, 'utf8')).join('')
  expect(Buffer.byteLength(all)).toBe(bytes)
  const got = all.split('\n').slice(0, -1)
  expect(got.filter((l) => l.startsWith('out '))).toEqual(out)
  expect(got.filter((l) => !l.startsWith('out '))).toEqual(err)
  // The stream the ready check reads is in the log too, and its lines are the group's events.
  expect(stderr).toEqual(err)
})

it('keeps `keep` files: the newest of what the daemon wrote, each whole lines', async () => {
  const path = join(tempDir(), 'app.log')
  const g = group({ daemons: { app: lines(2000, { path, maxBytes: 8192, keep: 2 }) } })
  await g.start()
  await g.stop()
  const files = logFiles(path)
  expect(files).toEqual([`${path}.2`, `${path}.1`, path])
  const kept = files
    .map((f) => readFileSync(f, 'utf8'))
    .join('')
    .split('\n')
    .slice(0, -1)
    .filter((l) => l.startsWith('out '))
  const { out } = expectedLines(2000)
  expect(kept.length).toBeGreaterThan(0)
  expect(kept).toEqual(out.slice(out.length - kept.length))
})

it('a line longer than maxBytes is split, the bytes exact', async () => {
  const path = join(tempDir(), 'app.log')
  const maxBytes = 1000
  const g = group({ daemons: { app: lines(40, { path, maxBytes, keep: 1000 }, 2500) } })
  await g.start()
  await g.stop()
  const files = logFiles(path)
  for (const f of files) expect(statSync(f).size).toBeLessThanOrEqual(maxBytes)
  const got = files
    .map((f) => readFileSync(f, 'utf8'))
    .join('')
    .split('\n')
    .slice(0, -1)
  const { out, err } = expectedLines(40, 2500)
  expect(got.filter((l) => l.startsWith('out '))).toEqual(out)
  expect(got.filter((l) => !l.startsWith('out '))).toEqual(err)
})

it('appends to the file there is, and keeps the output of a restarted daemon', async () => {
  const path = join(tempDir(), 'app.log')
  writeFileSync(path, 'before\n')
  const g = group({
    daemons: {
      app: {
        command: 'sh',
        args: ['-c', 'echo "start $$"; exec sleep 1000'],
        ready: { stdout: 'start' },
        log: { path },
      },
    },
  })
  await g.start()
  const first = g.supervisors.get('app')?.child?.pid
  await g.supervisors.get('app')?.restart()
  const second = g.supervisors.get('app')?.child?.pid
  await g.stop()
  await g.start()
  const third = g.supervisors.get('app')?.child?.pid
  await g.stop()
  expect(readFileSync(path, 'utf8')).toBe(`before\nstart ${first}\nstart ${second}\nstart ${third}\n`)
})

it('a log that cannot be opened fails the start, naming the daemon; nothing runs', async () => {
  const port = await freePort()
  const path = join(tempDir(), 'missing', 'app.log')
  const g = group({ daemons: { db: listener(port), app: { ...lines(1, { path }), after: ['db'] } } })
  await expect(g.start()).rejects.toMatchObject({
    code: 'ERR_SUPERVISOR_FAILED',
    daemon: 'app',
    message: expect.stringMatching(/^app did not start: cannot open its log: ENOENT/),
    cause: { cause: { code: 'ENOENT' } },
  })
  expect(existsSync(path)).toBe(false)
  for (const sup of g.supervisors.values()) expect(sup.child).toBeNull()
  expect(g.supervisors.get('db')?.state).toBe('stopped')
})
