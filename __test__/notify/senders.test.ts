// Who may speak for a child on its own NOTIFY_SOCKET (DESIGN "Layer 3,
// corrected": notify senders): the child, a process descending from it (its
// parent chain when the message is read), a member of its cgroup. Its
// process group is no test: any process of our session may join it with
// setpgid(2), as the outsider below does. Real python clients, /proc checked.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { readSupervisorState, Supervisor, type SupervisorOptions } from '../../index.js'
import { tempDirs, trackProcesses, waitFor } from '../helpers'
import { environOf, native } from './manager'

const { others } = trackProcesses()
const tempDir = tempDirs('procward-notify-senders-')

const SEND = join(__dirname, 'fixtures', 'sd-notify.py')
// Runs the rest of its arguments in process group argv[1] of our session
// (0: in a session and group of its own).
const IN_GROUP =
  'import os, sys\ng = int(sys.argv[1])\nos.setsid() if g == 0 else os.setpgid(0, g)\nos.execvp(sys.argv[2], sys.argv[2:])'

const supervisors: Supervisor[] = []
function supervisor(options: Partial<SupervisorOptions> & Pick<SupervisorOptions, 'command'>): Supervisor {
  const s = new Supervisor({ ready: { notify: true }, readyTimeoutMs: 10_000, restart: 'never', ...options })
  supervisors.push(s)
  return s
}
afterEach(async () => {
  for (const s of supervisors.splice(0)) await s.stop({ signal: 'SIGKILL' }).catch(() => {})
})

/** Field `n` (1-based, as proc(5) counts) of /proc/<pid>/stat, or null when gone. */
function statField(pid: number, n: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[n - 3])
  } catch {
    return null
  }
}

describe.skipIf(!native.notifySupported())('notify senders', () => {
  // First in this file: the refusal warning is said once per process.
  it('refuses READY=1 from a process that joined the child’s process group (setpgid) without descending from it', async () => {
    const dir = tempDir()
    const go = join(dir, 'go')
    const seen: Error[] = []
    const onWarning = (w: Error) => seen.push(w)
    process.on('warning', onWarning)
    try {
      // The child speaks only once told to.
      const sup = supervisor({
        command: 'sh',
        args: ['-c', `exec python3 ${SEND} 'READY=1\\nSTATUS=child' --trigger ${go} --linger`],
        stateFile: join(dir, 'state.json'),
      })
      let ready = false
      const started = sup.start().then(() => (ready = true))
      await waitFor(() => sup.child !== null, 5000, 'the spawn')
      const child = sup.child as NonNullable<typeof sup.child>
      expect(statField(child.pid, 5)).toBe(child.pid) // it leads its group
      const address = (await environOf(child.pid)).get('NOTIFY_SOCKET') as string
      // Started by us (same session), not by the child: joins its group, then sends.
      const outsider = others.spawn(
        'python3',
        ['-c', IN_GROUP, String(child.pid), 'python3', SEND, 'READY=1\\nSTATUS=outsider', '--linger'],
        { env: { ...process.env, NOTIFY_SOCKET: address } },
      )
      const refused = () => seen.filter((w) => (w as { code?: string }).code === 'PROCWARD_NOTIFY_REFUSED')
      await waitFor(() => refused().length > 0 || ready, 10_000, 'the outsider judged')
      // It was in the group when judged, and still there to be looked at.
      expect(statField(outsider.pid as number, 5)).toBe(child.pid)
      expect(statField(outsider.pid as number, 4)).toBe(process.pid)
      expect(ready).toBe(false)
      expect(refused().length).toBe(1)
      expect(sup.state).toBe('starting')
      expect(readSupervisorState(join(dir, 'state.json'))?.child?.status ?? null).toBeNull()
      // The child itself is still heard.
      writeFileSync(go, '')
      await started
      expect(sup.state).toBe('running')
      await waitFor(() => readSupervisorState(join(dir, 'state.json'))?.child?.status === 'child', 5000, 'STATUS=child')
    } finally {
      process.off('warning', onWarning)
    }
  })

  it('takes READY=1 from a descendant in a session and group of its own (no cgroup)', async () => {
    // sh → python (setsid) → python: the sender's parent chain leads to the
    // child; its group and session do not.
    const sup = supervisor({
      command: 'sh',
      args: ['-c', `python3 -c '${IN_GROUP}' 0 python3 ${SEND} READY=1 --linger & exec sleep 100`],
    })
    await sup.start()
    expect(sup.state).toBe('running')
    const child = sup.child as NonNullable<typeof sup.child>
    const senders = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'latin1').trim().split(/\s+/)
    expect(senders.length).toBe(1)
    const sender = Number(senders[0])
    others.track(sender) // out of the child's group: its stop does not reach it
    expect(statField(sender, 4)).toBe(child.pid)
    expect(statField(sender, 5)).toBe(sender) // a group of its own
    expect(statField(sender, 6)).toBe(sender) // and a session
  })
})
