// Type-checked only (tsc): the public types as an ESM consumer sees them,
// through the package's own ESM declarations (index.d.mts). Each expected
// error below fails the check if its line compiles after all.
import procwardDefault, {
  acquireLock,
  type ExitInfo,
  getProcessInfo,
  isLockedError,
  type LockHolder,
  type SupervisedProcess,
  Supervisor,
  type SupervisorExit,
  waitForExit,
} from 'procward'
import type { AcquirePgLockOptions, PgLock, LockHolder as PgLockHolder } from 'procward/pg'

export async function esmTypes(sup: Supervisor): Promise<void> {
  sup.on('exit', (info: SupervisorExit) => void info.expected)
  sup.once('ready', (child: SupervisedProcess) => void child.pid)
  // @ts-expect-error no such event
  sup.on('exitt', () => {})
  // @ts-expect-error 'exit' gives a SupervisorExit
  sup.off('exit', (x: number) => void x)

  // Under exactOptionalPropertyTypes, an identity that may be undefined.
  const exit: ExitInfo | null = (await waitForExit(1234, { identity: getProcessInfo(1234)?.identity })).exit
  void exit

  try {
    await acquireLock('/tmp/x.lock')
  } catch (err) {
    if (isLockedError(err)) {
      const holder: LockHolder | null = err.holder
      const code: 'ELOCKED' = err.code
      // @ts-expect-error either lock's ELOCKED: pg's has a key, no path
      const path: string = err.path
      const where: string = 'path' in err ? err.path : err.key
      void [holder, code, path, where]
    }
  }

  // The emitters' statics (events.once, inherited) typed by their event maps.
  const [child] = await Supervisor.once(sup, 'ready')
  const pid: number = child.pid
  void pid

  // The default export is the CommonJS module itself: the same functions and classes.
  const same: typeof Supervisor = procwardDefault.Supervisor
  void same
}

// procward/pg's types, through its ESM declarations (pg.d.mts), sharing the
// main entry's LockHolder.
export function pgTypes(lock: PgLock, options: AcquirePgLockOptions): void {
  const fence: bigint = lock.fence
  const holder: LockHolder = lock.holder satisfies PgLockHolder
  const key: string = options.key
  // @ts-expect-error no such option
  const bad: AcquirePgLockOptions = { connection: 'postgres://x', key: 'k', hostLoss: 5 }
  void [fence, holder, key, bad]
}
