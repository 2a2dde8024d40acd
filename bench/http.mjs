// The benchmarks' side of a served port: a free port to give a daemon, and
// which pid answers on it (the daemons answer `{ "pid": … }`), for the
// restart benchmarks (supervisor, restart).
import http from 'node:http'
import net from 'node:net'

const sleep = (t) => new Promise((r) => setTimeout(r, t))

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })
}

/** The pid that answers GET / on `port`, or null (no answer within 1 s, or not a daemon's). */
export function get(port) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      let body = ''
      res.on('data', (d) => (body += d))
      res.on('end', () => {
        try {
          resolve(JSON.parse(body).pid)
        } catch {
          resolve(null)
        }
      })
    })
    req.on('error', () => resolve(null))
    req.setTimeout(1000, () => req.destroy(new Error('timeout')))
  })
}

/** Once a pid other than `old` answers on `port`: that pid. */
export async function servedBy(port, old, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const pid = await get(port)
    if (pid !== null && pid !== old) return pid
    if (Date.now() > deadline) throw new Error(`port ${port} not served again within ${timeoutMs} ms`)
    await sleep(1)
  }
}
