// The handover bench's daemon: an HTTP server answering its pid, on the
// socket it was handed (LISTEN_FDS, LISTEN_PID its own: procward's
// `listen`) or else on --port PORT, bound itself. SIGTERM: it stops
// accepting, finishes what it has, and exits 0.
const http = require('node:http')

const i = process.argv.indexOf('--port')
const server = http.createServer((_req, res) => {
  res.setHeader('content-type', 'application/json')
  res.end(JSON.stringify({ pid: process.pid }))
})
server.keepAliveTimeout = 1000
if (process.env.LISTEN_PID === String(process.pid) && Number(process.env.LISTEN_FDS) > 0) server.listen({ fd: 3 })
else server.listen(Number(process.argv[i + 1]), '127.0.0.1')
process.on('SIGTERM', () => {
  server.close(() => process.exit(0))
  server.closeIdleConnections?.()
})
