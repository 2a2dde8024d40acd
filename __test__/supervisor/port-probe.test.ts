// The port ready check's probe: the kernel's own list of listeners
// (sock_diag), agreeing with /proc/net/tcp, and a leftover listener judged
// once — not a /proc scan per probe (that cost a tenth of a core while a
// stale daemon held the port).
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import net from 'node:net'
import { describe, expect, it } from 'vitest'
import { Supervisor } from '../../index.js'
import { freePort, trackProcesses, waitFor } from '../helpers'

trackProcesses()
const require = createRequire(__filename)
const native = require('../../binding.js') as { listeningInodes(port: number): string[] }
const procfs = require('../../lib/supervisor/procfs.js') as {
  childListens: (...args: unknown[]) => Promise<boolean | null>
}

/** What /proc/net/tcp{,6} lists as listening on `port` (state 0A). */
function procNetListeners(port: number): string[] {
  const out: string[] = []
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = ''
    try {
      text = readFileSync(table, 'latin1')
    } catch {
      continue
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/)
      if (f.length < 10 || f[3] !== '0A') continue
      const local = f[1] as string
      if (Number.parseInt(local.slice(local.lastIndexOf(':') + 1), 16) === port) out.push(f[9] as string)
    }
  }
  return out.sort()
}

const listen = (server: net.Server, port: number, host: string) =>
  new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => resolve())
  })

describe.skipIf(process.platform !== 'linux')('the listeners of a port', () => {
  it('sock_diag lists what /proc/net/tcp lists: IPv4 and IPv6, and nothing once closed', async () => {
    const port = await freePort()
    const v4 = net.createServer()
    await listen(v4, port, '127.0.0.1')
    const v6 = net.createServer()
    const hasV6 = await listen(v6, port, '::1').then(
      () => true,
      () => false,
    )
    try {
      const seen = native.listeningInodes(port).sort()
      expect(seen.length).toBe(hasV6 ? 2 : 1)
      expect(seen).toEqual(procNetListeners(port))
    } finally {
      v4.close()
      if (hasV6) v6.close()
    }
    await waitFor(() => native.listeningInodes(port).length === 0, 2000, 'the listeners to close')
  })

  it('refuses what is not a port', () => {
    for (const bad of [0, -1, 65536, 1.5, Number.NaN]) {
      expect(() => native.listeningInodes(bad)).toThrow(RangeError)
    }
  })

  it('a leftover listener is judged once, and the child is ready at its own listener', async () => {
    const port = await freePort()
    const stale = net.createServer((c) => c.destroy())
    await listen(stale, port, '127.0.0.1')
    let scans = 0
    const original = procfs.childListens
    procfs.childListens = (...args: unknown[]) => {
      scans++
      return original(...args)
    }
    try {
      // The child takes the port over with SO_REUSEPORT... not from node:
      // it waits for the leftover to go, then listens (a restart of a daemon
      // whose predecessor lingers).
      const script = `const net=require('net');const go=()=>{const s=net.createServer();s.once('error',()=>setTimeout(go,20));s.listen(${port},'127.0.0.1')};setTimeout(go,1500)`
      const s = new Supervisor({
        command: process.execPath,
        args: ['-e', script],
        ready: { port },
        readyTimeoutMs: 20_000,
        restart: 'never',
        spawn: { stop: { graceMs: 100 } },
      })
      const started = s.start()
      await new Promise((r) => setTimeout(r, 1200))
      stale.close()
      await started
      expect(s.state).toBe('running')
      // One judgement of the leftover, not one per 100 ms probe.
      expect(scans).toBeLessThanOrEqual(2)
      await s.stop()
    } finally {
      procfs.childListens = original
      stale.close()
    }
  })
})
