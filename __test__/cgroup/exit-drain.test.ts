// Adversarial checks of a contained child's exit drain (the kill of its
// cgroup, the wait for it to empty, the removal, then the reap): on the JS
// loop when the cgroup is empty once killed, handed on otherwise. Real
// processes and cgroups, checked through /proc and the cgroup file system.
import { existsSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { cgroupSupport, type SupervisedProcess } from '../../index.js'
import { aliveInProcTable, firstLineOf, runWithFewFds, trackProcesses, waitFor, zombieChildren } from '../helpers'

const { sup } = trackProcesses()

const support = cgroupSupport()
const skipReason = support.available ? null : `cgroup containment unavailable here: ${support.reason}`

/** Pids in a cgroup, from its cgroup.procs. */
function members(cgroup: string): number[] {
  return readFileSync(`${cgroup}/cgroup.procs`, 'utf8').split('\n').filter(Boolean).map(Number)
}

describe.skipIf(skipReason !== null)(`contained exit drain (${skipReason ?? 'cgroup v2'})`, () => {
  it('with no fd left at the exit (EMFILE), a member that left the group is still killed before the exit, and the cgroup removed', async () => {
    // The fixture's process fills its fd table, then SIGKILLs the leader:
    // opening cgroup.kill, cgroup.events and the directory all fail then.
    // The member is in a session of its own: only the cgroup's kill reaches
    // it. 'exit' must still mean everything in the cgroup is gone.
    const { stdout } = await runWithFewFds('drain-emfile.cjs')
    const res = JSON.parse(stdout) as {
      held: number
      exit: { signal: string | null }
      atExit: { memberAlive: boolean; dirExists: boolean }
    }
    expect(res.held).toBeGreaterThan(0)
    expect(res.exit.signal).toBe('SIGKILL')
    expect(res.atExit).toEqual({ memberAlive: false, dirExists: false })
  })

  it('100 contained children killed at once, the loop blocked around their exits: each exit once, after its members died and its cgroup went', async () => {
    // Every other child has a member in a session of its own. The leaders
    // are SIGKILLed in one turn and the loop then spins briefly, so the
    // reaper's grace runs out for some while the loop settles others.
    const n = 100
    const ps: SupervisedProcess[] = []
    for (let i = 0; i < n; i++) {
      ps.push(
        sup('sh', ['-c', i % 2 ? 'setsid sleep 1000 & echo ready; read x' : 'echo ready; read x'], {
          cgroup: true,
          stdio: ['pipe', 'pipe', 'inherit'],
        }),
      )
    }
    for (const p of ps) expect(await firstLineOf(p)).toBe('ready')
    const cgroups = ps.map((p) => p.cgroup as string)
    const memberPids: number[][] = []
    for (let i = 0; i < n; i++) {
      const want = i % 2 ? 2 : 1
      await waitFor(() => members(cgroups[i] as string).length === want, 5000, 'the members in the cgroup')
      memberPids.push(members(cgroups[i] as string).filter((pid) => pid !== ps[i]?.pid))
    }
    const counts = ps.map(() => 0)
    const atExit: { alive: number[]; dirExists: boolean }[] = []
    for (const [i, p] of ps.entries()) {
      p.on('exit', () => {
        counts[i] = (counts[i] as number) + 1
        atExit[i] = {
          alive: (memberPids[i] as number[]).filter(aliveInProcTable),
          dirExists: existsSync(cgroups[i] as string),
        }
      })
    }
    for (const p of ps) process.kill(p.pid, 'SIGKILL')
    const spinUntil = process.hrtime.bigint() + 2_000_000n
    while (process.hrtime.bigint() < spinUntil) {
      // spin: the loop is blocked
    }
    await Promise.all(ps.map((p) => p.exited))
    await new Promise((r) => setImmediate(r))
    for (const p of ps) p.stdin?.destroy()
    expect(counts.filter((c) => c !== 1)).toEqual([])
    expect(atExit.filter((s) => s.alive.length > 0 || s.dirExists)).toEqual([])
    expect(zombieChildren().filter((pid) => ps.some((p) => p.pid === pid))).toEqual([])
    expect(cgroups.filter((cg) => existsSync(cg))).toEqual([])
  }, 60_000)
})
