// What `procward run` writes: its own log lines (with a timestamp unless
// stderr is the journal's, which stamps them itself), and with --prefix the
// child's output, read through pipes and copied with a prefix on each line.
// Copying never blocks our event loop: writes go through the thread pool
// (a pipe to a stalled reader blocks a thread, not the supervisor), one at
// a time per file (fds 1 and 2 are one when they name the same file), in
// the order read, and a child's pipe is paused while its copy is
// behind, so a slow reader slows the child as it would without us. A reader
// that is gone breaks the child's pipe as it would without us: we close our
// end of it, and the child's next write gets EPIPE (SIGPIPE).

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

/** Whether fds 1 and 2 are one file (a pipe, socket or terminal): `2>&1`, the journal's stream. */
function sameFile() {
  try {
    const a = fs.fstatSync(1, { bigint: true })
    const b = fs.fstatSync(2, { bigint: true })
    return a.dev === b.dev && a.ino === b.ino
  } catch {
    return false
  }
}

/**
 * Asynchronous writes, in the order given, of bytes to descriptors this
 * process shares (one or both of 1 and 2 when they are the same file: one
 * queue keeps what goes there in arrival order).
 */
class FdWriter {
  /** [fd, buf] pairs not yet handed to a write. */
  #queue = []
  #queued = 0
  #writing = false
  #broken = false
  #drainWaiters = []
  #lowWaiters = []
  #brokenWaiters = []
  #retry = null

  /** false once behind by HIGH_WATER: wait for onLow() before more. */
  write(fd, buf) {
    if (this.#broken || buf.length === 0) return true
    this.#queue.push([fd, buf])
    this.#queued += buf.length
    this.#pump()
    return this.#queued < HIGH_WATER
  }

  /** Behind by HIGH_WATER or more. */
  behind() {
    return this.#queued >= HIGH_WATER
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
    // The queue's head, and what follows it for the same fd, in one write.
    const fd = this.#queue[0][0]
    let n = 1
    while (n < this.#queue.length && this.#queue[n][0] === fd) n++
    const bufs = this.#queue.splice(0, n).map((e) => e[1])
    const buf = bufs.length === 1 ? bufs[0] : Buffer.concat(bufs)
    this.#writing = true
    fs.write(fd, buf, 0, buf.length, null, (err, written) => {
      this.#writing = false
      if (err) {
        if (err.code === 'EAGAIN') {
          // Someone else made the shared descriptor non-blocking: try again
          // shortly rather than spin or drop.
          this.#queue.unshift([fd, buf])
          this.#retry = setTimeout(() => {
            this.#retry = null
            this.#pump()
          }, 10)
          return
        }
        // EPIPE and the like: the reader is gone; what follows has nowhere
        // to go. Nothing waits for room any more.
        this.#broken = true
        this.#queue = []
        this.#queued = 0
        this.#emitLow()
        for (const w of this.#brokenWaiters.splice(0)) w()
        this.#settle()
        return
      }
      this.#queued -= written
      if (written < buf.length) this.#queue.unshift([fd, buf.subarray(written)])
      if (this.#queued < HIGH_WATER) this.#emitLow()
      this.#pump()
      this.#settle()
    })
  }

  /** Calls `fn` once the reader is gone (at once if it is). */
  onBroken(fn) {
    if (this.#broken) fn()
    else this.#brokenWaiters.push(fn)
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

/** Read order across every stream copied: a chunk's place in it. */
let readSeq = 0

/**
 * One place lines end up (fd 1, fd 2, or both when they are one file), and
 * the line there left unfinished: a source's fragment without its newline
 * is ended with one the moment another source (the other stream, another
 * child's copy, our own log) writes there, and that source's next bytes
 * start a line of their own, prefixed. So a prefixed line is never joined
 * to anyone else's.
 *
 * Chunks go out in the order they were read from the pipes, not the order
 * their streams hand them on: a paused stream goes on reading into its own
 * buffer, so after a pause the other stream may hand on data read later. A
 * chunk is held while a source here still has an earlier one in its
 * stream's buffer.
 */
class Destination {
  writer = new FdWriter()
  #now
  /** The source whose line is unfinished here (null: at a line's start). */
  #open = null
  /** Sources writing here: { fd, label, pending: [[seq, chunk]] read, held: [[seq, chunk]] handed on }. */
  #sources = new Set()
  #own = { fd: 2, label: '', pending: [], held: [], own: true }

  /** `now()`: what goes before a prefix (the time, or nothing). */
  constructor(now) {
    this.#now = now
    this.#sources.add(this.#own)
  }

  /** A source ({ fd, label }) that will write here; `done(source)` when it ends. */
  add(source) {
    source.pending = []
    source.held = []
    this.#sources.add(source)
    return source
  }

  done(source) {
    // What its stream still buffered is never handed on (a destroyed
    // stream); what it handed on is still written, in its place.
    source.pending = []
    source.ended = true
    this.#flush()
  }

  /** `source` read a chunk (its stream has it buffered): its place in the order. */
  read(source, chunk) {
    source.pending.push([++readSeq, chunk])
  }

  /** The stream handed `chunk` on; false once behind (see FdWriter.write). */
  write(source, chunk) {
    if (chunk.length === 0) return this.writer.behind() === false
    const first = source.pending[0]
    // As read (the usual case), or (a stream that split or joined what it
    // read) in order from now.
    const seq = first !== undefined && first[1] === chunk ? source.pending.shift()[0] : ++readSeq
    if (first !== undefined && first[1] !== chunk) source.pending = []
    source.held.push([seq, chunk])
    this.#flush()
    return this.writer.behind() === false
  }

  /** One whole line of ours on fd 2, in its place after what was read before it. */
  line(text) {
    this.#own.held.push([++readSeq, Buffer.from(text)])
    this.#flush()
  }

  /** Writes held chunks in read order, up to the first still in a stream's buffer. */
  #flush() {
    for (;;) {
      let next = null
      let nextSeq = Number.POSITIVE_INFINITY
      let waiting = false
      for (const src of this.#sources) {
        const p = src.pending[0]
        if (p !== undefined && p[0] < nextSeq) {
          nextSeq = p[0]
          waiting = true
        }
        const h = src.held[0]
        if (h !== undefined && h[0] < nextSeq) {
          nextSeq = h[0]
          next = src
          waiting = false
        }
      }
      if (next === null || waiting) break
      const [, chunk] = next.held.shift()
      this.#emit(next, chunk)
    }
    for (const src of this.#sources) if (src.ended && src.held.length === 0) this.#sources.delete(src)
  }

  #emit(source, chunk) {
    if (this.#open !== null && this.#open !== source) {
      this.writer.write(this.#open.fd, Buffer.from('\n'))
      this.#open = null
    }
    if (source.own) {
      this.writer.write(source.fd, chunk)
      return
    }
    const parts = []
    let atLineStart = this.#open !== source
    let start = 0
    while (start < chunk.length) {
      if (atLineStart) {
        parts.push(Buffer.from(`${this.#now()}${source.label}`))
        atLineStart = false
      }
      const nl = chunk.indexOf(10, start)
      const end = nl === -1 ? chunk.length : nl + 1
      parts.push(chunk.subarray(start, end))
      if (nl !== -1) atLineStart = true
      start = end
    }
    if (chunk.length > 0) this.#open = chunk[chunk.length - 1] === 10 ? null : source
    this.writer.write(source.fd, Buffer.concat(parts))
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
  // With --prefix our lines share fd 2 with the children's stderr copies,
  // and fd 2 may be fd 1's file: one destination per file keeps them in
  // order, and lines whole.
  const now = () => (stamp ? `${new Date().toISOString()} ` : '')
  const err = prefix ? new Destination(now) : null
  const out = prefix ? (sameFile() ? err : new Destination(now)) : null
  /** Streams being copied → the promise of their end. */
  const copies = new Set()

  function line(text) {
    const s = `${now()}${escapeControl(text)}\n`
    if (err !== null) err.line(s)
    else if (!process.stderr.destroyed) process.stderr.write(s)
  }

  /** Copies `stream` to `dest` as `source` ({ fd, label }), bytes otherwise exact. */
  function copy(stream, dest, source) {
    dest.add(source)
    const ended = new Promise((resolve) => {
      stream.once('end', resolve)
      stream.once('close', resolve)
      stream.once('error', resolve)
    })
    const entry = { stream, ended }
    copies.add(entry)
    ended.then(() => {
      copies.delete(entry)
      dest.done(source)
    })
    dest.writer.onBroken(() => stream.destroy())
    // Every chunk read from the pipe reaches the stream's push() at once,
    // whether the stream is flowing or paused: that is its place in the
    // read order (see Destination).
    const push = stream.push
    stream.push = function (chunk, encoding) {
      if (chunk != null && chunk.length > 0) dest.read(source, chunk)
      return push.call(this, chunk, encoding)
    }
    stream.on('data', (chunk) => {
      if (!dest.write(source, chunk)) {
        stream.pause()
        dest.writer.onLow(() => stream.resume())
      }
    })
  }

  function pipe(child, name) {
    if (out === null) return
    // A source per stream of each child: a new child's first line is its own.
    if (child.stdout) copy(child.stdout, out, { fd: 1, label: `${name}: ` })
    if (child.stderr) copy(child.stderr, err, { fd: 2, label: `${name}: ` })
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
    await Promise.race([Promise.all([out.writer.drained(), err.writer.drained()]), cap])
  }

  return { line, pipe, settle, abandon: () => abandoned() }
}

module.exports = { createOutput, underJournal }
