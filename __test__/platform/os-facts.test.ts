// What lib/os.js asks the binding (src/binding/os.rs over proc_info::facts)
// instead of testing process.platform or reading /proc itself: each answer
// checked on real processes against what the kernel shows them as.
import { execFileSync, spawnSync } from 'node:child_process'
import { readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import net from 'node:net'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { cgroupSupport, getProcessInfo } from '../../index.js'
import { FIXTURES, firstLine, firstLineOf, freePort, isRoot, NODE, trackProcesses, waitFor } from '../helpers'

const { sup, others } = trackProcesses()
const require = createRequire(__filename)

interface Stat {
  state: string
  running: boolean
  ppid: number
  pgid: number
  session: number
  ttyNr: number
  tpgid: number
}
interface OwnStatus {
  pending: bigint
  sharedPending: bigint
  ignored: bigint
  caught: bigint
  capEff: bigint
}
interface Marked {
  pid: number
  ppid: number
  pgid: number
  session: number
  identity: string
}
const native = require('../../binding.js') as {
  platformFacts(): { windows: boolean; procfs: boolean }
  processStat(pid: number): Stat | null
  ownStatus(): OwnStatus | null
  processComm(pid: number): string | null
  processOwner(pid: number): number | null
  processArgv(pid: number): Promise<string[] | null>
  processCgroup(pid: number): Promise<{ path: string; id: number } | null>
  cgroup2Mount(): string | null
  openOwnTerminal(fd: number): number | null
  portListeners(port: number): Promise<string[] | null>
  childListens(pid: number, pgid: number | null, port: number): Promise<boolean | null>
  markedProcesses(entry: string): Promise<Marked[]>
}
const os = require('../../lib/os.js') as {
  WINDOWS: boolean
  PROCFS: boolean
  otherThreadsRunnable(): boolean
  processStat(pid: number): Stat | null
  listeningInodes(port: number): Promise<Set<string> | null>
}

const LINUX = process.platform === 'linux'

/** A detached `sleep 30` (a session and group of its own): its pid. */
function sleeper(env: NodeJS.ProcessEnv = process.env): number {
  const child = others.spawn('sleep', ['30'], { detached: true, stdio: 'ignore', env })
  return child.pid as number
}

/** The pid of a process that ran and has been reaped. */
function gonePid(): number {
  return spawnSync('true').pid as number
}

/** The stat fields after the name, as the kernel wrote them for `pid`. */
function statFields(pid: number): string[] {
  const line = readFileSync(`/proc/${pid}/stat`, 'latin1')
  return line.slice(line.lastIndexOf(')') + 2).split(' ')
}

/** The socket inodes `pid` holds open, read from its fd links. */
function socketInodes(pid: number): string[] {
  const out: string[] = []
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))
      if (m) out.push(m[1] as string)
    } catch {
      // closed meanwhile
    }
  }
  return out
}

const listenOn = (port: number) =>
  new Promise<net.Server>((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => resolve(server))
  })

describe('the platform, as the binding was built for it', () => {
  it('says which OS it is without lib/ asking process.platform', () => {
    expect(native.platformFacts()).toEqual({ windows: process.platform === 'win32', procfs: LINUX })
    expect(os.WINDOWS).toBe(process.platform === 'win32')
    expect(os.PROCFS).toBe(LINUX)
  })
})

describe.skipIf(!LINUX)('a process, as /proc says', () => {
  it("a stat line: state, parent, group, session and terminal, from the kernel's own line", async () => {
    const pid = sleeper()
    await waitFor(() => statFields(pid)[0] === 'S', 5000, 'sleep to sleep')
    const st = native.processStat(pid)
    const f = statFields(pid)
    expect(st).toEqual({
      state: 'sleeping',
      running: true,
      ppid: process.pid,
      pgid: pid,
      session: pid,
      ttyNr: Number(f[4]),
      tpgid: Number(f[5]),
    })
    // setsid left it without a controlling terminal.
    expect([st?.ttyNr, st?.tpgid]).toEqual([0, -1])
    const own = native.processStat(process.pid)
    expect(own?.session).toBe(Number(statFields(process.pid)[3]))
    expect(own?.pgid).toBe(Number(statFields(process.pid)[2]))
  })

  it('a hostile name is not read as the fields after it', async () => {
    const child = others.spawn('sh', [join(FIXTURES, 'renamed.sh')], { detached: true })
    const pid = Number(await firstLine(child))
    expect(native.processComm(pid)).toBe('a) Z 1 (b')
    expect(native.processStat(pid)).toMatchObject({ running: true, ppid: process.pid, pgid: pid, session: pid })
  })

  it('a zombie is not running; a reaped pid is null; a bad pid is refused', async () => {
    // sh execs a sleep that never waits for the child sh started: a zombie.
    const child = others.spawn('sh', ['-c', 'true & exec sleep 30'], { detached: true, stdio: 'ignore' })
    const parent = child.pid as number
    let zombie = 0
    await waitFor(
      () => {
        const kids = readFileSync(`/proc/${parent}/task/${parent}/children`, 'latin1').trim().split(' ')
        zombie = Number(kids[0])
        return zombie > 0 && statFields(zombie)[0] === 'Z'
      },
      5000,
      'the zombie',
    )
    expect(native.processStat(zombie)).toMatchObject({ state: 'zombie', running: false, ppid: parent })
    expect(await native.processArgv(zombie)).toEqual([])
    const gone = gonePid()
    expect(native.processStat(gone)).toBeNull()
    expect(native.processComm(gone)).toBeNull()
    expect(native.processOwner(gone)).toBeNull()
    expect(await native.processArgv(gone)).toBeNull()
    expect(await native.processCgroup(gone)).toBeNull()
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      expect(() => native.processStat(bad)).toThrow(RangeError)
      await expect(native.processArgv(bad)).rejects.toThrow(RangeError)
      // lib/os.js: cannot tell.
      expect(os.processStat(bad)).toBeNull()
    }
  })

  it('a command line as argv: empty and non-ASCII arguments kept', async () => {
    const child = others.spawn(NODE, ['-e', 'setInterval(() => {}, 1e5)', '', 'café'], { stdio: 'ignore' })
    expect(await native.processArgv(child.pid as number)).toEqual([
      NODE,
      '-e',
      'setInterval(() => {}, 1e5)',
      '',
      'café',
    ])
  })

  it.skipIf(!isRoot)("the owner is the uid a process runs as, not its parent's", async () => {
    const child = others.spawn('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'sleep', '30'], {
      stdio: 'ignore',
    })
    const pid = child.pid as number
    await waitFor(() => readFileSync(`/proc/${pid}/comm`, 'latin1').trim() === 'sleep', 5000, 'setpriv to exec')
    expect(native.processOwner(pid)).toBe(65534)
    expect(native.processOwner(process.pid)).toBe(0)
  })

  it("this process's signal masks and capabilities, as /proc/self/status shows them", () => {
    const text = readFileSync('/proc/self/status', 'latin1')
    const field = (name: string) => BigInt(`0x${new RegExp(`^${name}:\\s*([0-9a-f]+)$`, 'm').exec(text)?.[1]}`)
    expect(native.ownStatus()).toEqual({
      pending: field('SigPnd'),
      sharedPending: field('ShdPnd'),
      ignored: field('SigIgn'),
      caught: field('SigCgt'),
      capEff: field('CapEff'),
    })
  })

  it('a listener added in JS shows as caught; Node ignores SIGPIPE', () => {
    const code = `
      const n = require(${JSON.stringify(join(__dirname, '..', '..', 'binding.js'))})
      const bit = (m, s) => Number((m >> BigInt(require('os').constants.signals[s] - 1)) & 1n)
      const before = n.ownStatus()
      process.on('SIGUSR2', () => {})
      const after = n.ownStatus()
      console.log(JSON.stringify([bit(before.caught, 'SIGUSR2'), bit(after.caught, 'SIGUSR2'), bit(after.ignored, 'SIGPIPE')]))`
    const out = execFileSync(NODE, ['-e', code], { encoding: 'utf8' })
    expect(JSON.parse(out)).toEqual([0, 1, 1])
  })
})

describe.skipIf(!LINUX)('terminals', () => {
  it('a terminal is opened anew, non-blocking; a pipe or a file is not a terminal', () => {
    // script(1) gives node a terminal of its own, as its controlling one
    // and on fd 1, with node in the terminal's foreground group.
    const code = `
      const n = require(${JSON.stringify(join(__dirname, '..', '..', 'binding.js'))})
      const fs = require('fs')
      const st = n.processStat(process.pid)
      const own = n.openOwnTerminal(1)
      const isTty = own !== null && require('tty').isatty(own)
      if (own !== null) fs.closeSync(own)
      const nul = fs.openSync('/dev/null', 'w')
      fs.writeSync(2, 'RESULT ' + JSON.stringify({ fg: st.ttyNr !== 0 && st.tpgid === st.pgid, isTty, nul: n.openOwnTerminal(nul) }) + '\\n')`
    const r = spawnSync('script', ['-qec', `${NODE} -e "$CODE" 2>&1`, '/dev/null'], {
      env: { ...process.env, CODE: code },
      encoding: 'utf8',
    })
    const line = /RESULT (.*)/.exec(r.stdout)?.[1]
    expect(line, r.stdout + r.stderr).toBeDefined()
    expect(JSON.parse(line as string)).toEqual({ fg: true, isTty: true, nul: null })
  })

  it('refuses a negative fd', () => {
    expect(() => native.openOwnTerminal(-1)).toThrow(RangeError)
  })
})

describe.skipIf(!LINUX)('listeners', () => {
  it('the sockets listening on a port are the ones the listener holds', async () => {
    const port = await freePort()
    const server = await listenOn(port)
    try {
      const inodes = await native.portListeners(port)
      expect(inodes).toHaveLength(1)
      expect(socketInodes(process.pid)).toContain(inodes?.[0])
      expect(await os.listeningInodes(port)).toEqual(new Set(inodes))
    } finally {
      server.close()
    }
    await expect(native.portListeners(0)).rejects.toThrow(RangeError)
    await expect(native.portListeners(65536)).rejects.toThrow(RangeError)
  })

  it("the child's listener, or a member of its group's; not another's; null with no listener", async () => {
    const port = await freePort()
    // The group's leader starts a member that listens, then idles.
    const listen = `require('net').createServer().listen(${port}, '127.0.0.1', () => console.log('up'))`
    const leader = `const c = require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(listen)}], { stdio: ['ignore', 'inherit', 'inherit'] }); setInterval(() => {}, 1e5)`
    const child = others.spawn(NODE, ['-e', leader], { detached: true })
    const pid = child.pid as number
    expect(await firstLine(child)).toBe('up')
    expect(await native.childListens(pid, pid, port)).toBe(true)
    // Without its group the leader holds nothing.
    expect(await native.childListens(pid, null, port)).toBe(false)
    // Another process that listens elsewhere is not the listener.
    const other = sleeper()
    expect(await native.childListens(other, other, port)).toBe(false)
    // Where nothing listens, no holder can be told.
    expect(await native.childListens(pid, pid, await freePort())).toBeNull()
  })
})

describe.skipIf(!LINUX)('marks in the environment', () => {
  it('finds the marked processes with their identity, never a near miss or a zombie', async () => {
    const mark = `PROCWARD_TEST_MARK=${process.pid}-${Date.now()}`
    const [name, value] = mark.split('=') as [string, string]
    const marked = sleeper({ ...process.env, [name]: value })
    sleeper({ ...process.env, [name]: `${value}x` })
    sleeper({ ...process.env, [`X${name}`]: value })
    // A marked process whose parent never reaps it: a zombie, not found.
    const zombieParent = others.spawn('sh', ['-c', 'sleep 0 & exec sleep 30'], {
      detached: true,
      stdio: 'ignore',
      env: { ...process.env, [name]: value },
    })
    const zp = zombieParent.pid as number
    await waitFor(
      () => {
        const kids = readFileSync(`/proc/${zp}/task/${zp}/children`, 'latin1').trim()
        return kids !== '' && statFields(Number(kids))[0] === 'Z'
      },
      5000,
      'the zombie',
    )
    const found = (await native.markedProcesses(mark)).sort((a, b) => a.pid - b.pid)
    expect(found).toEqual(
      [
        { pid: zp, ppid: process.pid, pgid: zp, session: zp, identity: getProcessInfo(zp)?.identity },
        { pid: marked, ppid: process.pid, pgid: marked, session: marked, identity: getProcessInfo(marked)?.identity },
      ].sort((a, b) => a.pid - b.pid),
    )
  })
})

describe.skipIf(!LINUX)('cgroups', () => {
  it("a process's cgroup is its directory under the cgroup2 mount, its id that directory's inode", async () => {
    const mount = native.cgroup2Mount()
    expect(mount).not.toBeNull()
    const line = readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .find((l) => l.split(' - ')[1]?.startsWith('cgroup2 '))
    expect(mount).toBe(line?.split(' ')[4])
    const own = await native.processCgroup(process.pid)
    expect(own?.path.startsWith(mount as string)).toBe(true)
    expect(own?.id).toBe(statSync(own?.path as string).ino)
  })

  it.skipIf(!cgroupSupport().available)('a contained child: the cgroup spawnSupervised reports', async () => {
    const p = sup('sh', ['-c', 'echo up; exec sleep 30'], { cgroup: true, stdio: ['ignore', 'pipe', 'inherit'] })
    expect(await firstLineOf(p)).toBe('up')
    const cg = await native.processCgroup(p.pid)
    // Its directory, and that directory's inode: the cgroup id.
    expect(cg).toEqual({ path: p.cgroup, id: statSync(p.cgroup as string).ino })
  })
})

describe.skipIf(!LINUX)('otherThreadsRunnable', () => {
  it('is true while a thread of ours spins, and false again once it has ended', async () => {
    const { Worker } = require('node:worker_threads') as typeof import('node:worker_threads')
    const worker = new Worker('for (;;) {}', { eval: true })
    try {
      await waitFor(() => os.otherThreadsRunnable(), 10_000, 'the spinning worker seen runnable')
    } finally {
      await worker.terminate()
    }
    // Node's own threads sleep again once nothing wakes them.
    await waitFor(() => !os.otherThreadsRunnable(), 10_000, 'no other thread runnable')
  })
})
