// procward run as a real systemd unit (see container.ts): the daemon's
// output (blocking fds, every byte in the journal), the watchdog through a
// crash loop and its SIGABRT, a stop whose signals reach procward and its
// daemon in either order, and a unit that starts it through npx. Each test
// failed before its fix.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import {
  CHECKOUT,
  cursor,
  dropUnits,
  entries,
  FIX,
  INIT,
  inside,
  installNotifyUnit,
  installUnit,
  journal,
  markSkippedWithoutSystemd,
  PROCWARD_RUN,
  removeInside,
  sh,
  show,
  systemctl,
  unitProcesses,
  until,
  writeInside,
} from './container'

// (units.test.ts says why on stderr, once per run.)
markSkippedWithoutSystemd('issue 23 in a real systemd')

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
const DAEMON = `/usr/bin/node ${FIX}/gated-daemon.cjs`

/** The daemons started so far (gated-daemon.cjs appends its pid to START_LOG). */
async function starts(log: string): Promise<number[]> {
  const r = await inside(['cat', log])
  return r.stdout
    .split('\n')
    .filter((l) => l !== '')
    .map(Number)
}

// A child inherits non-blocking stdio. Under the journal
// procward's stdout and stderr are one socket that libuv made O_NONBLOCK,
// and the daemon shares that open file: a daemon writing faster than
// journald reads gets EAGAIN (seen here: a line written twice in the journal
// by sed's stdio retrying, in 1 of 5 runs of 50 000 lines). Fixed: the
// child clears O_NONBLOCK on its stdio before exec, as libuv does.
describe.skipIf(INIT === 0)("the daemon's stdio under the journal", { timeout: 90_000 }, () => {
  afterEach(dropUnits)

  it("the daemon's stdout and stderr are blocking, as systemd gave them", async () => {
    await installNotifyUnit('nonblock.service', '--name nonblock -- /bin/sleep 10031')
    await systemctl('start', 'nonblock.service')
    const pid = (await inside(['pgrep', '-f', '^/bin/sleep 10031$'])).stdout.trim()
    expect(pid).toMatch(/^\d+$/)
    for (const fd of [1, 2]) {
      const flags = /flags:\s+(\d+)/.exec(await sh(`cat /proc/${pid}/fdinfo/${fd}`))?.[1]
      expect(flags).toBeDefined()
      expect({ fd, nonblock: (Number.parseInt(flags ?? '0', 8) & 0o4000) !== 0 }).toEqual({ fd, nonblock: false })
    }
  })

  it('the journal receives every byte the daemon writes', async () => {
    const n = 50_000
    await installUnit(
      'bytes.service',
      `[Service]
Type=exec
ExecStart=${PROCWARD_RUN} --name bytes --restart never -- ${FIX}/bytes.sh ${n} /run/bytes.gate
LogRateLimitIntervalSec=0
`,
    )
    removeInside('/run/bytes.gate')
    const c = await cursor()
    await systemctl('start', 'bytes.service')
    // The daemon writes once procward is silent: a line procward writes in
    // the middle of one the daemon writes in blocks splits it in the journal
    // (journald breaks lines where the writing pid changes). Seen, reported;
    // this test is about bytes.
    await until(
      async () => (await journal('bytes.service', c)).some((l) => l.startsWith('procward: bytes: ready pid')),
      20_000,
      'procward to say the daemon runs',
    )
    writeInside('/run/bytes.gate', '')
    await until(
      async () => (await show('bytes.service', 'ActiveState')).ActiveState !== 'active',
      60_000,
      'the unit to end',
    )
    expect(await show('bytes.service', 'ActiveState', 'Result')).toEqual({ ActiveState: 'inactive', Result: 'success' })
    // One stream (stdout and stderr are one socket to the journal, shared
    // with procward's own lines): its bytes are the entries, each with the
    // newline that ended it unless journald says it broke the line itself
    // (_LINE_BREAK: a line procward wrote while the daemon's was half
    // written, the end of the stream), less procward's lines; the last one
    // procward writes is "stopped".
    let text = ''
    await until(
      async () => {
        const got = await entries(['_SYSTEMD_UNIT=bytes.service'], c)
        text = got.map((e) => (e.lineBreak === null ? `${e.message}\n` : e.message)).join('')
        return text.endsWith('procward: bytes: stopped\n')
      },
      30_000,
      'the whole stream in the journal',
    )
    const daemon = text.replace(/procward: bytes: [^\n]*\n/g, '')
    const expected = [
      ...Array.from({ length: n }, (_, i) => `line ${i + 1}\n`),
      ...Array.from({ length: n / 1000 }, (_, i) => `err ${(i + 1) * 1000}\n`),
      'the end, without a newline',
    ].join('')
    let at = 0
    while (at < expected.length && daemon[at] === expected[at]) at++
    const where = (t: string) => JSON.stringify(t.slice(Math.max(0, at - 40), at + 40))
    expect(daemon === expected ? 'every byte' : `differs at byte ${at}: ${where(daemon)}, not ${where(expected)}`).toBe(
      'every byte',
    )
    removeInside('/run/bytes.gate')
  })
})

// Before: the watchdog is fed only while a daemon runs, so a
// backoff longer than half of WatchdogSec gets a healthy procward killed
// ("Watchdog timeout" about 12 s after start).
describe.skipIf(INIT === 0)('the watchdog over a crash loop', { timeout: 90_000 }, () => {
  afterEach(dropUnits)

  it('no watchdog kill over a minute of a crash loop with its backoff', { timeout: 120_000 }, async () => {
    await installNotifyUnit(
      'loop.service',
      "--name loop --max-restarts 20 -- /bin/sh -c 'sleep 2.5; exit 1'",
      'WatchdogSec=2s',
      'Restart=on-failure',
    )
    const c = await cursor()
    // Ready after 1 s (no ready check), then an exit 1.5 s later, again and
    // again with a growing backoff: procward is healthy throughout.
    await systemctl('start', 'loop.service')
    const first = await show('loop.service', 'MainPID', 'NRestarts')
    const end = Date.now() + 60_000
    while (Date.now() < end) {
      expect(await show('loop.service', 'MainPID', 'NRestarts')).toEqual(first)
      await sleep(1000)
    }
    const lines = await journal('loop.service', c)
    expect(lines.filter((l) => /watchdog/i.test(l) && !l.startsWith('procward: '))).toEqual([])
    // The loop did turn (at least one backoff beyond half of WatchdogSec).
    expect(lines.filter((l) => /restart attempt \d+ in (\d{4,}) ms/.test(l)).length).toBeGreaterThan(0)
  })
})

// Under KillMode=control-group systemd signals procward and
// the daemon at once; when procward sees the daemon's death before its own
// SIGTERM it counts a crash and starts a new daemon in the middle of the
// stop (4/5 tries with `kill -STOP $MAINPID; systemctl stop`; 2/2 on the
// watchdog's SIGABRT).
describe.skipIf(INIT === 0)('no daemon started during a stop', { timeout: 90_000 }, () => {
  afterEach(dropUnits)

  it('systemctl stop of a stopped procward whose daemon dies of SIGTERM first: no new daemon (5 tries)', async () => {
    await installNotifyUnit('race.service', `--name race -- ${DAEMON}`, 'Environment=START_LOG=/run/race.starts')
    for (let i = 0; i < 5; i++) {
      removeInside('/run/race.starts')
      const c = await cursor()
      await systemctl('start', 'race.service')
      expect(await starts('/run/race.starts')).toHaveLength(1)
      const main = (await show('race.service', 'MainPID')).MainPID
      await sh(`kill -STOP ${main}; systemctl stop race.service`)
      const lines = await journal('race.service', c)
      expect(
        lines.filter((l) => /restart attempt|unexpected/.test(l)),
        lines.join('\n'),
      ).toEqual([])
      expect(await starts('/run/race.starts')).toHaveLength(1)
    }
    removeInside('/run/race.starts')
  })

  // The same stop for an application whose own SIGTERM handler stops its
  // Supervisor (handleSignals off). Here systemd wakes the main process
  // (SIGTERM, SIGCONT) before it signals the daemon, so this passed
  // without the fix too (5/5): the race itself is proved in-process, in
  // supervisor/stop-signal-race.test.ts (12/12 restarted without it). This
  // is that application, whole, in a real systemd.
  it("a Node app whose own SIGTERM handler stops its Supervisor, stopped as systemd's stop came: no new daemon (5 tries)", async () => {
    await installUnit(
      'own.service',
      [
        '[Service]',
        `ExecStart=/usr/bin/node ${FIX}/app.cjs`,
        'Environment=APP_OWN_HANDLER=1',
        'Environment="APP_DAEMON_SH=echo $$ >>/run/own.starts; exec sleep 10041"',
        '',
      ].join('\n'),
    )
    for (let i = 0; i < 5; i++) {
      removeInside('/run/own.starts')
      const c = await cursor()
      await systemctl('start', 'own.service')
      await until(
        async () => (await unitProcesses('own.service')).some((p) => p.cmd.startsWith('sleep 10041')),
        20_000,
        'the daemon',
      )
      const daemons = await starts('/run/own.starts')
      expect(daemons).toHaveLength(1)
      const main = (await show('own.service', 'MainPID')).MainPID
      await sh(`kill -STOP ${main}; systemctl stop own.service`)
      // journald may store the last lines of a unit a moment after its stop.
      let lines: string[] = []
      await until(
        async () => {
          lines = await journal('own.service', c)
          return lines.includes('app: stopped by its own handler')
        },
        10_000,
        "the stop's lines in the journal",
      ).catch(() => {})
      expect(lines, lines.join('\n')).toContain('app: stopped by its own handler')
      expect(await starts('/run/own.starts')).toEqual(daemons)
    }
    removeInside('/run/own.starts')
  })

  it("the watchdog's SIGABRT (KillMode=control-group): the old procward starts no daemon (3 tries)", async () => {
    await installNotifyUnit(
      'abrt.service',
      `--name abrt -- ${DAEMON}`,
      'Environment=START_LOG=/run/abrt.starts',
      'WatchdogSec=2s',
      'Restart=on-failure',
    )
    for (let i = 0; i < 3; i++) {
      removeInside('/run/abrt.starts')
      const c = await cursor()
      await systemctl('start', 'abrt.service')
      const before = await show('abrt.service', 'MainPID', 'NRestarts')
      await sh(`kill -STOP ${before.MainPID}`)
      await until(
        async () => {
          const s = await show('abrt.service', 'ActiveState', 'SubState', 'NRestarts')
          return s.ActiveState === 'active' && s.SubState === 'running' && s.NRestarts !== before.NRestarts
        },
        60_000,
        'the restarted unit',
      )
      // One daemon for the first procward, one for the unit's restart: none
      // started by the first one while it stopped.
      expect((await journal('abrt.service', c)).filter((l) => /restart attempt|unexpected/.test(l))).toEqual([])
      expect(await starts('/run/abrt.starts')).toHaveLength(2)
      await systemctl('stop', 'abrt.service')
    }
    removeInside('/run/abrt.starts')
  })
})

// `ExecStart=/usr/bin/npx procward run …` makes npm the
// main process; with NotifyAccess=all the watchdog's WATCHDOG_PID names
// npm, procward sends no pings and the unit is killed every few seconds,
// silently. The docs now show WorkingDirectory= + node_modules/.bin (see
// docs-units.test.ts); procward must also say on stderr, once, that it is
// not the process the manager expects.
describe.skipIf(INIT === 0)('procward not the main process', { timeout: 90_000 }, () => {
  beforeAll(async () => {
    await sh(
      `mkdir -p /srv/app/node_modules/.bin && ln -sfn ${CHECKOUT} /srv/app/node_modules/procward &&
       ln -sfn ../procward/bin/procward.js /srv/app/node_modules/.bin/procward`,
    )
  })
  afterAll(() => removeInside('/srv/app'))
  afterEach(dropUnits)

  it('under npx (WATCHDOG_PID not its pid): said once on stderr', async () => {
    await installUnit(
      'npx.service',
      `[Service]
Type=notify
NotifyAccess=all
WorkingDirectory=/srv/app
ExecStart=/usr/bin/npx procward run --name npx -- /bin/sleep 10021
WatchdogSec=30s
`,
    )
    const c = await cursor()
    await systemctl('start', 'npx.service')
    const main = (await show('npx.service', 'MainPID')).MainPID
    expect(await sh(`tr '\\0' ' ' </proc/${main}/cmdline`)).toMatch(/npm|npx/)
    await until(
      async () => (await journal('npx.service', c)).some((l) => l.startsWith('procward: ') && /WATCHDOG_PID/.test(l)),
      10_000,
      'procward to say it is not the process the manager watches',
    )
    await sleep(2000)
    expect((await journal('npx.service', c)).filter((l) => /WATCHDOG_PID/.test(l))).toHaveLength(1)
  })
})
