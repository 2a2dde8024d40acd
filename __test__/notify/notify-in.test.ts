// ready: { notify: true }: the child gets a NOTIFY_SOCKET of the
// supervisor's own and is ready on READY=1 from itself, its process group
// or its cgroup; anyone else is ignored. Real clients (python's socket
// module, systemd-notify), real processes, /proc checked.
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { cgroupSupport, readSupervisorState, Supervisor, type SupervisorOptions } from '../../index.js'
import { fdsLeftSince, openFds, tempDirs, trackProcesses, waitFor } from '../helpers'
import { abstractSockets, environOf, native, StandIn, socketInode } from './manager'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-notify-')

const SEND = join(__dirname, 'fixtures', 'sd-notify.py')
// Not in SupervisorReady's type yet (index.d.ts is another change's).
const NOTIFY: SupervisorOptions['ready'] = { notify: true }

const supervisors: Supervisor[] = []
function supervisor(options: Partial<SupervisorOptions> & Pick<SupervisorOptions, 'command'>): Supervisor {
  const s = new Supervisor({ ready: NOTIFY, readyTimeoutMs: 10_000, restart: 'never', ...options })
  supervisors.push(s)
  return s
}
afterEach(async () => {
  for (const s of supervisors.splice(0)) await s.stop({ signal: 'SIGKILL' }).catch(() => {})
})

/** A shell line that runs the python client with `args`. */
const send = (...args: string[]) => `python3 ${SEND} ${args.map((a) => `'${a}'`).join(' ')}`

function hasSystemdNotify(): boolean {
  try {
    execFileSync('systemd-notify', ['--help'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/** Warnings emitted while `fn` runs (process 'warning' events). */
async function warningsDuring(fn: () => Promise<void>): Promise<Error[]> {
  const seen: Error[] = []
  const on = (w: Error) => seen.push(w)
  process.on('warning', on)
  try {
    await fn()
  } finally {
    // Warnings are emitted on a later tick.
    await new Promise((r) => setImmediate(r))
    process.off('warning', on)
  }
  return seen
}

describe.skipIf(!native.notifySupported())('ready: { notify: true }', () => {
  it('is ready on READY=1 from the child itself, not before', async () => {
    const dir = tempDir()
    const trigger = join(dir, 'go')
    // exec: the python client *is* the child.
    const sup = supervisor({ command: 'sh', args: ['-c', `exec ${send('READY=1', '--trigger', trigger, '--linger')}`] })
    let ready = false
    const started = sup.start().then(() => (ready = true))
    await waitFor(() => sup.child !== null, 5000, 'the spawn')
    const child = sup.child as NonNullable<typeof sup.child>
    const env = await environOf(child.pid)
    expect(env.get('NOTIFY_SOCKET')).toMatch(/^@procward\/notify\/[0-9a-f]{32}$/)
    expect(abstractSockets()).toContain(env.get('NOTIFY_SOCKET'))
    // Nothing sent yet: starting, whatever the time.
    await new Promise((r) => setTimeout(r, 300))
    expect(ready).toBe(false)
    expect(sup.state).toBe('starting')
    writeFileSync(trigger, '')
    await started
    expect(sup.state).toBe('running')
    expect(sup.status().pid).toBe(child.pid)
  })

  it('is ready on READY=1 from a member of its process group (a subshell)', async () => {
    // The subshell's python lingers (a worker): its group is looked up in
    // /proc when its message is read. The child itself never speaks.
    const sup = supervisor({ command: 'sh', args: ['-c', `(${send('READY=1', '--linger')}) & exec sleep 100`] })
    await sup.start()
    expect(sup.state).toBe('running')
  })

  it('ignores READY=1 from a process outside its group and cgroup: readiness is never reached', async () => {
    const sup = supervisor({ command: 'sleep', args: ['100'], readyTimeoutMs: 1500 })
    let err: (Error & { code?: string; cause?: { code?: string } }) | undefined
    const warnings = await warningsDuring(async () => {
      const started = sup.start().catch((e) => (err = e))
      await waitFor(() => sup.child !== null, 5000, 'the spawn')
      const address = (await environOf((sup.child as { pid: number }).pid)).get('NOTIFY_SOCKET') as string
      // A real client in a process group and session of its own...
      const outsider = others.spawn('python3', [SEND, 'READY=1\\nSTATUS=outsider', '--linger'], {
        env: { ...process.env, NOTIFY_SOCKET: address },
        detached: true,
      })
      // ...and this process too (an ancestor, in the supervisor's group).
      const tx = native.NotifySender.open(address)
      expect(tx.send('READY=1')).toBe(true)
      tx.close()
      await started
      expect(outsider.exitCode).toBeNull() // it did send, and is still there to be looked at
    })
    expect(err?.code).toBe('ERR_SUPERVISOR_FAILED')
    expect(err?.cause?.code).toBe('ERR_READY_TIMEOUT')
    expect(sup.state).toBe('failed')
    const refused = warnings.filter((w) => (w as { code?: string }).code === 'PROCWARD_NOTIFY_REFUSED')
    // Said once per process; this file's first refusal is here.
    expect(refused.length).toBe(1)
    expect(refused[0]?.message).toMatch(/not the child, a descendant of it or in its cgroup/)
  })

  it('keeps STATUS= lines as the record child.status; a message longer than 4096 bytes is refused whole', async () => {
    const dir = tempDir()
    const stateFile = join(dir, 'state.json')
    const go = join(dir, 'go')
    const script = [
      send('STATUS=warming up'),
      send('STATUS=too long', '--pad', '5000'),
      send('READY=1\\nSTATUS=serving'),
      send('STATUS=busy', '--trigger', go),
      'exec sleep 100',
    ].join('; ')
    const sup = supervisor({ command: 'sh', args: ['-c', script], stateFile })
    await sup.start()
    await waitFor(() => readSupervisorState(stateFile)?.child?.status === 'serving', 5000, 'STATUS=serving')
    writeFileSync(go, '')
    await waitFor(() => readSupervisorState(stateFile)?.child?.status === 'busy', 5000, 'STATUS=busy')
    await sup.stop()
    const rec = readSupervisorState(stateFile)
    expect(rec?.child).toBeNull()
    expect(rec?.state).toBe('stopped')
  })

  it.skipIf(!hasSystemdNotify())('takes systemd-notify --ready as a real client', async () => {
    const dir = tempDir()
    const stateFile = join(dir, 'state.json')
    // systemd-notify sends from its own pid (as root it names its parent's):
    // either way a member of the child's group.
    const sup = supervisor({
      command: 'sh',
      args: [
        '-c',
        'systemd-notify --status="loading"; systemd-notify --ready --status="hello from sh"; exec sleep 100',
      ],
      stateFile,
    })
    await sup.start()
    await waitFor(() => readSupervisorState(stateFile)?.child?.status === 'hello from sh', 5000, 'the status')
  })

  /** One notify supervisor started and stopped: what lives as long as the process (the runtime) is open. */
  async function warmUp(): Promise<void> {
    const s = supervisor({ command: 'sh', args: ['-c', `${send('READY=1')}; exec sleep 100`] })
    await s.start()
    await s.stop()
  }

  it('gives each attempt its own socket, closed when its child exits; no fd is left behind', async () => {
    await warmUp()
    const before = openFds()
    const addresses: string[] = []
    const sup = supervisor({
      command: 'sh',
      args: ['-c', `${send('READY=1')}; exec sleep 100`],
      restart: 'always',
    })
    const address = async () => (await environOf((sup.child as { pid: number }).pid)).get('NOTIFY_SOCKET') as string
    await sup.start()
    const first = sup.child as NonNullable<typeof sup.child>
    addresses.push(await address())
    // The child holds no end of its socket: close-on-exec.
    const inode = socketInode(addresses[0] as string)
    expect(inode).not.toBeNull()
    for (const fd of readdirSync(`/proc/${first.pid}/fd`)) {
      expect(readlinkSync(`/proc/${first.pid}/fd/${fd}`)).not.toBe(`socket:[${inode}]`)
    }
    const restarted = new Promise((r) => sup.once('ready', r))
    first.kill('SIGKILL')
    await restarted
    addresses.push(await address())
    expect(addresses[0]).not.toBe(addresses[1])
    await waitFor(() => !abstractSockets().includes(addresses[0] as string), 5000, 'the first socket to close')
    expect(abstractSockets()).toContain(addresses[1])
    await sup.stop()
    await waitFor(() => !abstractSockets().includes(addresses[1] as string), 5000, 'the second socket to close')
    expect(await fdsLeftSince(before)).toEqual([])
  })

  it('closes fds passed with a message (FDSTORE=1) unread', async () => {
    await warmUp()
    const before = openFds()
    const sup = supervisor({
      command: 'sh',
      args: ['-c', `${send('FDSTORE=1', '--pass-fd')}; ${send('READY=1', '--pass-fd')}; exec sleep 100`],
    })
    await sup.start()
    await sup.stop()
    expect(await fdsLeftSince(before)).toEqual([])
  })

  it('closes the socket when the ready check times out or the supervisor stops before ready', async () => {
    // Long enough for the environment to be read before the ready check gives up.
    const sup = supervisor({ command: 'sleep', args: ['100'], readyTimeoutMs: 2000 })
    const spawned = new Promise<number>((r) => sup.once('spawn', (c) => r(c.pid)))
    const failed = sup.start().catch((e) => e)
    const address = (await environOf(await spawned)).get('NOTIFY_SOCKET') as string
    await failed
    await waitFor(() => !abstractSockets().includes(address), 5000, 'the socket to close')

    const other = supervisor({ command: 'sleep', args: ['100'] })
    const spawned2 = new Promise<number>((r) => other.once('spawn', (c) => r(c.pid)))
    const pending = other.start().catch((e) => e)
    const address2 = (await environOf(await spawned2)).get('NOTIFY_SOCKET') as string
    await other.stop()
    expect((await pending).name).toBe('AbortError')
    await waitFor(() => !abstractSockets().includes(address2), 5000, 'the socket to close')
  })

  it("passes on neither our manager's NOTIFY_SOCKET nor its watchdog", async () => {
    const saved = { ...process.env }
    process.env.NOTIFY_SOCKET = '/run/systemd/notify'
    process.env.WATCHDOG_USEC = '1000000'
    process.env.WATCHDOG_PID = String(process.pid)
    try {
      const sup = supervisor({ command: 'sh', args: ['-c', `${send('READY=1')}; exec sleep 100`] })
      await sup.start()
      const env = await environOf((sup.child as { pid: number }).pid)
      expect(env.get('NOTIFY_SOCKET')).toMatch(/^@procward\/notify\//)
      expect(env.has('WATCHDOG_USEC')).toBe(false)
      expect(env.has('WATCHDOG_PID')).toBe(false)
    } finally {
      for (const k of ['NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID']) {
        if (saved[k] === undefined) delete process.env[k]
      }
    }
  })

  const contained = cgroupSupport().available
  it.skipIf(!contained)('takes READY=1 from a process in its cgroup that left its group', async () => {
    // setsid: a session and group of its own, but still in the child's cgroup.
    const sup = supervisor({
      command: 'sh',
      args: ['-c', `setsid ${send('READY=1', '--linger')} & exec sleep 100`],
      spawn: { cgroup: true },
    })
    await sup.start()
    expect(sup.state).toBe('running')
  })

  it('refuses bad values', () => {
    for (const notify of [false, 1, 'yes', null]) {
      expect(
        () => new Supervisor({ command: 'true', ready: { notify } as unknown as SupervisorOptions['ready'] }),
      ).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }))
    }
    expect(
      () =>
        new Supervisor({ command: 'true', ready: { notify: true, port: 1 } as unknown as SupervisorOptions['ready'] }),
    ).toThrow(TypeError)
    expect(
      () => new Supervisor({ command: 'true', ready: { notify: true, x: 1 } as unknown as SupervisorOptions['ready'] }),
    ).toThrow(TypeError)
  })
})

describe('the native sockets', () => {
  it.skipIf(!native.notifySupported())('refuse addresses that name no socket', () => {
    for (const bad of ['', 'relative/path', '@', 'vsock:2:1234', `/${'a'.repeat(200)}`]) {
      expect(() => native.NotifySender.open(bad)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }))
    }
  })

  it.skipIf(!native.notifySupported())('receive the fds a message carries, and close them', async () => {
    const rx = new StandIn()
    const tx = native.NotifySender.open(rx.address)
    tx.send('READY=1')
    tx.close()
    const mine = await rx.waitFor('READY') // the runtime is up: its own fds are not counted below
    expect(mine.pid).toBe(process.pid)
    const before = openFds()
    others.spawn('python3', [SEND, 'FDSTORE=1', '--pass-fd'], { env: { ...process.env, NOTIFY_SOCKET: rx.address } })
    const m = await rx.waitFor('FDSTORE', '1')
    expect(m.hadFds).toBe(true)
    expect(m.verdict).toBe('unchecked')
    expect(await fdsLeftSince(before)).toEqual([])
    rx.close()
  })

  it.skipIf(!native.notifySupported())(
    'a path socket is removed on close, and a second bind there is EADDRINUSE',
    () => {
      const path = join(tempDir(), 'notify.sock')
      const rx = native.NotifyReceiver.bind(path)
      expect(existsSync(path)).toBe(true)
      // (Named by the JS face: Node knows every errno's name.)
      expect(() => native.NotifyReceiver.bind(path)).toThrow(
        expect.objectContaining({ errno: -98, syscall: 'bind', path }),
      )
      rx.close()
      expect(existsSync(path)).toBe(false)
    },
  )
})
