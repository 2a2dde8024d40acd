// Under Node the exit is watched on the JS thread's own loop through one
// epoll of procward's, its hub: every pidfd of that loop's children is
// there, and the loop's own epoll sees the hub alone. ref()/unref() of each
// child decides whether the hub's one poll handle holds the process.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { aliveInProcTable, IS_BUN, runFixture, trackProcesses, waitFor } from '../helpers'

const { sup } = trackProcesses()
const onLoop = !IS_BUN && !process.env.PROCWARD_EXIT_WATCH

/** For each epoll fd of this process: how many fds it holds. */
function epollSizes(): number[] {
  const sizes: number[] = []
  for (const fd of readdirSync('/proc/self/fd')) {
    let target = ''
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`)
    } catch {
      continue // closed meanwhile (readdir's own fd)
    }
    if (target !== 'anon_inode:[eventpoll]') continue
    const info = readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8')
    sizes.push(info.split('\n').filter((l) => l.startsWith('tfd:')).length)
  }
  return sizes
}

describe.skipIf(!onLoop)('the loop hub (Node, the default exit watch)', () => {
  it("holds every child's pidfd, and the loop's own epoll none of them", async () => {
    const n = 40
    const kids = Array.from({ length: n }, () => sup('sleep', ['30'], { stdio: 'ignore' }))
    // Let the loop run a turn (libuv adds a polled fd to its epoll then).
    await new Promise((r) => setTimeout(r, 20))
    // The hub and procward's reaper (the safety net) each hold the n pidfds
    // and nothing else; libuv's epoll holds the hub and its own few fds (a
    // poll handle per child would put all n there too: n and more).
    expect(epollSizes().filter((s) => s >= n)).toEqual([n, n])
    for (const k of kids) k.kill('SIGKILL')
    await Promise.all(kids.map((k) => k.exited))
    // Closed pidfds leave every epoll.
    expect(epollSizes().filter((s) => s >= n)).toEqual([])
  })

  it('holds the process while a child is ref()ed: the short one, not the unref()ed ones', async () => {
    const { stdout } = await runFixture('hub-refs.cjs', 'mixed')
    const lines = stdout.trim().split('\n')
    expect(lines[1]).toBe('short exit 0')
    const pids = (lines[0] ?? '').split(' ').slice(1).map(Number)
    expect(pids).toHaveLength(2)
    // They die with their parent (parentDeathSignal), which did not wait.
    for (const pid of pids) await waitFor(() => !aliveInProcTable(pid), 5000, `unref()ed child ${pid} to die`)
  })

  it('holds it again after unref() then ref(), until that child exits', async () => {
    const { stdout } = await runFixture('hub-refs.cjs', 'again')
    expect(stdout.trim().split('\n')[1]).toBe('long exit SIGKILL')
  })
})
