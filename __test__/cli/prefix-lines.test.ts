// procward run --prefix: a prefixed line is never joined to another
// stream's, another child's or procward's own, and what is read from the
// daemon's stdout and stderr goes out in the order it was read (issue 23,
// item 6). The daemon makes each write only once procward has read the one
// before (two-streams.py), so that order is known.
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { IS_BUN, trackProcesses } from '../helpers'
import { CLI, CLI_FIXTURES, Cli, NODE } from './cli-process'

const { others } = trackProcesses()
const TWO = join(CLI_FIXTURES, 'two-streams.py')

/** procward's lines without their time stamp. */
const unstamped = (text: string) => text.split('\n').map((l) => l.replace(/^\d{4}-\d\d-\d\dT[\d:.]+Z /, ''))

/** `procward run --prefix --name d --restart never -- python3 two-streams.py SCRIPT` with fds 1 and 2 one pipe, through `reader`. */
async function runMerged(script: string, reader = 'cat'): Promise<{ code: number | null; out: string }> {
  const run = ['run', '--prefix', '--name', 'd', '--restart', 'never', '--', 'python3', TWO, script]
  const quoted = [NODE, CLI, ...run].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ')
  // (pipefail is not POSIX sh: procward's status is said on a line of its own.)
  const sh = others.spawn('sh', ['-c', `{ ${quoted} 2>&1; echo "status $?"; } | ${reader}`])
  let out = ''
  sh.stdout?.on('data', (d) => (out += d))
  await new Promise((resolve) => sh.once('close', resolve))
  const status = out.match(/^status (\d+)$/m)
  return { code: status ? Number(status[1]) : null, out: out.replace(/^status \d+\n/m, '') }
}

describe('procward run --prefix: whole lines, in the order read', () => {
  it('ends a fragment without a newline when the other stream or procward speaks: never one line of two', async () => {
    const script = [
      '1:a fragment without a trailing newline',
      '2:a line on stderr\\n',
      '1:the rest of it\\n',
      '2:half on stderr',
      '1:stdout interrupts\\n',
      '2:and the other half\\n',
      '1:last words without a newline',
    ].join(';')
    const c = await runMerged(script)
    expect(c.code).toBe(0)
    const lines = unstamped(c.out)
    const ours = lines.filter((l) => l.startsWith('d: '))
    expect(ours).toEqual([
      'd: a fragment without a trailing newline',
      'd: a line on stderr',
      'd: the rest of it',
      'd: half on stderr',
      'd: stdout interrupts',
      'd: and the other half',
      'd: last words without a newline',
    ])
    // Every line is the daemon's or procward's, whole.
    expect(lines.filter((l) => l !== '' && !l.startsWith('d: ') && !l.startsWith('procward: d: '))).toEqual([])
    // procward's exit line comes after the last words, on a line of its own.
    const last = lines.indexOf('d: last words without a newline')
    const exit = lines.findIndex((l) => l.startsWith('procward: d: exit pid'))
    expect(exit).toBeGreaterThan(last)
  })

  // Under Bun the pipes are read on its event loop (a blocking read per pipe
  // on its threadpool stalled every fs call of the process: see
  // __test__/spawn/silent-pipes.test.ts), which may take a stderr line
  // before stdout written just before it while stdout is held back.
  it.skipIf(IS_BUN)('keeps stdout and stderr in the order read, through a slow reader', async () => {
    // 5 lines, a stderr line, 1000 lines (one write), a stderr line: 40 times.
    const round = (r: number) => [`1*5:out ${r}.%d\\n`, `2:err ${r}.a\\n`, `1*1000:out ${r}.b%d\\n`, `2:err ${r}.c\\n`]
    const script = Array.from({ length: 40 }, (_, r) => round(r))
      .flat()
      .join(';')
    // Reads 4 KiB at a time, a millisecond apart: procward's copy falls behind.
    const slow =
      "python3 -c 'import os, time\nwhile True:\n b = os.read(0, 4096)\n if not b: break\n os.write(1, b)\n time.sleep(0.001)'"
    const c = await runMerged(script, slow)
    expect(c.code).toBe(0)
    const got = unstamped(c.out).filter((l) => l.startsWith('d: '))
    const want: string[] = []
    for (let r = 0; r < 40; r++) {
      for (let i = 0; i < 5; i++) want.push(`d: out ${r}.${i}`)
      want.push(`d: err ${r}.a`)
      for (let i = 0; i < 1000; i++) want.push(`d: out ${r}.b${i}`)
      want.push(`d: err ${r}.c`)
    }
    expect(got.length).toBe(want.length)
    // The first line out of place, if any (a whole diff of 40 000 lines is no help).
    const first = got.findIndex((l, i) => l !== want[i])
    expect(first === -1 ? null : { at: first, got: got[first], want: want[first] }).toBeNull()
  })

  it('a new daemon’s first line is its own, after its predecessor’s unfinished one (fds 1 and 2 apart)', async () => {
    // Three daemons (two restarts), each writes a fragment and exits 1.
    const c = new Cli(others, [
      'run',
      '--prefix',
      '--name',
      'd',
      '--restart',
      'on-failure',
      '--max-restarts',
      '2',
      '--',
      'sh',
      '-c',
      'printf "run $$"; exit 1',
    ])
    expect((await c.done).code).toBe(1)
    const pids = c.pids('spawn')
    expect(pids.length).toBe(3)
    // stdout: exact bytes, but each fragment on a line of its own.
    expect(unstamped(c.out)).toEqual(pids.map((p) => `d: run ${p}`))
  })
})
