// Pipes that say nothing must not hold up the rest of the process: under
// Bun, a child's stdout read with fs.createReadStream took one threadpool
// thread per silent pipe, and with as many silent pipes as the pool has
// threads every fs call of the process waited until a child spoke (seen
// as a reload's record written only once its successor printed). Bounded
// by order, not time: the fs call must finish while every child is still
// silent, and each child's words then arrive whole.
import { readFile } from 'node:fs/promises'
import { describe, expect, it } from 'vitest'
import { trackProcesses, waitFor } from '../helpers'

const { sup } = trackProcesses()

describe('silent stdout pipes', () => {
  it('four children saying nothing on their pipes hold up no fs call; their words arrive after', async () => {
    // Each speaks only when told (SIGUSR1), then exits.
    const script = 'trap "echo spoke $$; exit 0" USR1; echo >/dev/null; while :; do sleep 0.05; done'
    const children = Array.from({ length: 4 }, () => sup('sh', ['-c', script], { stdio: ['ignore', 'pipe', 'ignore'] }))
    const said = children.map(() => '')
    for (const [i, c] of children.entries()) {
      c.stdout?.on('data', (d: Buffer) => {
        said[i] += String(d)
      })
    }
    for (let i = 0; i < 5; i++) await readFile('/proc/self/status')
    expect(said).toEqual(['', '', '', ''])
    for (const c of children) c.kill('SIGUSR1')
    await waitFor(() => said.every((s, i) => s === `spoke ${children[i]?.pid}\n`), 10_000, 'every child heard')
    await Promise.all(children.map((c) => new Promise((r) => (c.exitInfo ? r(null) : c.once('exit', r)))))
  })
})
