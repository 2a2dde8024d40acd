// procward up as one real systemd Type=notify unit (see
// __test__/systemd/container.ts): `systemctl start` returns only once every
// daemon of the group is ready, STATUS= counts them, the main process is
// procward up, and `systemctl stop` stops them in reverse order, leaving
// nothing in the unit's cgroup.
import { afterEach, describe, expect, it } from 'vitest'
import {
  CHECKOUT,
  cursor,
  dropUnits,
  INIT,
  inside,
  installUnit,
  journal,
  logLevel,
  markSkippedWithoutSystemd,
  notifications,
  removeInside,
  show,
  systemctl,
  unitProcesses,
  writeInside,
} from './container'

markSkippedWithoutSystemd('procward up in a real systemd')

const LISTEN = `${CHECKOUT}/__test__/group/fixtures/listen.cjs`
const CONFIG = '/run/up-test/procward.config.json'

describe.skipIf(INIT === 0)('procward up under systemd', { timeout: 120_000 }, () => {
  afterEach(async () => {
    await dropUnits()
    await logLevel('info')
    removeInside('/run/up-test')
  })

  it('is one Type=notify unit: ready once all are ready, STATUS= counts them, stopped in reverse', async () => {
    // db listens after 1.5 s; web waits for it, then listens after 0.5 s.
    writeInside(
      CONFIG,
      JSON.stringify({
        daemons: {
          db: { command: '/usr/bin/node', args: [LISTEN, '18571', '1500'], ready: { port: 18571 } },
          web: { command: '/usr/bin/node', args: [LISTEN, '18572', '500'], ready: { port: 18572 }, after: ['db'] },
        },
      }),
    )
    await installUnit(
      'up.service',
      [
        '[Service]',
        'Type=notify',
        `ExecStart=/usr/bin/node ${CHECKOUT}/bin/procward.js up -f ${CONFIG}`,
        'TimeoutStartSec=30s',
        '',
      ].join('\n'),
    )
    await logLevel('debug')
    const c = await cursor()
    const start = await inside(['systemctl', 'start', 'up.service'])
    expect(start.code).toBe(0)
    const s = await show('up.service', 'ActiveState', 'MainPID', 'StatusText')
    expect(s.ActiveState).toBe('active')
    expect(s.StatusText).toMatch(/^2 of 2 running \(db, web\)/)
    // Both listen now: READY=1 came after the last daemon's ready.
    const procs = await unitProcesses('up.service')
    expect(procs.find((p) => p.pid === Number(s.MainPID))?.cmd).toMatch(/procward\.js up -f /)
    expect(procs.filter((p) => p.cmd.includes('listen.cjs'))).toHaveLength(2)
    const said = await notifications('up.service', c)
    const ready = said.findIndex((m) => m.includes('READY=1'))
    expect(ready).toBeGreaterThan(0)
    // Before READY=1, a STATUS= that does not yet count both running.
    expect(said.slice(0, ready).some((m) => /STATUS=.*1 of 2 running/.test(m))).toBe(true)
    const stopped = await cursor()
    await systemctl('stop', 'up.service')
    expect(await unitProcesses('up.service')).toEqual([])
    const lines = (await journal('up.service', stopped)).filter((l) => /procward: (web|db): stopped/.test(l))
    expect(lines.map((l) => /procward: (\w+): stopped/.exec(l)?.[1])).toEqual(['web', 'db'])
    expect((await notifications('up.service', stopped)).some((m) => m.includes('STOPPING=1'))).toBe(true)
  })
})
