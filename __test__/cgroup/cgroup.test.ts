// Containment (Linux cgroup v2): real processes that leave their process
// group (setsid, double fork, a uid change), real cgroups, checked through
// /proc and the cgroup file system. Skipped, with the reason, where
// cgroupSupport() says containment cannot work.
import { type ChildProcess, spawnSync } from 'node:child_process'
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { constants as osConstants } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import {
  cgroupSupport,
  type SpawnSupervisedOptions,
  type SupervisedProcess,
  Supervisor,
  spawnSupervised,
} from '../../index.js'
import {
  aliveInProcTable,
  CLI,
  childrenOf,
  FIXTURES,
  fdsLeftSince,
  firstLineOf,
  hasFreezer,
  jsonLines,
  NODE,
  nodeAsNobody,
  openFds,
  PROCWARD,
  procState,
  run,
  runWithFewFds,
  sleep,
  tempDirs,
  thrown,
  trackProcesses,
  waitFor,
  withFreezer,
} from '../helpers'

const { sup, others } = trackProcesses()
const tempDir = tempDirs('procward-cgroup-')
const OWNER = join(FIXTURES, 'cgroup-owner.cjs')
const SUPERVISOR_PROCESS = join(FIXTURES, 'supervisor-process.cjs')
const ENOSYS = osConstants.errno.ENOSYS

const support = cgroupSupport()
const skipReason = support.available ? null : `cgroup containment unavailable here: ${support.reason}`

/** Pids in a cgroup (and below it), from its cgroup.procs. */
function members(cgroup: string): number[] {
  return readFileSync(join(cgroup, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number)
}

/** The members of `cgroup`, once `cond` holds for them. */
async function membersWhen(cgroup: string, cond: (pids: number[]) => boolean, what: string): Promise<number[]> {
  let pids: number[] = []
  await waitFor(
    () => {
      pids = members(cgroup)
      return cond(pids)
    },
    5000,
    what,
  )
  return pids
}

/** `sh -c script` contained (stdin a pipe), once it printed 'ready' and its cgroup's members met `cond`. */
async function containedWhenReady(
  script: string,
  cond: (pids: number[]) => boolean,
  what: string,
  options: SpawnSupervisedOptions = {},
) {
  const p = sup('sh', ['-c', script], { cgroup: true, stdio: ['pipe', 'pipe', 'inherit'], ...options })
  const cgroup = p.cgroup as string
  expect(await firstLineOf(p)).toBe('ready')
  return { p, cgroup, pids: await membersWhen(cgroup, cond, what) }
}

/** A process's group id, from /proc (0 once it is gone). */
function pgidOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2])
  } catch {
    return 0
  }
}

/** This process's child cgroups under the default parent. */
function ourCgroups(): string[] {
  if (!support.parent || !existsSync(support.parent)) return []
  return readdirSync(support.parent).filter((n) => new RegExp(`^d?${process.pid}-\\d+-\\d+$`).test(n))
}

/** First JSON line a child_process child prints. */
function jsonLine(child: ChildProcess): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let buf = ''
    child.stdout?.on('data', (d) => {
      buf += d
      const nl = buf.indexOf('\n')
      if (nl >= 0) resolve(JSON.parse(buf.slice(0, nl)))
    })
    child.once('exit', (code, signal) => reject(new Error(`exited (${code ?? signal}) before a line: ${buf}`)))
  })
}

/** node's arguments for an owner (cgroup-owner.cjs) of a contained `sh -c script`. */
function ownerArgs(script: string): string[] {
  return [OWNER, PROCWARD, 'sh', JSON.stringify(['-c', script]), JSON.stringify({ cgroup: true })]
}

/** fixtures/cgroup-owner.cjs running `sh -c script` contained, once it reported the cgroup and the script's first line. */
async function containedOwner(script: string) {
  const owner = others.spawn(NODE, ownerArgs(script))
  const info = await jsonLine(owner)
  return { owner, cgroup: info.cgroup as string, line: Number(info.line) }
}

/** The live guardians among `pid`'s children (a new one's cmdline reads empty for an instant after its exec). */
function guardiansOf(pid: number): number[] {
  return childrenOf(pid).filter((p) => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, 'latin1').startsWith('procward-guardian') && aliveInProcTable(p)
    } catch {
      return false
    }
  })
}

/** Our live children other than procward's guardian (a child of this process). */
function childrenButGuardian(): number[] {
  return childrenOf(process.pid).filter((p) => {
    try {
      return !readFileSync(`/proc/${p}/cmdline`, 'latin1').startsWith('procward-guardian')
    } catch {
      return false
    }
  })
}

describe('cgroupSupport', () => {
  it('answers the contract shape, with a reason exactly when unavailable', () => {
    expect(Object.keys(support).sort()).toEqual(['available', 'parent', 'reason'])
    expect(typeof support.available).toBe('boolean')
    if (support.available) {
      expect(support.reason).toBeNull()
      expect(support.parent).toMatch(/^\/.*\/procward$/)
    } else {
      expect(support.reason).toEqual(expect.any(String))
    }
  })

  it('as a user the hierarchy is not delegated to, says why, and a contained spawn throws ERR_CGROUP_UNAVAILABLE', (ctx) => {
    if (process.getuid?.() !== 0) return ctx.skip('needs root to run a check as nobody')
    const code = `
      const p = require(${JSON.stringify(PROCWARD)})
      const out = { support: p.cgroupSupport() }
      try { p.spawnSupervised('true', [], { cgroup: true }) } catch (e) { out.error = { code: e.code, message: e.message } }
      // A supervisor fails at once: no crash loop of spawn errors, nothing run uncontained.
      const sup = new p.Supervisor({ command: 'sleep', args: ['1000'], spawn: { cgroup: true } })
      sup.start().then(() => { out.started = true }, (e) => { out.supervisor = { code: e.code, state: sup.state, restarts: sup.status().restarts } })
        .finally(() => console.log(JSON.stringify(out)))`
    // The node on PATH would do: the check is the same native code either way.
    const stdout = nodeAsNobody(code)
    if (stdout === '') return ctx.skip('cannot run node as nobody here')
    const out = JSON.parse(stdout)
    expect(out.support.available).toBe(false)
    expect(out.support.reason).toEqual(expect.any(String))
    expect(out.error.code).toBe('ERR_CGROUP_UNAVAILABLE')
    expect(out.error.message).toContain(out.support.reason)
    expect(out.supervisor).toEqual({ code: 'ERR_CGROUP_UNAVAILABLE', state: 'failed', restarts: 0 })
  })
})

/**
 * A contained `sh` started by a fresh Node (`cmd args -e ...`, with `env`)
 * where clone3 is not used: it sees itself in its cgroup, and its setsid
 * member is gone with the cgroup at the exit.
 */
async function expectContainedWithoutClone3(cmd: string, args: string[], env: Record<string, string>): Promise<void> {
  const code = `
      const p = require(${JSON.stringify(PROCWARD)})
      const c = p.spawnSupervised('sh', ['-c', 'cat /proc/self/cgroup; setsid sleep 1000 & echo $!; read x || true'], { cgroup: true, stdio: ['pipe', 'pipe', 'inherit'] })
      let out = ''
      c.stdout.on('data', (d) => (out += d))
      // Read while the leader waits on its stdin (it lives until then).
      const cgroup = c.cgroup
      c.stdin.end()
      // The output is complete once stdout closes (it may come after the exit).
      Promise.all([c.exited, new Promise((r) => c.stdout.once('close', r))]).then(() => {
        const member = Number(out.trim().split('\\n').pop())
        const stat = require('node:fs').existsSync('/proc/' + member + '/stat') ? require('node:fs').readFileSync('/proc/' + member + '/stat', 'latin1') : ''
        const state = stat ? stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) : null
        console.log(JSON.stringify({ cgroup, out, member, state, dirExists: require('node:fs').existsSync(cgroup) }))
      })`
  const child = others.spawn(cmd, [...args, '-e', code], { env: { ...process.env, ...env } })
  const r = (await jsonLine(child)) as {
    cgroup: string
    out: string
    member: number
    state: string | null
    dirExists: boolean
  }
  // The shell saw itself in the child's cgroup (the v2 line, relative to the hierarchy).
  const v2 = r.out.split('\n').find((l) => l.startsWith('0::')) as string
  expect(r.cgroup.endsWith(v2.slice(3))).toBe(true)
  expect(r.member).toBeGreaterThan(0)
  expect(r.state === null || r.state === 'Z').toBe(true)
  expect(r.dirExists).toBe(false)
}

/**
 * A supervisor process with a contained daemon (a leader and two setsid'd
 * sleeps, no death signal, so they outlive it), SIGKILLed: what it recorded.
 */
async function predecessorWithCgroup(): Promise<{
  stateFile: string
  cg: { path: string; id: number }
  leader: number
  pids: number[]
}> {
  const stateFile = join(tempDir(), 'state.json')
  const options = {
    command: 'sh',
    args: ['-c', 'setsid sleep 1000 & (setsid sleep 1001 &); exec sleep 1002'],
    stateFile,
    restart: 'never',
    // Outlives its supervisor (no death signal, no guardian): only the
    // successor's takeover can end it.
    spawn: { cgroup: true, parentDeathSignal: false },
  }
  const first = others.spawn(process.execPath, [SUPERVISOR_PROCESS, PROCWARD, JSON.stringify(options)])
  const lines = jsonLines(first.stdout)
  await waitFor(() => lines.some((l) => l.event === 'started'), 10_000, 'the first supervisor to start')
  // The state file is written off the JS thread: wait for the child's record.
  const record = () => {
    try {
      return JSON.parse(readFileSync(stateFile, 'utf8'))
    } catch {
      return null
    }
  }
  await waitFor(() => record()?.child?.cgroup != null, 5000, 'the recorded cgroup')
  const cg = record().child.cgroup as { path: string; id: number }
  // A failed run must not leave the unguarded cgroup behind.
  onTestFinished(async () => {
    if (!existsSync(cg.path)) return
    writeFileSync(join(cg.path, 'cgroup.kill'), '1')
    await waitFor(() => members(cg.path).length === 0, 5000, 'the leftover cgroup to empty')
    rmdirSync(cg.path)
  })
  expect(cg.path).toMatch(/\/d\d+-\d+-\d+$/)
  expect(cg.id).toBe(Number(spawnSync('stat', ['-c', '%i', cg.path], { encoding: 'utf8' }).stdout.trim()))
  let pids: number[] = []
  // The three sleeps (not a shell on its way to exec or to exit).
  const comm = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, 'latin1').trim()
    } catch {
      return ''
    }
  }
  await waitFor(
    () => {
      pids = members(cg.path)
      return pids.length === 3 && pids.every((pid) => comm(pid) === 'sleep')
    },
    5000,
    'three sleeps in the cgroup',
  )
  first.kill('SIGKILL')
  await new Promise((r) => first.once('exit', r))
  await sleep(100)
  expect(pids.filter(aliveInProcTable).length).toBe(pids.length) // nothing else killed them
  const leader = record().child.pid as number
  expect(pids).toContain(leader)
  return { stateFile, cg, leader, pids }
}

describe.skipIf(skipReason !== null)(`containment (${skipReason ?? 'cgroup v2'})`, () => {
  it('kills a setsid grandchild and a double-forked daemon when the leader exits, before exit, and removes the cgroup', async () => {
    // The leader starts a grandchild in a session of its own and a daemon
    // whose parent exits at once (reparented, out of the group), prints
    // ready, and exits when its stdin closes.
    const p = sup('sh', ['-c', 'setsid sleep 1000 & (setsid sleep 1001 & ) ; echo ready; read x || true'], {
      cgroup: true,
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    const cgroup = p.cgroup as string
    expect(cgroup).toMatch(new RegExp(`^${support.parent}/${process.pid}-\\d+-\\d+$`))
    expect(await firstLineOf(p)).toBe('ready')
    // Both left the leader's group (once their setsid ran): a group sweep
    // alone would miss them.
    const pids = await membersWhen(
      cgroup,
      (pids) => {
        const strays = pids.filter((pid) => pid !== p.pid)
        return strays.length === 2 && strays.every((pid) => pgidOf(pid) !== p.pid)
      },
      'a grandchild and a daemon out of the group, in the cgroup',
    )
    const atExit = new Promise<{ alive: number[]; dirExists: boolean; cgroup: string | null }>((resolve) =>
      p.once('exit', () =>
        resolve({ alive: pids.filter(aliveInProcTable), dirExists: existsSync(cgroup), cgroup: p.cgroup }),
      ),
    )
    p.stdin?.end()
    const seen = await atExit
    expect(seen).toEqual({ alive: [], dirExists: false, cgroup: null })
    expect(p.exitInfo).toMatchObject({ code: 0 })
    expect(p.resourceUsage().cpuUsec).toEqual(expect.any(Number))
  })

  it('with the event loop blocked, the reaper drains and reaps a contained child itself; its exit is delivered after', async () => {
    // The leader and a setsid member; the leader exits while this thread
    // spins. No JS runs until the spin ends, so whatever happens to the
    // process table meanwhile is native work.
    const { p, cgroup, pids } = await containedWhenReady(
      'setsid sleep 1000 & echo ready; read x',
      (pids) => pids.length === 2,
      'the member in the cgroup',
    )
    const member = pids.find((pid) => pid !== p.pid) as number
    let exited = false
    p.once('exit', () => (exited = true))
    process.kill(p.pid, 'SIGKILL')
    const deadline = Date.now() + 10_000
    // The leader is ours: reaped (gone) by procward. The member was
    // reparented: dead is enough (its new parent reaps it, in its time).
    const settled = () => procState(p.pid) === null && !aliveInProcTable(member) && !existsSync(cgroup)
    while (!settled() && Date.now() < deadline) {
      // spin: the loop is blocked
    }
    expect({ leader: procState(p.pid), memberAlive: aliveInProcTable(member), dirExists: existsSync(cgroup) }).toEqual({
      leader: null,
      memberAlive: false,
      dirExists: false,
    })
    expect(exited).toBe(false)
    await new Promise((r) => setImmediate(r))
    await waitFor(() => exited, 5000, "the 'exit'")
    expect(p.exitInfo).toMatchObject({ signal: 'SIGKILL' })
  })

  it('a contained exit whose members are still dying after the kill waits for them all, then removes the cgroup', async () => {
    // Many members: the cgroup is rarely empty the instant it is killed,
    // so the wait for populated 0 is handed on, not done here.
    const { p, cgroup, pids } = await containedWhenReady(
      'for i in $(seq 40); do setsid sleep 1000 & done; echo ready; read x',
      (pids) => pids.length === 41,
      'forty members',
    )
    const atExit = new Promise<{ alive: number[]; dirExists: boolean }>((resolve) =>
      p.once('exit', () => resolve({ alive: pids.filter(aliveInProcTable), dirExists: existsSync(cgroup) })),
    )
    p.stdin?.end()
    expect(await atExit).toEqual({ alive: [], dirExists: false })
  })

  it('control: without cgroup the same tree escapes the group sweep (what the test above would see)', async () => {
    const p = sup('sh', ['-c', 'setsid sleep 1000 & echo $!; read x || true'], { stdio: ['pipe', 'pipe', 'inherit'] })
    const stray = Number(await firstLineOf(p))
    others.track(stray)
    await waitFor(() => pgidOf(stray) !== p.pid && pgidOf(stray) !== 0, 5000, 'the setsid to run')
    p.stdin?.end()
    await p.exited
    expect(aliveInProcTable(stray)).toBe(true)
  })

  it('stop() kills a member that left the group and ignores SIGTERM: killed, everything gone', async () => {
    // Leader and member both ignore SIGTERM; the member is in its own session.
    const p = sup(
      'sh',
      [
        '-c',
        `trap '' TERM; setsid sh -c "trap '' TERM; while :; do sleep 1; done" & echo ready; while :; do sleep 1; done`,
      ],
      { cgroup: true, stdio: ['ignore', 'pipe', 'inherit'] },
    )
    const cgroup = p.cgroup as string
    expect(await firstLineOf(p)).toBe('ready')
    const pids = await membersWhen(
      cgroup,
      (pids) => pids.some((pid) => pid !== p.pid && pgidOf(pid) !== p.pid),
      'the member out of the group, in the cgroup',
    )
    const r = await p.stop({ graceMs: 200, killTimeoutMs: 3000 })
    expect(r.outcome).toBe('killed')
    expect(r.signals).toEqual(['SIGTERM', 'SIGKILL'])
    expect(pids.filter(aliveInProcTable)).toEqual([])
    expect(existsSync(cgroup)).toBe(false)
  })

  it('kills a contained grandchild that dropped to nobody when its owner is SIGKILLed', async () => {
    // The grandchild changes uid (which clears a death signal) and session:
    // only the guardian's cgroup.kill can reach it.
    const {
      owner,
      cgroup,
      line: grandchild,
    } = await containedOwner('setpriv --reuid=65534 --regid=65534 --clear-groups setsid sleep 1000 & echo $!; wait')
    await waitFor(
      () => readFileSync(`/proc/${grandchild}/status`, 'latin1').includes('Uid:\t65534'),
      5000,
      'the grandchild to run as nobody',
    )
    expect(members(cgroup)).toContain(grandchild)
    owner.kill('SIGKILL')
    await waitFor(() => !aliveInProcTable(grandchild), 5000, 'the guardian to kill the grandchild')
    await waitFor(() => !existsSync(cgroup), 15_000, 'the guardian to remove the cgroup')
  })

  it('when its owner is SIGKILLed, a cgroup the child made below its own goes too (the guardian removes deepest first)', async () => {
    const { owner, cgroup, line: member } = await containedOwner('sleep 1000 & echo $!; wait')
    // What a container runtime inside would do: a sub-cgroup, a member moved there.
    mkdirSync(join(cgroup, 'sub'))
    writeFileSync(join(cgroup, 'sub', 'cgroup.procs'), String(member))
    expect(members(join(cgroup, 'sub'))).toEqual([member])
    owner.kill('SIGKILL')
    await waitFor(() => !aliveInProcTable(member), 5000, 'the guardian to kill the member')
    await waitFor(() => !existsSync(cgroup), 15_000, 'the guardian to remove the cgroup and its sub-cgroup')
  })

  it('cgroups a member nested deeper than PATH_MAX are all removed at the exit, and nothing crashes', async () => {
    const p = sup('sleep', ['1000'], { cgroup: true })
    const cgroup = p.cgroup as string
    // 2100 levels of 'd/' are 4200 bytes below the cgroup: no absolute
    // path reaches the deepest. Made relative to the working directory,
    // as a member could, by a process of its own (chdir is per process).
    const nest = spawnSync(
      process.execPath,
      [
        '-e',
        `const fs = require('fs'); process.chdir(process.argv[1]);
         for (let i = 0; i < 2100; i++) { fs.mkdirSync('d'); process.chdir('d') }`,
        cgroup,
      ],
      { encoding: 'utf8' },
    )
    expect(nest.stderr).toBe('')
    expect(nest.status).toBe(0)
    const r = await p.stop({ signal: 'SIGKILL' })
    expect(r.outcome).toBe('killed')
    await waitFor(() => !existsSync(cgroup), 10_000, 'the nested cgroups to be removed')
  })

  it('a guardian killed by hand is replaced at once: its owner SIGKILLed later, with no contained spawn since, still takes its children along', async () => {
    const { owner, cgroup, line: stray } = await containedOwner('setsid sleep 1000 & echo $!; wait')
    await waitFor(() => guardiansOf(owner.pid as number).length > 0, 5000, 'the guardian')
    const [first] = guardiansOf(owner.pid as number)
    expect(first).toBeGreaterThan(0)
    // One short line in ps and systemctl status that names it: its script
    // is in its environment, not its command line.
    const argv = readFileSync(`/proc/${first}/cmdline`, 'latin1').split('\0')
    expect(argv.slice(0, 4)).toEqual([
      'procward-guardian',
      '-c',
      'eval "$PROCWARD_GUARDIAN_SCRIPT"',
      'procward-guardian',
    ])
    expect(argv.join(' ')).not.toMatch(/trap|cgroup\.kill/)
    process.kill(first as number, 'SIGKILL')
    let second = 0
    await waitFor(
      () => {
        second = guardiansOf(owner.pid as number).find((p) => p !== first) ?? 0
        return second > 0
      },
      5000,
      'a new guardian',
    )
    owner.kill('SIGKILL')
    await waitFor(() => !aliveInProcTable(stray), 5000, 'the new guardian to kill the stray')
    await waitFor(() => !existsSync(cgroup), 15_000, 'the new guardian to remove the cgroup')
  })

  it('a guardian killed twice within a second is replaced once the rate limit allows, not at the next contained spawn', async () => {
    const { owner, cgroup, line: stray } = await containedOwner('setsid sleep 1000 & echo $!; wait')
    const guardianOf = (pid: number) => guardiansOf(pid)[0] ?? 0
    const seen: number[] = []
    // The first, then its replacement at once, killed as soon as it shows.
    const fresh = () => {
      const g = guardianOf(owner.pid as number)
      return g > 0 && !seen.includes(g) ? g : 0
    }
    for (let i = 0; i < 2; i++) {
      await waitFor(() => fresh() > 0, 5000, `guardian ${i + 1}`)
      const g = fresh()
      expect(g).toBeGreaterThan(0)
      seen.push(g)
      process.kill(g, 'SIGKILL')
    }
    // No contained spawn follows: a third comes by itself.
    await waitFor(() => fresh() > 0, 10_000, 'a third guardian')
    owner.kill('SIGKILL')
    await waitFor(() => !aliveInProcTable(stray), 5000, 'the third guardian to kill the stray')
    await waitFor(() => !existsSync(cgroup), 15_000, 'the third guardian to remove the cgroup')
  })

  it("the guardian finds rmdir on its owner's PATH where the usual directories lack it (NixOS)", async (ctx) => {
    const rmdir = spawnSync('sh', ['-c', 'command -v rmdir'], { encoding: 'utf8' }).stdout.trim()
    const unshare = spawnSync('unshare', ['-m', 'true'])
    if (process.getuid?.() !== 0 || unshare.status !== 0 || !rmdir.startsWith('/')) {
      return ctx.skip('needs root, unshare -m and an rmdir on PATH')
    }
    // In a mount namespace of the owner's own, the usual rmdir cannot run;
    // a working one is on the owner's PATH only.
    const alt = tempDir()
    copyFileSync(rmdir, join(alt, 'rmdir'))
    chmodSync(join(alt, 'rmdir'), 0o755)
    const owner = others.spawn(
      'unshare',
      [
        '-m',
        'sh',
        '-c',
        `mount --bind /dev/null ${rmdir} && exec "$0" "$@"`,
        NODE,
        ...ownerArgs('setsid sleep 1000 & echo $!; wait'),
      ],
      { env: { ...process.env, PATH: `${alt}:${process.env.PATH}` } },
    )
    const info = await jsonLine(owner)
    const cgroup = info.cgroup as string
    owner.kill('SIGKILL')
    await waitFor(() => !aliveInProcTable(Number(info.line)), 5000, 'the guardian to kill the stray')
    await waitFor(() => !existsSync(cgroup), 15_000, 'the guardian to remove the cgroup')
  })

  it('a successor supervisor kills the whole recorded cgroup of a SIGKILLed one', async () => {
    const { stateFile, cg, pids } = await predecessorWithCgroup()
    const takeovers: unknown[] = []
    const successor = new Supervisor({ command: 'sleep', args: ['1000'], stateFile, restart: 'never' })
    successor.on('takeover', (t) => takeovers.push(t))
    try {
      await successor.start()
      expect(takeovers).toHaveLength(1)
      // Killed whole (cgroup.kill); each member dies a moment after, on a loaded machine.
      await waitFor(() => pids.filter(aliveInProcTable).length === 0, 5000, 'the recorded cgroup to die')
      await waitFor(() => !existsSync(cg.path), 5000, 'the recorded cgroup to be removed')
    } finally {
      await successor.stop({ signal: 'SIGKILL' })
    }
  })

  it('procward stop on a dead supervisor ends the whole recorded cgroup, strays included', async () => {
    const { stateFile, cg, leader, pids } = await predecessorWithCgroup()
    const { stderr } = await run(process.execPath, [CLI, 'stop', stateFile, '--grace', '2000'])
    expect(stderr).toContain(`child pid ${leader}: exited`)
    expect(stderr).toContain(`cgroup ${cg.path}: killed`)
    await waitFor(() => pids.filter(aliveInProcTable).length === 0, 5000, 'the recorded cgroup to die')
    await waitFor(() => !existsSync(cg.path), 5000, 'the recorded cgroup to be removed')
  })

  it("'adopt': when the adopted leader exits, its recorded cgroup is killed whole before the exit is handled", async () => {
    const { stateFile, cg, leader, pids } = await predecessorWithCgroup()
    const successor = new Supervisor({
      command: 'sleep',
      args: ['1000'],
      stateFile,
      restart: 'never',
      takeover: 'adopt',
    })
    const seen: string[] = []
    successor.on('takeover', (t) => seen.push(`takeover ${t.action}`))
    successor.on('exit', () => seen.push(`exit: ${pids.filter(aliveInProcTable).length} alive`))
    try {
      await successor.start()
      expect(seen).toEqual(['takeover adopted'])
      expect(pids.filter(aliveInProcTable).length).toBe(3)
      process.kill(leader, 'SIGKILL')
      await waitFor(
        () => ['stopped', 'failed'].includes(successor.state),
        5000,
        'the supervisor to end (restart never)',
      )
      // Every member was dead when the exit was handled, not only the leader.
      expect(seen).toEqual(['takeover adopted', 'exit: 0 alive'])
      await waitFor(() => !existsSync(cg.path), 5000, 'the recorded cgroup to be removed')
    } finally {
      await successor.stop({ signal: 'SIGKILL' })
    }
  })

  it('without clone3 (the cgroup.procs path) the child is inside before it execs, and all is killed at its exit', async () => {
    // A fresh process reads PROCWARD_NO_CLONE3 at its first contained spawn.
    await expectContainedWithoutClone3(process.execPath, [], { PROCWARD_NO_CLONE3: '1' })
  })

  it('where a seccomp filter refuses clone3 (ENOSYS, as container profiles do), the cgroup.procs path takes over', async (ctx) => {
    const exe = join(tempDir(), 'no-clone3')
    const cc = spawnSync('cc', ['-O', '-o', exe, join(FIXTURES, 'no-clone3.c')], { encoding: 'utf8' })
    if (cc.status !== 0) return ctx.skip(`cannot build the seccomp fixture: ${cc.error?.message ?? cc.stderr}`)
    // Node itself starts its threads with clone (glibc retries on ENOSYS).
    await expectContainedWithoutClone3(exe, [String(ENOSYS), process.execPath], {})
  })

  it('procward run --cgroup contains the daemon: a setsid child dies with it', async () => {
    const child = others.spawn(process.execPath, [
      CLI,
      'run',
      '--cgroup',
      '--restart',
      'never',
      '--',
      'sh',
      '-c',
      'setsid sleep 1000 & echo $!; sleep 0.2; exit 3',
    ])
    let out = ''
    child.stdout?.on('data', (d) => (out += d))
    const status = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)))
    expect(status).toBe(3)
    const member = Number(out.trim())
    expect(member).toBeGreaterThan(0)
    expect(aliveInProcTable(member)).toBe(false)
  })

  it('a guardian killed by hand is replaced at the next contained spawn', async () => {
    await sup('true', [], { cgroup: true }).exited
    const guardians = () => guardiansOf(process.pid)
    const [first] = guardians()
    expect(first).toBeGreaterThan(0)
    process.kill(first as number, 'SIGKILL')
    // Reaped natively (no zombie child is left for the harness to find).
    await waitFor(() => !guardians().includes(first as number), 5000, 'the guardian to die')
    // Found dead at the next contained spawn, zombie or not, and replaced.
    const p = sup('sleep', ['1000'], { cgroup: true })
    // Its /proc/<pid>/cmdline reads empty for an instant after the exec.
    await waitFor(() => guardians().length > 0, 5000, 'a new guardian')
    const [second] = guardians()
    expect(second).toBeGreaterThan(0)
    expect(second).not.toBe(first)
    await p.stop({ signal: 'SIGKILL' })
    // Reaped natively: no zombie child is left for the harness to find.
    await waitFor(() => !childrenOf(process.pid).includes(first as number), 5000, 'the dead guardian to be reaped')
  })

  it('refuses a bad parent with a clear error: nothing created, nothing started', () => {
    const dir = tempDir()
    const before = childrenButGuardian()
    const cases: [unknown, string, RegExp][] = [
      [{ parent: 'relative/path' }, 'ERR_INVALID_ARG_VALUE', /absolute path/],
      [{ parent: '/nonexistent/procward-cgroup' }, 'ERR_INVALID_ARG_VALUE', /nonexistent/],
      [{ parent: dir }, 'ERR_INVALID_ARG_VALUE', /not a directory of a cgroup v2 hierarchy/],
      [{ parent: 42 }, 'ERR_INVALID_ARG_TYPE', /options\.cgroup\.parent/],
      [{ path: '/x' }, 'ERR_INVALID_ARG_VALUE', /options\.cgroup\.path/],
      ['/sys/fs/cgroup/x', 'ERR_INVALID_ARG_TYPE', /options\.cgroup must be a boolean or an object/],
    ]
    for (const [cgroup, code, message] of cases) {
      const err = thrown(() => spawnSupervised('sleep', ['1000'], { cgroup } as object))
      expect(err, JSON.stringify(cgroup)).toBeInstanceOf(TypeError)
      expect(err.code).toBe(code)
      expect(err.message).toMatch(message)
    }
    expect(readdirSync(dir)).toEqual([])
    expect(childrenButGuardian()).toEqual(before)
  })

  it('refuses a threaded parent (no process could enter a cgroup there) before anything is created or started', () => {
    // A threaded child turns its parent into a "domain threaded" one; a new
    // cgroup below either is threaded or "domain invalid".
    const root = join(dirname(support.parent as string), `procward-test-threaded-${process.pid}`)
    mkdirSync(root)
    mkdirSync(join(root, 't'))
    onTestFinished(() => {
      rmdirSync(join(root, 't'))
      rmdirSync(root)
    })
    writeFileSync(join(root, 't', 'cgroup.type'), 'threaded')
    const before = childrenButGuardian()
    const cases: [string, string][] = [
      [root, 'domain threaded'],
      [join(root, 't'), 'threaded'],
    ]
    for (const [parent, type] of cases) {
      const err = thrown(() => spawnSupervised('sleep', ['1000'], { cgroup: { parent } }))
      expect(err, parent).toBeInstanceOf(TypeError)
      expect(err.code).toBe('ERR_INVALID_ARG_VALUE')
      expect(err.message).toContain(`is a "${type}" cgroup`)
      expect(readdirSync(parent, { withFileTypes: true }).filter((e) => e.isDirectory() && e.name !== 't')).toEqual([])
    }
    expect(childrenButGuardian()).toEqual(before)
  })

  it('a parent named through .. or a symlink is used, and reported, by its canonical path', async () => {
    const parent = support.parent as string
    const link = join(tempDir(), 'link')
    symlinkSync(parent, link)
    for (const given of [`${parent}/../${basename(parent)}`, `${parent}/.`, link]) {
      const p = sup('sleep', ['1000'], { cgroup: { parent: given } })
      expect(dirname(p.cgroup as string), given).toBe(parent)
      expect(members(p.cgroup as string)).toEqual([p.pid])
      await p.stop({ signal: 'SIGKILL' })
    }
  })

  it('an explicit parent takes the child there', async () => {
    const parent = support.parent as string
    const p = sup('sleep', ['1000'], { cgroup: { parent } })
    expect(p.cgroup?.startsWith(`${parent}/`)).toBe(true)
    expect(members(p.cgroup as string)).toEqual([p.pid])
    await p.stop({ signal: 'SIGKILL' })
  })

  it('reports usage: CPU time always, memory and pids where those controllers are on', async () => {
    const p = sup('sh', ['-c', 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo done; sleep 1000'], {
      cgroup: true,
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const cgroup = p.cgroup as string
    expect(await firstLineOf(p)).toBe('done')
    const controllers = readFileSync(join(cgroup, 'cgroup.controllers'), 'utf8').split(/\s+/)
    const u = p.resourceUsage()
    expect(u.cpuUsec).toBeGreaterThan(0)
    expect(u.memoryBytes === null).toBe(!controllers.includes('memory'))
    expect(u.pids === null).toBe(!controllers.includes('pids'))
    await p.stop({ signal: 'SIGKILL' })
    // After the removal: the last reading, not an error.
    expect(p.resourceUsage().cpuUsec).toBeGreaterThanOrEqual(u.cpuUsec as number)
    const plain = sup('true', [])
    expect(plain.cgroup).toBeNull()
    expect(plain.resourceUsage()).toEqual({ cpuUsec: null, memoryBytes: null, pids: null })
    await plain.exited
  })

  it('1000 contained spawn/exit cycles leave no cgroup directory and no fd behind', async () => {
    // The guardian (one per process) and its pipe exist after the first.
    await sup('true', [], { cgroup: true }).exited
    const fdsBefore = openFds()
    const dirsBefore = ourCgroups()
    const batch = 10
    for (let i = 0; i < 1000; i += batch) {
      const ps: SupervisedProcess[] = []
      for (let j = 0; j < batch; j++) ps.push(spawnSupervised('true', [], { cgroup: true }))
      const infos = await Promise.all(ps.map((p) => p.exited))
      for (const info of infos) expect(info.code).toBe(0)
    }
    expect(ourCgroups()).toEqual(dirsBefore)
    expect(await fdsLeftSince(fdsBefore)).toEqual([])
  }, 120_000)

  it('an exit waits for the cgroup only within killTimeoutMs (a member stuck), and the cgroup goes once it empties', async (ctx) => {
    // A member frozen by the cgroup-v1 freezer stands for one stuck.
    if (!hasFreezer()) return ctx.skip('needs root and the cgroup-v1 freezer')
    await withFreezer(async (freezer) => {
      const { p, cgroup, pids } = await containedWhenReady(
        'setsid sleep 1000 & echo ready; read x',
        (pids) => pids.length >= 2,
        'the member in the cgroup',
        { stop: { killTimeoutMs: 300 } },
      )
      const member = pids.find((pid) => pid !== p.pid) as number
      await freezer.freeze(member)
      const atExit = new Promise<{ memberAlive: boolean; dirExists: boolean }>((resolve) =>
        p.once('exit', () => resolve({ memberAlive: aliveInProcTable(member), dirExists: existsSync(cgroup) })),
      )
      p.stdin?.end()
      // The exit came after the bound although the member still lives.
      expect(await atExit).toEqual({ memberAlive: true, dirExists: true })
      freezer.thaw()
      await waitFor(() => !aliveInProcTable(member), 5000, 'the thawed member to die of the pending kill')
      await waitFor(() => !existsSync(cgroup), 5000, 'the cgroup to be removed once empty')
    })
  })
})

describe('error messages read like Node, never with Rust error text', () => {
  const noRustText = (e: unknown) => {
    const message = String((e as Error)?.message ?? e)
    expect(message).not.toMatch(/os error/i)
    expect(message).not.toMatch(/\(os error \d+\)|Os \{ code/)
  }

  it('a cgroup parent that does not exist, or runs through a file, names the errno in words', () => {
    const file = join(tempDir(), 'file')
    writeFileSync(file, '')
    const cases: [string, RegExp][] = [
      ['/nonexistent', /^options\.cgroup\.parent \/nonexistent: ENOENT: no such file or directory$/],
      [join(file, 'below'), /: ENOTDIR: not a directory$/],
    ]
    for (const [parent, message] of cases) {
      const err = thrown(() => spawnSupervised('sleep', ['1000'], { cgroup: { parent } }))
      expect(err, parent).toBeInstanceOf(TypeError)
      expect(err.code).toBe('ERR_INVALID_ARG_VALUE')
      expect(err.message).toMatch(message)
      noRustText(err)
    }
  })

  it('with no fd left (EMFILE), every call that fails says so without Rust error text', async () => {
    const { stdout } = await runWithFewFds('error-texts.cjs', join(tempDir(), 'lock'))
    const res = JSON.parse(stdout) as { held: number; errors: { call: string; code: string; message: string }[] }
    expect(res.held).toBeGreaterThan(0)
    // Something did fail here (the contained spawn needs fds at every step).
    expect(res.errors.length).toBeGreaterThan(0)
    for (const e of res.errors) {
      expect(e.message, e.call).not.toMatch(/os error/i)
    }
  })
})

// ---- under a service manager ---------------------------------------------------------

/** The cgroup2 mount point, from /proc/self/mountinfo (null: none). */
function v2Mount(): string | null {
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const [pre, post] = line.split(' - ')
    if (post?.startsWith('cgroup2 ')) return (pre as string).split(' ')[4] as string
  }
  return null
}

/** Every cgroup below `dir` (deepest first), and `dir` itself last. */
function cgroupsBelow(dir: string): string[] {
  const out: string[] = []
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) out.push(...cgroupsBelow(join(dir, e.name)))
  }
  out.push(dir)
  return out
}

/** Pids in `dir` and every cgroup below it. */
function pidsBelow(dir: string): number[] {
  return cgroupsBelow(dir).flatMap((d) => {
    try {
      return members(d)
    } catch {
      return []
    }
  })
}

describe('containment under a service manager (a test cgroup standing in for a unit)', () => {
  const mount = v2Mount()
  const canRun = process.getuid?.() === 0 && mount !== null && support.available
  const canXattr = spawnSync('python3', ['-c', 'import os']).status === 0
  let n = 0

  /**
   * A fresh "unit" cgroup holding a supervisor process (the owner fixture)
   * that spawned a contained child with a setsid grandchild (the stray).
   */
  async function unitWithSupervisor(delegate: boolean) {
    const unit = join(mount as string, `procward-unit-${process.pid}-${++n}`)
    mkdirSync(unit)
    onTestFinished(async () => {
      if (!existsSync(unit)) return
      writeFileSync(join(unit, 'cgroup.kill'), '1')
      await waitFor(() => pidsBelow(unit).length === 0, 5000, 'the unit to empty')
      for (const d of cgroupsBelow(unit)) rmdirSync(d)
    })
    if (delegate) {
      const set = spawnSync('python3', [
        '-c',
        'import os,sys; os.setxattr(sys.argv[1], "trusted.delegate", b"1")',
        unit,
      ])
      expect(set.status).toBe(0)
    }
    const owner = others.spawn('sh', [
      '-c',
      'echo $$ > "$0/cgroup.procs" && exec "$@"',
      unit,
      NODE,
      ...ownerArgs('setsid sleep 1000 & echo $!; wait'),
    ])
    const info = await jsonLine(owner)
    const ownerCgroup = readFileSync(`/proc/${owner.pid}/cgroup`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('0::'))
      ?.slice(3)
    return { unit, owner, cgroup: info.cgroup as string, stray: Number(info.line), ownerCgroup }
  }

  for (const delegate of [true, false]) {
    const how = delegate ? 'delegated (the supervisor moves into a leaf)' : 'not delegated (root, no Delegate=)'
    it.skipIf(!canRun || (delegate && !canXattr))(
      `${how}: the children live inside the unit, and SIGTERM to every process of it ends them all`,
      async () => {
        const { unit, owner, cgroup, stray, ownerCgroup } = await unitWithSupervisor(delegate)
        const rel = unit.slice((mount as string).length)
        expect(cgroup.startsWith(`${unit}/procward/`)).toBe(true)
        expect(ownerCgroup).toBe(delegate ? `${rel}/supervisor` : rel)
        expect(pidsBelow(unit)).toContain(stray)
        // What `systemctl stop` does first: SIGTERM to every process of the unit.
        for (const pid of pidsBelow(unit)) {
          try {
            process.kill(pid, 'SIGTERM')
          } catch {
            // gone meanwhile
          }
        }
        await new Promise((r) => owner.once('exit', r))
        await waitFor(() => !aliveInProcTable(stray), 5000, 'the stray to die')
        // The guardian outlived the SIGTERM, saw its owner die, and removed the child's cgroup.
        await waitFor(() => !existsSync(cgroup), 15_000, "the child's cgroup to be removed").catch((e) => {
          // What kept it: its members, and what runs in the unit (the guardian among them, or not).
          const what = (pid: number) => {
            try {
              return `${pid} ${readFileSync(`/proc/${pid}/cmdline`, 'latin1').replaceAll('\0', ' ').slice(0, 60)}`
            } catch {
              return `${pid} (gone)`
            }
          }
          throw new Error(
            `${e.message}; in it: [${pidsBelow(cgroup).map(what).join('; ')}], in the unit: [${pidsBelow(unit).map(what).join('; ')}]`,
          )
        })
        await waitFor(() => pidsBelow(unit).filter(aliveInProcTable).length === 0, 5000, 'the unit to empty')
        // Left below the unit: only our empty skeleton, which a manager trims with the unit.
        const left = cgroupsBelow(unit)
          .slice(0, -1)
          .map((d) => d.slice(unit.length + 1))
        expect(left.every((d) => d === 'procward' || d === 'supervisor')).toBe(true)
      },
    )

    it.skipIf(!canRun || (delegate && !canXattr))(
      `${how}: cgroup.kill of the unit ends them all, and leaves only empty cgroups below it`,
      async () => {
        const { unit, owner, cgroup, stray } = await unitWithSupervisor(delegate)
        expect(cgroup.startsWith(`${unit}/procward/`)).toBe(true)
        writeFileSync(join(unit, 'cgroup.kill'), '1')
        await new Promise((r) => owner.once('exit', r))
        await waitFor(() => !aliveInProcTable(stray), 5000, 'the stray to die')
        await waitFor(() => pidsBelow(unit).length === 0, 5000, 'the unit to empty')
        // Nothing of ours survived to remove them: a manager removes the
        // unit's tree bottom-up, and can (every one is empty).
        for (const d of cgroupsBelow(unit)) rmdirSync(d)
        expect(existsSync(unit)).toBe(false)
      },
    )
  }
})
