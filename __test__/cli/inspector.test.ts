// SIGUSR1 opens Node's inspector in a Node process that does not take the
// signal: in a root `procward run`, any local user could then attach and
// run code as root. Tried as the red team did: a second user (nobody)
// tries to attach after the signal. The control (a plain Node process
// with the same inspector port) shows that the attempt would succeed.
import { spawnSync } from 'node:child_process'
import { chmodSync, existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { freePort, IS_BUN, isRoot, NODE, nodeAsNobody, sleep, tempDirs, trackProcesses, waitFor } from '../helpers'
import { Cli } from './cli-process'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-inspector-')

/** What nobody sees at the inspector's HTTP endpoint on `port`: 'attachable', or the connect error's code. */
function nobodyAttaches(port: number): string {
  const out = nodeAsNobody(`
    const req = require('http').get('http://127.0.0.1:${port}/json/list', (res) => {
      let body = ''
      res.on('data', (d) => (body += d))
      res.on('end', () => console.log(/webSocketDebuggerUrl/.test(body) ? 'attachable' : 'answer without a target'))
    })
    req.on('error', (e) => console.log(e.code))
    req.setTimeout(2000, () => { console.log('timeout'); req.destroy() })
  `)
  return out.trim()
}

/** The TCP ports `pid` listens on (its socket fds against /proc/net/tcp{,6}). */
function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>()
  for (const line of spawnSync('ls', ['-l', `/proc/${pid}/fd`], { encoding: 'utf8' }).stdout.split('\n')) {
    const m = /socket:\[(\d+)\]/.exec(line)
    if (m?.[1] !== undefined) inodes.add(m[1])
  }
  const ports: number[] = []
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/)
      // local_address st(0A: LISTEN) ... inode
      if (f[3] === '0A' && inodes.has(f[9] ?? '')) ports.push(Number.parseInt(f[1]?.split(':')[1] ?? '', 16))
    }
  }
  return ports
}

describe.skipIf(process.platform !== 'linux' || !isRoot)('SIGUSR1 never opens Node inspector in procward', () => {
  // Bun opens no inspector on SIGUSR1 and reads no --inspect from
  // NODE_OPTIONS: there is nothing to close, and no control to show.
  it.skipIf(IS_BUN)(
    'the control: a plain Node process with the same setup is attachable by another user after SIGUSR1',
    async (ctx) => {
      const port = await freePort()
      const p = others.spawn(NODE, ['-e', 'setInterval(() => {}, 1000)'], {
        env: { ...process.env, NODE_OPTIONS: `--inspect-port=127.0.0.1:${port}` },
        stdio: ['ignore', 'ignore', 'pipe'],
      })
      let err = ''
      p.stderr?.on('data', (d) => (err += d))
      await sleep(300)
      p.kill('SIGUSR1')
      await waitFor(() => err.includes('Debugger listening'), 5000, 'the inspector to open')
      const seen = nobodyAttaches(port)
      if (seen === '') return ctx.skip('node cannot run as nobody here')
      expect(seen).toBe('attachable')
      p.kill('SIGKILL')
    },
  )

  it('procward run --user nobody: SIGUSR1 reaches the daemon, no inspector opens, nobody cannot attach', async (ctx) => {
    const port = await freePort()
    const dir = tempDir()
    chmodSync(dir, 0o777)
    const log = join(dir, 'usr1.log')
    const c = new Cli(
      others,
      [
        'run',
        '--user',
        'nobody',
        '--',
        'sh',
        '-c',
        `trap 'echo usr1 >> ${log}' USR1; echo up; while :; do sleep 0.05; done`,
      ],
      { env: { ...process.env, NODE_OPTIONS: `--inspect-port=127.0.0.1:${port}` } },
    )
    await waitFor(() => c.out.includes('up'), 10_000, 'the daemon')
    const heard = () => (existsSync(log) ? (readFileSync(log, 'utf8').match(/usr1/g) ?? []).length : 0)
    for (let i = 0; i < 2; i++) {
      c.proc.kill('SIGUSR1')
      await waitFor(() => heard() === i + 1, 5000, 'the daemon to get it')
    }
    await sleep(200)
    expect(c.err).not.toMatch(/Debugger listening/)
    expect(listeningPorts(c.pid)).toEqual([])
    const seen = nobodyAttaches(port)
    if (seen === '') return ctx.skip('node cannot run as nobody here')
    expect(seen).toBe('ECONNREFUSED')
    c.proc.kill('SIGTERM')
    expect((await c.done).signal).toBe('SIGTERM')
  })

  it('a daemon that dies of the SIGUSR1 passed on: exit 138 with --restart never, as tini', async () => {
    const c = new Cli(others, ['run', '--restart', 'never', '--', 'sleep', '1000'])
    await waitFor(() => /: ready pid/.test(c.err), 10_000, 'the daemon')
    c.proc.kill('SIGUSR1')
    const { code } = await c.done
    expect(code).toBe(138)
    expect(c.err).toMatch(/killed by SIGUSR1/)
    expect(c.err).not.toMatch(/Debugger listening/)
  })

  it.skipIf(IS_BUN)(
    'NODE_OPTIONS=--inspect in procward environment: its own inspector is closed at once, the daemon still gets NODE_OPTIONS',
    async (ctx) => {
      const port = await freePort()
      const opts = `--inspect=127.0.0.1:${port}`
      const c = new Cli(others, ['run', '--', 'sh', '-c', 'echo "options: $NODE_OPTIONS"; sleep 1000'], {
        env: { ...process.env, NODE_OPTIONS: opts },
      })
      await waitFor(() => c.out.includes('options:'), 10_000, 'the daemon')
      expect(c.out).toContain(`options: ${opts}`)
      expect(c.err).toMatch(/inspector was opened in procward itself .* closed/)
      await waitFor(() => listeningPorts(c.pid).length === 0, 5000, 'no listening socket in procward')
      const seen = nobodyAttaches(port)
      if (seen === '') return ctx.skip('node cannot run as nobody here')
      expect(seen).toBe('ECONNREFUSED')
      c.proc.kill('SIGTERM')
      await c.done
    },
  )

  it('a SIGUSR1 at any moment of start-up leaves no inspector open (Node own start-up is the only window, closed at once)', async () => {
    for (let delayMs = 0; delayMs <= 120; delayMs += 15) {
      const port = await freePort()
      const c = new Cli(others, ['run', '--restart', 'never', '--', 'sleep', '1000'], {
        env: { ...process.env, NODE_OPTIONS: `--inspect-port=127.0.0.1:${port}` },
      })
      const t0 = performance.now()
      while (performance.now() - t0 < delayMs) {
        // a busy wait: a timer this short is not precise enough
      }
      c.proc.kill('SIGUSR1')
      // Either the signal came before Node's own handler (the default
      // action ends it) or it is handled: either way, no inspector stays.
      const ended = await Promise.race([c.done.then(() => true), sleep(800).then(() => false)])
      if (!ended) {
        expect(listeningPorts(c.pid)).toEqual([])
        if (c.err.includes('Debugger listening')) expect(c.err).toMatch(/closed/)
        c.proc.kill('SIGTERM')
        await c.done
      }
    }
  })

  it('procward lock passes SIGUSR1 on to its command and keeps no inspector', async () => {
    const dir = tempDir()
    const log = join(dir, 'usr1.log')
    const c = new Cli(others, [
      'lock',
      join(dir, 'lock'),
      '--',
      'sh',
      '-c',
      `trap 'echo usr1 >> ${log}; exit 0' USR1; echo up; while :; do sleep 0.05; done`,
    ])
    await waitFor(() => c.out.includes('up'), 10_000, 'the command')
    c.proc.kill('SIGUSR1')
    const { code } = await c.done
    expect(readFileSync(log, 'utf8')).toBe('usr1\n')
    expect(code).toBe(0)
    expect(c.err).not.toMatch(/Debugger listening/)
  })
})
