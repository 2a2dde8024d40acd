// procward run under a terminal: COMMAND gets it as tini gives it (its
// stdin, and the foreground for its own group), so an interactive shell or
// REPL can read it; the terminal comes back to procward when COMMAND exits,
// and a restarted COMMAND takes it again; Ctrl-C, now COMMAND's, still ends
// procward run; a procward run in the background of a shell takes nothing.
// Each run has a real pty as its controlling terminal: util-linux's
// `script`, whose stdin is what is typed and whose stdout is the screen.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { CLI, canUnsharePid, NODE, trackProcesses, waitFor } from '../helpers'

const { others } = trackProcesses()
const hasScript = process.platform === 'linux' && spawnSync('script', ['--version']).status === 0
const hasBash = spawnSync('bash', ['-c', 'exit 0']).status === 0
const dir = mkdtempSync(join(tmpdir(), 'procward-tty-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** `s` as one word of sh. */
const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`
/** `procward run ARGS` as a line of sh. */
const procwardRun = (args: string[]) => [NODE, CLI, 'run', ...args].map(q).join(' ')
/**
 * Printed by COMMAND before its `read` (`reading:PID`) and after it
 * (`got:LINE`). Written so that procward's spawn line, which shows the
 * script, holds neither.
 */
const READING = `echo "read""ing:$$"`
const GOT = 'echo "go""t:$x"'

/** A shell line run on a fresh pty of its own (session leader, the pty its controlling terminal). */
class Pty {
  out = ''
  readonly done: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  private readonly proc

  constructor(line: string) {
    this.proc = others.spawn('script', ['-qfec', line, '/dev/null'], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, SHELL: '/bin/sh' },
    })
    this.proc.stdout?.on('data', (d) => (this.out += d))
    this.proc.stderr?.on('data', (d) => (this.out += d))
    this.done = new Promise((resolve) => this.proc.once('close', (code, signal) => resolve({ code, signal })))
  }

  /** Typed at the terminal. */
  type(text: string): void {
    this.proc.stdin?.write(text)
  }

  count(re: RegExp): number {
    return [...this.out.matchAll(re)].length
  }

  /** Waits until `re` has been seen `n` times on the screen. */
  async seen(re: RegExp, n = 1, what = String(re)): Promise<void> {
    await waitFor(() => this.count(new RegExp(re.source, 'g')) >= n, 15_000, `${what}; screen: ${this.out}`)
  }
}

/** Has `done` resolved yet? */
function settled(p: Promise<unknown>): () => boolean {
  let yes = false
  p.then(() => (yes = true))
  return () => yes
}

/** `procward run ARGS` as a line of sh, run where the test says (as it is, or as PID 1). */
type Launch = (args: string[]) => string

/** A line typed reaches COMMAND's `read`, and COMMAND's status is procward's. */
async function readsTheTerminal(launch: Launch): Promise<void> {
  const t = new Pty(launch(['--restart', 'never', '--', 'sh', '-c', `${READING}; read x; ${GOT}`]))
  await t.seen(/reading:\d+/)
  t.type('hello\n')
  // Without the terminal, its stdin was /dev/null: `got:` at once; with
  // the stdin alone (not the foreground), the read stopped it (SIGTTIN).
  await t.seen(/got:/, 1, "COMMAND's line")
  expect(t.out).toContain('got:hello')
  expect(await t.done).toEqual({ code: 0, signal: null })
}

/** Ctrl-C kills COMMAND (restart policy `on-failure`: a death by a signal is one), and procward ends with 130 without a restart. */
async function ctrlCEnds(launch: Launch): Promise<void> {
  const t = new Pty(launch(['--restart', 'on-failure', '--', 'sh', '-c', `${READING}; exec sleep 1000`]))
  await t.seen(/reading:\d+/)
  t.type('\x03')
  const ended = settled(t.done)
  await waitFor(() => ended() || t.count(/: spawn pid/g) > 1, 15_000, 'the end or a restart')
  expect(t.count(/: spawn pid/g)).toBe(1)
  expect(t.out).toMatch(/exit pid \d+ killed by SIGINT/)
  expect(await t.done).toEqual({ code: 130, signal: null })
}

describe.skipIf(!hasScript)('procward run in the foreground of a terminal', () => {
  it('COMMAND reads the terminal: a line typed reaches it, and its status is ours', () => readsTheTerminal(procwardRun))

  it('COMMAND is in the foreground with its own group; after its exit the terminal is ours, so its restart takes it again', async () => {
    const count = join(dir, 'count')
    // Shows its group and the terminal's foreground (from /proc: `cut`
    // is in its group), reads a line, fails the first time.
    const script = [
      'cut -d" " -f5,8 /proc/self/stat | sed "s/^/groups:/"',
      READING,
      'read x',
      GOT,
      `echo >> ${q(count)}`,
      `[ $(wc -l < ${q(count)}) -ge 2 ]`,
    ].join('; ')
    const t = new Pty(procwardRun(['--restart', 'on-failure', '--', 'sh', '-c', script]))
    await t.seen(/reading:\d+/)
    t.type('one\n')
    await t.seen(/reading:\d+/, 2, 'the restarted COMMAND reading')
    t.type('two\n')
    await t.seen(/got:two/, 1, 'the restarted COMMAND reading the terminal')
    const end = await t.done
    expect(t.out).toContain('got:one')
    expect(t.out).toContain('got:two')
    expect(end).toEqual({ code: 0, signal: null })
    // Each COMMAND: its group is the terminal's foreground.
    const groups = [...t.out.matchAll(/groups:(\d+) (-?\d+)/g)].map((m) => [Number(m[1]), Number(m[2])])
    expect(groups).toHaveLength(2)
    for (const [pgrp, tpgid] of groups) expect(tpgid).toBe(pgrp)
    const pids = [...t.out.matchAll(/reading:(\d+)/g)].map((m) => Number(m[1]))
    expect(groups.map(([pgrp]) => pgrp)).toEqual(pids)
  })

  it('Ctrl-C reaches COMMAND, and ends procward run (130) rather than restarting COMMAND', () => ctrlCEnds(procwardRun))

  // A COMMAND that exits 0 on Ctrl-C would be restarted again and again.
  it('with --restart always (the default), COMMAND is not given the terminal, and Ctrl-C ends procward run (130)', async () => {
    const script = `trap "exit 0" INT; ${READING}; read x; ${GOT}; sleep 1000 & wait`
    const t = new Pty(procwardRun(['--', 'sh', '-c', script]))
    await t.seen(/reading:\d+/)
    // Its stdin is /dev/null: the read ends at once, with nothing.
    await t.seen(/got:/, 1, "COMMAND's empty line")
    expect(t.out).toMatch(/got:\s*$/m)
    t.type('\x03')
    expect(await t.done).toEqual({ code: 130, signal: null })
    expect(t.count(/: spawn pid/g)).toBe(1)
  })

  it.skipIf(!hasBash)('started in the background of a shell, it takes neither the stdin nor the terminal', async () => {
    // `set -m`: job control, as in an interactive shell; the job `&` runs
    // in a group of its own outside the foreground, which stays the shell's.
    const script = [
      'cut -d" " -f5,8 /proc/self/stat | sed "s/^/groups:/"',
      '[ -t 0 ] && echo stdin:terminal || echo stdin:other',
    ].join('; ')
    const line = `set -m; ${procwardRun(['--restart', 'never', '--', 'sh', '-c', script])} & wait $!; echo job:$?`
    const t = new Pty(`bash -c ${q(line)}`)
    const end = await t.done
    expect(t.out).toContain('job:0')
    expect(t.out).toContain('stdin:other')
    const m = /groups:(\d+) (-?\d+)/.exec(t.out)
    expect(m).not.toBeNull()
    expect(Number(m?.[2])).not.toBe(Number(m?.[1]))
    expect(end).toEqual({ code: 0, signal: null })
  })

  describe.skipIf(!canUnsharePid())("as PID 1 of a pid namespace (docker run -it's entrypoint)", () => {
    const asInit = (args: string[]) => `unshare --pid --fork --mount-proc --kill-child ${procwardRun(args)}`

    it('COMMAND reads the terminal', () => readsTheTerminal(asInit))

    it('Ctrl-C ends it with 130', () => ctrlCEnds(asInit))
  })
})
