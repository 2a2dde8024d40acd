// isLockedError: the runtime guard behind the `err is LockedError` type. True
// for the lock's own ELOCKED (from acquireLock, and passed on by a
// Supervisor's start()), false for anything merely shaped like it.
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { acquireLock, isLockedError, Supervisor } from '../../index.js'
import { tempDirs, trackProcesses } from '../helpers'

trackProcesses()
const tempDir = tempDirs('procward-locked-error-')
const require = createRequire(__filename)

describe('isLockedError', () => {
  it('is true for the ELOCKED of a held lock, from require and import alike', async () => {
    const path = join(tempDir(), 'x.lock')
    const held = await acquireLock(path, { purpose: 'test' })
    try {
      const err = await acquireLock(path).then(
        () => null,
        (e: unknown) => e,
      )
      expect(err).toMatchObject({ code: 'ELOCKED', path })
      expect(isLockedError(err)).toBe(true)
      if (!isLockedError(err)) throw new Error('unreachable')
      expect(err.holder?.pid).toBe(process.pid)
      expect(err.holder?.purpose).toBe('test')
      const esm = (await import('../../index.mjs')) as { isLockedError: (e: unknown) => boolean }
      expect(esm.isLockedError(err)).toBe(true)
    } finally {
      held.release()
    }
  })

  it("is true for a Supervisor's start() refused by the lock on its stateFile", async () => {
    const stateFile = join(tempDir(), 'state.json')
    const held = await acquireLock(`${stateFile}.lock`)
    const sup = new Supervisor({ command: 'sleep', args: ['1000'], stateFile })
    try {
      const err = await sup.start().then(
        () => null,
        (e: unknown) => e,
      )
      expect(isLockedError(err)).toBe(true)
    } finally {
      await sup.stop()
      held.release()
    }
  })

  it('is false for look-alikes and non-errors', async () => {
    const fake = Object.assign(new Error('ELOCKED: x'), { code: 'ELOCKED', path: '/x', holder: null })
    expect(isLockedError(fake)).toBe(false)
    expect(isLockedError({ code: 'ELOCKED' })).toBe(false)
    for (const v of [undefined, null, 'ELOCKED', 0, Symbol('x'), () => {}]) expect(isLockedError(v)).toBe(false)
    // Another library's ELOCKED: proper-lockfile's.
    const lockfile = require('proper-lockfile') as {
      lock(file: string, o?: object): Promise<() => Promise<void>>
    }
    const file = join(tempDir(), 'data')
    require('node:fs').writeFileSync(file, '')
    const release = await lockfile.lock(file)
    try {
      const err = await lockfile.lock(file).then(
        () => null,
        (e: unknown) => e,
      )
      expect(err).toMatchObject({ code: 'ELOCKED' })
      expect(isLockedError(err)).toBe(false)
    } finally {
      await release()
    }
    // procward's other errors are branded too, yet not ELOCKED.
    const other = await acquireLock('').then(
      () => null,
      (e: unknown) => e,
    )
    expect(other).toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' })
    expect(isLockedError(other)).toBe(false)
  })
})
