// pnpm bench ready: what a Supervisor's port ready check costs while a
// leftover listener (a stale daemon) holds the port, beside what one read of
// /proc/net/tcp{,6} every 100 ms alone costs (the probe before sock_diag,
// without its /proc scans). CPU of this process over the wait, as % of a core.
import fs from 'node:fs/promises'
import { createRequire } from 'node:module'
import net from 'node:net'

const require = createRequire(import.meta.url)
const { Supervisor } = require('../index.js')
const WAIT_MS = 5000

async function cpuOver(fn) {
  const c0 = process.cpuUsage()
  const t0 = performance.now()
  await fn()
  const c = process.cpuUsage(c0)
  return ((c.user + c.system) / 1000 / (performance.now() - t0)) * 100
}

export async function run() {
  const stale = net.createServer((c) => c.destroy())
  await new Promise((r) => stale.listen(0, '127.0.0.1', r))
  const port = stale.address().port
  const sup = await cpuOver(async () => {
    const s = new Supervisor({
      command: 'sleep',
      args: ['100'],
      ready: { port },
      readyTimeoutMs: WAIT_MS,
      restart: 'never',
    })
    await s.start().catch(() => {})
    await s.stop()
  })
  const procNet = await cpuOver(async () => {
    const end = performance.now() + WAIT_MS
    while (performance.now() < end) {
      await fs.readFile('/proc/net/tcp', 'latin1')
      await fs.readFile('/proc/net/tcp6', 'latin1').catch(() => '')
      await new Promise((r) => setTimeout(r, 100))
    }
  })
  stale.close()
  console.log(`\n## ready: { port } behind a leftover listener, ${WAIT_MS / 1000} s of waiting (% of one core)`)
  console.log('| probe | CPU | ratio |')
  console.log('|---|---|---|')
  console.log(`| procward Supervisor (sock_diag, leftover judged once) | ${sup.toFixed(2)} % | 1.0× |`)
  console.log(
    `| a read of /proc/net/tcp{,6} every 100 ms, nothing else | ${procNet.toFixed(2)} % | ${(procNet / sup).toFixed(1)}× |`,
  )
}
