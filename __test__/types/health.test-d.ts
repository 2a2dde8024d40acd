// Type tests of the Supervisor's health after ready (options.health, its
// events, status() and the record), checked by `tsc -p tsconfig.json`,
// never run: each line compiles, or carries @ts-expect-error.
import {
  readSupervisorState,
  type SupervisedProcess,
  Supervisor,
  type SupervisorErrorCode,
  type SupervisorExitInfo,
  type SupervisorHealth,
  type SupervisorHealthCheck,
  type SupervisorUnhealthy,
} from '../../index.js'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
declare function assertType<T extends true>(): void

export function healthOptionsAreTyped(): void {
  const port: SupervisorHealth = { check: { port: 8080 }, intervalMs: 5000, timeoutMs: 1000, failures: 3 }
  const url: SupervisorHealth = { check: { http: 'http://127.0.0.1:8080/health', status: 204 }, startPeriodMs: 0 }
  const fn: SupervisorHealth = {
    check: async (child, signal) => {
      // null for an adopted orphan
      assertType<Equal<typeof child, SupervisedProcess | null>>()
      assertType<Equal<typeof signal, AbortSignal>>()
    },
  }
  void new Supervisor({ command: 'sleep', health: port })
  void [url, fn]
  // @ts-expect-error a check is required
  const none: SupervisorHealth = { intervalMs: 1000 }
  // @ts-expect-error a port is a number
  const mixed: SupervisorHealth = { check: { port: '80' } }
  // @ts-expect-error no such key
  const typo: SupervisorHealth = { check: { port: 80 }, interval: 1000 }
  void [none, mixed, typo]
  const code: SupervisorErrorCode = 'ERR_HEALTH_CHECK_TIMEOUT'
  void code
}

export function healthEventsAreTyped(sup: Supervisor): void {
  sup.on('unhealthy', (u) => {
    assertType<Equal<typeof u, SupervisorUnhealthy>>()
    assertType<Equal<typeof u.error.code, 'ERR_HEALTH_CHECK_FAILED' | 'ERR_HEALTH_CHECK_TIMEOUT'>>()
  })
  sup.on('healthy', (h) => assertType<Equal<typeof h, { pid: number; failures: number }>>())
  sup.on('exit', (e) => assertType<Equal<typeof e.reason, 'unhealthy' | 'memory' | undefined>>())
  sup.on('restart', (r) => assertType<Equal<typeof r.lastExit, SupervisorExitInfo | null>>())
  assertType<Equal<ReturnType<Supervisor['status']>['health'], SupervisorHealthCheck | null>>()
  const rec = readSupervisorState('/tmp/x.json')
  const h = rec?.child?.health
  if (h) assertType<Equal<typeof h, SupervisorHealthCheck>>()
  if (rec?.lastExit) assertType<Equal<typeof rec.lastExit.reason, 'unhealthy' | 'memory' | undefined>>()
  // @ts-expect-error 'unhealthy' gives SupervisorUnhealthy, not a string
  sup.on('unhealthy', (s: string) => {
    void s
  })
}

export function heldSocketsAreTyped(): void {
  const sup = new Supervisor({
    command: 'node',
    args: ['server.js'],
    listen: [
      { port: 0 },
      { port: 8443, host: '::', name: 'tls', backlog: 128 },
      { path: '/run/app.sock', mode: 0o660 },
    ],
    ready: { http: 'http://127.0.0.1:8080/healthz', status: 200 },
    handleSignals: { hup: 'reload' },
  })
  // @ts-expect-error a socket is a port or a path
  void new Supervisor({ command: 'node', listen: [{ name: 'x' }] })
  const first = sup.listening[0]
  assertType<Equal<typeof first, import('../../index.js').SupervisorListening | undefined>>()
  void sup.reload({ args: ['server.js', '--v2'] }).then((v) => assertType<Equal<typeof v, void>>())
  sup.on('reload', (r) => {
    assertType<Equal<typeof r.ok, boolean>>()
    assertType<Equal<typeof r.error, Error | null>>()
    assertType<Equal<typeof r.to, number | null>>()
  })
  const next = sup.status().next
  assertType<Equal<typeof next, { pid: number; identity: string } | null>>()
  const r = readSupervisorState('/run/app.json')
  void r?.lastReload?.ok
  void r?.next?.pid
  const code: SupervisorErrorCode = 'ERR_RELOAD_ABANDONED'
  void code
}
