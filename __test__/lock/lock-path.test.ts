// lockPath(dir, name): a lock per name of any kind, without an encoding of
// the caller's own. Real files: every path it gives can be created and
// locked, and two names never share one.
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { acquireLock, lockPath, readLock, tryLock } from '../../index.js'

const dir = mkdtempSync(join(tmpdir(), 'procward-lockpath-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const awkward = [
  'alice',
  'resync:alice@example.com',
  'a/b',
  '../../etc/passwd',
  '.',
  '..',
  '.hidden',
  'with space',
  'tab\there',
  'new\nline',
  'nul\0byte',
  '%41',
  'A',
  'a',
  'CON',
  'nul',
  'com1',
  'ünïcödé',
  '日本語',
  '👍',
  'x'.repeat(10_000),
  `${'x'.repeat(200)}y`,
  '%'.repeat(300),
]

describe('lockPath', () => {
  it('gives a file in dir, named safely, for any name', () => {
    for (const name of awkward) {
      const p = lockPath(dir, name)
      expect(dirname(p)).toBe(dir)
      const file = basename(p)
      expect(file.endsWith('.lock')).toBe(true)
      expect(file).not.toMatch(/[/\\\0\n\t ]/)
      expect(file.startsWith('.')).toBe(false)
      expect(Buffer.byteLength(file)).toBeLessThanOrEqual(255)
      expect(file).not.toMatch(/^(con|prn|aux|nul|com[0-9]|lpt[0-9])\./i)
    }
  })

  it('is one to one: distinct names, distinct files (also once created on disk)', () => {
    const paths = awkward.map((n) => lockPath(dir, n))
    expect(new Set(paths).size).toBe(awkward.length)
    for (const p of paths) writeFileSync(p, '')
    // Case-sensitive here (Linux): 'A' and 'a' are two files.
    expect(readdirSync(dir).length).toBe(awkward.length)
  })

  it('is stable: the same name gives the same path, and the documented encoding', () => {
    expect(lockPath(dir, 'resync:alice')).toBe(join(dir, 'resync%3aalice.lock'))
    expect(lockPath(dir, '.x')).toBe(join(dir, '%2ex.lock'))
    expect(lockPath(dir, 'ü')).toBe(join(dir, '%c3%bc.lock'))
    expect(lockPath(dir, 'CON')).toBe(join(dir, '%43ON.lock'))
    expect(lockPath(dir, 'x'.repeat(500))).toBe(lockPath(dir, 'x'.repeat(500)))
    expect(lockPath(dir, 'x'.repeat(500))).not.toBe(lockPath(dir, 'x'.repeat(501)))
  })

  it('names a lock that works: one holder per name, others free', () => {
    const a = tryLock(lockPath(dir, 'resync:a/1'))
    expect(a).not.toBeNull()
    expect(tryLock(lockPath(dir, 'resync:a/1'))).toBeNull()
    const b = tryLock(lockPath(dir, 'resync:a/2'))
    expect(b).not.toBeNull()
    expect(readLock(lockPath(dir, 'resync:a/1')).held).toBe(true)
    a?.release()
    b?.release()
  })

  it('refuses what is not a name, creating nothing', async () => {
    const before = readdirSync(dir).length
    for (const [d, n, code] of [
      [dir, '', 'ERR_INVALID_ARG_VALUE'],
      [dir, 5, 'ERR_INVALID_ARG_TYPE'],
      [dir, '\ud800', 'ERR_INVALID_ARG_VALUE'],
      ['', 'x', 'ERR_INVALID_ARG_VALUE'],
      [null, 'x', 'ERR_INVALID_ARG_TYPE'],
      ['a\0b', 'x', 'ERR_INVALID_ARG_VALUE'],
    ] as const) {
      expect(() => lockPath(d as string, n as string)).toThrow(TypeError)
      try {
        lockPath(d as string, n as string)
      } catch (err) {
        expect((err as { code?: string }).code).toBe(code)
      }
    }
    expect(readdirSync(dir).length).toBe(before)
    await expect(acquireLock(lockPath(join(dir, 'missing'), 'x'))).rejects.toMatchObject({ code: 'ENOENT' })
  })
})
