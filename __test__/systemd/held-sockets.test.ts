// Held sockets in a real systemd (see container.ts): `procward run` started
// by a .socket unit holds the unit's socket and passes it on (LISTEN_PID
// re-targeted to each daemon), so the first connection starts the service,
// a kill -9 of the daemon refuses no connection, and `systemctl reload`
// (ExecReload=kill -HUP $MAINPID with --hup reload) replaces the daemon
// without a failed request, saying RELOADING=1 then READY=1. The client
// runs inside the container (its own loopback). Each test stops its units
// and checks that nothing is left in their cgroups.
import { afterEach, describe, expect, it } from 'vitest'
import {
  CHECKOUT,
  cursor,
  dropUnits,
  INIT,
  inside,
  installUnit,
  logLevel,
  markSkippedWithoutSystemd,
  notifications,
  PROCWARD_RUN,
  removeInside,
  sh,
  show,
  systemctl,
  unitProcesses,
  until,
  writeInside,
} from './container'

markSkippedWithoutSystemd('held sockets in a real systemd', true)

const PORT = 18471
const DAEMON = `${CHECKOUT}/__test__/fixtures/listen-daemon.cjs`
const STOP = '/run/held-client.stop'

/** The daemon's pid (the listen-daemon in the service's cgroup), or null. */
async function daemonPid(): Promise<number | null> {
  const p = (await unitProcesses('held.service')).find((p) => p.cmd.startsWith(`/usr/bin/node ${DAEMON}`))
  return p?.pid ?? null
}

/** Starts the counting client inside; its result once STOP is touched. */
function client(): { result: Promise<{ ok: number; refused: number; other: string[]; pids: number[] }> } {
  removeInside(STOP)
  const run = inside(['/usr/bin/node', `${CHECKOUT}/bench/count-client.cjs`, String(PORT), STOP])
  return {
    result: run.then((r) => {
      if (r.code !== 0) throw new Error(`client: exit ${r.code}\n${r.stderr}`)
      return JSON.parse(r.stdout.trim())
    }),
  }
}

describe.skipIf(INIT === 0)('procward run under a socket unit', { timeout: 120_000 }, () => {
  afterEach(async () => {
    writeInside(STOP, '')
    await systemctl('stop', 'held.socket', 'held.service').catch(() => {})
    expect(await unitProcesses('held.service')).toEqual([])
    await logLevel('info')
    await dropUnits()
  })

  it('the first connection starts it; kill -9 refuses nothing; systemctl reload fails no request', async () => {
    await installUnit(
      'held.socket',
      ['[Socket]', `ListenStream=127.0.0.1:${PORT}`, 'FileDescriptorName=web', '', '[Install]', ''].join('\n'),
    )
    await installUnit(
      'held.service',
      [
        '[Service]',
        'Type=notify',
        `ExecStart=${PROCWARD_RUN} --listen web --ready-http http://127.0.0.1:${PORT}/ --hup reload -- /usr/bin/node ${DAEMON}`,
        'ExecReload=/bin/kill -HUP $MAINPID',
        'TimeoutStartSec=30s',
        '',
      ].join('\n'),
    )
    await systemctl('start', 'held.socket')
    expect((await show('held.service', 'ActiveState')).ActiveState).toBe('inactive')
    // The first connection starts the service, and is answered by its daemon.
    const first = await sh(`/usr/bin/node -e "
      require('http').get('http://127.0.0.1:${PORT}/env', (r) => { let b = ''; r.on('data', (d) => b += d); r.on('end', () => console.log(b)) })"`)
    const answer = JSON.parse(first.trim())
    expect(answer.env.LISTEN_PID).toBe(String(answer.pid))
    expect(answer.env.LISTEN_FDS).toBe('1')
    expect(answer.env.LISTEN_FDNAMES).toBe('web')
    await until(
      async () => (await show('held.service', 'ActiveState')).ActiveState === 'active',
      20_000,
      'the service active',
    )
    const main = Number((await show('held.service', 'MainPID')).MainPID)
    expect(await daemonPid()).toBe(answer.pid)

    const c = client()
    // kill -9 of the daemon, three times: procward restarts it on the same socket.
    const killed: number[] = []
    for (let i = 0; i < 3; i++) {
      const pid = (await daemonPid()) as number
      killed.push(pid)
      await sh(`kill -9 ${pid}`)
      await until(
        async () => {
          const now = await daemonPid()
          return now !== null && now !== pid
        },
        20_000,
        'a new daemon',
      )
      await new Promise((r) => setTimeout(r, 300))
    }
    writeInside(STOP, '')
    const killing = await c.result
    expect(killing.refused).toBe(0)
    // A request the killed daemon had accepted is lost (as under systemd alone): reset, never refused.
    for (const code of killing.other) expect(['ECONNRESET', 'socket hang up']).toContain(code)
    expect(killing.ok).toBeGreaterThan(0)
    // systemctl reload, twice: RELOADING=1, then READY=1 once the new daemon serves.
    const r2 = client()
    await logLevel('debug')
    const mark = await cursor()
    for (let i = 0; i < 2; i++) {
      const before = await daemonPid()
      const r = await inside(['systemctl', 'reload', 'held.service'])
      expect(r.code).toBe(0)
      await until(
        async () => {
          const now = await daemonPid()
          return now !== null && now !== before && (await unitProcesses('held.service')).length === 2
        },
        20_000,
        'the reload done',
      )
    }
    writeInside(STOP, '')
    const seen = await r2.result
    expect(seen.refused).toBe(0)
    expect(seen.other).toEqual([])
    expect(seen.ok).toBeGreaterThan(0)
    // The main process stayed procward throughout.
    expect(Number((await show('held.service', 'MainPID')).MainPID)).toBe(main)
    const said = await notifications('held.service', mark)
    const reloading = said.findIndex((m) => m.includes('RELOADING=1'))
    expect(reloading, said.join('\n')).toBeGreaterThanOrEqual(0)
    expect(said[reloading]).toMatch(/MONOTONIC_USEC=\d+/)
    expect(said.slice(reloading + 1).some((m) => m.includes('READY=1'))).toBe(true)
    expect((await show('held.service', 'ActiveState')).ActiveState).toBe('active')
  })
})
