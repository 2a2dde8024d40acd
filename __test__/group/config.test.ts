// A group's config is checked whole in the constructor, before anything
// starts: each error names the daemon and the field, with Node's codes.
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { type GroupConfig, isArgumentError, readSupervisorState, SupervisorGroup } from '../../index.js'
import { freePort, tempDirs, thrown, trackProcesses } from '../helpers'
import { listener, trackGroups } from './helpers'

trackProcesses()
const tempDir = tempDirs('procward-group-config-')
const group = trackGroups()

const cmd = { command: 'true' }

describe('a config that cannot run is refused in the constructor', () => {
  const cases: [string, () => unknown, 'TypeError' | 'RangeError', string, string][] = [
    ['not an object', () => null, 'TypeError', 'ERR_INVALID_ARG_TYPE', 'config must be an object, got null'],
    [
      'an unknown key',
      () => ({ daemons: { a: cmd }, extra: 1 }),
      'TypeError',
      'ERR_INVALID_ARG_VALUE',
      'config.extra is not an option (stateDir, notify, daemons)',
    ],
    [
      'no daemons',
      () => ({ daemons: {} }),
      'TypeError',
      'ERR_INVALID_ARG_VALUE',
      'daemons must name at least one daemon',
    ],
    [
      'a cycle',
      () => ({ daemons: { a: { ...cmd, after: ['b'] }, b: { ...cmd, after: ['a'] } } }),
      'TypeError',
      'ERR_INVALID_ARG_VALUE',
      'daemons: a cycle: a -> b -> a',
    ],
    [
      'a cycle past a daemon outside it',
      () => ({ daemons: { a: { ...cmd, after: ['b'] }, b: { ...cmd, after: ['c'] }, c: { ...cmd, after: ['b'] } } }),
      'TypeError',
      'ERR_INVALID_ARG_VALUE',
      'daemons: a cycle: b -> c -> b',
    ],
    [
      'a daemon after itself',
      () => ({ daemons: { a: { ...cmd, after: ['a'] } } }),
      'TypeError',
      'ERR_INVALID_ARG_VALUE',
      'daemons: a cycle: a -> a',
    ],
    [
      'an unknown name in after',
      () => ({ daemons: { db: cmd, web: { ...cmd, after: ['db', 'cache'] } } }),
      'TypeError',
      'ERR_INVALID_ARG_VALUE',
      "daemons.web.after: unknown daemon 'cache'",
    ],
    [
      'after not an array',
      () => ({ daemons: { db: cmd, web: { ...cmd, after: 'db' } } }),
      'TypeError',
      'ERR_INVALID_ARG_TYPE',
      'daemons.web.after must be an array of strings, got string "db"',
    ],
    [
      "a Supervisor's bad option",
      () => ({ daemons: { web: { ...cmd, readyTimeoutMs: -1 } } }),
      'RangeError',
      'ERR_OUT_OF_RANGE',
      'daemons.web.readyTimeoutMs must be a number of milliseconds in 0..=2147483647, got -1',
    ],
    [
      "a Supervisor's bad nested option",
      () => ({ daemons: { web: { ...cmd, ready: { port: 0 } } } }),
      'RangeError',
      'ERR_OUT_OF_RANGE',
      'daemons.web.ready.port must be an integer in 1..=65535, got 0',
    ],
    [
      'an unknown key of a daemon (the group keys listed too)',
      () => ({ daemons: { web: { ...cmd, maxMemory: 1 << 30 } } }),
      'TypeError',
      'ERR_INVALID_ARG_VALUE',
      'daemons.web.maxMemory is not an option of a daemon (command, args, name, spawn, restart, backoff, crashLoop, ready, readyTimeoutMs, health, stateFile, takeover, handleSignals, notify, meta, listen, after, memoryLimit, log)',
    ],
    [
      'notify beside a daemon that speaks',
      () => ({ notify: true, daemons: { a: { ...cmd, notify: true } } }),
      'TypeError',
      'ERR_INVALID_ARG_VALUE',
      'daemons.a.notify: the group speaks to the service manager (notify: true), not a daemon',
    ],
    [
      'a notify that is not a boolean',
      () => ({ notify: 'yes', daemons: { a: cmd } }),
      'TypeError',
      'ERR_INVALID_ARG_TYPE',
      'notify must be a boolean',
    ],
    [
      'a memoryLimit of 0',
      () => ({ daemons: { web: { ...cmd, memoryLimit: 0 } } }),
      'RangeError',
      'ERR_OUT_OF_RANGE',
      'daemons.web.memoryLimit must be an integer in 1..=9007199254740991, got 0',
    ],
    [
      'a bad spawn option',
      () => ({ daemons: { web: { ...cmd, spawn: { shell: true } } } }),
      'TypeError',
      'ERR_INVALID_ARG_VALUE',
      'daemons.web.spawn.shell is not an option',
    ],
    [
      'a log without a path',
      () => ({ daemons: { web: { ...cmd, log: {} } } }),
      'TypeError',
      'ERR_INVALID_ARG_TYPE',
      'daemons.web.log.path must be a string, got undefined',
    ],
    [
      'a log keeping no file',
      () => ({ daemons: { web: { ...cmd, log: { path: 'x.log', keep: 0 } } } }),
      'RangeError',
      'ERR_OUT_OF_RANGE',
      'daemons.web.log.keep must be an integer in 1..=1000, got 0',
    ],
    [
      'a log of no size',
      () => ({ daemons: { web: { ...cmd, log: { path: 'x.log', maxBytes: 0 } } } }),
      'RangeError',
      'ERR_OUT_OF_RANGE',
      'daemons.web.log.maxBytes must be an integer in 1..=9007199254740991, got 0',
    ],
    [
      "a log and the daemon's stdout elsewhere",
      () => ({ daemons: { web: { ...cmd, log: { path: 'x.log' }, spawn: { stdio: 'inherit' } } } }),
      'TypeError',
      'ERR_INVALID_ARG_VALUE',
      "daemons.web.spawn.stdio[1]: the log (daemons.web.log) takes stdout and stderr: give 'pipe' or leave stdio out",
    ],
    [
      'two daemons, one log',
      () => ({ daemons: { a: { ...cmd, log: { path: '/tmp/x.log' } }, b: { ...cmd, log: { path: '/tmp/./x.log' } } } }),
      'TypeError',
      'ERR_INVALID_ARG_VALUE',
      "daemons.b.log.path: /tmp/x.log is daemons.a's already",
    ],
    [
      'two daemons, one state file',
      () => ({ stateDir: '/tmp/s', daemons: { a: cmd, b: { ...cmd, stateFile: '/tmp/s/a.json' } } }),
      'TypeError',
      'ERR_INVALID_ARG_VALUE',
      "daemons.b.stateFile: /tmp/s/a.json is daemons.a's already",
    ],
    [
      'two daemons speaking to the service manager',
      () => ({ daemons: { a: { ...cmd, notify: true }, b: { ...cmd, notify: true } } }),
      'TypeError',
      'ERR_INVALID_ARG_VALUE',
      'daemons.b.notify: daemons.a speaks to the service manager already (one per process)',
    ],
    [
      'a name that is no file name',
      () => ({ daemons: { '../web': cmd } }),
      'TypeError',
      'ERR_INVALID_ARG_VALUE',
      `daemons: "../web" is not a daemon name (letters, digits, '.', '_', '-'; not first a '.' or '-')`,
    ],
  ]
  for (const [what, config, cls, code, message] of cases) {
    it(what, () => {
      const err = thrown(() => new SupervisorGroup(config() as GroupConfig))
      expect(err.constructor.name).toBe(cls)
      expect(err.code).toBe(code)
      expect(err.message.startsWith(message)).toBe(true)
      expect(isArgumentError(err)).toBe(true)
    })
  }
})

it('a daemon is named by its key, and its state file is <stateDir>/<name>.json', async () => {
  const stateDir = join(tempDir(), 'state')
  const port = await freePort()
  const g = group({ stateDir, daemons: { web: listener(port), other: { command: 'sleep', args: ['1000'] } } })
  expect([...g.supervisors.keys()]).toEqual(['web', 'other'])
  expect(g.supervisors.get('web')?.name).toBe('web')
  expect(existsSync(stateDir)).toBe(false)
  await g.start()
  expect(readSupervisorState(join(stateDir, 'web.json'))).toMatchObject({ name: 'web', state: 'running' })
  expect(readSupervisorState(join(stateDir, 'other.json'))).toMatchObject({ name: 'other', state: 'running' })
})
