// Type tests, checked by `tsc -p tsconfig.json` (with exactOptionalPropertyTypes),
// never run: each line either compiles or carries @ts-expect-error, which
// fails the check when the line it covers compiles after all.
import { once } from 'node:events'
import type { Readable, Writable } from 'node:stream'
import {
  type ArgumentError,
  type ArgumentErrorCode,
  acquireLock,
  type CgroupSupport,
  cgroupSupport,
  type ExitInfo,
  type FileLockedError,
  getProcessInfo,
  isArgumentError,
  isLockedError,
  isPgError,
  isProcwardError,
  isSupervisorError,
  isUnavailableError,
  type LockedError,
  type LockHolder,
  type PgErrorCode,
  type PgLockedError,
  type ProcwardErrorCode,
  type ResourceUsage,
  readSupervisorState,
  type SpawnedShape,
  type SpawnSupervisedOptions,
  type StopOptions,
  type StopResult,
  SupervisedProcess,
  Supervisor,
  type SupervisorErrorCode,
  type SupervisorEvents,
  type SupervisorExit,
  type SupervisorStateRecord,
  spawnSupervised,
  stopSupervisedProcess,
  type UnavailableErrorCode,
  type WaitForExitResult,
  waitForExit,
} from '../../index.js'

/** True only when A and B are the same type. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
function assertType<T extends true>(_: T = true as T): void {}

export function optionalFieldsTakeUndefined(): void {
  const stop: StopOptions = {
    signal: undefined,
    graceMs: undefined,
    killTimeoutMs: undefined,
    group: undefined,
    identity: undefined,
  }
  const spawnOptions: SpawnSupervisedOptions = {
    cwd: undefined,
    env: undefined,
    stdio: undefined,
    processGroup: undefined,
    killGroupOnExit: undefined,
    parentDeathSignal: undefined,
    signal: undefined,
    stop: { graceMs: undefined },
  }
  const p = spawnSupervised('sleep', ['1'], spawnOptions)
  void p.stop({ graceMs: undefined })
  void stopSupervisedProcess(1234, stop)
  void spawnSupervised('sleep', [], { stdio: [{ file: '/dev/null', append: undefined }, 'pipe', 'pipe'] })
  // @ts-expect-error graceMs is a number
  void p.stop({ graceMs: '5' })
  // @ts-expect-error no such option (a typo is still caught with the generic signature)
  spawnSupervised('sleep', [], { stdoi: 'pipe' })
  // @ts-expect-error no such stop option
  void p.stop({ graceMS: 5 })
}

export function streamsFollowStdio(): void {
  const none = spawnSupervised('sleep', ['1'])
  assertType<Equal<typeof none.stdin, null>>()
  assertType<Equal<typeof none.stdout, null>>()
  assertType<Equal<typeof none.stderr, null>>()

  const piped = spawnSupervised('cat', [], { stdio: 'pipe' })
  assertType<Equal<typeof piped.stdin, Writable>>()
  assertType<Equal<typeof piped.stdout, Readable>>()
  assertType<Equal<typeof piped.stderr, Readable>>()
  piped.stdout.on('data', () => {})
  piped.stdin.end()

  const mixed = spawnSupervised('cat', [], { stdio: ['ignore', 'pipe', { file: '/tmp/log', append: true }] })
  assertType<Equal<typeof mixed.stdin, null>>()
  assertType<Equal<typeof mixed.stdout, Readable>>()
  assertType<Equal<typeof mixed.stderr, null>>()
  // @ts-expect-error stdin is 'ignore': null, not a stream
  mixed.stdin.end()

  const tuple = ['pipe', 'inherit', 'pipe'] as const
  const fromConst = spawnSupervised('cat', [], { stdio: tuple })
  assertType<Equal<typeof fromConst.stdin, Writable>>()
  assertType<Equal<typeof fromConst.stdout, null>>()
  assertType<Equal<typeof fromConst.stderr, Readable>>()

  const inherited = spawnSupervised('cat', [], { stdio: 'inherit' })
  // @ts-expect-error 'inherit': no stream
  inherited.stdout.on('data', () => {})

  // Options typed only as SpawnSupervisedOptions: the types cannot know.
  const opts: SpawnSupervisedOptions = { stdio: 'pipe' }
  const wide = spawnSupervised('cat', [], opts)
  assertType<Equal<typeof wide.stdout, Readable | null>>()
  assertType<Equal<typeof wide.pgid, number | null>>()
  // @ts-expect-error possibly null
  wide.stdout.on('data', () => {})
}

export function pgidFollowsProcessGroup(): void {
  const byDefault = spawnSupervised('sleep', ['1'])
  assertType<Equal<typeof byDefault.pgid, number>>()
  const grouped = spawnSupervised('sleep', ['1'], { processGroup: true })
  assertType<Equal<typeof grouped.pgid, number>>()
  const undefinedGroup = spawnSupervised('sleep', ['1'], { processGroup: undefined })
  assertType<Equal<typeof undefinedGroup.pgid, number>>()
  const ungrouped = spawnSupervised('sleep', ['1'], { processGroup: false })
  assertType<Equal<typeof ungrouped.pgid, null>>()
  // @ts-expect-error processGroup: false has no pgid
  const n: number = ungrouped.pgid
  const maybe = spawnSupervised('sleep', ['1'], { processGroup: Math.random() > 0.5 })
  assertType<Equal<typeof maybe.pgid, number | null>>()
  void n
}

export function plainSupervisedProcessFitsAny(): void {
  // A user's own annotation, a helper that takes any child, an array of mixed ones.
  const a: SupervisedProcess = spawnSupervised('cat', [], { stdio: 'pipe' })
  const b: SupervisedProcess = spawnSupervised('sleep', ['1'], { processGroup: false })
  const all: SupervisedProcess[] = [a, b, spawnSupervised('sleep', ['1'])]
  assertType<Equal<(typeof a)['stdout'], Readable | null>>()
  assertType<Equal<(typeof a)['pgid'], number | null>>()
  void stopSupervisedProcess(spawnSupervised('cat', [], { stdio: 'pipe' }))
  void Promise.all(all.map((p) => stopSupervisedProcess(p)))

  // A narrowed annotation, written out or through SpawnedShape.
  const piped: SupervisedProcess<SpawnedShape<{ stdio: 'pipe' }>> = spawnSupervised('cat', [], { stdio: 'pipe' })
  assertType<Equal<typeof piped.stdout, Readable>>()
  const explicit: SupervisedProcess<{ stdin: null; stdout: Readable; stderr: null; pgid: number }> = spawnSupervised(
    'cat',
    [],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  )
  // @ts-expect-error stdout not piped: no Readable to promise
  const wrong: SupervisedProcess<SpawnedShape<{ stdio: 'pipe' }>> = spawnSupervised('sleep', ['1'])
  // @ts-expect-error a wide process cannot be narrowed by assignment
  const narrowed: SupervisedProcess<SpawnedShape<{ stdio: 'pipe' }>> = a
  void [explicit, wrong, narrowed]
  assertType<Equal<typeof a extends SupervisedProcess ? true : false, true>>()
  void (a instanceof SupervisedProcess)
}

export async function stopResultShape(): Promise<void> {
  const r: StopResult = await stopSupervisedProcess(1234, { identity: 'x' })
  assertType<Equal<typeof r.pidReused, boolean>>()
  // @ts-expect-error not an outcome
  const o: StopResult['outcome'] = 'stopped'
  void o
  // @ts-expect-error a string is not a target
  void stopSupervisedProcess('1234')
}

export function containment(): void {
  const s: CgroupSupport = cgroupSupport()
  assertType<Equal<typeof s.available, boolean>>()
  assertType<Equal<typeof s.parent, string | null>>()
  assertType<Equal<typeof s.reason, string | null>>()
  const p = spawnSupervised('sleep', ['1'], { cgroup: true })
  void spawnSupervised('sleep', ['1'], { cgroup: { parent: '/sys/fs/cgroup/my.slice' } })
  void spawnSupervised('sleep', ['1'], { cgroup: {} })
  void spawnSupervised('sleep', ['1'], { cgroup: false })
  // @ts-expect-error a path alone is not the option; { parent } is
  void spawnSupervised('sleep', ['1'], { cgroup: '/sys/fs/cgroup/x' })
  // @ts-expect-error no such key
  void spawnSupervised('sleep', ['1'], { cgroup: { path: '/x' } })
  assertType<Equal<typeof p.cgroup, string | null>>()
  const u: ResourceUsage = p.resourceUsage()
  assertType<Equal<typeof u.cpuUsec, number | null>>()
  assertType<Equal<typeof u.memoryBytes, number | null>>()
  assertType<Equal<typeof u.pids, number | null>>()
  const rec: SupervisorStateRecord | null = readSupervisorState('/tmp/x.json')
  const cg = rec?.child?.cgroup
  if (cg) assertType<Equal<typeof cg, { path: string; id: number }>>()
}

export async function supervisorEventsAreTyped(sup: Supervisor): Promise<void> {
  sup.on('exit', (info) => assertType<Equal<typeof info, SupervisorExit>>())
  sup.on('ready', (child) => assertType<Equal<typeof child, SupervisedProcess>>())
  sup.once('failed', (err) => assertType<Equal<typeof err, Error>>())
  sup.off('stdout', (line) => assertType<Equal<typeof line, string>>())
  sup.prependListener('stopped', (r) => assertType<Equal<typeof r, StopResult | null>>())
  // @ts-expect-error no such event (a typo is not an event of its own)
  sup.on('exitt', () => {})
  // @ts-expect-error no such event
  sup.once('readyy', () => {})
  // @ts-expect-error 'exit' gives a SupervisorExit, not a number
  sup.off('exit', (x: number) => {
    void x
  })
  // @ts-expect-error 'exit' gives a SupervisorExit, not a number
  sup.addListener('exit', (x: number) => {
    void x
  })
  // @ts-expect-error 'ready' gives the child, not a string
  sup.removeListener('ready', (s: string) => {
    void s
  })

  // @ts-expect-error emit checks the arguments too
  sup.emit('stopped', 'done')
  // @ts-expect-error no such event
  sup.listenerCount('exitt')

  // events.once is `Promise<any[]>` in Node's own types (20 and later, for
  // any emitter); the event map gives the type.
  const [child] = (await once(sup, 'ready')) as SupervisorEvents['ready']
  assertType<Equal<typeof child, SupervisedProcess>>()

  const p = spawnSupervised('sleep', ['1'])
  p.on('exit', (info) => assertType<Equal<typeof info, ExitInfo>>())
  p.once('exit', (info) => assertType<Equal<typeof info, ExitInfo>>())
  // @ts-expect-error 'exit' gives an ExitInfo
  p.off('exit', (x: string) => {
    void x
  })
  // @ts-expect-error a SupervisedProcess has no 'ready' event
  p.on('ready', () => {})
}

export async function waitForExitUnderExactOptionals(): Promise<void> {
  const info = getProcessInfo(1234)
  // `identity` may be undefined (no such process): passed on as it is.
  const r: WaitForExitResult = await waitForExit(1234, { identity: info?.identity, signal: undefined })
  assertType<Equal<typeof r.exit, ExitInfo | null>>()
  // @ts-expect-error identity is a string
  void waitForExit(1234, { identity: 42 })
  // @ts-expect-error no such option
  void waitForExit(1234, { timeout: 5 })
}

export async function lockedErrorGuard(): Promise<void> {
  try {
    await acquireLock('/tmp/x.lock')
  } catch (err) {
    // @ts-expect-error unknown until narrowed
    void err.holder
    if (isLockedError(err)) {
      assertType<Equal<typeof err, LockedError>>()
      assertType<Equal<typeof err.code, 'ELOCKED'>>()
      assertType<Equal<typeof err.holder, LockHolder | null>>()
      // Either lock's: a file lock's has a path, a PostgreSQL lock's a key.
      // @ts-expect-error pg's ELOCKED has no path
      void err.path
      if ('path' in err) {
        assertType<Equal<typeof err, FileLockedError>>()
        assertType<Equal<typeof err.path, string>>()
        assertType<Equal<typeof err.holderRunning, boolean | null>>()
      } else {
        assertType<Equal<typeof err, PgLockedError>>()
        assertType<Equal<typeof err.key, string>>()
        assertType<Equal<typeof err.holderRunning, null>>()
      }
    }
  }
  assertType<Equal<ReturnType<typeof isLockedError>, boolean>>()
}

export function errorFamilies(err: unknown): void {
  // The codes: one union of procward's own, made of its families'.
  assertType<Equal<Extract<ProcwardErrorCode, ArgumentErrorCode>, ArgumentErrorCode>>()
  assertType<
    Equal<
      Extract<ProcwardErrorCode, SupervisorErrorCode | UnavailableErrorCode | PgErrorCode | 'ELOCKED'>,
      SupervisorErrorCode | UnavailableErrorCode | PgErrorCode | 'ELOCKED'
    >
  >()
  // @ts-expect-error not a code of procward's
  const notOurs: ProcwardErrorCode = 'ERR_SOMETHING_ELSE'
  const crash: SupervisorErrorCode = 'ERR_CRASH_LOOP'
  const lost: PgErrorCode = 'ERR_PROCWARD_PG_LOCK_LOST'
  void [notOurs, crash, lost]
  if (isArgumentError(err)) {
    assertType<Equal<typeof err, ArgumentError>>()
    assertType<Equal<typeof err.code, ArgumentErrorCode>>()
    void (err instanceof RangeError)
  }
  if (isSupervisorError(err)) {
    assertType<Equal<typeof err.code, SupervisorErrorCode>>()
    assertType<Equal<typeof err.lastExit, ExitInfo | null | undefined>>()
  }
  if (isUnavailableError(err)) assertType<Equal<typeof err.code, UnavailableErrorCode>>()
  if (isPgError(err)) {
    assertType<Equal<typeof err.code, PgErrorCode>>()
    assertType<Equal<typeof err.key, string | undefined>>()
  }
  if (isProcwardError(err)) {
    const code: string = err.code
    if (err.code === 'ENOENT') assertType<Equal<typeof err.syscall, string | undefined>>()
    void code
  }
}

export async function staticOnceAndOnAreTyped(sup: Supervisor, child: SupervisedProcess): Promise<void> {
  // Node's events.once and events.on, inherited as statics: typed by the map.
  const [ready] = await Supervisor.once(sup, 'ready')
  assertType<Equal<typeof ready, SupervisedProcess>>()
  const exitArgs = await Supervisor.once(sup, 'exit', { signal: AbortSignal.timeout(1000) })
  assertType<Equal<typeof exitArgs, [info: SupervisorExit]>>()
  for await (const [line] of Supervisor.on(sup, 'stdout')) {
    assertType<Equal<typeof line, string>>()
    break
  }
  const [info] = await SupervisedProcess.once(child, 'exit')
  assertType<Equal<typeof info, ExitInfo>>()
  for await (const args of SupervisedProcess.on(child, 'exit')) {
    assertType<Equal<typeof args, [info: ExitInfo]>>()
    break
  }
  // Not a procward emitter, or not a name of its map: Node's own typing.
  const [other] = await Supervisor.once(child, 'ready')
  assertType<Equal<typeof other, unknown>>()
  // What is not possible: Node's own `once`/`on` imported from node:events
  // are statics of @types/node's EventEmitter class, and a declaration
  // cannot add an overload to a class's static: they stay `any[]`.
  const nodeOnce = await once(sup, 'ready')
  // biome-ignore lint/suspicious/noExplicitAny: what @types/node gives, recorded as such
  assertType<Equal<typeof nodeOnce, any[]>>()
}
