// A Node program that embeds a Supervisor with `notify: true` as a real
// systemd Type=notify unit (see container.ts): active only once its daemon
// serves, its own STATUS= said, the watchdog fed through a backoff longer
// than WatchdogSec, and a kill by the watchdog when the app's loop is stuck.
// Each test stops its unit and checks that nothing is left in its cgroup.
import { afterEach, describe, expect, it } from 'vitest'
import {
  cursor,
  dropUnits,
  FIX,
  INIT,
  inside,
  installUnit,
  journal,
  markSkippedWithoutSystemd,
  removeInside,
  sh,
  show,
  systemctl,
  unitProcesses,
  until,
} from './container'

markSkippedWithoutSystemd('an app embedding a Supervisor in a real systemd', true)

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** The app's unit: Type=notify, WatchdogSec=2s, its daemon on `port` gated by /run/embedded.gate. */
function installApp(port: number): Promise<void> {
  return installUnit(
    'embedded.service',
    [
      '[Service]',
      'Type=notify',
      `ExecStart=/usr/bin/node ${FIX}/notify-app.cjs`,
      `Environment=APP_PORT=${port} APP_GATE=/run/embedded.gate`,
      'WatchdogSec=2s',
      'TimeoutStartSec=30s',
      '',
    ].join('\n'),
  )
}

describe.skipIf(INIT === 0)('an app that embeds a Supervisor with notify: true', { timeout: 90_000 }, () => {
  afterEach(async () => {
    await systemctl('stop', 'embedded.service').catch(() => {})
    expect(await unitProcesses('embedded.service')).toEqual([])
    removeInside('/run/embedded.gate')
    await dropUnits()
  })

  it('is active only once its daemon serves; says its own status; the watchdog is fed through a 6 s backoff', async () => {
    await installApp(18461)
    removeInside('/run/embedded.gate')
    const start = inside(['systemctl', 'start', 'embedded.service'])
    let started = false
    void start.then(() => (started = true))
    // The daemon waits for its gate: the unit is still activating.
    await until(
      async () => (await show('embedded.service', 'ActiveState')).ActiveState === 'activating',
      10_000,
      'activating',
    )
    await sleep(1500)
    expect(started).toBe(false)
    expect((await show('embedded.service', 'ActiveState')).ActiveState).toBe('activating')
    await sh('touch /run/embedded.gate')
    expect((await start).code).toBe(0)
    const s = await show('embedded.service', 'ActiveState', 'MainPID', 'StatusText')
    expect(s.ActiveState).toBe('active')
    await until(
      async () => (await show('embedded.service', 'StatusText')).StatusText === 'app: resync lock held, serving',
      10_000,
      "the app's own STATUS=",
    )
    // The main process is the app itself (node notify-app.cjs), not a procward run.
    const procs = await unitProcesses('embedded.service')
    expect(procs.find((p) => p.pid === Number(s.MainPID))?.cmd).toMatch(/notify-app\.cjs$/)
    // Kill the daemon: the app waits 6 s before the next, feeding the watchdog all along.
    const c = await cursor()
    const daemon = procs.find((p) => p.cmd.includes('gated-daemon.cjs'))?.pid
    expect(daemon).toBeDefined()
    await sh(`kill -9 ${daemon}`)
    await until(
      async () => /restarting in 6000 ms/.test((await show('embedded.service', 'StatusText')).StatusText ?? ''),
      10_000,
      'the backoff in STATUS=',
    )
    await sleep(5000)
    const during = await show('embedded.service', 'ActiveState', 'MainPID', 'NRestarts')
    expect(during).toMatchObject({ ActiveState: 'active', MainPID: s.MainPID })
    await until(
      async () =>
        (await unitProcesses('embedded.service')).some((p) => p.cmd.includes('gated-daemon.cjs') && p.pid !== daemon),
      15_000,
      'the next daemon',
    )
    const lines = await journal('embedded.service', c)
    expect(lines.filter((l) => /watchdog timeout/i.test(l))).toEqual([])
    expect((await show('embedded.service', 'MainPID')).MainPID).toBe(s.MainPID)
  })

  it("is killed by systemd's watchdog when the app's loop is stuck", async () => {
    await installApp(18462)
    await sh('touch /run/embedded.gate')
    await systemctl('start', 'embedded.service')
    const main = (await show('embedded.service', 'MainPID')).MainPID
    const c = await cursor()
    await sh(`kill -USR2 ${main}`)
    await until(
      async () => (await show('embedded.service', 'Result')).Result === 'watchdog',
      20_000,
      'the watchdog to end the unit',
    )
    const lines = await journal('embedded.service', c)
    expect(lines.some((l) => /watchdog timeout/i.test(l))).toBe(true)
  })
})
