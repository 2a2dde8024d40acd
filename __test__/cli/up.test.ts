// procward up: the daemons of a config file in the foreground, as `docker
// compose up`: started in the order of their `after`, each line prefixed
// with its daemon's name, stopped in reverse by SIGTERM/SIGINT (then dying
// of it, as procward run does), one line and status 2 for a bad file with
// nothing started; as PID 1 of a pid namespace too.
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { aliveInProcTable, CLI, canUnsharePid, childrenOf, NODE, tempDirs, trackProcesses, waitFor } from '../helpers'
import { Cli, cli } from './cli-process'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-up-')

/** A daemon that says `<name> up` on stdout and `<name> err` on stderr, then sleeps (exec: its pid is the daemon's). */
const talker = (name: string, more: Record<string, unknown> = {}) => ({
  command: 'sh',
  args: ['-c', `echo ${name} up; echo ${name} err >&2; exec sleep 1000`],
  ready: { stdout: `${name} up` },
  ...more,
})

/** Zombies whose parent is `parent`. */
function zombiesOf(parent: number): number[] {
  return readdirSync('/proc')
    .map(Number)
    .filter((p) => p > 0)
    .filter((p) => {
      try {
        const s = readFileSync(`/proc/${p}/stat`, 'utf8')
        const f = s.slice(s.lastIndexOf(')') + 2).split(' ')
        return f[0] === 'Z' && Number(f[1]) === parent
      } catch {
        return false
      }
    })
}

function writeConfig(dir: string, file: string, config: unknown): string {
  const path = join(dir, file)
  const text = file.endsWith('.json') ? JSON.stringify(config) : `export default ${JSON.stringify(config)}\n`
  writeFileSync(path, text)
  return path
}

/** The order of the log lines `procward: NAME: EVENT` in `err`, as `EVENT NAME`. */
function events(err: string, which: string[]): string[] {
  return [...err.matchAll(/procward: ([\w.-]+): (\w+)/g)]
    .filter((m) => which.includes(m[2] ?? ''))
    .map((m) => `${m[2]} ${m[1]}`)
}

describe('procward up', () => {
  it('starts in after order, prefixes each line with its daemon, stops in reverse on SIGTERM and dies of it', async () => {
    const dir = tempDir()
    const file = writeConfig(dir, 'group.json', {
      daemons: { web: talker('web', { after: ['db'] }), db: talker('db') },
    })
    const up = new Cli(others, ['up', '-f', file])
    await waitFor(() => up.err.includes('procward: ready'), 10_000, 'the group ready')
    const pids = up.pids('spawn')
    expect(pids).toHaveLength(2)
    up.proc.kill('SIGTERM')
    const end = await up.done
    expect(end).toEqual({ code: null, signal: 'SIGTERM' })
    expect(events(up.err, ['spawn', 'ready'])).toEqual(['spawn db', 'ready db', 'spawn web', 'ready web'])
    expect(events(up.err, ['exit', 'stopped'])).toEqual(['exit web', 'stopped web', 'exit db', 'stopped db'])
    // Each daemon's lines, with its name padded to the longest: not a terminal, no colour.
    expect(up.out).toMatch(/Z db : db up\n/)
    expect(up.out).toMatch(/Z web: web up\n/)
    expect(up.err).toMatch(/Z web: web err\n/)
    expect(up.out).not.toContain('\x1b[')
    for (const pid of pids) expect(aliveInProcTable(pid)).toBe(false)
  })

  it('finds procward.config.cjs in its working directory; SIGINT ends it as SIGINT', async () => {
    const dir = tempDir()
    writeFileSync(
      join(dir, 'procward.config.cjs'),
      `module.exports = { daemons: { only: ${JSON.stringify(talker('only'))} } }\n`,
    )
    const up = new Cli(others, ['up'], { cwd: dir })
    await waitFor(() => up.err.includes('procward: ready'), 10_000, 'the group ready')
    up.proc.kill('SIGINT')
    expect(await up.done).toEqual({ code: null, signal: 'SIGINT' })
    expect(up.out).toMatch(/only: only up\n/)
  })

  it('exits 0 once every daemon ended cleanly by itself, 1 once all ended and one failed', async () => {
    const dir = tempDir()
    const clean = writeConfig(dir, 'clean.mjs', {
      daemons: {
        a: { command: 'sh', args: ['-c', 'echo a done'], restart: 'on-failure' },
        b: { command: 'sh', args: ['-c', 'sleep 0.2'], restart: 'never', after: ['a'] },
      },
    })
    const ok = await cli(others, ['up', '-f', clean])
    expect(ok.code).toBe(0)
    expect(ok.out).toMatch(/a: a done\n/)
    // One that gives up is reported, the others run on (as compose's up);
    // once all have ended, the status says one failed.
    const failing = writeConfig(dir, 'failing.mjs', {
      daemons: {
        a: { command: 'sh', args: ['-c', 'sleep 0.5'], restart: 'never' },
        b: { command: 'sh', args: ['-c', 'exit 3'], restart: 'never' },
      },
    })
    const bad = await cli(others, ['up', '-f', failing])
    expect(bad.code).toBe(1)
    expect(bad.err).toMatch(/procward: b: failed b exited with code 3/)
    expect(events(bad.err, ['failed', 'stopped'])).toEqual(['failed b', 'stopped a'])
  })

  it.skipIf(spawnSync('script', ['--version']).status !== 0)('colours the names on a terminal only', async () => {
    const dir = tempDir()
    const file = writeConfig(dir, 'tty.json', {
      daemons: { only: { command: 'sh', args: ['-c', 'echo only said'], restart: 'never' } },
    })
    // Under a pty (script): the name in its colour; through a pipe (the tests above): none.
    const tty = spawnSync('script', ['-qec', `${NODE} ${CLI} up -f ${file}`, '/dev/null'], { encoding: 'utf8' })
    expect(tty.status).toBe(0)
    expect(tty.stdout).toContain('\x1b[36monly\x1b[0m: only said')
  })

  describe('a bad file: one line naming it and the problem, status 2, nothing started', () => {
    // A daemon that would leave a mark: it must never run.
    const marker = (dir: string) => ({ command: 'touch', args: [join(dir, 'started')] })
    const cases: [string, (dir: string) => string, RegExp][] = [
      [
        'a cycle',
        (d) =>
          writeConfig(d, 'c.json', {
            daemons: { m: { ...marker(d), after: ['x'] }, x: { command: 'true', after: ['m'] } },
          }),
        /: daemons: a cycle: /,
      ],
      [
        'an unknown name in after',
        (d) => writeConfig(d, 'u.mjs', { daemons: { m: { ...marker(d), after: ['nope'] } } }),
        /: daemons\.m\.after: unknown daemon 'nope'/,
      ],
      [
        'a bad option',
        (d) => writeConfig(d, 'o.json', { daemons: { m: { ...marker(d), memoryLimit: -1 } } }),
        /: daemons\.m\.memoryLimit must be an integer/,
      ],
      [
        'not JSON',
        (d) => {
          writeFileSync(join(d, 'x.json'), '{ "daemons": ')
          return join(d, 'x.json')
        },
        /x\.json: not JSON: /,
      ],
      [
        'a module that throws',
        (d) => {
          writeFileSync(join(d, 't.mjs'), 'throw new Error("boom")\n')
          return join(d, 't.mjs')
        },
        /t\.mjs: cannot be loaded: boom/,
      ],
      ['no file', (d) => join(d, 'missing.json'), /missing\.json: no such file/],
    ]
    for (const [what, make, message] of cases) {
      it(what, async () => {
        const dir = tempDir()
        const file = make(dir)
        const r = await cli(others, ['up', '-f', file])
        expect(r.code).toBe(2)
        const [first, ...rest] = r.err.trimEnd().split('\n')
        expect(first).toMatch(/^procward up: /)
        expect(first).toMatch(message)
        // One line: the file and its problem (no --help hint: flags are not the problem).
        expect(rest).toEqual([])
        expect(existsSync(join(dir, 'started'))).toBe(false)
      })
    }

    it('no config file in the working directory', async () => {
      const r = await cli(others, ['up'], { cwd: tempDir() })
      expect(r.code).toBe(2)
      expect(r.err).toMatch(/^procward up: no procward\.config\.mjs, procward\.config\.cjs, procward\.config\.json in /)
    })
  })

  it.skipIf(!canUnsharePid())(
    'as PID 1 of a pid namespace: SIGTERM stops all in reverse order, status 143; orphans reaped',
    async () => {
      const dir = tempDir()
      const file = writeConfig(dir, 'group.json', {
        daemons: {
          db: talker('db'),
          // Orphans a grandchild every 100 ms: the namespace's init (procward) must reap them.
          web: {
            command: 'sh',
            args: ['-c', 'echo web up; while :; do (sleep 0.05 &); sleep 0.1; done'],
            ready: { stdout: 'web up' },
            after: ['db'],
          },
        },
      })
      const ns = others.spawn(
        'unshare',
        ['--pid', '--fork', '--mount-proc', '--kill-child', NODE, CLI, 'up', '-f', file],
        {
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      )
      let err = ''
      ns.stderr?.on('data', (d) => (err += d))
      const done = new Promise<{ code: number | null }>((resolve) => ns.once('close', (code) => resolve({ code })))
      await waitFor(() => err.includes('procward: ready'), 10_000, 'the group ready')
      const init = childrenOf(ns.pid as number)[0] as number
      expect(init).toBeGreaterThan(0)
      // Orphans come to init, and go: after a second of them, none is left a zombie for long.
      await new Promise((r) => setTimeout(r, 1000))
      await waitFor(() => zombiesOf(init).length === 0, 5000, 'no zombie under init')
      process.kill(init, 'SIGTERM')
      expect((await done).code).toBe(143)
      expect(events(err, ['exit', 'stopped'])).toEqual(['exit web', 'stopped web', 'exit db', 'stopped db'])
    },
  )
})
