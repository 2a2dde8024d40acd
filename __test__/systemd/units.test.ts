// `procward run` in real units of a real systemd (252, PID 1 of a container:
// see container.ts): readiness, restarts, stops, the watchdog, the journal,
// as systemd itself sees them (systemctl show, its journal, the unit's
// cgroup). Each test stops its units and checks that nothing is left in
// their cgroups.
import { afterEach, describe, expect, it } from 'vitest'
import {
  aliveInside,
  CHECKOUT,
  cursor,
  dropUnits,
  FIX,
  INIT,
  inside,
  installNotifyUnit,
  installUnit,
  journal,
  logLevel,
  markSkippedWithoutSystemd,
  notifications,
  removeInside,
  sh,
  show,
  systemctl,
  unitProcesses,
  until,
  writeInside,
} from './container'

markSkippedWithoutSystemd('procward in a real systemd', true)

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
const DAEMON = `/usr/bin/node ${FIX}/gated-daemon.cjs`
/** `procward run`'s arguments for the gated daemon `name` on `port`: it listens (and is ready) once /run/NAME.gate exists. */
const gated = (name: string, port: number) =>
  `--name ${name} --ready-port ${port} -- ${DAEMON} ${port} /run/${name}.gate`

/** A `systemctl start` in flight: whether it has returned, and how. */
function starting(unit: string): { done: () => boolean; result: Promise<{ code: number | null; out: string }> } {
  let finished = false
  const result = inside(['systemctl', 'start', unit]).then((r) => {
    finished = true
    return { code: r.code, out: r.stdout + r.stderr }
  })
  return { done: () => finished, result }
}

/** The pids of a unit's processes whose command line starts with `argv0` (procward's own names it later). */
async function pidsOf(unit: string, argv0: string): Promise<number[]> {
  return (await unitProcesses(unit)).filter((p) => p.cmd.startsWith(argv0)).map((p) => p.pid)
}

/** The one pid of a unit's processes whose command line starts with `argv0`; throws unless exactly one. */
async function onePid(unit: string, argv0: string): Promise<number> {
  const pids = await pidsOf(unit, argv0)
  if (pids.length !== 1 || pids[0] === undefined) throw new Error(`${unit}: not one ${argv0}: ${pids.join(', ')}`)
  return pids[0]
}

/** Asks 127.0.0.1:port inside the container; the daemon answers its pid. */
async function askPort(port: number): Promise<string> {
  const r = await inside([
    '/usr/bin/node',
    '-e',
    `require('net').connect(${port}, '127.0.0.1').on('data', (d) => process.stdout.write(d)).on('error', (e) => { console.log(e.code); })`,
  ])
  return r.stdout.trim()
}

describe.skipIf(INIT === 0)('procward run in a real systemd', { timeout: 90_000 }, () => {
  afterEach(async () => {
    await logLevel('info')
    await dropUnits()
  })

  /** `systemctl start UNIT` (the journal at debug): its exit code, ActiveState and Result after it, what the unit notified. */
  async function failingStart(unit: string) {
    await logLevel('debug')
    const c = await cursor()
    const { code } = await inside(['systemctl', 'start', unit])
    const state = await show(unit, 'ActiveState', 'Result')
    return { code, state, notified: await notifications(unit, c) }
  }

  it('Type=notify: systemctl start returns only once the daemon is ready', async () => {
    removeInside('/run/ready.gate')
    await installNotifyUnit('ready.service', gated('ready', 8101), 'TimeoutStartSec=60')
    const start = starting('ready.service')
    await until(async () => (await pidsOf('ready.service', DAEMON)).length === 1, 20_000, 'the daemon')
    // Longer than the 1 s that counts as ready without a check: the port
    // check is what is waited for.
    await sleep(2000)
    expect(start.done()).toBe(false)
    expect((await show('ready.service', 'ActiveState')).ActiveState).toBe('activating')
    expect(await askPort(8101)).toBe('ECONNREFUSED')

    writeInside('/run/ready.gate', '')
    const r = await start.result
    expect(r).toEqual({ code: 0, out: '' })
    const daemon = await onePid('ready.service', DAEMON)
    // Ready means serving, the moment start returns.
    expect(await askPort(8101)).toBe(String(daemon))
    const s = await show('ready.service', 'ActiveState', 'StatusText')
    expect(s).toEqual({ ActiveState: 'active', StatusText: `ready running, pid ${daemon}` })
    removeInside('/run/ready.gate')
  })

  it('Type=notify: systemctl start fails for a daemon that crashes at start-up, never reported ready', async () => {
    await installNotifyUnit(
      'crash.service',
      "--name crash --max-restarts 2 -- /bin/sh -c 'sleep 0.2; exit 1'",
      'TimeoutStartSec=60',
    )
    const { code, state, notified } = await failingStart('crash.service')
    expect(code).not.toBe(0)
    expect(state).toEqual({ ActiveState: 'failed', Result: 'exit-code' })
    expect(notified.length).toBeGreaterThan(0)
    expect(notified.filter((m) => /(^|, )READY=1/.test(m))).toEqual([])
  })

  it('Type=notify: systemctl start fails for a daemon that never accepts connections (TimeoutStartSec)', async () => {
    removeInside('/run/never.gate')
    await installNotifyUnit('never.service', gated('never', 8102), 'TimeoutStartSec=4s')
    const { code, state, notified } = await failingStart('never.service')
    expect(code).not.toBe(0)
    expect(state).toEqual({ ActiveState: 'failed', Result: 'timeout' })
    expect(notified.filter((m) => /(^|, )READY=1/.test(m))).toEqual([])
  })

  it('kill -9 of the daemon: MainPID unchanged, READY=1 only after the new ready, STATUS= at each step', async () => {
    writeInside('/run/k9.gate', '')
    await installNotifyUnit('k9.service', gated('k9', 8103))
    await systemctl('start', 'k9.service')
    const main = (await show('k9.service', 'MainPID')).MainPID
    const first = await onePid('k9.service', DAEMON)
    expect((await show('k9.service', 'StatusText')).StatusText).toBe(`k9 running, pid ${first}`)

    await logLevel('debug')
    removeInside('/run/k9.gate') // the next daemon is not ready until we say so
    const killed = await cursor()
    await sh(`kill -9 ${first}`)
    let second = 0
    await until(
      async () => {
        const now = await pidsOf('k9.service', DAEMON)
        second = now.length === 1 && now[0] !== first ? (now[0] ?? 0) : 0
        return second !== 0
      },
      20_000,
      'the new daemon',
    )
    await sleep(2000) // beyond the 1 s rule: the port decides
    expect(await show('k9.service', 'MainPID', 'StatusText')).toEqual({
      MainPID: main,
      StatusText: `k9 starting, pid ${second}`,
    })
    const beforeReady = await notifications('k9.service', killed)
    expect(beforeReady.filter((m) => /(^|, )READY=1/.test(m))).toEqual([])

    const opened = await cursor()
    writeInside('/run/k9.gate', '')
    await until(
      async () => (await notifications('k9.service', opened)).some((m) => /(^|, )READY=1/.test(m)),
      20_000,
      'READY=1 for the new daemon',
    )
    expect(await show('k9.service', 'MainPID', 'StatusText', 'ActiveState')).toEqual({
      MainPID: main,
      StatusText: `k9 running, pid ${second}`,
      ActiveState: 'active',
    })
    expect(await askPort(8103)).toBe(String(second))
    // The steps, in order, as systemd got them.
    const statuses = (await notifications('k9.service', killed))
      .map((m) => /STATUS=(.*)$/.exec(m)?.[1])
      .filter((s) => s !== undefined)
    expect(statuses).toEqual([
      `k9 pid ${first} was killed by SIGKILL`,
      'k9 restarting in 0 ms (attempt 1)',
      `k9 starting, pid ${second}`,
      `k9 running, pid ${second}`,
    ])
    const ready = (await notifications('k9.service', killed)).filter((m) => /(^|, )READY=1/.test(m))
    expect(ready).toEqual([`READY=1, STATUS=k9 running, pid ${second}`])
    removeInside('/run/k9.gate')
  })

  const stops: [string, boolean][] = [
    ['control-group', false],
    ['control-group', true],
    ['mixed', false],
    ['mixed', true],
  ]
  it.each(stops)(
    'systemctl stop leaves nothing in the cgroup: KillMode=%s, --cgroup + Delegate=yes: %s, an escapee (setsid)',
    async (killMode, contained) => {
      const unit = `stop-${killMode}-${contained ? 'cg' : 'plain'}.service`
      const pidFile = `/run/${unit}.escapee`
      removeInside(pidFile)
      await installNotifyUnit(
        unit,
        `--name esc ${contained ? '--cgroup ' : ''}-- ${FIX}/escapee.sh ${pidFile}`,
        `KillMode=${killMode}`,
        ...(contained ? ['Delegate=yes'] : []),
        'TimeoutStopSec=30s',
      )
      await systemctl('start', unit)
      const escapee = Number(await sh(`cat ${pidFile}`))
      const daemon = await onePid(unit, 'sleep 10010')
      // The escapee left the daemon's session and group, not the unit.
      const sid = async (pid: number) => (await sh(`ps -o sid= -p ${pid}`)).trim()
      expect(await sid(escapee)).not.toBe(await sid(daemon))
      expect((await unitProcesses(unit)).map((p) => p.pid)).toContain(escapee)
      if (contained) expect(await sh(`cat /proc/${escapee}/cgroup`)).toMatch(`/system.slice/${unit}/procward/`)

      await systemctl('stop', unit)
      expect(await unitProcesses(unit)).toEqual([])
      expect(await aliveInside(escapee)).toBe(false)
      expect(await aliveInside(daemon)).toBe(false)
      expect((await show(unit, 'ActiveState')).ActiveState).toBe('inactive')
      removeInside(pidFile)
    },
  )

  it('the watchdog: SIGSTOP of procward → killed and restarted by systemd, exactly one daemon', async () => {
    await installNotifyUnit(
      'wd.service',
      '--name wd -- /bin/sleep 10013',
      'WatchdogSec=2s',
      'Restart=on-failure',
      'TimeoutStopSec=10s',
    )
    await systemctl('start', 'wd.service')
    const before = await show('wd.service', 'MainPID', 'NRestarts')
    const first = await onePid('wd.service', '/bin/sleep 10013')
    const c = await cursor()
    await sh(`kill -STOP ${before.MainPID}`)
    await until(
      async () => {
        const s = await show('wd.service', 'MainPID', 'NRestarts', 'ActiveState', 'SubState')
        return s.ActiveState === 'active' && s.SubState === 'running' && s.NRestarts !== before.NRestarts
      },
      60_000,
      'the restarted unit',
    )
    expect((await journal('wd.service', c)).some((l) => l.includes('Watchdog timeout'))).toBe(true)
    const after = await show('wd.service', 'MainPID', 'NRestarts')
    expect(after.MainPID).not.toBe(before.MainPID)
    expect(Number(after.NRestarts)).toBe(Number(before.NRestarts) + 1)
    expect(await aliveInside(Number(before.MainPID))).toBe(false)
    expect(await aliveInside(first)).toBe(false)
    // Exactly one daemon, and it stays one (its predecessor is not back).
    expect(await pidsOf('wd.service', '/bin/sleep 10013')).toHaveLength(1)
    await sleep(3000)
    expect(await pidsOf('wd.service', '/bin/sleep 10013')).toHaveLength(1)
    expect((await show('wd.service', 'MainPID')).MainPID).toBe(after.MainPID)
  })

  it.each([false, true])(
    'kill -9 of procward with Restart=always: exactly one daemon after the restart (--cgroup + Delegate=yes: %s)',
    async (contained) => {
      const unit = `k9pw-${contained ? 'cg' : 'plain'}.service`
      await installNotifyUnit(
        unit,
        `--name k9pw ${contained ? '--cgroup ' : ''}-- /bin/sleep 10014`,
        'Restart=always',
        ...(contained ? ['Delegate=yes'] : []),
      )
      await systemctl('start', unit)
      const before = await show(unit, 'MainPID', 'NRestarts')
      const first = await onePid(unit, '/bin/sleep 10014')
      await sh(`kill -9 ${before.MainPID}`)
      await until(
        async () => {
          const s = await show(unit, 'NRestarts', 'ActiveState', 'SubState')
          return s.ActiveState === 'active' && s.SubState === 'running' && s.NRestarts !== before.NRestarts
        },
        30_000,
        'the restarted unit',
      )
      expect(await aliveInside(first)).toBe(false)
      const daemons = await pidsOf(unit, '/bin/sleep 10014')
      expect(daemons).toHaveLength(1)
      expect(daemons[0]).not.toBe(first)
      await sleep(2000)
      expect(await pidsOf(unit, '/bin/sleep 10014')).toEqual(daemons)
    },
  )

  it('--ready-notify through a wrapper that calls systemd-notify --ready', async () => {
    removeInside('/run/wrap.gate')
    await installNotifyUnit(
      'wrap.service',
      `--name wrap --ready-notify -- ${FIX}/notify-wrapper.sh /run/wrap.gate`,
      'TimeoutStartSec=60',
    )
    const start = starting('wrap.service')
    await until(
      async () => (await pidsOf('wrap.service', `/bin/sh ${FIX}/notify-wrapper.sh`)).length === 1,
      20_000,
      'the wrapper',
    )
    await sleep(2000) // beyond the 1 s rule: the wrapper's READY=1 decides
    expect(start.done()).toBe(false)
    expect((await show('wrap.service', 'ActiveState')).ActiveState).toBe('activating')

    writeInside('/run/wrap.gate', '')
    expect(await start.result).toEqual({ code: 0, out: '' })
    expect((await show('wrap.service', 'ActiveState')).ActiveState).toBe('active')
    // The daemon (the wrapper, now sleep) is what runs. (systemd-notify's
    // BARRIER=1 after its READY=1 is sometimes refused with a warning,
    // once it has exited: seen, reported, not asserted here.)
    expect(await pidsOf('wrap.service', 'sleep 10009')).toHaveLength(1)
    removeInside('/run/wrap.gate')
  })

  it('a Node app using Supervisor with handleSignals: true (KillMode=mixed: only the app gets the SIGTERM)', async () => {
    await installUnit(
      'app.service',
      `[Service]
ExecStart=/usr/bin/node ${FIX}/app.cjs
KillMode=mixed
TimeoutStopSec=30s
`,
    )
    const c = await cursor()
    await systemctl('start', 'app.service')
    let first = 0
    await until(
      async () => {
        const m = (await journal('app.service', c)).map((l) => /^app: started, daemon (\d+)$/.exec(l)).find(Boolean)
        first = m ? Number(m[1]) : 0
        return first !== 0
      },
      20_000,
      'the app to start its daemon',
    )
    const main = (await show('app.service', 'MainPID')).MainPID
    await sh(`kill -9 ${first}`)
    let second = 0
    await until(
      async () => {
        const lines = await journal('app.service', c)
        const m = lines.map((l) => /^app: running (\d+)$/.exec(l)).filter((x) => x !== null)
        second = m.length >= 2 ? Number(m[m.length - 1]?.[1]) : 0
        return second !== 0
      },
      20_000,
      'the restarted daemon',
    )
    expect(second).not.toBe(first)
    expect((await show('app.service', 'MainPID')).MainPID).toBe(main)
    // 'running' comes as the daemon is spawned (no ready check): a SIGTERM
    // before Node has loaded it and installed its handler would kill it
    // silently (seen on a loaded machine). Its 'started' line comes after.
    await until(
      async () => (await journal('app.service', c)).includes(`daemon ${second} started`),
      20_000,
      'the restarted daemon to take SIGTERM',
    )

    const stopping = await cursor()
    await systemctl('stop', 'app.service')
    // journald may store the last lines of a unit a moment after its stop.
    let lines: string[] = []
    await until(
      async () => {
        lines = await journal('app.service', stopping)
        return lines.includes('app: stopped') && lines.includes(`daemon ${second} got SIGTERM`)
      },
      10_000,
      "the stop's lines in the journal",
    ).catch(() => {})
    // The app stopped its daemon (SIGTERM from the app, not from systemd:
    // KillMode=mixed signals the main process only), then died of its signal.
    expect(lines, lines.join('\n')).toContain(`daemon ${second} got SIGTERM`)
    expect(lines, lines.join('\n')).toContain('app: stopped')
    expect(await show('app.service', 'ActiveState', 'Result')).toEqual({ ActiveState: 'inactive', Result: 'success' })
    expect(await unitProcesses('app.service')).toEqual([])
  })

  it("a lock file in a unit's RuntimeDirectory=, removed by systemctl restart: procward lock stops its command and exits 75", async () => {
    // The directory's unit (the app), and a holder of a lock file in it
    // (another unit): restarting the first removes and recreates
    // /run/resync, so the holder's file is gone and a new start would lock
    // a new one. The holder must learn it, not run on as a second holder.
    await installUnit(
      'resync-dir.service',
      ['[Service]', 'Type=oneshot', 'RemainAfterExit=yes', 'ExecStart=/bin/true', 'RuntimeDirectory=resync', ''].join(
        '\n',
      ),
    )
    await systemctl('start', 'resync-dir.service')
    await installUnit(
      'resync-holder.service',
      ['[Service]', `ExecStart=${CHECKOUT}/bin/procward.js lock /run/resync/resync.lock -- /bin/sleep 1000`, ''].join(
        '\n',
      ),
    )
    await systemctl('start', 'resync-holder.service')
    await until(async () => (await pidsOf('resync-holder.service', '/bin/sleep')).length === 1, 10_000, 'the command')
    await systemctl('restart', 'resync-dir.service')
    await until(
      async () => (await show('resync-holder.service', 'ActiveState')).ActiveState !== 'active',
      10_000,
      'the holder to end',
    )
    expect((await show('resync-holder.service', 'ExecMainStatus')).ExecMainStatus).toBe('75')
    const lines = await journal('resync-holder.service')
    expect(lines.join('\n')).toContain('/run/resync/resync.lock')
    expect(await unitProcesses('resync-holder.service')).toEqual([])
  })
})
