// The native reaper: one fd per live child (its pidfd, nothing duplicated),
// a JS thread that never runs its loop still leaves no zombie, and a
// thousand children killed at once each give one exit. Every back-end runs
// these (the suite is run with PROCWARD_EXIT_WATCH unset, =tokio and
// =fallback).
import { describe, expect, it } from 'vitest'
import type { SupervisedProcess } from '../../index.js'
import { fdsLeftSince, openFds, procState, sleep, trackProcesses, waitFor, zombieChildren } from '../helpers'

const { sup } = trackProcesses()

function exitCounter(p: SupervisedProcess): () => number {
  let n = 0
  p.on('exit', () => {
    n++
  })
  return () => n
}

describe('fds', () => {
  it('at most one per live child, none once they are gone', async () => {
    // The reaper's own epoll (and anything else opened once) comes first.
    await sup('true', [], { stdio: 'ignore' }).exited
    const before = openFds()
    const n = 200
    const kids = Array.from({ length: n }, () => sup('sleep', ['100'], { stdio: 'ignore' }))
    const grown = openFds().length - before.length
    expect(grown).toBeLessThanOrEqual(n)
    for (const k of kids) k.kill('SIGKILL')
    await Promise.all(kids.map((k) => k.exited))
    expect(await fdsLeftSince(before)).toEqual([])
  })
})

describe('a JS thread that never runs its loop', () => {
  it('still leaves no zombie: the child is reaped natively, its exit given once later', async () => {
    const p = sup('sleep', ['100'], { stdio: 'ignore' })
    const count = exitCounter(p)
    const pid = p.pid
    p.kill('SIGKILL')
    // Busy-wait on purpose: the loop must not run until the child is reaped.
    for (const t0 = Date.now(); procState(pid) !== null && Date.now() - t0 < 10_000; );
    expect(procState(pid)).toBeNull()
    expect(count()).toBe(0)
    expect(await p.exited).toEqual({ pid, code: null, signal: 'SIGKILL' })
    await sleep(50)
    expect(count()).toBe(1)
  })
})

describe('a thousand children killed at once', () => {
  it('each gives its own exit, once, and none is left a zombie', async () => {
    const n = 1000
    const kids = Array.from({ length: n }, () => sup('sleep', ['100'], { stdio: 'ignore' }))
    const counts = kids.map(exitCounter)
    for (const k of kids) expect(k.kill('SIGKILL')).toBe(true)
    const infos = await Promise.all(kids.map((k) => k.exited))
    infos.forEach((info, i) => {
      expect(info).toEqual({ pid: kids[i]?.pid, code: null, signal: 'SIGKILL' })
    })
    await sleep(100)
    expect(counts.filter((c) => c() !== 1)).toEqual([])
    await waitFor(() => zombieChildren().length === 0, 5000, 'no zombie children')
  }, 120_000)
})
