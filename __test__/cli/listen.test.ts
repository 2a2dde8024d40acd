// procward run --listen / --ready-http / --hup reload, and procward reload:
// the CLI holds the sockets, a SIGHUP (or `procward reload STATE_FILE`)
// replaces the daemon while a client counts what fails (nothing), and bad
// flags are bad usage naming the flag, nothing started. Real processes on
// loopback; bounds on correctness, never on speed.
import { writeFileSync } from 'node:fs'
import http from 'node:http'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { aliveInProcTable, DAEMON_NODE, FIXTURES, freePort, getJson, tempDirs, trackProcesses } from '../helpers'
import { recordWhen } from '../supervisor/helpers'
import { Cli, cli as runCli } from './cli-process'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-cli-listen-')
const cli = (args: string[]) => runCli(others, args)
const DAEMON = join(FIXTURES, 'listen-daemon.cjs')
const pidAt = async (port: number) => (await getJson(port)).pid

/** `procward run --listen PORT --ready-http … --hup reload --state-file F -- node listen-daemon.cjs`, once running. */
async function served(extra: string[] = []) {
  const stateFile = join(tempDir(), 'web.json')
  const port = await freePort()
  const c = new Cli(others, [
    'run',
    '--state-file',
    stateFile,
    '--listen',
    `127.0.0.1:${port}=web`,
    '--ready-http',
    `http://127.0.0.1:${port}/`,
    '--hup',
    'reload',
    ...extra,
    '--',
    DAEMON_NODE,
    DAEMON,
  ])
  const r = await recordWhen(stateFile, (r) => r.state === 'running', 'running')
  return { c, stateFile, port, daemon: r.child?.pid as number }
}

describe.skipIf(process.platform !== 'linux')('procward run --listen', () => {
  it('SIGHUP and procward reload replace the daemon; a client counting fails nothing', async () => {
    const { c, stateFile, port, daemon } = await served()
    expect(await pidAt(port)).toBe(daemon)
    let failed = 0
    let ok = 0
    let running = true
    const loop = (async () => {
      while (running) {
        try {
          await pidAt(port)
          ok++
        } catch {
          failed++
        }
      }
    })()
    let last = daemon
    for (let i = 0; i < 3; i++) {
      const before = (await recordWhen(stateFile, () => true, 'a record')).lastReload?.at ?? null
      process.kill(c.pid, 'SIGHUP')
      const r = await recordWhen(
        stateFile,
        (r) => (r.lastReload?.at ?? null) !== before && r.child?.pid !== last,
        'the reload done',
      )
      expect(r.lastReload?.ok).toBe(true)
      expect(r.lastReload?.from).toBe(last)
      last = r.child?.pid as number
    }
    const out = await cli(['reload', stateFile])
    expect(out.err).toMatch(/reloaded: pid \d+ replaced by pid \d+/)
    expect(out.code).toBe(0)
    const st = await cli(['status', stateFile])
    expect(st.out).toMatch(/Last reload: pid \d+ replaced by pid \d+, at /)
    running = false
    await loop
    expect(failed).toBe(0)
    expect(ok).toBeGreaterThan(0)
    expect(c.err).toMatch(/: reload pid \d+ replaced by pid \d+/)
    process.kill(c.pid, 'SIGTERM')
    const end = await c.done
    expect(end.signal ?? end.code).toBeTruthy()
    for (const pid of [daemon, last]) expect(aliveInProcTable(pid)).toBe(false)
  })

  it('procward reload of a successor that fails: exit 1 with why, the old daemon serves on', async () => {
    const failFile = join(tempDir(), 'fail')
    const stateFile = join(tempDir(), 'web.json')
    const port = await freePort()
    const c = new Cli(others, [
      'run',
      '--state-file',
      stateFile,
      '--listen',
      String(port),
      '--ready-http',
      `http://127.0.0.1:${port}/`,
      '--hup',
      'reload',
      '--',
      DAEMON_NODE,
      DAEMON,
      '--fail-if',
      failFile,
    ])
    const r = await recordWhen(stateFile, (r) => r.state === 'running', 'running')
    const daemon = r.child?.pid as number
    writeFileSync(failFile, '')
    const out = await cli(['reload', stateFile])
    expect(out.code).toBe(1)
    expect(out.err).toMatch(new RegExp(`reload failed, pid ${daemon} serves on: .*exited with code 3`))
    expect(await pidAt(port)).toBe(daemon)
    expect(c.err).toContain('reload failed')
    const st = await cli(['status', stateFile])
    expect(st.out).toMatch(new RegExp(`Last reload: failed \\(pid ${daemon} served on\\): .*exited with code 3`))
  })

  it('procward reload refuses a supervisor started without --hup reload, and sends nothing', async () => {
    const stateFile = join(tempDir(), 'plain.json')
    const port = await freePort()
    const c = new Cli(others, ['run', '--state-file', stateFile, '--listen', String(port), '--', DAEMON_NODE, DAEMON])
    const r = await recordWhen(stateFile, (r) => r.state === 'running', 'running')
    const out = await cli(['reload', stateFile])
    expect(out.code).toBe(1)
    expect(out.err).toContain('was not started with --hup reload')
    // Still the same supervisor and daemon: no SIGHUP reached it.
    await new Promise((res) => setTimeout(res, 200))
    expect(aliveInProcTable(c.pid)).toBe(true)
    expect(await pidAt(port)).toBe(r.child?.pid)
  })

  it.each([
    [['--listen', 'abc'], /--listen must be \[HOST:\]PORT or \/PATH/],
    [['--listen', '70000'], /^procward run: the port of the first --listen must be an integer in 0\.\.=65535/],
    [['--listen', 'rel/x.sock'], /--listen must be \[HOST:\]PORT or \/PATH/],
    [['--listen', 'localhost:8080'], /^procward run: the host of the first --listen must be an IP address/],
    [['--hup', 'reload'], /--hup 'reload' needs --listen/],
    [['--listen', '0', '--ready-port', '1', '--ready-http', 'http://x/'], /are two ready checks/],
  ])('bad usage %j: exit 2 naming the flag, nothing started', async (flags, pattern) => {
    const out = await cli(['run', ...flags, '--', 'sh', '-c', 'echo started'])
    expect(out.code).toBe(2)
    expect(out.err.split('\n')[0]).toMatch(pattern)
    expect(out.out).not.toContain('started')
  })

  it('a port in use: procward run exits 1 saying the address and EADDRINUSE, nothing started', async () => {
    const taken = http.createServer()
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r))
    const port = (taken.address() as { port: number }).port
    try {
      const out = await cli(['run', '--listen', String(port), '--', 'sh', '-c', 'echo started'])
      expect(out.code).toBe(1)
      expect(out.err).toContain(`127.0.0.1:${port}`)
      expect(out.err).toContain('EADDRINUSE')
      expect(out.out).not.toContain('started')
    } finally {
      taken.close()
    }
  })
})
