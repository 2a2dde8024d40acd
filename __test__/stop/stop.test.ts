import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { getProcessInfo, stopSupervisedProcess } from '../../index.js'
import {
  AS_NOBODY,
  aliveInProcTable,
  announcedWorkers,
  canUnsharePid,
  FIXTURES,
  firstLine,
  firstLineOf,
  hasFreezer,
  isRoot,
  NODE,
  nodeThroughSetpriv,
  outputLines,
  PROCWARD,
  pidNamespaceShell,
  procState,
  reusePid,
  runFixture,
  sleep,
  trackProcesses,
  waitFor,
  withFreezer,
} from '../helpers'

const { sup, others } = trackProcesses()

/** A bare pid: a daemon in its own session, nobody's child but PID 1's. */
async function daemon(mode: 'cooperative' | 'stubborn'): Promise<number> {
  const launcher = others.spawn(join(FIXTURES, 'daemon.sh'), [mode])
  const pid = Number(await firstLine(launcher))
  others.track(pid)
  await waitFor(() => getProcessInfo(pid)?.ppid !== launcher.pid, 5000, 'the daemon to be orphaned')
  return pid
}

describe('our children', () => {
  it('stops a cooperative child with SIGTERM', async () => {
    const p = sup('sleep', ['100'])
    const r = await p.stop()
    expect(r).toMatchObject({
      outcome: 'exited',
      signals: ['SIGTERM'],
      exit: { pid: p.pid, code: null, signal: 'SIGTERM' },
    })
    expect(r.elapsedMs).toBeGreaterThanOrEqual(0)
    expect(procState(p.pid)).toBeNull()
    expect(p.exitInfo).toEqual(r.exit)
  })

  it('kills a TERM-ignoring child and its whole group', async () => {
    const p = sup(join(FIXTURES, 'ignore-term.sh'), [], { stdio: ['ignore', 'pipe', 'inherit'] })
    const pids = await announcedWorkers(p, others)
    const r = await stopSupervisedProcess(p, { graceMs: 300 })
    expect(r).toMatchObject({ outcome: 'killed', signals: ['SIGTERM', 'SIGKILL'], exit: { signal: 'SIGKILL' } })
    expect(r.elapsedMs).toBeGreaterThanOrEqual(300)
    expect(r.elapsedMs).toBeLessThan(300 + 2000 + 1000)
    expect(procState(p.pid)).toBeNull()
    for (const m of pids) await waitFor(() => !aliveInProcTable(m), 5000, `member ${m} to die`)
  })

  it('waits for a child whose SIGTERM handler takes 40 ms', async () => {
    // stderr ignored: the shell reports its TERMed `sleep` as "Terminated".
    const p = sup(join(FIXTURES, 'slow-term.sh'), ['0.04'], { stdio: ['ignore', 'pipe', 'ignore'] })
    await firstLineOf(p)
    const r = await p.stop({ graceMs: 5000 })
    expect(r).toMatchObject({ outcome: 'exited', signals: ['SIGTERM'], exit: { code: 0, signal: null } })
    expect(r.elapsedMs).toBeGreaterThanOrEqual(40)
  })

  it('resolves already-exited, sending nothing, once the child has exited (also after an earlier stop)', async () => {
    const p = sup('sh', ['-c', 'exit 3'])
    const info = await p.exited
    const r = await p.stop()
    expect(r).toEqual({ outcome: 'already-exited', pidReused: false, signals: [], elapsedMs: 0, exit: info })

    const q = sup('sleep', ['100'])
    const first = await q.stop()
    expect(first.outcome).toBe('exited')
    const second = await q.stop()
    expect(second).toMatchObject({ outcome: 'already-exited', signals: [], exit: first.exit })
  })

  // The exit reaped by the native watcher (seen through exitInfo, which
  // reads it) while its 'exit' event is still on its way: the stop emits it
  // first, so a caller who awaits the stop finds the 'exit' listeners run.
  it("resolves already-exited only after 'exit' is emitted, when the exit was reaped but not yet delivered", async () => {
    const p = sup('true', [])
    const order: string[] = []
    p.on('exit', (info) => order.push(`exit ${info.code}`))
    const until = Date.now() + 5000
    while (p.exitInfo === null && Date.now() < until) {} // the loop held: no delivery
    expect(p.exitInfo).toMatchObject({ code: 0, signal: null })
    expect(order).toEqual([]) // not delivered yet, not by the stop's call either
    const stopping = p.stop()
    expect(order).toEqual([])
    const r = await stopping
    order.push(`stop ${r.outcome}`)
    expect(order).toEqual(['exit 0', 'stop already-exited'])
    expect(r.exit).toBe(await p.exited)
    await sleep(50) // the native delivery, when it comes, emits nothing again
    expect(order).toEqual(['exit 0', 'stop already-exited'])
  })

  // Before: the listener's error became the stop's rejection, and an
  // abort's stop (which swallows it) lost it.
  it("an 'exit' listener that throws when the stop emits 'exit' is an uncaught exception, and the stop resolves", async () => {
    const { stdout } = await runFixture('exit-listener-throws.cjs')
    expect(JSON.parse(stdout)).toEqual({ stop: 'already-exited', uncaught: ['abort listener', 'stop listener'] })
  })

  it('shares one escalation between concurrent stops', async () => {
    const p = sup(join(FIXTURES, 'ignore-term.sh'), [], { stdio: ['ignore', 'pipe', 'inherit'] })
    await firstLineOf(p)
    const a = p.stop({ graceMs: 100 })
    const b = stopSupervisedProcess(p, { graceMs: 100 })
    const c = p.stop({ graceMs: 100 })
    const [ra, rb, rc] = await Promise.all([a, b, c])
    expect(ra).toBe(rb)
    expect(ra).toBe(rc)
    expect(ra.signals).toEqual(['SIGTERM', 'SIGKILL'])
  })

  it('stops a SupervisedProcess of another copy of procward (brand, not instanceof)', async () => {
    const p = sup('sleep', ['100'])
    const foreign = { [Symbol.for('procward.supervised')]: true, stop: (o: object) => p.stop(o) }
    const r = await stopSupervisedProcess(foreign as unknown as typeof p, { graceMs: 1000 })
    expect(r.outcome).toBe('exited')
    expect(r.exit?.pid).toBe(p.pid)
  })

  it('is final: after exited/killed nothing reports the child running', async () => {
    const p = sup('sleep', ['100'])
    const r = await p.stop()
    expect(['exited', 'killed']).toContain(r.outcome)
    expect(p.exitInfo).not.toBeNull()
    expect(p.kill('SIGTERM')).toBe(false)
    expect((await p.stop()).outcome).toBe('already-exited')
  })

  it('stops on AbortSignal with the spawn stop defaults', async () => {
    const ac = new AbortController()
    const p = sup(join(FIXTURES, 'ignore-term.sh'), [], {
      signal: ac.signal,
      stop: { graceMs: 50 },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    await firstLineOf(p)
    ac.abort()
    const info = await p.exited
    expect(info.signal).toBe('SIGKILL')
    expect(procState(p.pid)).toBeNull()
  })

  it('stops on Symbol.asyncDispose', async () => {
    const p = sup('sleep', ['100'])
    await p[Symbol.asyncDispose]()
    expect(p.exitInfo).toMatchObject({ signal: 'SIGTERM' })
    expect(procState(p.pid)).toBeNull()
  })

  it('stays bounded: killTimeoutMs 0 settles at once, and the child is still reaped', async () => {
    const p = sup(join(FIXTURES, 'ignore-term.sh'), [], { stdio: ['ignore', 'pipe', 'inherit'] })
    await firstLineOf(p)
    const r = await p.stop({ graceMs: 0, killTimeoutMs: 0 })
    // The SIGKILL went out; with no time allowed to see the reap, the verdict
    // may be 'unkillable', but the stop never waits beyond its bounds.
    expect(['killed', 'unkillable']).toContain(r.outcome)
    expect(r.signals).toEqual(['SIGTERM', 'SIGKILL'])
    await p.exited
    expect(procState(p.pid)).toBeNull()
  })

  it('yields unkillable for a process that survives SIGKILL, within its bounds', async (ctx) => {
    // A task frozen by the cgroup-v1 freezer cannot act on SIGKILL until it
    // is thawed: the same as a process stuck in uninterruptible sleep.
    if (!hasFreezer()) return ctx.skip('needs root and the cgroup-v1 freezer')
    await withFreezer(async (freezer) => {
      const p = sup('sleep', ['100'])
      await freezer.freeze(p.pid)
      const r = await p.stop({ graceMs: 100, killTimeoutMs: 200 })
      expect(r).toMatchObject({ outcome: 'unkillable', signals: ['SIGTERM', 'SIGKILL'], exit: null })
      // It waited out both bounds, and no more than them plus slack for a
      // loaded machine (a correctness bound, not a speed target).
      expect(r.elapsedMs).toBeGreaterThanOrEqual(300)
      expect(r.elapsedMs).toBeLessThan(300 + 1000)
      expect(p.exitInfo).toBeNull()
      // Thawed, it dies of a pending signal and is reaped as usual.
      freezer.thaw()
      const info = await p.exited
      expect(info.code).toBeNull()
      expect(['SIGKILL', 'SIGTERM']).toContain(info.signal)
      expect(procState(p.pid)).toBeNull()
    })
  })

  it('with group: false signals the leader only', async () => {
    const p = sup(join(FIXTURES, 'workers.sh'), [], { stdio: ['ignore', 'pipe', 'inherit'], killGroupOnExit: false })
    const members = await announcedWorkers(p, others)
    const r = await p.stop({ group: false })
    expect(r.outcome).toBe('exited')
    for (const m of members) expect(aliveInProcTable(m)).toBe(true)
  })
})

describe('bare pids', () => {
  it('stops a cooperative daemon in its own session', async () => {
    const pid = await daemon('cooperative')
    const r = await stopSupervisedProcess(pid, { graceMs: 2000 })
    expect(r).toMatchObject({ outcome: 'exited', signals: ['SIGTERM'], exit: null })
    expect(aliveInProcTable(pid)).toBe(false)
  })

  it('kills a TERM-ignoring daemon', async () => {
    const pid = await daemon('stubborn')
    const r = await stopSupervisedProcess(pid, { graceMs: 200 })
    expect(r).toMatchObject({ outcome: 'killed', signals: ['SIGTERM', 'SIGKILL'], exit: null })
    expect(r.elapsedMs).toBeGreaterThanOrEqual(200)
    expect(aliveInProcTable(pid)).toBe(false)
  })

  it('stops a daemon group with group: true', async () => {
    const pid = await daemon('stubborn')
    expect(getProcessInfo(pid)?.pgid).toBe(pid)
    const r = await stopSupervisedProcess(pid, { graceMs: 100, group: true })
    expect(r.outcome).toBe('killed')
    expect(aliveInProcTable(pid)).toBe(false)
  })

  it('refuses group: true for a process that does not lead its group', async () => {
    const sentinel = others.spawn('sleep', ['100'])
    await expect(stopSupervisedProcess(sentinel.pid as number, { group: true })).rejects.toMatchObject({
      code: 'EINVAL',
    })
    expect(aliveInProcTable(sentinel.pid as number)).toBe(true)
  })

  it('acts only on the matching identity, and a gone pid is already-exited', async () => {
    const pid = await daemon('cooperative')
    const identity = getProcessInfo(pid)?.identity as string
    const wrong = await stopSupervisedProcess(pid, { identity: `${identity}0` })
    expect(wrong).toMatchObject({ outcome: 'already-exited', signals: [] })
    expect(aliveInProcTable(pid)).toBe(true)
    const right = await stopSupervisedProcess(pid, { identity })
    expect(right.outcome).toBe('exited')
    const again = await stopSupervisedProcess(pid, { identity })
    expect(again).toMatchObject({ outcome: 'already-exited', signals: [] })
  })

  it('counts a zombie as exited and sends nothing', async () => {
    const parent = others.spawn(join(FIXTURES, 'zombie-parent.sh'), [])
    const zombie = Number(await firstLine(parent))
    await waitFor(() => procState(zombie) === 'Z', 5000, 'the zombie')
    const r = await stopSupervisedProcess(zombie)
    expect(r).toMatchObject({ outcome: 'already-exited', signals: [] })
  })

  it('never reaches a newcomer on a reused pid (pid reuse forced through ns_last_pid)', async (ctx) => {
    if (!isRoot) return ctx.skip('forcing pid reuse needs root (/proc/sys/kernel/ns_last_pid)')
    const { pid, oldIdentity: identity, newcomer } = await reusePid(others)
    expect(newcomer.pid).toBe(pid)
    const r = await stopSupervisedProcess(pid, { identity, graceMs: 100, killTimeoutMs: 100 })
    expect(r).toMatchObject({ outcome: 'already-exited', signals: [] })
    expect(newcomer.exitCode).toBeNull()
    expect(newcomer.signalCode).toBeNull()
    expect(aliveInProcTable(pid)).toBe(true)
  })

  it('rejects with EPERM for a process we may not signal', async (ctx) => {
    if (!isRoot) return ctx.skip('needs root to run a caller as nobody')
    const target = others.spawn('sleep', ['100'])
    const out = await nodeThroughSetpriv(ctx, AS_NOBODY, [
      join(FIXTURES, 'as-nobody.cjs'),
      PROCWARD,
      'stopSupervisedProcess',
      String(target.pid),
    ])
    const res = JSON.parse(out)
    expect(res.uid).toBe(65534)
    expect(res.error).toMatchObject({ code: 'EPERM' })
    expect(aliveInProcTable(target.pid as number)).toBe(true)
  })
})

describe('bad input signals nothing', () => {
  // A sentinel in our own process group: kill(0, sig) or kill(-1, sig) would hit it.
  it.each([
    ['pid 0', 0, RangeError],
    ['pid -1', -1, RangeError],
    ['pid NaN', Number.NaN, RangeError],
    ['pid Infinity', Number.POSITIVE_INFINITY, RangeError],
    ['pid 1.5', 1.5, RangeError],
    ['pid 2^31', 2 ** 31, RangeError],
    ['our own pid', process.pid, RangeError],
    ['a string', '1', TypeError],
    ['null', null, TypeError],
    ['a bigint', 1n, TypeError],
    ['an object', {}, TypeError],
  ])('rejects %s', async (_, target, Err) => {
    const sentinel = others.spawn('sleep', ['100'])
    const sentinelPid = sentinel.pid as number
    expect(getProcessInfo(sentinelPid)?.pgid).toBe(getProcessInfo(process.pid)?.pgid)
    const p = stopSupervisedProcess(target as number, { signal: 'SIGKILL', graceMs: 0, killTimeoutMs: 0 })
    await expect(p).rejects.toBeInstanceOf(Err)
    await new Promise((r) => setTimeout(r, 20))
    expect(aliveInProcTable(sentinelPid)).toBe(true)
    expect(sentinel.signalCode).toBeNull()
  })

  it.each([
    ['negative graceMs', { graceMs: -1 }, RangeError],
    ['NaN graceMs', { graceMs: Number.NaN }, RangeError],
    ['infinite killTimeoutMs', { killTimeoutMs: Number.POSITIVE_INFINITY }, RangeError],
    ['string graceMs', { graceMs: '5' }, TypeError],
    ['unknown signal', { signal: 'SIGNOPE' }, TypeError],
    ['signal 0', { signal: 0 }, RangeError],
    ['non-string identity', { identity: 5 }, TypeError],
    ['non-boolean group', { group: 'yes' }, TypeError],
  ])('rejects %s', async (_, options, Err) => {
    const sentinel = others.spawn('sleep', ['100'])
    const sentinelPid = sentinel.pid as number
    await expect(stopSupervisedProcess(sentinelPid, options as object)).rejects.toBeInstanceOf(Err)
    const own = sup('sleep', ['100'])
    await expect(own.stop(options as object)).rejects.toBeInstanceOf(Err)
    await new Promise((r) => setTimeout(r, 20))
    expect(aliveInProcTable(sentinelPid)).toBe(true)
    expect(own.exitInfo).toBeNull()
  })

  it('rejects a target that is neither a pid nor a SupervisedProcess', async () => {
    await expect(stopSupervisedProcess(undefined as unknown as number)).rejects.toBeInstanceOf(TypeError)
  })
})

describe('a bare-pid stop never reaches init, its caller or its kin', () => {
  const KIN = join(FIXTURES, 'stop-own-kin.cjs')
  const node = JSON.stringify(NODE)
  const fixture = (which: string) => `${node} ${JSON.stringify(KIN)} ${JSON.stringify(PROCWARD)} ${which}`

  function refused(line: string | undefined, target: number | string) {
    const said = JSON.parse(line ?? 'null')
    expect(said).toMatchObject({ name: 'RangeError', code: 'ERR_OUT_OF_RANGE' })
    expect(said.message).toContain(`refusing to stop pid ${target}`)
    expect(said.message).not.toMatch(/os error/)
  }

  it('refuses its parent: nothing signalled', async () => {
    const out = await outputLines(others, 'sh', ['-c', `${fixture('parent')}; echo alive`])
    refused(out[0], JSON.parse(out[0] as string).target)
    expect(out[1]).toBe('alive')
  })

  it('refuses its grandparent: nothing signalled', async () => {
    const inner = `${fixture('grandparent')}; echo inner-alive`
    const out = await outputLines(others, 'sh', ['-c', `sh -c ${JSON.stringify(inner)}; echo outer-alive`])
    refused(out[0], JSON.parse(out[0] as string).target)
    expect(out.slice(1)).toEqual(['inner-alive', 'outer-alive'])
  })

  it('refuses a group stop of its own group: nothing signalled', async () => {
    // setsid: the shell leads a group of its own, which the fixture joins.
    const out = await outputLines(others, 'setsid', ['sh', '-c', `${fixture('group')}; echo alive`])
    refused(out[0], JSON.parse(out[0] as string).target)
    expect(out[1]).toBe('alive')
  })

  it.skipIf(!canUnsharePid())('refuses pid 1 (a plain stop, no group): nothing signalled', async () => {
    // pid 1 of a fresh pid namespace is the shell; signals from inside the
    // namespace that it has no handler for are dropped by the kernel, so a
    // stop that was sent would report them (and would end a real init).
    const out = await outputLines(others, ...pidNamespaceShell(`${fixture('1')}; echo alive`))
    refused(out[0], 1)
    expect(out[1]).toBe('alive')
  })
})
