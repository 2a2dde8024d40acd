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
  type Supervisor,
  type SupervisorExit,
  waitForExit,
} from 'procward'

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
      void [holder, code]
    }
  }

  // The default export is the CommonJS module itself: the same functions and classes.
  const same: typeof Supervisor = procwardDefault.Supervisor
  void same
}
