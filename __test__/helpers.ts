// Helpers for tests against real processes. They read the process table
// directly (/proc), independently of procward's own parser, so a bug there
// cannot hide itself.
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process'
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterEach, expect, type TestContext } from 'vitest'
import { getProcessInfo, type SupervisedProcess, spawnSupervised } from '../index.js'

export const FIXTURES = join(__dirname, 'fixtures')
/** The package's entry, for fixtures and scripts run in processes of their own. */
export const PROCWARD = join(__dirname, '..', 'index.js')
/** The `procward` command. */
export const CLI = join(__dirname, '..', 'bin', 'procward.js')
export const NODE = process.execPath
export const isRoot = process.getuid?.() === 0
/**
 * This run is under Bun (`bun --bun vitest run`): its child_process, its
 * errors and its process.env are Bun's, not Node's, so a test that compares
 * procward with child_process, or reads Node's internals, says so and skips
 * that part.
 */
export const IS_BUN = typeof process.versions.bun === 'string'
/**
 * The Node that runs a daemon serving on an inherited socket
 * (`server.listen({ fd: 3 })`): Bun's node:http accepts nothing on one
 * (1.4.5), so under Bun the test daemons run on the Node on PATH.
 */
export const DAEMON_NODE = IS_BUN ? 'node' : NODE

/** python3 with ctypes is here (the ptrace fixture needs it). */
export function hasPython(): boolean {
  return spawnSync('python3', ['-c', 'import ctypes'], { stdio: 'ignore' }).status === 0
}
/**
 * What `node -e code` printed run as nobody (uid and gid 65534): this node,
 * or (when nobody may not run it, e.g. one cached under /root) the one on
 * PATH; '' when neither ran and printed.
 */
export function nodeAsNobody(code: string): string {
  for (const node of [process.execPath, 'node']) {
    const r = spawnSync(node, ['-e', code], { uid: 65534, gid: 65534, encoding: 'utf8' })
    if (r.status === 0 && r.stdout) return r.stdout
  }
  return ''
}
/** execFile as a promise of `{ stdout, stderr }`; rejects on a non-zero exit. */
export const run = promisify(execFile)

/** The state letter from /proc/<pid>/stat, or null when the pid is gone. */
export function procState(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
  } catch {
    return null
  }
}

/** Alive per the process table: present and neither zombie nor dead. */
export function aliveInProcTable(pid: number): boolean {
  const s = procState(pid)
  return s !== null && s !== 'Z' && s !== 'X'
}

/** Running processes (not zombies) whose command line is exactly `argv`. */
export function runningWithArgv(argv: string[]): number[] {
  const want = `${argv.join('\0')}\0`
  const out: number[] = []
  for (const ent of readdirSync('/proc')) {
    if (!/^\d+$/.test(ent)) continue
    try {
      if (readFileSync(`/proc/${ent}/cmdline`, 'latin1') === want && aliveInProcTable(Number(ent)))
        out.push(Number(ent))
    } catch {
      // gone
    }
  }
  return out
}

/** What `process.kill(pid, 0)` says: the check this library replaces. */
export function killZeroSaysAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Polls `cond` (test-side only) until true, or throws after `timeoutMs`. */
export async function waitFor(cond: () => boolean, timeoutMs = 5000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(5)
  }
}

/** Children of a pid, from /proc. */
export function childrenOf(pid: number): number[] {
  const out: number[] = []
  for (const ent of readdirSync('/proc')) {
    if (!/^\d+$/.test(ent)) continue
    try {
      const stat = readFileSync(`/proc/${ent}/stat`, 'latin1')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid === pid) out.push(Number(ent))
    } catch {
      // raced with an exit
    }
  }
  return out
}

/** Our own zombie children (there must be none after each test). */
export function zombieChildren(): number[] {
  return childrenOf(process.pid).filter((p) => procState(p) === 'Z')
}

/** Open fds of this process, not counting procward's bounded stat-fd cache. */
export function openFds(): string[] {
  const out: string[] = []
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`)
      if (/^\/proc\/\d+\/stat$/.test(target)) continue
      out.push(`${fd} -> ${target}`)
    } catch {
      // the fd readdir itself used
    }
  }
  return out
}

/**
 * The fds opened since `before` that are still open once procward's native
 * watchers have finished: each holds a duplicate of a child's pidfd until
 * it has seen the reap, which can be a moment after `'exit'` (bounded).
 */
export async function fdsLeftSince(before: string[], timeoutMs = 2000): Promise<string[]> {
  const left = () => openFds().filter((fd) => !before.includes(fd))
  await waitFor(() => left().length === 0, timeoutMs, 'the native watchers to close their pidfds').catch(() => {})
  return left()
}

/** Processes carrying `tag` in their environment (inherited by descendants). */
export function taggedProcesses(tag: string): number[] {
  const needle = Buffer.from(`PROCWARD_TEST_TAG=${tag}\0`)
  const out: number[] = []
  for (const ent of readdirSync('/proc')) {
    if (!/^\d+$/.test(ent) || Number(ent) === process.pid) continue
    try {
      if (readFileSync(`/proc/${ent}/environ`).includes(needle)) out.push(Number(ent))
    } catch {
      // gone, or not ours to read
    }
  }
  return out
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ').trim()
  } catch {
    return '?'
  }
}

/** This test process's tag (see `trackProcesses`). */
export const TEST_TAG = `procward-test-${process.pid}`

export class Spawned {
  private readonly children: ChildProcess[] = []
  // Each child's 'exit', listened for from its spawn (every runtime emits it
  // on a later tick): Deno sets signalCode as soon as kill() is called,
  // before the child is reaped, so only 'exit' says the process is gone.
  private readonly exits = new WeakMap<ChildProcess, Promise<void>>()
  private readonly exited = new WeakSet<ChildProcess>()
  private readonly groups: number[] = []
  private readonly pids: number[] = []
  /** Every process started here, and all its descendants (daemons that
   * double-forked away included), carry this in their environment, so the
   * cleanup finds them even when a test failed before learning their pids. */
  readonly tag = TEST_TAG

  spawn(cmd: string, args: string[], opts: Parameters<typeof spawn>[2] = {}): ChildProcess {
    const env = { ...(opts.env ?? process.env), PROCWARD_TEST_TAG: this.tag }
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'], ...opts, env })
    this.children.push(child)
    this.exits.set(
      child,
      new Promise<void>((resolve) =>
        child.once('exit', () => {
          this.exited.add(child)
          resolve()
        }),
      ),
    )
    if (opts.detached && child.pid) this.groups.push(child.pid)
    return child
  }

  /** A pid started some other way (a grandchild, a daemon) to kill at the end. */
  track(pid: number): void {
    this.pids.push(pid)
  }

  async cleanup(): Promise<void> {
    for (const pgid of this.groups) {
      try {
        process.kill(-pgid, 'SIGKILL')
      } catch {
        // group already empty
      }
    }
    for (const pid of this.pids) {
      if (aliveInProcTable(pid)) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          // gone
        }
      }
    }
    // A spawn that failed (ENOENT, say) has no pid and gives no 'exit'.
    const running = this.children.filter((c) => c.pid !== undefined && !this.exited.has(c))
    const ours = new Set(running.length > 0 ? childrenOf(process.pid) : [])
    await Promise.all(
      running.map(async (c) => {
        // Not c.kill(): Deno's does nothing once any signal was sent. By
        // pid, while it is still a child of ours (not reaped: no reuse).
        if (c.pid !== undefined && ours.has(c.pid)) {
          try {
            process.kill(c.pid, 'SIGKILL')
          } catch {
            // reaped just now
          }
        }
        let timer: NodeJS.Timeout | undefined
        await Promise.race([
          this.exits.get(c),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`child ${c.pid} gave no 'exit' 10 s after SIGKILL`)), 10_000)
          }),
        ]).finally(() => clearTimeout(timer))
      }),
    )
    this.children.length = 0
    this.groups.length = 0
    this.pids.length = 0
  }
}

/** First line a child prints on stdout. */
export function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = ''
    const onData = (d: Buffer) => {
      buf += d.toString()
      const nl = buf.indexOf('\n')
      if (nl >= 0) {
        child.stdout?.off('data', onData)
        resolve(buf.slice(0, nl))
      }
    }
    child.stdout?.on('data', onData)
    // On 'close', not 'exit': a grandchild may still hold the pipe and print.
    child.stdout?.once('close', () => reject(new Error(`stdout closed before a line (got ${JSON.stringify(buf)})`)))
  })
}

/**
 * Forces the next process created on this machine to get `pid`, by writing
 * pid - 1 to /proc/sys/kernel/ns_last_pid (root only) and spawning, retrying
 * when another process wins the race.
 */
export async function spawnOnPid(
  tracker: Spawned,
  pid: number,
  cmd: string,
  args: string[],
  opts: Parameters<typeof spawn>[2] = {},
): Promise<ChildProcess> {
  for (let attempt = 0; attempt < 200; attempt++) {
    writeFileSync('/proc/sys/kernel/ns_last_pid', String(pid - 1))
    const child = tracker.spawn(cmd, args, opts)
    if (child.pid === pid) return child
    child.kill('SIGKILL')
    await new Promise((r) => child.once('exit', r))
  }
  throw new Error(`could not get pid ${pid} after 200 attempts`)
}

/** Tracks supervised children so every test can stop what it started. */
export class Supervised {
  private readonly started: SupervisedProcess[] = []

  spawn(...args: Parameters<typeof spawnSupervised>): SupervisedProcess {
    const p = spawnSupervised(...args)
    this.started.push(p)
    return p
  }

  async cleanup(): Promise<void> {
    for (const p of this.started.splice(0)) {
      if (p.exitInfo === null) await p.stop({ signal: 'SIGKILL', killTimeoutMs: 5000 })
    }
  }
}

/** First line a supervised child prints on its 'pipe' stdout. */
export function firstLineOf(p: SupervisedProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = ''
    const onData = (d: Buffer) => {
      buf += String(d)
      const nl = buf.indexOf('\n')
      if (nl >= 0) {
        p.stdout?.off('data', onData)
        resolve(buf.slice(0, nl))
      }
    }
    p.stdout?.on('data', onData)
    p.exited.then(() => reject(new Error(`exited before a line: ${JSON.stringify(buf)}`)))
  })
}

/**
 * Starts a sleeper, notes its identity, kills it, and puts a new sleeper on
 * the very same pid at once (root only; see spawnOnPid). No delay: the
 * newcomer may start within the same clock tick as the old process.
 */
export async function reusePid(
  tracker: Spawned,
): Promise<{ pid: number; oldIdentity: string; newcomer: ChildProcess }> {
  const first = tracker.spawn('sleep', ['100'])
  const pid = first.pid as number
  const oldIdentity = getProcessInfo(pid)?.identity as string
  first.kill('SIGKILL')
  await new Promise((r) => first.once('exit', r))
  const newcomer = await spawnOnPid(tracker, pid, 'sleep', ['100'])
  return { pid, oldIdentity, newcomer }
}

/**
 * Per test file: trackers for supervised and child_process children, stopped
 * after every test, which must then leave no zombie child behind.
 */
export function trackProcesses(): { sup: Supervised['spawn']; others: Spawned } {
  // Inherited by every child that does not get an explicit env, supervised
  // ones included: the leak check below finds whatever escaped.
  process.env.PROCWARD_TEST_TAG = TEST_TAG
  const supervised = new Supervised()
  const others = new Spawned()
  afterEach(async () => {
    await supervised.cleanup()
    await others.cleanup()
    expect(zombieChildren()).toEqual([])
    // Anything the test started that still runs now escaped its cleanup
    // (or procward failed to kill it): kill it, and fail the test.
    const running = () => taggedProcesses(TEST_TAG).filter(aliveInProcTable)
    let leaked: string[] = []
    try {
      await waitFor(() => running().length === 0, 2000, 'killed test processes to die')
    } catch {
      leaked = running().map((pid) => `${pid}: ${cmdline(pid)}`)
      for (const pid of running()) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          // gone
        }
      }
    }
    expect(leaked).toEqual([])
  })
  return { sup: supervised.spawn.bind(supervised), others }
}

/** A loopback port nothing listens on now: bound to 0, read, closed. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo
      srv.close(() => resolve(port))
    })
  })
}

/** Per test file: `tempDir()` makes a fresh directory, removed after each test. */
export function tempDirs(prefix: string): () => string {
  const dirs: string[] = []
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
  })
  return () => {
    const d = mkdtempSync(join(tmpdir(), prefix))
    dirs.push(d)
    return d
  }
}

/**
 * A process whose main thread has ended while another thread runs on and
 * holds an exclusive flock on `lockPath` (fixtures/leader-exits.c, built
 * with cc): `/proc/<pid>/stat` says Z for it. `beforeExit` runs while its
 * main thread still runs (to take its identity, say). Null without cc.
 */
export async function leaderExited(
  spawned: Spawned,
  lockPath: string,
  dir: string,
  beforeExit: (pid: number) => void = () => {},
): Promise<number | null> {
  const exe = join(dir, 'leader-exits')
  const cc = spawnSync('cc', ['-O', '-pthread', '-o', exe, join(FIXTURES, 'leader-exits.c')])
  if (cc.status !== 0) return null
  const child = spawned.spawn(exe, [lockPath], { stdio: ['pipe', 'pipe', 'inherit'] })
  const pid = Number(await firstLine(child))
  beforeExit(pid)
  child.stdin?.write('go\n')
  await waitFor(
    () => procState(pid) === 'Z' && readdirSync(`/proc/${pid}/task`).length === 2,
    5000,
    'its main thread to end while the other runs',
  )
  return pid
}

/**
 * A process that runs throughout while its threads come and go
 * (fixtures/thread-churn.c, built with cc): `exec`, its main thread ended
 * and another thread calling execve, again and again; `relay`, its main
 * thread ended and each thread starting the next and ending. Its pid, once
 * the churn runs; null without cc.
 */
export async function threadChurn(spawned: Spawned, mode: 'exec' | 'relay', dir: string): Promise<number | null> {
  const exe = join(dir, 'thread-churn')
  const cc = spawnSync('cc', ['-O', '-pthread', '-o', exe, join(FIXTURES, 'thread-churn.c')])
  if (cc.status !== 0) return null
  const child = spawned.spawn(exe, [mode], { stdio: ['ignore', 'pipe', 'inherit'] })
  const pid = Number(await firstLine(child))
  await waitFor(() => procState(pid) === 'Z', 5000, 'its main thread to end')
  return pid
}

/** The error `fn` throws, or a failure when it does not throw. */
export function thrown(fn: () => unknown): NodeJS.ErrnoException & Record<string, unknown> {
  try {
    fn()
  } catch (e) {
    return e as NodeJS.ErrnoException & Record<string, unknown>
  }
  throw new Error('expected a throw')
}

/**
 * Calls `onLine` with every line (without its newline) `stream` delivers.
 * Returns what has come after the last newline so far.
 */
export function onLines(
  stream: NodeJS.ReadableStream | null | undefined,
  onLine: (line: string) => void,
): () => string {
  let buf = ''
  stream?.on('data', (d: Buffer | string) => {
    buf += String(d)
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl)
      buf = buf.slice(nl + 1)
      onLine(line)
    }
  })
  return () => buf
}

/** The JSON lines `stream` delivers (a process's events), collected as they come. */
export function jsonLines<T = Record<string, unknown>>(stream: NodeJS.ReadableStream | null | undefined): T[] {
  const out: T[] = []
  onLines(stream, (line) => out.push(JSON.parse(line)))
  return out
}

/** A child's stdout, line by line: each call resolves with the next line. */
export function lines(child: ChildProcess): () => Promise<string> {
  const queue: string[] = []
  const waiting: { resolve: (line: string) => void; reject: (e: Error) => void }[] = []
  const rest = onLines(child.stdout, (line) => {
    const w = waiting.shift()
    if (w) w.resolve(line)
    else queue.push(line)
  })
  child.stdout?.once('close', () => {
    for (const w of waiting.splice(0))
      w.reject(new Error(`stdout closed before a line (left: ${JSON.stringify(rest())})`))
  })
  return () => {
    const line = queue.shift()
    if (line !== undefined) return Promise.resolve(line)
    return new Promise((resolve, reject) => waiting.push({ resolve, reject }))
  }
}

/**
 * The workers a supervised workers.sh (or ignore-term.sh) announces on its
 * first line ("ready <worker1> <worker2>"), tracked to be killed at the end.
 */
export async function announcedWorkers(p: SupervisedProcess, tracker: Spawned): Promise<number[]> {
  const [, ...workers] = (await firstLineOf(p)).split(' ')
  const pids = workers.map(Number)
  for (const w of pids) tracker.track(w)
  return pids
}

/**
 * GET `path` of a daemon answering JSON (fixtures/listen-daemon.cjs,
 * http-daemon.cjs: `{ pid, ... }`) on a new connection; rejects with the
 * connection's error (ECONNREFUSED, ECONNRESET) for a caller that counts them.
 */
export function getJson<T = { pid: number; [k: string]: unknown }>(
  port: number,
  path = '/',
  host = '127.0.0.1',
): Promise<T> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host, port, path, agent: false }, (res) => {
      let body = ''
      res.on('data', (d) => {
        body += d
      })
      res.on('end', () => {
        try {
          resolve(JSON.parse(body))
        } catch (err) {
          reject(err)
        }
      })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.setTimeout(20_000, () => req.destroy(new Error('timed out')))
  })
}

/** What fixtures/http-daemon.cjs on `port` says about itself, or null when nothing answers. */
export function askDaemon(port: number): Promise<{ pid: number; args: string[] } | null> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      let body = ''
      res.on('data', (d) => (body += d))
      res.on('end', () => resolve(JSON.parse(body)))
    })
    req.on('error', () => resolve(null))
    req.setTimeout(2000, () => {
      req.destroy()
      resolve(null)
    })
  })
}

let unshareWorks: boolean | undefined
/** Whether this process may start a pid namespace (root, and unshare(1) does it here). */
export function canUnsharePid(): boolean {
  unshareWorks ??= isRoot && spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true']).status === 0
  return unshareWorks
}

/**
 * `sh -c script args...` as pid 1 of a new pid namespace, leading a session
 * and group of its own, killed with its `unshare`: the command and its
 * arguments, for spawn or execFile (see canUnsharePid).
 */
export function pidNamespaceShell(script: string, ...args: string[]): [string, string[]] {
  return ['unshare', ['--pid', '--fork', '--mount-proc', '--kill-child', 'setsid', 'sh', '-c', script, ...args]]
}

const FREEZER = '/sys/fs/cgroup/freezer'
/** Whether a cgroup-v1 freezer serves here (root, and the hierarchy mounted). */
export const hasFreezer = (): boolean => isRoot && existsSync(`${FREEZER}/cgroup.procs`)

/**
 * Runs `body` with a cgroup-v1 freezer group of its own (see hasFreezer): a
 * task frozen there cannot act on SIGKILL until it is thawed, like one in
 * uninterruptible sleep (v2's own freezer lets a SIGKILL through, so it
 * would not stand for one). Thawed, emptied and removed after, whatever
 * happened.
 */
export async function withFreezer(
  body: (freezer: { freeze(pid: number): Promise<void>; thaw(): void }) => Promise<void>,
): Promise<void> {
  const cg = `${FREEZER}/procward-test-${process.pid}`
  mkdirSync(cg)
  const thaw = () => writeFileSync(`${cg}/freezer.state`, 'THAWED')
  const freeze = async (pid: number) => {
    writeFileSync(`${cg}/cgroup.procs`, String(pid))
    writeFileSync(`${cg}/freezer.state`, 'FROZEN')
    await waitFor(() => readFileSync(`${cg}/freezer.state`, 'utf8').trim() === 'FROZEN', 5000, 'the freeze')
  }
  try {
    await body({ freeze, thaw })
  } finally {
    thaw()
    await waitFor(() => readFileSync(`${cg}/cgroup.procs`, 'utf8').trim() === '', 5000, 'the freezer to empty')
    rmdirSync(cg)
  }
}

/** setpriv's options for a process of nobody's, without root's groups. */
export const AS_NOBODY = ['--reuid=65534', '--regid=65534', '--clear-groups']

/**
 * The stdout of `node ...args` started through setpriv with `privileges`
 * (a uid change, capabilities: root only). Skips the test, saying why,
 * where node cannot be run so here (`what`: "as nobody", ...).
 */
export async function nodeThroughSetpriv(
  ctx: TestContext,
  privileges: string[],
  args: string[],
  what = 'as nobody',
): Promise<string> {
  try {
    return (await run('setpriv', [...privileges, NODE, ...args])).stdout
  } catch (e) {
    return ctx.skip(`cannot run node ${what} here: ${(e as Error).message.split('\n')[0]}`)
  }
}

/** Runs `cmd args` to its end; the lines of its stdout. */
export async function outputLines(tracker: Spawned, cmd: string, args: string[]): Promise<string[]> {
  const p = tracker.spawn(cmd, args)
  let out = ''
  p.stdout?.on('data', (d) => (out += d))
  await new Promise((r) => p.once('exit', r))
  return out.trim().split('\n')
}

/** Runs `node fixtures/<fixture> <procward> ...args` to its end. */
export function runFixture(fixture: string, ...args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(NODE, [join(FIXTURES, fixture), PROCWARD, ...args])
}

/**
 * Runs `node fixtures/<fixture> <procward> ...args` to its end with no more
 * than 64 fds (RLIMIT_NOFILE): for the fixtures that fill the rest
 * (fixtures/fd-table.cjs) to provoke EMFILE.
 */
export function runWithFewFds(fixture: string, ...args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run('sh', ['-c', 'ulimit -n 64 && exec "$0" "$@"', NODE, join(FIXTURES, fixture), PROCWARD, ...args])
}

/** All `stream` delivers, to its end. */
export async function readAll(stream: NodeJS.ReadableStream | null | undefined): Promise<string> {
  if (!stream) throw new Error('no stream')
  let out = ''
  for await (const chunk of stream) out += String(chunk)
  return out
}
