// The stream a line ready check reads (the child's stdout or stderr, forced
// to a pipe): its lines go to the check until it passes; each chunk then
// goes either to the 'stdout'/'stderr' line events (someone listens) or,
// byte for byte, to this process's own fd 1 or 2 (no one does).
//
// The copy keeps what 'inherit' would have given: the same bytes (Buffers,
// never decoded; the line splitting for the check and the events works on
// a copy of its own), and the same backpressure — the child's pipe is
// paused while its chunk is being written, so a destination that does not
// drain stops the child (its pipe fills), never grows this process.
//
// And it never blocks the event loop, whatever fd 1 and 2 are. Node writes
// process.stdout synchronously when it is a terminal or a file (a pty whose
// reader stopped froze the whole supervisor), asynchronously when it is a
// pipe or a socket. So: a pipe or socket is written through process.stdout
// itself (libuv's non-blocking stream; 'drain' is the backpressure; our
// chunks keep their order among the application's own writes); anything
// else (a terminal, a file, /dev/null) with fs.write, which runs on a libuv
// threadpool thread — a stalled terminal blocks that thread, not the loop.
// One writer per fd, writing one chunk at a time, so at most one threadpool
// thread per fd waits on a stalled destination, however many supervisors
// copy. O_NONBLOCK may not be set on fd 1 itself (a file description
// shared with the shell that started us), nor may a tty.WriteStream be used
// (Node's tty stream makes its fd blocking again).
//
// A terminal on Linux is written through a file description of our own,
// opened non-blocking from /proc/self/fd/N (a tty's open makes a new one;
// the shell's stays as it was): fs.write then never waits in the
// threadpool, and a full terminal is tried again on a timer. A write
// pending in the threadpool would hold the event loop for good once the
// terminal's reader stalls (Ctrl-S, a pty nobody reads), and cannot be
// unref'd; a timer can: once the terminal has taken nothing for STALL_MS,
// the retries no longer keep the process alive (while the child runs, the
// supervisor does; after it, what a stalled terminal refuses is lost, as a
// child blocked on it and then stopped would have lost it). Elsewhere, a
// terminal is written by fs.write on the threadpool as before.
//
// A pipe whose reader went away (EPIPE) is the copy's end, not the
// supervisor's: the error of our write is taken (the application's own
// errors on the stream still reach it, or crash it as they would without
// us), and what the child writes is read and dropped from then on. Dropped
// rather than its pipe closed: the same stream feeds the ready check and
// the line events, and a child dying of SIGPIPE because a log reader
// restarted would turn into a restart loop.

const fs = require('node:fs')
const tty = require('node:tty')
const os = require('../os')

const noop = () => {}
const { WINDOWS } = os

/** A line longer than this (in bytes) is handed on in pieces: a pipe never stalls on it. */
const MAX_LINE = 64 * 1024
const NL = 0x0a
const CR = 0x0d

/** Where, in `buf` (longer than `max`), a piece of at most `max` bytes may end without cutting a UTF-8 character. */
function pieceEnd(buf, max) {
  let end = max
  // Back over continuation bytes (10xxxxxx), at most three.
  for (let i = 0; i < 3 && end > 0 && (buf[end] & 0xc0) === 0x80; i++) end--
  return end > 0 ? end : max
}

/**
 * Cuts bytes into lines. Lines are handed on as strings without the "\n"
 * (nor the "\r" of a "\r\n"), decoded as UTF-8 (bytes that are not become
 * U+FFFD); a line longer than MAX_LINE bytes in pieces (cut between
 * characters). The bytes of the line not yet ended can be taken back.
 */
class LineSplitter {
  #pending = []
  #size = 0

  /** Hands `onLine` each line `chunk` (a Buffer) ends. */
  push(chunk, onLine) {
    let start = 0
    let nl = chunk.indexOf(NL)
    while (nl >= 0) {
      const line = this.#size === 0 ? chunk.subarray(start, nl) : this.#take(chunk.subarray(start, nl))
      onLine(text(pieces(line, onLine)))
      start = nl + 1
      nl = chunk.indexOf(NL, start)
    }
    if (start < chunk.length) {
      this.#pending.push(chunk.subarray(start))
      this.#size += chunk.length - start
    }
    if (this.#size > MAX_LINE) {
      const rest = pieces(this.#take(null), onLine)
      this.#pending.push(rest)
      this.#size = rest.length
    }
  }

  /** At the end of the stream: what is left, as a last line. */
  end(onLine) {
    if (this.#size > 0) onLine(text(pieces(this.#take(null), onLine)))
  }

  /** The bytes of the line not ended yet (null: none), no longer this splitter's. */
  takeRest() {
    return this.#size === 0 ? null : this.#take(null)
  }

  /** Forgets the line not ended yet. */
  reset() {
    this.#pending = []
    this.#size = 0
  }

  #take(tail) {
    if (tail !== null) this.#pending.push(tail)
    const all = this.#pending.length === 1 ? this.#pending[0] : Buffer.concat(this.#pending)
    this.#pending = []
    this.#size = 0
    return all
  }
}

/** Hands `onLine` the first MAX_LINE-byte pieces of a long `line`; returns the rest (at most MAX_LINE bytes). */
function pieces(line, onLine) {
  let rest = line
  while (rest.length > MAX_LINE) {
    const end = pieceEnd(rest, MAX_LINE)
    onLine(rest.toString('utf8', 0, end))
    rest = rest.subarray(end)
  }
  return rest
}

/** A line's bytes as its text: UTF-8, without a trailing "\r". */
function text(line) {
  const end = line.length > 0 && line[line.length - 1] === CR ? line.length - 1 : line.length
  return line.toString('utf8', 0, end)
}

// ---- the copy -------------------------------------------------------------------------

/** A terminal that has taken nothing for this long is stalled: its retries no longer hold the loop. */
const STALL_MS = 1000

/** Writes of ours to process.stdout/stderr that failed: their 'error' is ours, not the application's. */
const ownErrors = new WeakSet()
const guarded = new WeakSet()

/**
 * Takes the 'error' a failed write of ours raises on `stream`, which would
 * otherwise be uncaught (Node's process.stdout has no listener): the stream
 * is destroyed, and the copy drops what comes next. Any other error is the
 * application's: thrown as it would be without us, unless it listens.
 */
function guard(stream) {
  if (guarded.has(stream)) return
  guarded.add(stream)
  stream.on('error', function onCopyError(err) {
    if (ownErrors.has(err)) return
    if (stream.listeners('error').every((l) => l === onCopyError)) throw err
  })
}

/**
 * A non-blocking file description of our own for the terminal on `fd`
 * (lib/os.js); null where it cannot be had (then fd itself is written,
 * blocking a threadpool thread while the terminal is full).
 */
function ownTerminal(fd) {
  return os.openOwnTerminal(fd)
}

/** How fd is written without blocking the loop: 'stream' (process.stdout/stderr), 'fs' (threadpool) or 'none'. */
function modeOf(fd) {
  let st
  try {
    st = fs.fstatSync(fd)
  } catch {
    return 'none' // closed: what the child writes goes nowhere, as it would with 'inherit'
  }
  if (st.isFIFO() || st.isSocket()) return 'stream'
  // Windows writes its console asynchronously (and fs.write there would
  // bypass the console's encoding).
  if (WINDOWS && tty.isatty(fd)) return 'stream'
  return 'fs'
}

/** Calls `done` once `stream` has drained, or can no longer be written. */
function whenDrained(stream, done) {
  const finish = () => {
    stream.removeListener('drain', finish)
    stream.removeListener('close', finish)
    done()
  }
  stream.on('drain', finish)
  stream.on('close', finish)
}

/** Writes chunks to one of this process's fds (1 or 2), one at a time, in order. */
class FdWriter {
  #fd
  /** What fs.write writes: #fd, or our own non-blocking description of its terminal. */
  #target = null
  #mode = null
  #queue = []
  #busy = false
  /** When the terminal last refused a write with nothing taken since (null: it takes). */
  #stalledSince = null

  constructor(fd) {
    this.#fd = fd
  }

  /** Queues `buf`; `done` once it has been written (or can never be). */
  write(buf, done) {
    this.#queue.push({ buf, done })
    if (!this.#busy) this.#next()
  }

  #next() {
    const item = this.#queue.shift()
    if (item === undefined) {
      this.#busy = false
      return
    }
    this.#busy = true
    const finish = () => {
      item.done()
      this.#next()
    }
    if (this.#mode === null) {
      this.#mode = modeOf(this.#fd)
      this.#target = this.#mode === 'fs' && tty.isatty(this.#fd) ? (ownTerminal(this.#fd) ?? this.#fd) : this.#fd
    }
    if (this.#mode === 'stream') this.#toStream(item.buf, finish)
    else if (this.#mode === 'fs') this.#toFd(item.buf, 0, 1, finish)
    else finish()
  }

  #toStream(buf, finish) {
    const stream = this.#fd === 1 ? process.stdout : process.stderr
    // Its reader gone (EPIPE destroyed it): the copy goes nowhere.
    if (stream.destroyed || stream.writableEnded) return finish()
    guard(stream)
    const written = stream.write(buf, (err) => {
      if (err) ownErrors.add(err)
    })
    if (written) finish()
    else whenDrained(stream, finish)
  }

  /** fs.write on the threadpool, until all of `buf` from `at` is written. */
  #toFd(buf, at, retryMs, finish) {
    fs.write(this.#target, buf, at, buf.length - at, null, (err, n) => {
      if (err) {
        // A full terminal (ours is non-blocking), or someone made the fd
        // non-blocking (a shared file description): try again shortly
        // rather than drop. Anything else (EPIPE, EIO of a terminal hung
        // up, EBADF) drops the chunk, as the child writing there itself
        // would have lost it.
        if (err.code === 'EAGAIN') {
          const now = performance.now()
          this.#stalledSince ??= now
          const t = setTimeout(() => this.#toFd(buf, at, Math.min(retryMs * 2, 100), finish), retryMs)
          if (now - this.#stalledSince >= STALL_MS) t.unref()
          return
        }
        this.#stalledSince = null
        return finish()
      }
      if (n > 0) this.#stalledSince = null
      if (at + n < buf.length) this.#toFd(buf, at + n, 1, finish)
      else finish()
    })
  }
}

/** One writer per fd, shared by every supervisor of this thread (so at most one write per fd is in flight). */
const writers = new Map()

function writerFor(fd) {
  let w = writers.get(fd)
  if (w === undefined) {
    w = new FdWriter(fd)
    writers.set(fd, w)
  }
  return w
}

/**
 * Relays `stream` (a child's piped stdout or stderr) to `fd` (1 or 2):
 * `hooks.check()` is the ready check's line listener while it wants lines
 * (null after); while `hooks.listening()`, chunks become lines for
 * `hooks.line(text)`; otherwise they are copied to `fd` as they are, the
 * stream paused while its chunk is being written.
 */
function relayOutput(stream, fd, hooks) {
  const forCheck = new LineSplitter()
  const forEvents = new LineSplitter()
  const writer = writerFor(fd)
  const copy = (buf) => {
    stream.pause()
    writer.write(buf, () => stream.resume())
  }
  const toCheck = (line) => hooks.check()?.(line)
  stream.on('data', (chunk) => {
    if (hooks.check() !== null) forCheck.push(chunk, toCheck)
    else forCheck.reset()
    if (hooks.listening()) {
      forEvents.push(chunk, hooks.line)
      return
    }
    // Each chunk goes whole to the events or to the copy: a line the events
    // had begun is copied with it.
    const rest = forEvents.takeRest()
    copy(rest === null ? chunk : Buffer.concat([rest, chunk]))
  })
  stream.on('end', () => {
    if (hooks.check() !== null) forCheck.end(toCheck)
    if (hooks.listening()) forEvents.end(hooks.line)
    else {
      const rest = forEvents.takeRest()
      if (rest !== null) writer.write(rest, noop)
    }
  })
  stream.on('error', noop)
}

module.exports = { relayOutput, LineSplitter, MAX_LINE }
