// A child that inherits Node's stdio gets it blocking, as child_process gives
// it: Node keeps a pipe stdout non-blocking, and a C program handed that
// (seq) fails with EAGAIN at its first full pipe instead of waiting for a
// slow reader.
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { CLI, FIXTURES, NODE, sleep } from '../helpers'

const LINES = 400_000

// Runs `node ARGS` with its stdout a pipe that we read slowly: nothing for
// 300 ms (the pipe fills within microseconds), then in small sips.
async function slowlyRead(args: string[]) {
  const child = spawn(NODE, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let err = ''
  child.stderr.setEncoding('utf8').on('data', (c: string) => {
    err += c
  })
  child.stdout.pause()
  await sleep(300)
  const chunks: Buffer[] = []
  child.stdout.on('data', (c: Buffer) => {
    chunks.push(c)
    child.stdout.pause()
    setTimeout(() => child.stdout.resume(), 1)
  })
  child.stdout.resume()
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)))
  return { code, out: Buffer.concat(chunks).toString('utf8').split('\n'), err }
}

// The fixture through a slow reader, with the verdict it prints last on stderr.
async function throughSlowReader(how: 'procward' | 'child_process') {
  const r = await slowlyRead([join(FIXTURES, 'inherit-slow-stdout.cjs'), how, 'seq', '1', String(LINES)])
  return { ...r, verdict: JSON.parse(r.err.trim().split('\n').at(-1) ?? '{}') }
}

describe.skipIf(process.platform !== 'linux')('inherited stdio', () => {
  it('a child inheriting a non-blocking pipe stdout writes every line to a slow reader, and Node keeps writing after it', async () => {
    const { code, out, verdict, err } = await throughSlowReader('procward')
    expect(err).not.toMatch(/Resource temporarily unavailable/)
    expect(verdict).toMatchObject({ code: 0, signal: null, before: true })
    expect(code).toBe(0)
    expect(out.slice(0, LINES)).toEqual(Array.from({ length: LINES }, (_, i) => String(i + 1)))
    expect(out[LINES]).toBe('parent-after')
  })

  it('does to the parent what child_process does: the shared description ends up blocking in both', async () => {
    const ours = await throughSlowReader('procward')
    const theirs = await throughSlowReader('child_process')
    expect(theirs.verdict).toMatchObject({ code: 0, before: true })
    expect(ours.verdict.after).toBe(theirs.verdict.after)
    expect(ours.out.length).toBe(theirs.out.length)
  })
})

describe.skipIf(process.platform !== 'linux')('inherited stdio through the CLI', () => {
  it('`procward run --restart never -- seq` delivers every line to a slow reader of its stdout', async () => {
    const { code, out, err } = await slowlyRead([CLI, 'run', '--restart', 'never', '--', 'seq', '1', String(LINES)])
    expect(err).not.toMatch(/Resource temporarily unavailable/)
    expect(code).toBe(0)
    expect(out.length).toBe(LINES + 1)
    expect(out[LINES - 1]).toBe(String(LINES))
  })
})
