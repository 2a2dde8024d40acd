// procward run --cwd, --env, --env-file, --user, --umask: the daemon's
// working directory, environment, credentials and umask, as a unit file's
// WorkingDirectory=, Environment=, EnvironmentFile=, User=/Group= and UMask=
// give them; procward's own unchanged. The env file parser against
// systemd's own cases (src/test/test-env-file.c) and its state machine's
// corners, with fakes; the rest with real processes.
import { spawnSync } from 'node:child_process'
import { readFileSync, readlinkSync, realpathSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { spawnSupervised } from '../../index.js'
import { CLI, isRoot, NODE, tempDirs, trackProcesses, waitFor } from '../helpers'
import { Cli, cli as runCli } from './cli-process'

const require = createRequire(__filename)
const { MAX_BYTES, parseEnvText, parseEnvFile, readEnvFile, EnvFileError } = require('../../lib/cli/env-file.js')
const { resolveUser, maySwitch, umaskOf } = require('../../lib/cli/unit-options.js')

const { sup, others } = trackProcesses()
const tempDir = tempDirs('procward-cli-unit-')
const cli = (args: string[]) => runCli(others, args)
const env = (text: string) => ({ ...parseEnvFile(text) })

describe('the env file, as systemd parses it (fakes)', () => {
  it("systemd's own test files read as systemd reads them", () => {
    // test_load_env_file_1: continuations, an escaped trailing space.
    expect(env('a=a\nb=b\\\nc\nd=d\\\ne\\\nf\ng=g\\ \nh=h\ni=i\\')).toEqual({
      a: 'a',
      b: 'bc',
      d: 'def',
      g: 'g ',
      h: 'h',
      i: 'i',
    })
    expect(env('a=a\\\n')).toEqual({ a: 'a' })
    // A comment's trailing backslash does not carry it on (systemd >= 254).
    expect(env('#SPAMD_ARGS="-d --socketpath=/var/lib/bulwark/spamd \\\n#--nouser-config  \\\nnormal=line')).toEqual({
      normal: 'line',
    })
    expect(
      env(
        '# Generated\n\nHWMON_MODULES="coretemp f71882fg"\n\n# For compatibility reasons\n\nMODULE_0=coretemp\nMODULE_1=f71882fg',
      ),
    ).toEqual({ HWMON_MODULES: 'coretemp f71882fg', MODULE_0: 'coretemp', MODULE_1: 'f71882fg' })
    expect(env('a=\nb=')).toEqual({ a: '', b: '' })
  })

  it('comments, whitespace and quotes', () => {
    expect(env('; semicolon\n  # indented\nA=1 # not a comment\n')).toEqual({ A: '1 # not a comment' })
    expect(env('  KEY  =   spaced value \t \n')).toEqual({ KEY: 'spaced value' })
    expect(env("S='it''s'\nT='a \\n $HOME'\n")).toEqual({ S: 'its', T: 'a \\n $HOME' })
    // Double quotes: \ before " \ ` $ is dropped, before anything else kept.
    expect(env('D="q\\"b\\\\s\\`t\\$d \\n \\x"')).toEqual({ D: 'q"b\\s`t$d \\n \\x' })
    // Quoted parts join; quotes inside an unquoted value are characters.
    expect(env(`J='a'"b" c\nU=x'y'"z"\n`)).toEqual({ J: 'abc', U: `x'y'"z"` })
    // Quotes keep newlines; an escaped newline in double quotes is a continuation.
    expect(env('M=\'one\ntwo\'\nN="three\\\nfour"\n')).toEqual({ M: 'one\ntwo', N: 'threefour' })
    // Whitespace inside quotes survives; after them, before more text, not.
    expect(env('W="  padded  "\n')).toEqual({ W: '  padded  ' })
    // CRLF files.
    expect(env('A=1\r\nB="2"\r\n')).toEqual({ A: '1', B: '2' })
    // An unclosed quote runs to the end of the file, as in systemd.
    expect(env("A='open\nB=2")).toEqual({ A: 'open\nB=2' })
    // A later assignment wins; `=` in a value is the value's.
    expect(env('A=1\nA=2=3\n')).toEqual({ A: '2=3' })
  })

  it('the line each key starts on', () => {
    expect(parseEnvText('\n# c\nA=1\\\n2\nB=x\nC\n')).toEqual([
      { key: 'A', value: '12', line: 3 },
      { key: 'B', value: 'x', line: 5 },
      { key: 'C', value: null, line: 6 },
    ])
  })

  it("what systemd ignores (a line without '=', a name that is not one, export) is refused, naming the line", () => {
    const refused = (text: string | Uint8Array) => {
      try {
        parseEnvFile(text)
      } catch (err) {
        expect(err).toBeInstanceOf(EnvFileError)
        return { message: (err as Error).message, line: (err as { line: number | null }).line }
      }
      throw new Error('accepted')
    }
    expect(refused('A=1\nexport B=2\n')).toEqual({
      message: `"export B" is not a variable name: write B=... without 'export' (systemd ignores such a line)`,
      line: 2,
    })
    expect(refused('9A=1')).toMatchObject({ message: expect.stringMatching(/"9A" is not a variable name/), line: 1 })
    expect(refused('A-B=1')).toMatchObject({ line: 1 })
    expect(refused('A=1\n\nJUSTAKEY\n')).toEqual({ message: `"JUSTAKEY" has no '=' (KEY=VALUE)`, line: 3 })
    expect(refused(Buffer.from('A=1\nB=\xff\n', 'latin1'))).toEqual({ message: 'is not UTF-8', line: 2 })
    expect(refused(Buffer.from('A=1\nB=x\0y\n'))).toEqual({ message: 'contains a NUL byte', line: 2 })
    // UTF-8 itself is fine.
    expect({ ...parseEnvFile(Buffer.from('A=héllo ✓\n')) }).toEqual({ A: 'héllo ✓' })
  })

  it('readEnvFile reads through the readFile it is given, its error as it is', () => {
    expect({ ...readEnvFile('/x.env', { readFile: () => Buffer.from('A=1') }) }).toEqual({ A: '1' })
    // systemd's bound, to the byte.
    const atMost = Buffer.alloc(MAX_BYTES, '\n')
    expect({ ...readEnvFile('/x.env', { readFile: () => atMost }) }).toEqual({})
    expect(() => readEnvFile('/x.env', { readFile: () => Buffer.alloc(MAX_BYTES + 1, '\n') })).toThrow(
      /^is larger than 64 MiB/,
    )
    const enoent = Object.assign(new Error('nope'), { code: 'ENOENT' })
    expect(() =>
      readEnvFile('/x.env', {
        readFile: () => {
          throw enoent
        },
      }),
    ).toThrow(enoent)
  })
})

describe('--user and --umask, resolved (fakes)', () => {
  const files: Record<string, string> = {
    '/etc/passwd': 'root:x:0:0:root:/root:/bin/bash\nsvc:x:990:985:Service:/srv/svc:/usr/sbin/nologin\n',
    '/etc/group': 'root:x:0:\nsvc:x:985:\nweb:x:33:svc\n',
  }
  const io = {
    readFile: (f: string) => {
      if (files[f] === undefined) throw Object.assign(new Error('no'), { code: 'ENOENT' })
      return files[f]
    },
    lookup: () => null,
  }
  const usage = (spec: string) => {
    try {
      resolveUser(spec, io)
    } catch (err) {
      return (err as Error).message
    }
    throw new Error('accepted')
  }

  it('names and numbers; the primary group unless one is given', () => {
    expect(resolveUser('svc', io)).toMatchObject({ uid: 990, gid: 985, user: { home: '/srv/svc' } })
    expect(resolveUser('svc:web', io)).toMatchObject({ uid: 990, gid: 33 })
    expect(resolveUser('990:7', io)).toMatchObject({ uid: 990, gid: 7, user: { name: 'svc' } })
    expect(resolveUser('4000:4000', io)).toEqual({ uid: 4000, gid: 4000, user: null })
  })

  it('a user or group that is not there is named', () => {
    expect(usage('nosuch')).toBe('--user nosuch: no user nosuch (not in /etc/passwd)')
    expect(usage('svc:nogroup')).toBe('--user svc:nogroup: no group nogroup (not in /etc/group)')
    expect(usage('4000')).toMatch(/^--user 4000: uid 4000 has no \/etc\/passwd entry.*--user 4000:GROUP/)
    expect(usage(':web')).toMatch(/a user is needed/)
    expect(usage('svc:')).toMatch(/the group after ':' is empty/)
    expect(usage('4294967295')).toMatch(/user id 4294967295 is out of range/)
  })

  it('who may switch: root, the same ids, or CAP_SETUID and CAP_SETGID', () => {
    const as = (capEff: bigint) => ({ euid: 1000, egid: 1000, capEff })
    expect(maySwitch(65534, 65534, { euid: 0, egid: 0 })).toBe(true)
    expect(maySwitch(1000, 1000, as(0n))).toBe(true)
    expect(maySwitch(65534, 65534, as(0n))).toBe(false)
    expect(maySwitch(65534, 65534, as(0xc0n))).toBe(true)
    expect(maySwitch(65534, 65534, as(0x80n))).toBe(false)
    expect(maySwitch(65534, 1000, as(0x80n))).toBe(true)
  })

  it('--umask is octal, 0000..0777', () => {
    expect(umaskOf('0022')).toBe(0o22)
    expect(umaskOf('077')).toBe(0o77)
    expect(umaskOf('0')).toBe(0)
    for (const bad of ['0o22', '0888', '1000', '', '-1', '22x']) expect(() => umaskOf(bad)).toThrow(/octal mode mask/)
  })
})

describe('spawnSupervised umask (real processes)', () => {
  it("the child runs with it; this process's own is unchanged", async () => {
    const ours = procOf(process.pid).umask
    for (const mask of [0o077, 0o002, 0]) {
      // Returned: it has exec'd.
      const p = sup('sleep', ['60'], { umask: mask })
      expect(procOf(p.pid).umask).toBe(mask.toString(8).padStart(4, '0'))
      await p.stop()
    }
    expect(procOf(process.pid).umask).toBe(ours)
    // What the child creates has it.
    const dir = tempDir()
    const p = sup('sh', ['-c', `: > ${join(dir, 'made')}`], { umask: 0o077 })
    await p.exited
    expect(statSync(join(dir, 'made')).mode & 0o777).toBe(0o600)
  })

  it.each([
    [-1, RangeError],
    [0o1000, RangeError],
    [1.5, RangeError],
    ['022', TypeError],
  ])('umask %s is refused, nothing started', (umask, type) => {
    let err: unknown
    try {
      spawnSupervised('true', [], { umask: umask as number })
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(type)
    expect((err as Error).message).toMatch(/^options\.umask must be/)
  })
})

/** What a process is, from /proc. */
function procOf(pid: number) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const field = (name: string) => new RegExp(`^${name}:\\s*(.*)$`, 'm').exec(status)?.[1] ?? ''
  const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean)
  return {
    cwd: readlinkSync(`/proc/${pid}/cwd`),
    env: Object.fromEntries(environ.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])),
    umask: field('Umask'),
    cmdline: readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' '),
    uid: field('Uid').split(/\s+/)[0],
    gid: field('Gid').split(/\s+/)[0],
  }
}

/** Starts procward run with `args` over a sleeping daemon; gives both pids' /proc views, then stops it. */
async function daemonUnder(args: string[]) {
  const c = new Cli(others, ['run', '--restart', 'never', ...args, '--', 'sleep', '60'])
  try {
    await waitFor(() => c.pids('spawn').length > 0 || c.proc.exitCode !== null, 10000, 'the spawn line')
    const pid = c.pids('spawn')[0]
    if (pid === undefined) throw new Error(`procward run ended: ${c.err}`)
    // The spawn returns once the child's exec has begun, which is before the
    // kernel has laid out the new program's environment: until then its
    // environ reads empty.
    await waitFor(() => readFileSync(`/proc/${pid}/environ`).length > 0, 10000, "the daemon's environment")
    return { daemon: procOf(pid), procward: procOf(c.pid) }
  } finally {
    c.proc.kill('SIGTERM')
    await c.done
  }
}

describe('procward run, each applied to the daemon only (real processes)', () => {
  it('--cwd, --env, --env-file, --umask: the daemon has them, procward not', async () => {
    const dir = realpathSync(tempDir())
    const file = join(dir, 'app.env')
    writeFileSync(file, '# the app\nFROM_FILE="two words"\nBOTH=file\nMULTI=a\\\nb\n')
    const { daemon, procward } = await daemonUnder([
      '--cwd',
      dir,
      '--env',
      'FROM_FLAG=1',
      '--env',
      'BOTH=flag',
      '--env-file',
      file,
      '--umask',
      '0027',
    ])
    expect(daemon.cwd).toBe(dir)
    expect(daemon.umask).toBe('0027')
    expect(daemon.env).toMatchObject({ FROM_FILE: 'two words', FROM_FLAG: '1', BOTH: 'flag', MULTI: 'ab' })
    // Inherited too: procward's own environment is the base.
    expect(daemon.env.PATH).toBe(process.env.PATH)
    expect(procward.cwd).toBe(process.cwd())
    expect(procward.umask).toBe(procOf(process.pid).umask)
    expect(procward.umask).not.toBe('0027')
    for (const k of ['FROM_FILE', 'FROM_FLAG', 'BOTH', 'MULTI']) expect(procward.env[k]).toBeUndefined()
  })

  it("--environment-file: --env-file's other name, in order with it; its NODE_OPTIONS is the daemon's only", async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'one.env'), 'A=one\nB=one\n')
    writeFileSync(join(dir, 'two.env'), 'B=two\nNODE_OPTIONS=--title=procward-test-title\n')
    writeFileSync(join(dir, 'three.env'), 'A=three\n')
    // Started as the installed bin is (`node procward.js run ...`, no `--`
    // of node's own): Node leaves --environment-file alone.
    const { daemon, procward } = await daemonUnder([
      '--env-file',
      join(dir, 'one.env'),
      '--environment-file',
      join(dir, 'two.env'),
      '--env-file',
      join(dir, 'three.env'),
    ])
    expect(daemon.env).toMatchObject({ A: 'three', B: 'two', NODE_OPTIONS: '--title=procward-test-title' })
    expect(procward.cmdline).toContain('procward.js run')
    expect(procward.env.NODE_OPTIONS).toBe(process.env.NODE_OPTIONS)
  })

  it('a variable named __proto__ (from --env and from --env-file) reaches the daemon like any other', async () => {
    const file = join(tempDir(), 'proto.env')
    writeFileSync(file, '__proto__=from-file\nOTHER=1\n')
    // Read as an own property: `.__proto__` or a literal's `__proto__:` would mean the prototype.
    const own = (env: Record<string, string>) => Object.getOwnPropertyDescriptor(env, '__proto__')?.value
    const fromFile = await daemonUnder(['--env-file', file])
    expect(own(fromFile.daemon.env)).toBe('from-file')
    expect(fromFile.daemon.env.OTHER).toBe('1')
    const fromFlag = await daemonUnder(['--env', '__proto__=from-flag'])
    expect(own(fromFlag.daemon.env)).toBe('from-flag')
  })

  it.runIf(isRoot)('--user nobody: the daemon runs as nobody, with its HOME and USER; procward as root', async () => {
    const nobody = resolveUser('nobody')
    const { daemon, procward } = await daemonUnder(['--user', 'nobody', '--cwd', '/'])
    expect(daemon.uid).toBe(String(nobody.uid))
    expect(daemon.gid).toBe(String(nobody.gid))
    expect(daemon.env).toMatchObject({ USER: 'nobody', LOGNAME: 'nobody', HOME: nobody.user.home })
    expect(procward.uid).toBe('0')
    expect(procward.gid).toBe('0')
  })

  it.runIf(isRoot)('--user as numbers, with a group of its own', async () => {
    const { daemon } = await daemonUnder(['--user', '65534:65533', '--cwd', '/'])
    expect([daemon.uid, daemon.gid]).toEqual(['65534', '65533'])
  })

  // A node nobody may run: this one, or (when it is cached under /root, as
  // the test command's Node 24 is) the one on PATH.
  const nobodysNode = [NODE, 'node'].find(
    (n) => spawnSync(n, ['-e', ''], { uid: 65534, gid: 65534, cwd: '/', stdio: 'ignore' }).status === 0,
  )
  it.runIf(isRoot && nobodysNode !== undefined)(
    'not root: --user another is refused before anything starts, in our words',
    async () => {
      // procward itself run as nobody (node's own uid option).
      const proc = others.spawn(nobodysNode as string, [CLI, 'run', '--user', 'root', '--', 'sh', '-c', 'echo ran'], {
        uid: 65534,
        gid: 65534,
        cwd: '/',
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      const c = { out: '', err: '' }
      proc.stdout?.on('data', (d) => (c.out += d))
      proc.stderr?.on('data', (d) => (c.err += d))
      const r = await new Promise<{ code: number | null }>((resolve) => proc.once('close', (code) => resolve({ code })))
      expect(r.code).toBe(2)
      expect(c.out).toBe('')
      expect(c.err).toMatch(
        /^procward run: --user root: procward runs as uid 65534 and may not switch to uid 0 gid 0 \(setuid: operation not permitted\)/,
      )
    },
  )
})

describe('bad input: exit 2 naming it, nothing started', () => {
  /** One usage error line, the hint, exit 2, and the command never ran (it would have written to stdout). */
  async function refused(args: string[], pattern: RegExp) {
    const r = await runCli(others, [...args, '--', 'sh', '-c', 'echo ran'])
    expect(r.out).toBe('')
    expect(r.code).toBe(2)
    const lines = r.err.trimEnd().split('\n')
    expect(lines[0]).toMatch(pattern)
    expect(lines[1]).toBe("try 'procward run --help'")
    expect(lines).toHaveLength(2)
  }

  it('a directory that is not there, or not a directory', async () => {
    const dir = tempDir()
    await refused(['run', '--cwd', join(dir, 'nope')], /^procward run: --cwd .*nope: no such file or directory$/)
    writeFileSync(join(dir, 'f'), '')
    await refused(['run', '--cwd', join(dir, 'f')], /^procward run: --cwd .*f: not a directory$/)
  })

  it('an env file that is bad, naming its line; a user, group or umask that is not one; an --env without =', async () => {
    const dir = tempDir()
    const bad = join(dir, 'bad.env')
    writeFileSync(bad, 'A=1\nexport B=2\n')
    await refused(
      ['run', '--env-file', bad],
      /^procward run: --env-file .*bad\.env:2: "export B" is not a variable name/,
    )
    await refused(['run', '--user', 'procward-no-such-user'], /no user procward-no-such-user \(not in \/etc\/passwd\)/)
    await refused(['run', '--user', 'root:procward-no-such-group'], /no group procward-no-such-group/)
    await refused(['run', '--umask', '0999'], /--umask must be an octal mode mask/)
    // In the words given, and read no further than systemd reads one.
    await refused(['run', '--environment-file', bad], /^procward run: --environment-file .*bad\.env:2: "export B"/)
    // Only a regular file: /dev/zero would be read on and on; a FIFO with no
    // writer would hang open(2) (as PID 1, until a SIGKILL).
    await refused(
      ['run', '--environment-file', '/dev/zero'],
      /^procward run: --environment-file \/dev\/zero: is a character device, not a regular file$/,
    )
    const fifo = join(dir, 'fifo.env')
    spawnSync('mkfifo', [fifo])
    await refused(['run', '--environment-file', fifo], /--environment-file .*fifo\.env: is a FIFO, not a regular file$/)
    const bom = join(dir, 'bom.env')
    writeFileSync(bom, '\uFEFFA=1\n')
    await refused(['run', '--environment-file', bom], /bom\.env:1: starts with a byte-order mark \(U\+FEFF/)
    await refused(['run', '--environment-file', join(dir, 'nope.env')], /--environment-file .*nope\.env: no such file/)
    await refused(['run', '--env', 'NOEQUALS'], /^procward run: --env NOEQUALS: KEY=VALUE expected$/)
    await refused(['run', '--env', '1X=2'], /"1X" is not a variable name/)
  })

  it('a missing or unreadable env file (procward run started as `node -- procward.js`: see docs/cli.md)', async () => {
    // Node itself checks every `--env-file` argument, even a script's
    // (nodejs/node#54232), unless it comes after a `--` of node's own.
    const dir = tempDir()
    for (const [file, why] of [
      [join(dir, 'missing.env'), 'no such file or directory'],
      [dir, 'is a directory, not a regular file'],
      ['/dev/zero', 'is a character device, not a regular file'],
    ] as const) {
      const p = others.spawn(NODE, ['--', CLI, 'run', '--env-file', file, '--', 'sh', '-c', 'echo ran'], {
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      let out = ''
      let err = ''
      p.stdout?.on('data', (d) => (out += d))
      p.stderr?.on('data', (d) => (err += d))
      const code = await new Promise((resolve) => p.once('close', resolve))
      expect({ code, out, first: err.split('\n')[0] }).toEqual({
        code: 2,
        out: '',
        first: `procward run: --env-file ${file}: ${why}`,
      })
    }
  })

  it('--help names them', async () => {
    const r = await cli(['run', '--help'])
    for (const flag of [
      '--cwd DIR',
      '--env K=V',
      '--env-file FILE',
      '--environment-file FILE',
      '--user USER[:GROUP]',
      '--umask 0NNN',
    ]) {
      expect(r.out).toContain(flag)
    }
  })
})
