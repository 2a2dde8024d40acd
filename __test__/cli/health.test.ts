// procward run --health-*: a daemon that stops serving is restarted, its
// log says why, and procward status shows the last check (passed or failing); a bad value is
// bad usage (exit 2) naming its flag, and nothing is started.
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { aliveInProcTable, freePort, tempDirs, trackProcesses, waitFor } from '../helpers'
import { recordWhen } from '../supervisor/helpers'
import { Cli, cli as runCli, runDaemon } from './cli-process'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-cli-health-')
const cli = (args: string[]) => runCli(others, args)
/** The --health-interval, --health-timeout and --health-failures flags. */
const checks = (intervalMs: number, timeoutMs: number, failures: number) => [
  '--health-interval',
  String(intervalMs),
  '--health-timeout',
  String(timeoutMs),
  '--health-failures',
  String(failures),
]

/**
 * `procward run` of the http daemon with a state file and an http check
 * on its port, once a check has passed: the CLI, its state file and the
 * daemon's pid.
 */
async function httpChecked(flags: string[]) {
  const stateFile = join(tempDir(), 'web.json')
  const port = await freePort()
  const c = new Cli(
    others,
    runDaemon(port, ['--state-file', stateFile, '--health-http', `http://127.0.0.1:${port}/`, ...flags]),
  )
  const r = await recordWhen(stateFile, (r) => r.child?.health?.ok === true, 'a passed check')
  return { c, stateFile, daemon: r.child?.pid as number }
}

describe.skipIf(process.platform !== 'linux')('procward run --health-*', () => {
  it('--health-port: a daemon whose listener closed is restarted; status shows the last check', async () => {
    const stateFile = join(tempDir(), 'web.json')
    const port = await freePort()
    const c = new Cli(
      others,
      runDaemon(port, ['--state-file', stateFile, '--health-port', String(port), ...checks(100, 90, 2)]),
    )
    const r = await recordWhen(stateFile, (r) => r.child?.health?.ok === true, 'a passed check in the record')
    const first = r.child?.pid as number
    const st = await cli(['status', stateFile])
    expect(st.code).toBe(0)
    expect(st.out).toMatch(/Health: ok, at \d{4}-\d\d-\d\dT[^;]+; \S+ ago/)
    const json = JSON.parse((await cli(['status', '--json', stateFile])).out)
    expect(json.child.health).toMatchObject({ ok: true, error: null, failures: 0 })

    process.kill(first, 'SIGUSR1') // closes its listener, stays alive
    const next = await recordWhen(
      stateFile,
      (r) => r.child !== null && r.child.pid !== first && r.state === 'running',
      'the restarted daemon',
    )
    others.track(next.child?.pid as number)
    expect(aliveInProcTable(first)).toBe(false)
    expect(next.lastExit).toMatchObject({ pid: first, reason: 'unhealthy' })
    // The record comes before the event, and the log line after it.
    const exitLine = new RegExp(`exit pid ${first} .*\\(unhealthy\\)`)
    await waitFor(() => exitLine.test(c.err), 5000, "the exit's log line")
    expect(c.err).toMatch(new RegExp(`unhealthy pid ${first} \\(1 of 2\\): .*health check failed`))
    const after = await cli(['status', stateFile])
    expect(after.out).toMatch(new RegExp(`Last exit: pid ${first}, .*, stopped as unhealthy, at `))
    c.proc.kill('SIGTERM')
    await c.done
  })

  it('--health-http: a SIGSTOPped daemon is restarted after its third failed check', async () => {
    const { c, stateFile, daemon: first } = await httpChecked(['--json', ...checks(300, 100, 3), '--grace', '2000'])
    process.kill(first, 'SIGSTOP')
    const next = await recordWhen(stateFile, (r) => r.child !== null && r.child.pid !== first, 'the restart')
    others.track(next.child?.pid as number)
    await waitFor(() => !aliveInProcTable(first), 5000, 'the stopped daemon gone')
    // The record comes before the event, and the log line after it: the whole lines written so far.
    const logged = () =>
      c.err
        .slice(0, c.err.lastIndexOf('\n') + 1)
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
    await waitFor(() => logged().some((e) => e.event === 'exit'), 5000, "the exit's log line")
    const events = logged()
    // (A check failed by a loaded machine before the SIGSTOP would come first, and be forgiven.)
    expect(
      events
        .filter((e) => e.event === 'unhealthy')
        .map((e) => e.failures)
        .slice(-3),
    ).toEqual([1, 2, 3])
    expect(events.find((e) => e.event === 'exit')).toMatchObject({ pid: first, reason: 'unhealthy' })
    c.proc.kill('SIGTERM')
    await c.done
  })

  it('--health-http: a failing check shows in procward status', async () => {
    // A limit far away: the daemon stays failing while status is read,
    // however long a loaded machine takes to start the status command.
    const { c, stateFile, daemon } = await httpChecked(checks(300, 100, 1000))
    process.kill(daemon, 'SIGSTOP')
    await recordWhen(stateFile, (r) => (r.child?.health?.failures ?? 0) >= 1, 'a failed check')
    const st = await cli(['status', stateFile])
    expect(st.out).toMatch(/Health: failing \(\d+ in a row\), at .*: .*no answer within 100 ms/)
    const json = JSON.parse((await cli(['status', '--json', stateFile])).out)
    expect(json.child).toMatchObject({ pid: daemon, health: { ok: false } })
    expect(json.child.health.failures).toBeGreaterThanOrEqual(1)
    process.kill(daemon, 'SIGCONT')
    c.proc.kill('SIGTERM')
    await c.done
  })

  it('--restart never: a daemon stopped as unhealthy ends procward with 1, though it exited 0 on our SIGTERM', async () => {
    const stateFile = join(tempDir(), 'web.json')
    const port = await freePort()
    const c = new Cli(
      others,
      runDaemon(port, [
        '--restart',
        'never',
        '--state-file',
        stateFile,
        '--health-port',
        String(port),
        ...checks(300, 250, 1),
      ]),
    )
    const r = await recordWhen(stateFile, (r) => r.child?.health?.ok === true, 'a passed check')
    const daemon = r.child?.pid as number
    process.kill(daemon, 'SIGUSR1') // closes its listener, stays alive; exits 0 on SIGTERM
    expect(await c.done).toEqual({ code: 1, signal: null })
    expect(c.err).toMatch(new RegExp(`exit pid ${daemon} code 0 \\(unhealthy\\)`))
    expect(c.err).toMatch(/failed .*health check failed/)
  })

  it('bad values: exit 2 naming the flag, nothing started', async () => {
    const dir = tempDir()
    const ran = join(dir, 'ran')
    const cases: [string[], RegExp][] = [
      [['--health-port', '70000'], /--health-port must be an integer in 1\.\.=65535, got 70000$/],
      [['--health-port', '-1'], /--health-port needs a value/],
      [['--health-port', 'x'], /--health-port must be a whole number/],
      [['--health-http', 'ftp://127.0.0.1/'], /--health-http must be an http: or https: URL/],
      [['--health-http', 'nope'], /--health-http must be an http: or https: URL/],
      [['--health-http', 'http://127.0.0.1:99999/'], /--health-http is not a valid URL \(its host or port\?\)/],
      [['--health-port', '80', '--health-http', 'http://127.0.0.1/'], /--health-port and --health-http/],
      [
        ['--health-port', '80', '--health-interval', '1000', '--health-timeout', '1000'],
        /--health-timeout must be less than --health-interval \(1000\)/,
      ],
      [
        ['--health-port', '80', '--health-timeout', '10000'],
        /--health-timeout must be less than --health-interval \(10000\)/,
      ],
      [['--health-port', '80', '--health-interval', '1.5'], /--health-interval must be a whole number/],
      [['--health-port', '80', '--health-failures', '0'], /--health-failures must be an integer in 1\.\.=/],
      // The library's rules in the flags' words: every option a message names.
      [
        ['--health-port', '80', '--health-interval', '1'],
        /--health-interval must be an integer in 2\.\.=2147483647 \(above --health-timeout\), got 1$/,
      ],
      [['--health-port', '80', '--health-start-period', '-'], /--health-start-period must be a whole number/],
      [['--health-interval', '1000'], /--health-interval needs a check: --health-port or --health-http/],
    ]
    for (const [flags, message] of cases) {
      const r = await cli(['run', ...flags, '--', 'sh', '-c', `touch ${ran}`])
      expect(r.code, flags.join(' ')).toBe(2)
      expect(r.err.split('\n')[0], flags.join(' ')).toMatch(message)
      expect(r.err).toMatch(/try 'procward run --help'/)
      expect(existsSync(ran)).toBe(false)
    }
  })
})
