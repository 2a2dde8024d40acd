// A daemon's memoryLimit: its tree (its process group; with `cgroup: true`,
// its cgroup) over the limit is stopped with its group, as the daemon's stop
// options say, and its Supervisor restarts it as a crash, reason 'memory'
// (the Supervisor's EXIT_REASON asks this watch about each exit it did not
// cause).
//
// How the tree is measured: the sum of its processes' RSS, sampled at most
// every 250 ms, off the JS thread (lib/os.js: one read of /proc/<pid>/stat
// per process). Where the daemon's cgroup has the memory controller (a
// delegated `memory.max`), the kernel enforces the limit as well:
// memory.max = the limit and memory.oom.group = 1, so that its OOM killer
// takes the whole cgroup the moment it is reached; such a death (SIGKILL,
// memory.events' oom_kill grown) is reason 'memory' too.

const fs = require('node:fs')
const os = require('../os')

/** The pause between two samples' starts: at most four a second. */
const SAMPLE_MS = 250

const noop = () => {}

/** The count of `oom_kill` in a cgroup's memory.events text, or null. */
function oomKills(text) {
  const m = /^oom_kill (\d+)$/m.exec(text)
  return m === null ? null : Number(m[1])
}

function readOomKills(dir) {
  try {
    return oomKills(fs.readFileSync(`${dir}/memory.events`, 'utf8'))
  } catch {
    return null
  }
}

class MemoryWatch {
  #limit
  #stop
  #onOver
  /** The child watched now: { child, timer, cgroup, oomBase } or null. */
  #current = null
  /** Pids stopped (or OOM-killed) for their memory, until their exit is asked about. */
  #over = new Set()

  /**
   * `limit` bytes; `stop`: the daemon's stop options (its spawn.stop);
   * `onOver({ pid, bytes, limit })` when its tree is stopped for it.
   */
  constructor(limit, stop, onOver) {
    this.#limit = limit
    this.#stop = stop
    this.#onOver = onOver
  }

  /** At each 'spawn': watches `child` from now until its exit. */
  watch(child) {
    this.#end()
    this.#over.clear()
    const cur = { child, timer: null, cgroup: child.cgroup, oomBase: null }
    this.#current = cur
    if (cur.cgroup !== null) this.#enforce(cur)
    child.once('exit', () => {
      if (this.#current === cur) this.#end()
    })
    this.#schedule(cur, 0)
  }

  /** The Supervisor's question at an exit it did not cause: 'memory', or null. */
  reasonOf(info) {
    if (this.#over.delete(info.pid)) return 'memory'
    const cur = this.#current
    // The kernel's OOM killer, where it holds the limit (see #enforce).
    if (cur !== null && cur.child.pid === info.pid && cur.oomBase !== null && info.signal === 'SIGKILL') {
      const now = readOomKills(cur.cgroup)
      if (now !== null && now > cur.oomBase) return 'memory'
    }
    return null
  }

  /** No more samples of the child watched now (the group stops it). */
  close() {
    this.#end()
  }

  #end() {
    const cur = this.#current
    if (cur === null) return
    clearTimeout(cur.timer)
    this.#current = null
  }

  #schedule(cur, delay) {
    cur.timer = setTimeout(() => this.#sample(cur).catch(noop), delay)
    cur.timer.unref?.()
  }

  async #sample(cur) {
    const started = performance.now()
    const { child } = cur
    const usage = cur.cgroup !== null ? await os.cgroupUsage(cur.cgroup) : await os.groupUsage(child.pgid)
    if (this.#current !== cur || child.exitInfo !== null) return
    const bytes = usage?.memoryBytes ?? null
    if (bytes !== null && bytes > this.#limit) {
      this.#current = null
      this.#over.add(child.pid)
      this.#onOver({ pid: child.pid, bytes, limit: this.#limit })
      // With its group (or cgroup), as the daemon's stop options say.
      child.stop(this.#stop).catch(noop)
      return
    }
    this.#schedule(cur, Math.max(0, SAMPLE_MS - (performance.now() - started)))
  }

  /**
   * Where the child's cgroup has the memory controller: the kernel holds
   * the limit (memory.max) and kills the whole cgroup at it
   * (memory.oom.group). Elsewhere (no controller delegated) the sampler
   * alone.
   */
  #enforce(cur) {
    try {
      fs.writeFileSync(`${cur.cgroup}/memory.max`, String(this.#limit))
    } catch {
      return // no memory controller here: the sampler alone
    }
    try {
      fs.writeFileSync(`${cur.cgroup}/memory.oom.group`, '1')
    } catch {
      // An older kernel: the OOM killer takes one process; its exit (or
      // the sampler) still ends the daemon.
    }
    cur.oomBase = readOomKills(cur.cgroup) ?? 0
  }
}

module.exports = { MemoryWatch, SAMPLE_MS, oomKills }
