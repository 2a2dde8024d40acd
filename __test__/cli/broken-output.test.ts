// The CLI's output has nowhere to go: a reader that is gone (`| head -0`),
// a full disk (`> /dev/full`). Quiet, conventional exits, no stack trace,
// never a hang.
import { execFileSync } from 'node:child_process'
import { closeSync, constants, openSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { tempDirs, trackProcesses, waitFor } from '../helpers'
import { recordWhen } from '../supervisor/helpers'
import { CLI, Cli, NODE } from './cli-process'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-cli-output-')

/** The CLI with `stdout` as its stdout: its status and stderr once it has ended. */
async function runWith(args: string[], stdout: number) {
  const p = others.spawn(NODE, [CLI, ...args], { stdio: ['ignore', stdout, 'pipe'] })
  let err = ''
  p.stderr?.on('data', (d) => (err += d))
  const code = await new Promise<number | null>((resolve) => p.once('close', (c) => resolve(c)))
  return { code, err }
}

/**
 * The write end of a pipe (its fd) whose only reader has closed it: every
 * write to it gets EPIPE. A FIFO, so that the fd is ours to hand on under
 * any runtime (a child_process pipe's fd is a Node internal, and Bun has none).
 */
function goneReader(): { end: number; close: () => void } {
  const fifo = join(tempDir(), 'gone-reader')
  execFileSync('mkfifo', [fifo])
  const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK)
  const end = openSync(fifo, constants.O_WRONLY)
  closeSync(reader)
  return { end, close: () => closeSync(end) }
}

const SIGPIPE_STATUS = 128 + 13

describe('procward with nowhere to write', () => {
  it('a reader that is gone: 141 (as killed by SIGPIPE), nothing on stderr: --help, --version, lock --help, status', async () => {
    const stateFile = join(tempDir(), 'svc.json')
    const sup = new Cli(others, ['run', '--state-file', stateFile, '--', 'sleep', '1000'])
    try {
      await recordWhen(stateFile, (r) => r.state === 'running', 'the running record')
      for (const args of [['--help'], ['--version'], ['lock', '--help'], ['status', stateFile]]) {
        const { end, close } = goneReader()
        try {
          expect(await runWith(args, end), args.join(' ')).toEqual({ code: SIGPIPE_STATUS, err: '' })
        } finally {
          close()
        }
      }
    } finally {
      sup.proc.kill('SIGTERM')
      await sup.done
    }
  })

  it('a full disk: one line on stderr that says so, exit 1', async () => {
    for (const args of [['--help'], ['--version'], ['lock', '--help']]) {
      const full = openSync('/dev/full', 'w')
      try {
        const r = await runWith(args, full)
        expect(r.code, args.join(' ')).toBe(1)
        expect(r.err).toMatch(/^procward: write error: .*ENOSPC.*\n$/)
      } finally {
        closeSync(full)
      }
    }
  })

  it('run --prefix: the reader leaves while the copy is behind: the daemon’s pipe breaks as it would without us, and procward ends', async () => {
    const c = new Cli(others, ['run', '--prefix', '--restart', 'never', '--', 'seq', '1', '10000000'])
    // Read a little, then not at all: the copy falls behind, seq blocks.
    await new Promise((resolve) => c.proc.stdout?.once('data', resolve))
    c.proc.stdout?.pause()
    await waitFor(() => c.pids('spawn').length === 1, 20_000, 'the spawn line')
    const seq = c.pids('spawn')[0] as number
    await waitFor(() => /pipe/.test(wchan(seq)), 20_000, 'seq blocked on its pipe')
    c.proc.stdout?.destroy()
    expect((await c.done).code).toBe(SIGPIPE_STATUS)
    expect(c.err).toMatch(/exit pid \d+ killed by SIGPIPE/)
  })
})

function wchan(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/wchan`, 'latin1')
  } catch {
    return ''
  }
}
