// Spawn-side hardening: relative cwd and PATH resolved as child_process does,
// FIFOs as stdio files that never block the event loop, Node-shaped errors,
// unknown options refused, and uid/gid/argv0 (with the death signal kept
// across the credential change).
import { spawn as cpSpawn, execFileSync } from 'node:child_process'
import {
  chmodSync,
  closeSync,
  constants as fsConstants,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readlinkSync,
  readSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawnSupervised } from '../../index.js'
import {
  AS_NOBODY,
  aliveInProcTable,
  childrenOf,
  FIXTURES,
  IS_BUN,
  isRoot,
  nodeThroughSetpriv,
  openFds,
  PROCWARD,
  readAll,
  run,
  thrown,
  trackProcesses,
  waitFor,
} from '../helpers'

const { sup, others } = trackProcesses()

let dir = ''
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'procward-hardening-'))
  // 0755: the tests that run as nobody read fixtures from here.
  chmodSync(dir, 0o755)
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

function noNewChildren(fn: () => void) {
  const before = childrenOf(process.pid)
  fn()
  expect(childrenOf(process.pid)).toEqual(before)
}

/**
 * The 'error' child_process emits for the same spawn. Under Bun, with the
 * message Node's child_process gives (`spawn <command> <code>`): procward
 * words its errors as Node does, and Bun's child_process words them its own
 * way ("Executable not found in $PATH", "posix_spawn '<path>'").
 */
function childProcessError(command: string, args: string[], options = {}): Promise<NodeJS.ErrnoException> {
  return new Promise((resolve, reject) => {
    const c = cpSpawn(command, args, { stdio: 'ignore', ...options })
    c.once('error', (e: NodeJS.ErrnoException) => {
      if (IS_BUN) {
        console.warn(`under Bun: child_process's message "${e.message}" compared as Node words it`)
        e.message = `spawn ${command} ${e.code}`
      }
      resolve(e)
    })
    c.once('spawn', () => {
      c.kill('SIGKILL')
      reject(new Error(`child_process started ${command}`))
    })
  })
}

function shape(e: NodeJS.ErrnoException & { spawnargs?: string[] }) {
  return {
    name: e.name,
    message: e.message,
    code: e.code,
    errno: e.errno,
    syscall: e.syscall,
    path: e.path,
    spawnargs: e.spawnargs,
  }
}

describe('relative cwd, PATH entries and commands resolve as in child_process', () => {
  function tool(path: string, marker: string) {
    mkdirSync(join(dir, path, '..'), { recursive: true })
    writeFileSync(join(dir, path), `#!/bin/sh\necho ${marker} "$(pwd)"\n`, { mode: 0o755 })
  }

  it('runs work/bin/tool for PATH bin with cwd work, and ./bin/tool likewise', async () => {
    tool('work/bin/tool', 'work/bin/tool')
    // The trap the old resolver fell into: cwd joined twice.
    tool('work/work/bin/tool', 'work/work/bin/tool')
    tool('bin/tool', 'bin/tool')
    tool('work/tool', 'work/tool')
    const sys = '/usr/bin:/bin'
    const cases = [
      ['tool', [], { cwd: 'work', env: { PATH: `bin:${sys}` } }],
      ['./bin/tool', [], { cwd: 'work', env: { PATH: sys } }],
      ['bin/tool', [], { cwd: 'work', env: { PATH: sys } }],
      ['tool', [], { env: { PATH: `bin:${sys}` } }],
      // An empty PATH entry is the child's cwd.
      ['tool', [], { cwd: 'work', env: { PATH: `${sys}:` } }],
      ['tool', [], { cwd: `${dir}/work`, env: { PATH: `bin:${sys}` } }],
      ['tool', [], { cwd: 'work', env: { PATH: `nowhere:${sys}` } }],
      ['./tool', [], { cwd: 'work/bin', env: { PATH: sys } }],
    ]
    const { stdout } = await run(
      process.execPath,
      [join(FIXTURES, 'side-by-side.cjs'), PROCWARD, JSON.stringify(cases)],
      {
        cwd: dir,
      },
    )
    const results = JSON.parse(stdout)
    // Bun's child_process resolves PATH its own way (an entry relative to
    // the cwd is not found): there, only the results Node gives are checked.
    if (IS_BUN)
      console.warn("under Bun: PATH resolution not compared with Bun's child_process, only with Node's results")
    else for (const r of results) expect(r.procward).toEqual(r.childProcess)
    expect(
      results.map((r: { procward: { out?: string; error?: string } }) => r.procward.out ?? r.procward.error),
    ).toEqual([
      `work/bin/tool ${dir}/work\n`,
      `work/bin/tool ${dir}/work\n`,
      `work/bin/tool ${dir}/work\n`,
      `bin/tool ${dir}\n`,
      `work/tool ${dir}/work\n`,
      `work/bin/tool ${dir}/work\n`,
      'ENOENT',
      `work/bin/tool ${dir}/work/bin\n`,
    ])
  })
})

describe('a FIFO as a stdio file', () => {
  let n = 0
  function fifo(): string {
    const path = join(dir, `fifo-${n++}`)
    execFileSync('mkfifo', [path])
    return path
  }

  async function inOwnProcess(which: string, path: string) {
    // A spawn that blocks in open() would block this fixture for good: the
    // timeout turns that into a failure instead of a hung test run.
    const { stdout } = await run(process.execPath, [join(FIXTURES, 'fifo.cjs'), PROCWARD, which, path], {
      timeout: 10_000,
      killSignal: 'SIGKILL',
    })
    return JSON.parse(stdout)
  }

  it('as stdin with no writer: spawns without blocking the loop; the child reads end-of-file', async () => {
    const res = await inOwnProcess('stdin-no-writer', fifo())
    expect(res).toEqual({ timerFired: true, exit: expect.objectContaining({ code: 0 }), stdout: '' })
  })

  it('as stdout with no reader: throws ENXIO at once, saying so, and starts nothing', async () => {
    const path = fifo()
    const res = await inOwnProcess('stdout-no-reader', path)
    expect(res).toEqual({
      timerFired: true,
      error: {
        name: 'Error',
        message: `ENXIO: no process has the FIFO open for reading, open '${path}'`,
        code: 'ENXIO',
        errno: -6,
        syscall: 'open',
        path,
      },
    })
  })

  it('as stdin with a writer: the child reads what was written, on a blocking fd', async () => {
    const path = fifo()
    // O_RDWR never blocks on a FIFO: it makes this process a writer.
    const writer = openSync(path, fsConstants.O_RDWR)
    writeSync(writer, 'hello\n')
    const p = sup('sh', ['-c', 'cat; grep flags /proc/self/fdinfo/0'], { stdio: [{ file: path }, 'pipe', 'inherit'] })
    closeSync(writer)
    const out = await readAll(p.stdout)
    const [text, flags] = out.split('flags:')
    expect(text).toBe('hello\n')
    // The child gets a blocking fd, as a shell's `< fifo` gives it.
    expect(Number.parseInt(String(flags).trim(), 8) & fsConstants.O_NONBLOCK).toBe(0)
    expect((await p.exited).code).toBe(0)
  })

  it('as stdout with a reader: the child writes to it, on a blocking fd', async () => {
    const path = fifo()
    const reader = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK)
    try {
      const p = sup('sh', ['-c', 'grep flags /proc/self/fdinfo/1'], { stdio: ['ignore', { file: path }, 'inherit'] })
      expect((await p.exited).code).toBe(0)
      const buf = Buffer.alloc(4096)
      const got = buf.toString('utf8', 0, readSync(reader, buf))
      expect(got).toMatch(/^flags:\s+[0-7]+\n$/)
      expect(Number.parseInt(got.slice(6).trim(), 8) & fsConstants.O_NONBLOCK).toBe(0)
    } finally {
      closeSync(reader)
    }
  })

  it('a directory as stdin is refused (EISDIR), not handed to the child', () => {
    noNewChildren(() => {
      const e = thrown(() => spawnSupervised('cat', [], { stdio: [{ file: dir }, 'ignore', 'ignore'] }))
      expect(shape(e)).toMatchObject({
        message: `EISDIR: illegal operation on a directory, open '${dir}'`,
        code: 'EISDIR',
        syscall: 'open',
        path: dir,
      })
    })
  })
})

describe('errors read like Node’s', () => {
  it('a missing command: exactly the error child_process gives', async () => {
    const fds = openFds()
    const args = ['a', 'b']
    noNewChildren(() => {
      const ours = thrown(() => spawnSupervised('procward-no-such-command', args))
      expect(ours).toBeInstanceOf(Error)
      expect(shape(ours)).toEqual({
        name: 'Error',
        message: 'spawn procward-no-such-command ENOENT',
        code: 'ENOENT',
        errno: -2,
        syscall: 'spawn procward-no-such-command',
        path: 'procward-no-such-command',
        spawnargs: args,
      })
    })
    expect(shape(thrown(() => spawnSupervised('procward-no-such-command', args)))).toEqual(
      shape(await childProcessError('procward-no-such-command', args)),
    )
    expect(openFds().filter((fd) => !fds.includes(fd))).toEqual([])
  })

  it('a missing absolute path and a non-executable file: as child_process words them', async () => {
    for (const command of ['/nonexistent/bin/x', join(FIXTURES, 'supervisor.cjs')]) {
      const ours = thrown(() => spawnSupervised(command, ['x']))
      expect(shape(ours)).toEqual(shape(await childProcessError(command, ['x'])))
      expect(ours.message).not.toMatch(/os error/)
    }
  })

  it('a missing cwd names chdir and the directory, not the command', () => {
    noNewChildren(() => {
      const e = thrown(() => spawnSupervised('true', ['x'], { cwd: '/nonexistent/dir' }))
      expect(shape(e)).toEqual({
        name: 'Error',
        message: "ENOENT: no such file or directory, chdir '/nonexistent/dir'",
        code: 'ENOENT',
        errno: -2,
        syscall: 'chdir',
        path: '/nonexistent/dir',
        spawnargs: ['x'],
      })
    })
  })

  it('a cwd that is a file is ENOTDIR for chdir', () => {
    const file = join(FIXTURES, 'supervisor.cjs')
    const e = thrown(() => spawnSupervised('true', [], { cwd: file }))
    expect(shape(e)).toMatchObject({
      message: `ENOTDIR: not a directory, chdir '${file}'`,
      code: 'ENOTDIR',
      errno: -20,
      syscall: 'chdir',
      path: file,
    })
  })

  it('a stdio file that cannot be opened names open and the file', () => {
    const file = '/nonexistent/dir/out.log'
    noNewChildren(() => {
      const e = thrown(() => spawnSupervised('true', [], { stdio: ['ignore', 'ignore', { file }] }))
      expect(shape(e)).toEqual({
        name: 'Error',
        message: `ENOENT: no such file or directory, open '${file}'`,
        code: 'ENOENT',
        errno: -2,
        syscall: 'open',
        path: file,
        spawnargs: [],
      })
    })
  })

  it('kill(0) is refused with a RangeError that points to isProcessRunning', async () => {
    const p = sup('sleep', ['100'])
    const e = thrown(() => p.kill(0))
    expect(e).toBeInstanceOf(RangeError)
    expect(e.code).toBe('ERR_OUT_OF_RANGE')
    expect(e.message).toMatch(/isProcessRunning\(/)
    expect(p.exitInfo).toBeNull()
  })
})

describe('options', () => {
  it.each([
    ['shell', { shell: true }],
    ['detached', { detached: true }],
    ['timeout', { timeout: 1000 }],
    ['procesGroup', { procesGroup: false }],
  ])('rejects the unknown option %s, naming it, and spawns nothing', (key, options) => {
    noNewChildren(() => {
      const e = thrown(() => spawnSupervised('echo', ['$HOME'], options as object))
      expect(e).toBeInstanceOf(TypeError)
      expect(e.code).toBe('ERR_INVALID_ARG_VALUE')
      expect(e.message).toContain(`options.${key}`)
    })
  })

  it('ignores unknown keys whose value is undefined (they set nothing)', async () => {
    const p = sup('true', [], { shell: undefined } as object)
    expect((await p.exited).code).toBe(0)
  })

  it('rejects unknown keys in a stdio file entry', () => {
    noNewChildren(() => {
      const e = thrown(() =>
        spawnSupervised('true', [], {
          stdio: ['ignore', { file: '/dev/null', mode: 0o600 } as { file: string }, 'ignore'],
        }),
      )
      expect(e).toBeInstanceOf(TypeError)
      expect(e.code).toBe('ERR_INVALID_ARG_VALUE')
      expect(e.message).toContain('stdio[1].mode')
    })
  })

  it.each([
    ['uid -1', { uid: -1 }, RangeError],
    ['uid 1.5', { uid: 1.5 }, RangeError],
    ['uid NaN', { uid: Number.NaN }, RangeError],
    ['uid 2^32-1 (the "no change" id)', { uid: 2 ** 32 - 1 }, RangeError],
    ['uid 2^32', { uid: 2 ** 32 }, RangeError],
    ['uid as a string', { uid: '0' }, TypeError],
    ['gid -1', { gid: -1 }, RangeError],
    ['gid as a bigint', { gid: 0n }, TypeError],
    ['argv0 not a string', { argv0: 5 }, TypeError],
    ['argv0 with NUL', { argv0: 'a\0b' }, TypeError],
  ])('rejects %s and spawns nothing', (_, options, type) => {
    noNewChildren(() => expect(() => spawnSupervised('true', [], options as object)).toThrow(type))
  })

  it('argv0 replaces argv[0] only, as in child_process', async () => {
    const p = sup('sleep', ['100'], { argv0: 'renamed-sleeper' })
    const theirs = others.spawn('sleep', ['100'], { argv0: 'renamed-sleeper', stdio: 'ignore' })
    // Each read once its exec is done (a cmdline read during it is the parent's, or empty).
    const execd = (pid: number | undefined) => readFileSync(`/proc/${pid}/cmdline`, 'latin1').startsWith('renamed')
    await waitFor(() => execd(theirs.pid) && execd(p.pid), 5000, 'exec')
    expect(readFileSync(`/proc/${p.pid}/cmdline`, 'latin1')).toBe('renamed-sleeper\u0000100\u0000')
    expect(readFileSync(`/proc/${p.pid}/cmdline`, 'latin1')).toBe(readFileSync(`/proc/${theirs.pid}/cmdline`, 'latin1'))
    expect(readlinkSync(`/proc/${p.pid}/exe`)).toBe(readlinkSync(`/proc/${theirs.pid}/exe`))
  })
})

describe('uid and gid', () => {
  function ids(pid: number) {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const line = (name: string) =>
      (status.match(new RegExp(`^${name}:[ \\t]*(.*)$`, 'm'))?.[1] ?? '').split(/\s+/).filter(Boolean)
    return { uid: line('Uid'), gid: line('Gid'), groups: line('Groups') }
  }

  it('runs the child as uid/gid 65534 with no supplementary groups, as child_process does', async (ctx) => {
    if (!isRoot) return ctx.skip('needs root to change credentials')
    const p = sup('sleep', ['100'], { uid: 65534, gid: 65534 })
    const theirs = others.spawn('sleep', ['100'], { uid: 65534, gid: 65534, stdio: 'ignore' })
    await waitFor(() => readFileSync(`/proc/${theirs.pid}/cmdline`, 'latin1').startsWith('sleep'), 5000, 'exec')
    expect(ids(p.pid)).toEqual({
      uid: ['65534', '65534', '65534', '65534'],
      gid: ['65534', '65534', '65534', '65534'],
      groups: [],
    })
    expect(ids(p.pid)).toEqual(ids(theirs.pid as number))
    // Still ours to stop: root may signal it.
    expect((await p.stop({ graceMs: 1000 })).outcome).toBe('exited')
  })

  it('with uid alone keeps the gid and drops the supplementary groups, as child_process does', async (ctx) => {
    if (!isRoot) return ctx.skip('needs root to change credentials')
    const p = sup('sleep', ['100'], { uid: 65534 })
    const theirs = others.spawn('sleep', ['100'], { uid: 65534, stdio: 'ignore' })
    await waitFor(() => readFileSync(`/proc/${theirs.pid}/cmdline`, 'latin1').startsWith('sleep'), 5000, 'exec')
    expect(ids(p.pid)).toEqual(ids(theirs.pid as number))
    expect(ids(p.pid).uid).toEqual(['65534', '65534', '65534', '65534'])
  })

  it('a child that dropped to nobody still dies with its SIGKILLed supervisor', async (ctx) => {
    if (!isRoot) return ctx.skip('needs root to change credentials')
    const node = others.spawn(process.execPath, [
      join(FIXTURES, 'supervisor-as.cjs'),
      PROCWARD,
      JSON.stringify({ uid: 65534, gid: 65534 }),
    ])
    const line: string = await new Promise((resolve) => node.stdout?.once('data', (d) => resolve(String(d).trim())))
    const [supPid, childPid] = line.split(' ').map(Number) as [number, number]
    others.track(childPid)
    expect(ids(childPid).uid?.[0]).toBe('65534')
    expect(aliveInProcTable(childPid)).toBe(true)
    process.kill(supPid, 'SIGKILL')
    await waitFor(() => !aliveInProcTable(childPid), 5000, 'the orphaned nobody child to die')
  })

  it('leaves this process dumpable (its /proc entries its own) after a credential change', async (ctx) => {
    if (!isRoot) return ctx.skip('needs root to start a process with only CAP_SETUID/CAP_SETGID')
    const stdout = await nodeThroughSetpriv(
      ctx,
      [
        '--reuid=1000',
        '--regid=1000',
        '--clear-groups',
        '--inh-caps=+setuid,+setgid',
        '--ambient-caps=+setuid,+setgid',
      ],
      [join(FIXTURES, 'dumpable.cjs'), PROCWARD],
      'with ambient capabilities',
    )
    expect(JSON.parse(stdout)).toEqual({
      uid: 1000,
      before: 1000,
      after: 1000,
      child: '65534',
      exit: expect.anything(),
    })
  })

  it('as non-root: EPERM from setuid/setgid, shaped like a spawn error, nothing left behind', async (ctx) => {
    if (!isRoot) return ctx.skip('needs root to start a process as nobody')
    const script = `
      const { spawnSupervised } = require(${JSON.stringify(PROCWARD)});
      const out = {};
      for (const [k, o] of [['uid', { uid: 0 }], ['gid', { gid: 0 }]]) {
        try { spawnSupervised('true', ['x'], o); out[k] = 'spawned' }
        catch (e) { out[k] = { message: e.message, code: e.code, errno: e.errno, syscall: e.syscall, path: e.path, spawnargs: e.spawnargs } }
      }
      out.children = require('fs').readFileSync('/proc/self/task/' + process.pid + '/children', 'utf8');
      console.log(JSON.stringify(out))`
    const stdout = await nodeThroughSetpriv(ctx, AS_NOBODY, ['-e', script])
    const res = JSON.parse(stdout)
    const common = { code: 'EPERM', errno: -1, path: 'true', spawnargs: ['x'] }
    expect(res.uid).toEqual({
      ...common,
      message: 'spawn true EPERM (setuid: operation not permitted)',
      syscall: 'setuid',
    })
    expect(res.gid).toEqual({
      ...common,
      message: 'spawn true EPERM (setgid: operation not permitted)',
      syscall: 'setgid',
    })
    expect(res.children.trim()).toBe('')
  })
})

describe('options are read once', () => {
  it('a getter that changes its answer after validation cannot leave a child without a handle', () => {
    const ac = new AbortController()
    let reads = 0
    const options = {
      stdio: 'ignore' as const,
      get signal() {
        reads++
        return reads <= 1 ? ac.signal : ({ aborted: false } as AbortSignal)
      },
    }
    const p = sup('sleep', ['100'], options)
    expect(reads).toBe(1)
    ac.abort()
    return p.exited.then((info) => expect(info.signal).toBe('SIGTERM'))
  })
})
