// The CLI's errors in its own words: its arguments' names (never a library
// option's), one line each, with a hint where one helps.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { tempDirs, trackProcesses } from '../helpers'
import { CLI, CLI_FIXTURES, NODE, cli as runCli } from './cli-process'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-cli-words-')
const cli = (args: string[]) => runCli(others, args)

describe('procward errors in its own words', () => {
  it('status -- F and stop -- F: `--` ends the options, as everywhere else', async () => {
    const file = join(tempDir(), 'svc.json')
    expect(await cli(['status', '--', file])).toMatchObject({
      code: 4,
      err: `procward: ${file}: no supervisor state recorded\n`,
    })
    expect(await cli(['stop', '--', file])).toMatchObject({
      code: 1,
      err: `procward: ${file}: no supervisor state recorded\n`,
    })
  })

  it('a file that is not a state record is called that, not "no state recorded"', async () => {
    const dir = tempDir()
    for (const [name, text] of [
      ['other.json', '{"a":1}\n'],
      ['garbage.json', 'garbage\n'],
    ]) {
      const file = join(dir, name as string)
      writeFileSync(file, text as string)
      for (const verb of ['status', 'stop']) {
        const r = await cli([verb, file])
        expect(r.err, `${verb} ${name}`).toBe(
          `procward: ${file}: not a procward state record (not written by procward run --state-file?)\n`,
        )
      }
    }
  })

  it('a lock or state file in a directory that does not exist: one line that names the directory, exit 1', async () => {
    const missing = join(tempDir(), 'no-such-dir')
    const lock = await cli(['lock', join(missing, 'x.lock'), '--', 'true'])
    expect(lock.code).toBe(1)
    expect(lock.err).toContain(`no directory ${missing}`)
    expect(lock.err.trimEnd().split('\n')).toHaveLength(1)
    const run = await cli(['run', '--state-file', join(missing, 'x.json'), '--', 'true'])
    expect(run.code).toBe(1)
    expect(run.err).toContain(`no directory ${missing}`)
  })

  it('values the library refuses are named as the arguments that gave them', async () => {
    for (const [args, words] of [
      [['run', '--', ''], 'procward run: COMMAND must not be empty'],
      [['lock', join(tempDir(), 'l'), '--', ''], 'procward lock: COMMAND must not be empty'],
      [['run', '--name', '', '--', 'true'], 'procward run: --name must not be empty'],
      [['lock', '--postgres', 'not-a-url', '--key', 'k', '--', 'true'], 'procward lock: --postgres must be'],
      [
        ['lock', '--postgres', 'postgres://procward@127.0.0.1:1/db', '--key', '', '--', 'true'],
        'procward lock: --key ',
      ],
    ] as const) {
      const r = await cli([...args])
      expect(r.code, args.join(' ')).toBe(2)
      expect(r.err.startsWith(words), `${args.join(' ')}: ${r.err}`).toBe(true)
      expect(r.err).not.toMatch(/options\./)
    }
  })

  it('lock --postgres without the pg package: one line that says to install it, no require stack', async () => {
    const p = others.spawn(
      NODE,
      [
        '--require',
        join(CLI_FIXTURES, 'without-pg.cjs'),
        CLI,
        'lock',
        '--postgres',
        'postgres://x@127.0.0.1:1/db',
        '--key',
        'k',
        '--',
        'true',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    )
    let err = ''
    p.stderr?.on('data', (d) => (err += d))
    const code = await new Promise((resolve) => p.once('close', resolve))
    expect(code).toBe(1)
    expect(err).toMatch(/^procward: .*npm install pg.*\n$/)
    expect(err.trimEnd().split('\n')).toHaveLength(1)
  })
})
