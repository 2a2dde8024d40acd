// What both demos use: output, pauses, a free loopback port, and whether
// the daemon on it answers.
import { createServer, request } from 'node:http'

export const say = (...a) => console.log(...a)
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** A loopback port nothing listens on now. */
export function freePort() {
  return new Promise((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })
}

/** The HTTP status the server on `port` answers with, or null when none answers (within 500 ms). */
export function httpStatus(port) {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/', timeout: 500 }, (res) => {
      res.resume()
      resolve(res.statusCode)
    })
    req.on('error', () => resolve(null))
    req.on('timeout', () => req.destroy())
    req.end()
  })
}
