// What `procward run` writes: its own log lines (with a timestamp unless
// stderr is the journal's, which stamps them itself), and with --prefix the
// child's output, read through pipes and copied with a prefix on each line.
// Copying never blocks our event loop: writes go through the thread pool
// (a pipe to a stalled reader blocks a thread, not the supervisor), one at
// a time per descriptor, and a child's pipe is paused while its copy is
// behind, so a slow reader slows the child as it would without us.

const fs = require('node:fs')
const { escapeControl } = require('./common.js')

/** Is fd 2 the stream systemd's journal gave us (JOURNAL_STREAM = dev:inode)? */
function underJournal() {
  const js = process.env.JOURNAL_STREAM
  if (!js) return false
  const [dev, ino] = js.split(':')
  try {
    const st = fs.fstatSync(2, { bigint: true })
    return String(st.dev) === dev && String(st.ino) === ino
  } catch {
    return false
  }
}

/** Behind by this much, a child's pipe is paused. */
const HIGH_WATER = 64 * 1024

/** Asynchronous, ordered writes of bytes to a descriptor this process shares. */
class FdWriter {
  #fd
  #queue = []
  #queued = 0
  #writing = false
  #broken = false
  #drainWaiters = []
  #lowWaiters = []
  #retry = null

  constructor(fd) {
    this.#fd = fd
  }

  /** false once behind by HIGH_WATER: wait for drained() before more. */
  write(buf) {
    if (this.#broken || buf.length === 0) return true
    this.#queue.push(buf)
    this.#queued += buf.length
    this.#pump()
    return this.#queued < HIGH_WATER
  }

  /** Resolves once everything written so far is out (or can never be). */
  drained() {
    if (this.#queued === 0 && !this.#writing) return Promise.resolve()
    return new Promise((resolve) => this.#drainWaiters.push(resolve))
  }

  /** Written, or given up (the reader is gone). */
  #settle() {
    if (this.#queued > 0 || this.#writing) return
    const waiters = this.#drainWaiters
    this.#drainWaiters = []
    for (const w of waiters) w()
  }

  #pump() {
    if (this.#writing || this.#retry !== null || this.#queue.length === 0) return
    const buf = this.#queue.length === 1 ? this.#queue[0] : Buffer.concat(this.#queue)
    this.#queue = []
    this.#writing = true
    fs.write(this.#fd, buf, 0, buf.length, null, (err, n) => {
      this.#writing = false
      if (err) {
        if (err.code === 'EAGAIN') {
          // Someone else made the shared descriptor non-blocking: try again
          // shortly rather than spin or drop.
          this.#queue.unshift(buf)
          this.#retry = setTimeout(() => {
            this.#retry = null
            this.#pump()
          }, 10)
          return
        }
        // EPIPE and the like: the reader is gone; what follows has nowhere to go.
        this.#broken = true
        this.#queue = []
        this.#queued = 0
        this.#settle()
        return
      }
      this.#queued -= n
      if (n < buf.length) this.#queue.unshift(buf.subarray(n))
      if (this.#queued < HIGH_WATER) this.#emitLow()
      this.#pump()
      this.#settle()
    })
  }

  /** Calls `fn` once the queue is below HIGH_WATER again. */
  onLow(fn) {
    if (this.#queued < HIGH_WATER) fn()
    else this.#lowWaiters.push(fn)
  }

  #emitLow() {
    const waiters = this.#lowWaiters
    this.#lowWaiters = []
    for (const w of waiters) w()
  }
}

/**
 * The log: `line(text)` writes one line of ours on stderr (its control
 * characters escaped: a name or a command cannot forge a line); `pipe(child,
 * name)` copies a child's piped stdout and stderr with a prefix (only with
 * --prefix); `settle()` waits for the copies to end and be written out.
 */
function createOutput({ stamp, prefix }) {
  // Our log's reader may go away (`2>&1 | logger`, and the logger
  // restarts): EPIPE ends the log, never the supervisor (which would leave
  // the child's group behind). Node raises it as an 'error' on the stream,
  // uncaught without a listener; the stream is destroyed, and our lines go
  // nowhere from then on. The same for our stdout.
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {})
  const out = prefix ? new FdWriter(1) : null
  const err = prefix ? new FdWriter(2) : null
  /** Streams being copied → the promise of their end. */
  const copies = new Set()
  const now = () => (stamp ? `${new Date().toISOString()} ` : '')

  function line(text) {
    const s = `${now()}${escapeControl(text)}\n`
    // With --prefix our lines share fd 2 with the child's stderr copy: one
    // writer keeps them in order.
    if (err !== null) err.write(Buffer.from(s))
    else if (!process.stderr.destroyed) process.stderr.write(s)
  }

  /** Copies `stream` to `writer`, `label` before each line, bytes otherwise exact. */
  function copy(stream, writer, label) {
    let atLineStart = true
    const ended = new Promise((resolve) => {
      stream.once('end', resolve)
      stream.once('close', resolve)
      stream.once('error', resolve)
    })
    const entry = { stream, ended }
    copies.add(entry)
    ended.then(() => copies.delete(entry))
    stream.on('data', (chunk) => {
      const parts = []
      let start = 0
      while (start < chunk.length) {
        if (atLineStart) {
          parts.push(Buffer.from(`${now()}${label}`))
          atLineStart = false
        }
        const nl = chunk.indexOf(10, start)
        const end = nl === -1 ? chunk.length : nl + 1
        parts.push(chunk.subarray(start, end))
        if (nl !== -1) atLineStart = true
        start = end
      }
      if (!writer.write(Buffer.concat(parts))) {
        stream.pause()
        writer.onLow(() => stream.resume())
      }
    })
  }

  function pipe(child, name) {
    if (out === null) return
    if (child.stdout) copy(child.stdout, out, `${name}: `)
    if (child.stderr) copy(child.stderr, err, `${name}: `)
  }

  /**
   * The child is gone: its pipes end (at once, unless something outside its
   * group still holds them: not waited for beyond `endMs`, except by a copy
   * paused behind a slow reader, which has lost nothing yet), then what was
   * read is written out. All within `totalMs`, or until `abandon()`.
   */
  let abandoned = null
  const abandonedP = new Promise((resolve) => {
    abandoned = resolve
  })
  async function settle({ endMs = 1000, totalMs = 5000 } = {}) {
    if (out === null) return
    const bound = (ms) =>
      new Promise((resolve) => {
        setTimeout(resolve, ms).unref()
      })
    const cap = Promise.race([bound(totalMs), abandonedP])
    await Promise.race([Promise.all([...copies].map((c) => c.ended)), bound(endMs), cap])
    const behind = [...copies].filter((c) => c.stream.isPaused())
    if (behind.length > 0) await Promise.race([Promise.all(behind.map((c) => c.ended)), cap])
    for (const c of copies) c.stream.destroy()
    await Promise.race([Promise.all([out.drained(), err.drained()]), cap])
  }

  return { line, pipe, settle, abandon: () => abandoned() }
}

module.exports = { createOutput, underJournal }
