// procward restart|reload|stop NAME -f FILE: one daemon of the group a
// procward up runs, through its control socket in the group's stateDir
// (owner-only: the directory 0700, the socket 0600, and the peer's uid
// asked of the kernel, SO_PEERCRED). Refused to another uid, even one that
// reaches the socket.
import { execFile } from 'node:child_process'
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  aliveInProcTable,
  CLI,
  DAEMON_NODE,
  FIXTURES,
  freePort,
  getJson,
  isRoot,
  NODE,
  tempDirs,
  trackProcesses,
  waitFor,
} from '../helpers'
import { Cli, cli } from './cli-process'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-up-control-')

const answeredBy = async (port: number) => (await getJson(port)).pid

const sleeper = { command: 'sh', args: ['-c', 'exec sleep 1000'] }

/** A group of db and web (after db) with its stateDir, run by procward up; its config file. */
async function runningGroup(dir: string, stateDir = join(dir, 'state')): Promise<{ up: Cli; file: string }> {
  const file = join(dir, 'group.json')
  writeFileSync(file, JSON.stringify({ stateDir, daemons: { db: sleeper, web: { ...sleeper, after: ['db'] } } }))
  const up = new Cli(others, ['up', '-f', file])
  await waitFor(
    () => up.err.includes('procward: ready') && up.err.includes('procward: control'),
    10_000,
    'the group ready',
  )
  return { up, file }
}

/** The CLI as nobody (uid and gid 65534): its status and stderr. */
function asNobody(args: string[]): Promise<{ code: number | null; err: string }> {
  return new Promise((resolve) => {
    execFile(
      'setpriv',
      ['--reuid=65534', '--regid=65534', '--clear-groups', NODE, CLI, ...args],
      { encoding: 'utf8' },
      (error, _out, err) => resolve({ code: error === null ? 0 : ((error.code as number | undefined) ?? null), err }),
    )
  })
}

describe('the control socket of procward up', () => {
  it('reload NAME: a daemon of the group that holds its socket is replaced, no request failing', async () => {
    const dir = tempDir()
    const file = join(dir, 'group.json')
    const port = await freePort()
    const web = {
      command: DAEMON_NODE,
      args: [join(FIXTURES, 'listen-daemon.cjs')],
      listen: [{ port }],
      ready: { http: `http://127.0.0.1:${port}/` },
    }
    writeFileSync(file, JSON.stringify({ stateDir: join(dir, 'state'), daemons: { web } }))
    const up = new Cli(others, ['up', '-f', file])
    await waitFor(
      () => up.err.includes('procward: ready') && up.err.includes('procward: control'),
      10_000,
      'the group ready',
    )
    const before = await answeredBy(port)
    let failed = 0
    let running = true
    const loop = (async () => {
      while (running) await answeredBy(port).catch(() => failed++)
    })()
    const reload = await cli(others, ['reload', 'web', '-f', file])
    running = false
    await loop
    expect(reload.code).toBe(0)
    expect(failed).toBe(0)
    await waitFor(() => !aliveInProcTable(before), 10_000, 'the old daemon gone')
    expect(await answeredBy(port)).not.toBe(before)
    up.proc.kill('SIGTERM')
    await up.done
  })

  it('restarts, stops and starts again one daemon; the others run on', async () => {
    const { up, file } = await runningGroup(tempDir())
    const [dbPid, webPid] = up.pids('spawn')
    const restarted = await cli(others, ['restart', 'web', '-f', file])
    expect(restarted.code).toBe(0)
    const newWeb = Number(/^procward: web: running, pid (\d+)$/m.exec(restarted.out)?.[1])
    expect(newWeb).not.toBe(webPid)
    expect(up.pids('spawn')).toEqual([dbPid, webPid, newWeb])

    const stopped = await cli(others, ['stop', 'web', '-f', file, '--json'])
    expect(stopped.code).toBe(0)
    expect(JSON.parse(stopped.out)).toEqual({ ok: true, name: 'web', state: 'stopped', pid: null })
    // db runs on, untouched.
    expect(up.err).not.toMatch(/procward: db: exit/)
    const again = await cli(others, ['restart', 'web', '-f', file])
    expect(again.code).toBe(0)
    expect(again.out).toMatch(/^procward: web: running, pid \d+$/m)

    const unknown = await cli(others, ['restart', 'nope', '-f', file])
    expect(unknown.code).toBe(1)
    expect(unknown.err).toMatch(/^procward: nope: no daemon nope in this group \(db, web\)$/m)

    // web holds no sockets (no listen): its reload is refused, saying why.
    const reload = await cli(others, ['reload', 'web', '-f', file])
    expect(reload.code).toBe(1)
    expect(reload.err).toMatch(/^procward: web: .*holds no sockets \(options\.listen\).*use restart\(\)$/m)
    up.proc.kill('SIGTERM')
    await up.done
    // Gone with the group: nothing answers.
    const after = await cli(others, ['restart', 'web', '-f', file])
    expect(after.code).toBe(1)
    expect(after.err).toMatch(/no procward up runs .*group\.json's group/)
  })

  it.skipIf(!isRoot)(
    'refuses another uid: the place shuts it out, and the kernel names it where it reaches the socket',
    async () => {
      const dir = tempDir()
      // nobody may read the config (not the stateDir).
      chmodSync(dir, 0o755)
      const { up, file } = await runningGroup(dir)
      chmodSync(file, 0o644)
      const shut = await asNobody(['restart', 'web', '-f', file])
      expect(shut.code).toBe(1)
      expect(shut.err).toMatch(/procward\.sock: permission denied/)
      // Opened to all (as a careless chmod would): SO_PEERCRED still refuses.
      chmodSync(join(dir, 'state'), 0o711)
      chmodSync(join(dir, 'state', 'procward.sock'), 0o666)
      const refused = await asNobody(['restart', 'web', '-f', file])
      expect(refused.code).toBe(1)
      expect(refused.err).toMatch(
        /^procward: web: refused: uid 65534 \(pid \d+\) is not this group's owner \(uid 0\)$/m,
      )
      expect(up.err).toMatch(/procward: control refused uid 65534/)
      // Nothing was restarted.
      expect(up.pids('spawn')).toHaveLength(2)
    },
  )

  it('a stateDir others may enter gets no control socket, and says why', async () => {
    const dir = tempDir()
    const stateDir = join(dir, 'open')
    mkdirSync(stateDir, { mode: 0o755 })
    chmodSync(stateDir, 0o755)
    const { up, file } = await runningGroup(dir, stateDir)
    expect(up.err).toMatch(/procward: control no control socket: .*open is open to others \(mode 755\): chmod 700 it/)
    const r = await cli(others, ['restart', 'web', '-f', file])
    expect(r.code).toBe(1)
    expect(r.err).toMatch(/no procward up runs/)
  })
})
