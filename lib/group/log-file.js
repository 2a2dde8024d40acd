// A daemon's log file: its children's stdout and stderr appended to one
// file, rotated at maxBytes to path.1 … path.<keep> (path.1 the newest).
//
// procward reads the pipes itself, so rotation needs no copytruncate and no
// signal to the daemon: between two writes the file is renamed away and a
// new one opened; the daemon never notices. Nothing is lost or duplicated:
// the bytes that come are the bytes written, in order per stream.
//
// Lines stay whole. Each stream's line not yet ended is held (at most
// HOLD_MAX bytes) until its newline comes, so a file only ever takes whole
// lines (stdout's and stderr's never interleave within a line), and a
// rotation cuts at the last newline that fits. A line longer than HOLD_MAX
// is written as it comes (it may then be interleaved with the other
// stream's lines, or split across files); one longer than maxBytes is
// split. A line not ended is written when its stream ends.
//
// Memory is bounded with a slow disk, as a pipe bounds it: a stream is
// paused while its chunk is being written (its pipe fills, and the daemon
// waits on its own write), so each stream has at most one chunk in flight
// and one line held.
//
// A write that fails (ENOSPC, EIO, EDQUOT) drops its chunk, whole: a part
// the kernel took before the failure is cut off again, so the file still
// ends at a line's end. The daemon is not held back: what it writes while
// the disk is full is dropped (the file keeps its older lines; rotation,
// which waits for maxBytes, frees nothing), until a write succeeds again.
// A process warning says so at the first failure, and how many bytes were
// dropped once writes succeed again or at close.

const fs = require('node:fs/promises')

const NL = 0x0a
/** The longest line kept whole (as the Supervisor's line events cut at 64 KiB). */
const HOLD_MAX = 64 * 1024
/**
 * After the daemon's exit its pipes end once drained, unless a process that
 * escaped its group holds them: close() waits this long for them, then
 * drops what they would still bring.
 */
const CLOSE_GRACE_MS = 2000
const MODE = 0o600

const noop = () => {}

async function renameIfThere(from, to) {
  try {
    await fs.rename(from, to)
  } catch (err) {
    if (err.code !== 'ENOENT') throw err
  }
}

class LogFile {
  #path
  #maxBytes
  #keep
  /** The open file (a FileHandle), or null; its size as we wrote it. */
  #fh = null
  #size = 0
  /** Every operation on the file (open, write, rotate, close), one at a time, in order. */
  #chain = Promise.resolve()
  /** The streams being read: { ended, detach() }. */
  #sources = new Set()
  /** The failures reported, each once until the next success: 'write', 'rotate'. */
  #warned = new Set()
  /** Bytes of output dropped since the last report of them, and the first failure's message. */
  #dropped = 0
  #dropCause = ''

  /** `log`: { path (absolute), maxBytes (Infinity: never rotated), keep }. */
  constructor(log) {
    this.#path = log.path
    this.#maxBytes = log.maxBytes
    this.#keep = log.keep
  }

  get path() {
    return this.#path
  }

  /** Opens the file now (appending), so that a start fails on a log that cannot be: rejects with the open's error. */
  open() {
    return this.#queue(() => this.#ensureOpen())
  }

  /**
   * Reads `stream` (a child's piped stdout or stderr, or null) into the
   * file until it ends. The file is opened here if open() was not called.
   */
  attach(stream) {
    if (stream === null || stream === undefined) return
    let held = []
    let heldSize = 0
    const take = () => {
      const unit = held.length === 1 ? held[0] : Buffer.concat(held)
      held = []
      heldSize = 0
      return unit
    }
    let source
    const ended = new Promise((resolve) => {
      let done = false
      const finish = () => {
        if (done) return
        done = true
        stream.removeListener('data', onData)
        if (heldSize > 0) {
          const rest = take()
          this.#queue(() => this.#put(rest))
        }
        this.#sources.delete(source)
        resolve()
      }
      source = {
        detach() {
          finish()
          stream.destroy()
        },
      }
      stream.once('end', finish)
      stream.once('close', finish)
    })
    source.ended = ended
    const onData = (chunk) => {
      const nl = chunk.lastIndexOf(NL)
      let unit
      if (nl < 0) {
        held.push(chunk)
        heldSize += chunk.length
        if (heldSize < HOLD_MAX) return
        unit = take()
      } else {
        held.push(chunk.subarray(0, nl + 1))
        unit = take()
        if (nl + 1 < chunk.length) {
          held.push(chunk.subarray(nl + 1))
          heldSize = chunk.length - nl - 1
        }
      }
      // Backpressure: nothing more is read from this pipe until the chunk is in the file.
      stream.pause()
      this.#queue(() => this.#put(unit)).then(() => stream.resume())
    }
    stream.on('data', onData)
    // An error ends the stream ('close' follows): what it had is written.
    stream.on('error', noop)
    this.#sources.add(source)
  }

  /**
   * Once the streams read have ended (or CLOSE_GRACE_MS has passed; the
   * rest is dropped) and what they brought is written: closes the file.
   * A stream attached later opens it again.
   */
  async close() {
    if (this.#sources.size > 0) {
      let timer
      const grace = new Promise((resolve) => {
        timer = setTimeout(resolve, CLOSE_GRACE_MS)
      })
      await Promise.race([Promise.all([...this.#sources].map((s) => s.ended)), grace])
      clearTimeout(timer)
      for (const s of [...this.#sources]) s.detach()
    }
    await this.#queue(async () => {
      this.#reportDropped()
      const fh = this.#fh
      this.#fh = null
      if (fh !== null) await fh.close()
    })
  }

  /** Runs `op` after every operation queued before it; its promise. */
  #queue(op) {
    const p = this.#chain.then(op)
    this.#chain = p.catch(noop)
    return p
  }

  async #ensureOpen() {
    if (this.#fh !== null) return
    const fh = await fs.open(this.#path, 'a', MODE)
    try {
      this.#size = (await fh.stat()).size
    } catch (err) {
      await fh.close().catch(noop)
      throw err
    }
    this.#fh = fh
  }

  /** Writes `buf`, rotating where it does not fit. Never rejects: a failure is reported and the bytes dropped. */
  async #put(buf) {
    let rest = buf
    try {
      await this.#ensureOpen()
      while (rest.length > 0) {
        const room = this.#maxBytes - this.#size
        if (rest.length <= room) {
          await this.#append(rest)
          break
        }
        // It does not fit: the lines that do go here, the rest to a new file.
        const nl = room > 0 ? rest.lastIndexOf(NL, room - 1) : -1
        if (nl >= 0) {
          await this.#append(rest.subarray(0, nl + 1))
          rest = rest.subarray(nl + 1)
        } else if (this.#size === 0) {
          // A line longer than maxBytes, in a file of its own: split.
          await this.#append(rest.subarray(0, room))
          rest = rest.subarray(room)
        }
        await this.#rotate()
      }
      this.#warned.delete('write')
      this.#reportDropped()
    } catch (err) {
      this.#dropped += rest.length
      if (this.#dropCause === '') this.#dropCause = err.message
      this.#warn('write', `cannot write ${this.#path}: ${err.message}; its output is dropped until a write succeeds`)
    }
  }

  /** A warning of the bytes dropped since the last one, if any. */
  #reportDropped() {
    if (this.#dropped === 0) return
    const text = `${this.#dropped} bytes of output dropped, not written to ${this.#path} (${this.#dropCause})`
    this.#dropped = 0
    this.#dropCause = ''
    process.emitWarning(`procward: ${text}`, { code: 'PROCWARD_LOG_FILE' })
  }

  /**
   * Appends all of `buf`, or none: when a write fails after the kernel took
   * part of it (a disk filling up takes what fits), the part is cut off, so
   * the file still ends with the last whole chunk and #size is true.
   */
  async #append(buf) {
    let at = 0
    try {
      while (at < buf.length) {
        const { bytesWritten } = await this.#fh.write(buf, at, buf.length - at)
        at += bytesWritten
      }
    } catch (err) {
      if (at > 0) {
        try {
          await this.#fh.truncate(this.#size)
        } catch {
          // Left in: counted, so that rotation still comes at maxBytes.
          this.#size += at
        }
      }
      throw err
    }
    this.#size += buf.length
  }

  /** path.<keep-1> → path.<keep> … path → path.1, and a new path. */
  async #rotate() {
    const fh = this.#fh
    this.#fh = null
    await fh.close()
    try {
      for (let i = this.#keep - 1; i >= 1; i--) await renameIfThere(`${this.#path}.${i}`, `${this.#path}.${i + 1}`)
      await fs.rename(this.#path, `${this.#path}.1`)
    } catch (err) {
      // Not rotated: the file grows on, and another try comes after
      // another maxBytes (not at every write).
      await this.#ensureOpen()
      this.#size = 0
      this.#warn('rotate', `cannot rotate ${this.#path}: ${err.message}`)
      return
    }
    this.#warned.delete('rotate')
    await this.#ensureOpen()
  }

  #warn(what, text) {
    if (this.#warned.has(what)) return
    this.#warned.add(what)
    process.emitWarning(`procward: ${text}`, { code: 'PROCWARD_LOG_FILE' })
  }
}

module.exports = { LogFile }
