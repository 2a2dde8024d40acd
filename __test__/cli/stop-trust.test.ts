// DESIGN's trust rule for takeover and `procward stop`: "A record naming
// pid 1, this process, one of its ancestors, our process group or our
// session is never signalled." A record (ours, 0600) whose child is an
// ancestor of `procward stop` (a script run by the daemon that stops "its"
// service, or a stale record whose pid+identity names the shell) is
// refused, and the ancestor lives.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { getProcessInfo } from '../../index.js'
import { CLI, NODE } from '../cli/cli-process'
import { tempDirs, trackProcesses, waitFor } from '../helpers'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-stop-trust-')

describe('procward stop and the trust rule', () => {
  it('never signals its own ancestor named as the child by a record', async () => {
    const file = join(tempDir(), 'state.json')
    // The shell waits for a line, then runs `procward stop` and reports.
    const sh = others.spawn(
      'sh',
      ['-c', `read x; "${NODE}" "${CLI}" stop "${file}" 2>&1; echo "stop status $?"; echo alive`],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    )
    let out = ''
    sh.stdout?.on('data', (d) => (out += d))
    const end = new Promise<{ code: number | null; signal: string | null }>((r) =>
      sh.once('exit', (code, signal) => r({ code, signal })),
    )
    const pid = sh.pid as number
    await waitFor(() => getProcessInfo(pid)?.name === 'sh', 5000, 'the shell')
    const info = getProcessInfo(pid)
    const now = new Date().toISOString()
    writeFileSync(
      file,
      JSON.stringify({
        version: 1,
        name: 'svc',
        state: 'running',
        supervisor: { pid: 4194304, identity: '' },
        child: {
          pid,
          identity: info?.identity,
          pgid: info?.pgid,
          session: null,
          command: 'sh',
          args: [],
          aliveAt: now,
        },
        restarts: 0,
        lastExit: null,
        updatedAt: now,
      }),
      { mode: 0o600 },
    )
    sh.stdin?.end('go\n')
    const e = await end
    expect(out).toContain('alive')
    expect(e).toEqual({ code: 0, signal: null })
  })
})
