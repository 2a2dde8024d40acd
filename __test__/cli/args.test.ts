// Arguments: one reading or a refusal, never a guess; statuses as env(1)
// and the shells give them; --help and --version without the native binary.
import { cpSync, mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { tempDirs, trackProcesses } from '../helpers'
import { cli as runCli } from './cli-process'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-cli-args-')
const cli = (args: string[]) => runCli(others, args)
const ROOT = join(__dirname, '..', '..')

/** Bad usage: one line, the hint, exit 2, nothing run. */
function expectUsageError(r: { code: number | null; out: string; err: string }, verb: string, pattern: RegExp) {
  expect(r.code).toBe(2)
  expect(r.out).toBe('')
  const lines = r.err.trimEnd().split('\n')
  expect(lines).toHaveLength(2)
  expect(lines[0]).toMatch(pattern)
  expect(lines[1]).toBe(`try 'procward${verb ? ` ${verb}` : ''} --help'`)
}

describe('options and their values', () => {
  it('lock F --wait 100 CMD is ambiguous: refused, the command is not run', async () => {
    const file = join(tempDir(), 'job.lock')
    const r = await cli(['lock', file, '--wait', '100', 'sh', '-c', 'echo ran'])
    expectUsageError(r, 'lock', /--wait 100 is ambiguous/)
    // Both unambiguous forms work.
    expect(await cli(['lock', file, '--wait=100', 'sh', '-c', 'echo ran'])).toMatchObject({ code: 0, out: 'ran\n' })
    expect(await cli(['lock', file, '--wait', '--', '100'])).toMatchObject({ code: 127 })
  })

  it('--opt V and --opt=V are the same; a value that looks like an option is refused', async () => {
    for (const form of [['--name', 'nap'], ['--name=nap']]) {
      const r = await cli(['run', '--json', '--restart=never', ...form, '--', 'true'])
      expect(r.code).toBe(0)
      expect(JSON.parse(r.err.split('\n')[0] as string)).toMatchObject({ name: 'nap', event: 'spawn' })
    }
    expectUsageError(
      await cli(['run', '--name', '--json', '--', 'true']),
      'run',
      /--name needs a value .*--name=--json/,
    )
    expectUsageError(await cli(['run', '--grace', '--', 'true']), 'run', /--grace needs a value/)
    expectUsageError(await cli(['run', '--json=yes', '--', 'true']), 'run', /--json takes no value/)
    expectUsageError(await cli(['run', '-x', '--', 'true']), 'run', /unknown option -x/)
    expectUsageError(
      await cli(['run', '--hup', 'ignore', '--', 'true']),
      'run',
      /^procward run: --hup must be one of 'stop', 'forward', 'reload', got string "ignore"$/,
    )
    expectUsageError(
      await cli(['run', '--restart', 'sometimes', '--', 'true']),
      'run',
      /^procward run: --restart must be one of 'always', 'on-failure', 'never', got string "sometimes"$/,
    )
    expectUsageError(await cli(['run', '--grace', '1e3', '--', 'true']), 'run', /--grace must be a whole number/)
    expectUsageError(
      await cli(['run', '--grace', '99999999999', '--', 'true']),
      'run',
      /^procward run: --grace must be a number of milliseconds in 0\.\.=2147483647, got 99999999999$/,
    )
    // The library judges the range, in the flag's words.
    expectUsageError(
      await cli(['run', '--ready-port', '0', '--', 'true']),
      'run',
      /^procward run: --ready-port must be an integer in 1\.\.=65535, got 0$/,
    )
    expectUsageError(
      await cli(['run', '--max-restarts', '99999999999', '--', 'true']),
      'run',
      /^procward run: --max-restarts must be an integer in 0\.\.=2147483647, got 99999999999$/,
    )
    expectUsageError(await cli(['status', '--json', 'a', 'b']), 'status', /one STATE_FILE/)
    expectUsageError(await cli(['frob']), '', /^procward: unknown command frob/)
    // A value the library refuses is bad usage too.
    expectUsageError(await cli(['lock', '', '--', 'true']), 'lock', /^procward lock: FILE must not be empty$/)
    expectUsageError(await cli(['stop', '']), 'stop', /^procward stop: STATE_FILE must not be empty$/)
    expectUsageError(await cli(['status', '']), 'status', /^procward status: STATE_FILE must not be empty$/)
    expectUsageError(await cli(['run', '--', '']), 'run', /^procward run: COMMAND must not be empty$/)
  })

  it("a value may start with a dash when given with '='", async () => {
    const r = await cli(['run', '--json', '--restart=never', '--name=-x-', '--', 'true'])
    expect(r.code).toBe(0)
    expect(r.err).toContain('"name":"-x-"')
  })
})

describe('a command that cannot be run', () => {
  it('not found: 127, with the cause (run fails at once or after its restarts; lock at once)', async () => {
    const run = await cli(['run', '--restart', 'never', '--', 'no-such-command-procward'])
    expect(run.code).toBe(127)
    expect(run.err).toMatch(/ENOENT/)
    expect(run.err).toMatch(/no-such-command-procward: command not found/)
    const looping = await cli(['run', '--max-restarts', '1', '--', 'no-such-command-procward'])
    expect(looping.code).toBe(127)
    expect(looping.err).toMatch(/failed .*ENOENT/)
    const lock = await cli(['lock', join(tempDir(), 'l'), '--', 'no-such-command-procward'])
    expect(lock.code).toBe(127)
    expect(lock.err).toBe('procward: no-such-command-procward: command not found\n')
  })

  it('found but not executable: 126', async () => {
    const dir = tempDir()
    expect((await cli(['run', '--restart', 'never', '--', dir])).code).toBe(126)
    expect((await cli(['lock', join(dir, 'l'), '--', '/etc/passwd'])).code).toBe(126)
  })
})

describe('--version and --help', () => {
  it('--version prints the package version', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
    expect(await cli(['--version'])).toMatchObject({ code: 0, out: `procward ${version}\n` })
  })

  it('--help works where the native binary is missing; a verb says what is missing', async () => {
    // The package without any binary: its JS files only.
    const pkg = join(tempDir(), 'procward')
    mkdirSync(pkg)
    for (const f of ['package.json', 'index.js', 'binding.js', 'platform.js', 'pg.js', 'lib', 'bin']) {
      cpSync(join(ROOT, f), join(pkg, f), { recursive: true })
    }
    const bin = join(pkg, 'bin', 'procward.js')
    // Nor a platform package on NODE_PATH (scripts/musl-run.sh installs the
    // musl binary's there).
    const bare = { env: { ...process.env, NODE_PATH: '' } }
    for (const args of [['--help'], ['run', '--help'], ['lock', '-h'], ['--version']]) {
      const r = await runCli(others, args, bare, bin)
      expect(r.code, args.join(' ')).toBe(0)
      expect(r.out).toMatch(/usage: procward|procward \d/)
    }
    // status: unknown (LSB 4); the others fail (1). Each names the missing package.
    const status = await runCli(others, ['status', join(pkg, 'none.json')], bare, bin)
    expect(status.code).toBe(4)
    expect(status.err).toMatch(/^procward: .*procward-linux/)
    const stop = await runCli(others, ['stop', join(pkg, 'none.json')], bare, bin)
    expect(stop.code).toBe(1)
    expect(stop.err).toMatch(/^procward: .*procward-linux/)
    expect(stop.err.trimEnd().split('\n')).toHaveLength(1)
  })
})
