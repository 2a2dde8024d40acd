// Small measuring helpers shared by the benchmarks.
import { monitorEventLoopDelay } from 'node:perf_hooks'

export const now = () => process.hrtime.bigint()
export const us = (ns) => Number(ns) / 1000

export function quantile(sorted, q) {
  if (sorted.length === 0) return Number.NaN
  const i = Math.min(sorted.length - 1, Math.max(0, Math.round(q * (sorted.length - 1))))
  return sorted[i]
}

export function stats(values) {
  const s = [...values].sort((a, b) => a - b)
  return { p50: quantile(s, 0.5), p99: quantile(s, 0.99), max: s[s.length - 1], n: s.length }
}

/** Median per-call time (µs) over `batches` batches of `perBatch` calls. */
export function perCall(fn, { batches = 15, perBatch = 2000 } = {}) {
  for (let i = 0; i < Math.min(perBatch, 200); i++) fn(i) // warm up
  const means = []
  for (let b = 0; b < batches; b++) {
    const t0 = now()
    for (let i = 0; i < perBatch; i++) fn(i)
    means.push(us(now() - t0) / perBatch)
  }
  return stats(means).p50
}

/** Event-loop delay (ms) while `tick` runs every `everyMs` for `durationMs`. */
export async function loopDelayWhile(tick, { everyMs = 10, durationMs = 1000 } = {}) {
  const h = monitorEventLoopDelay({ resolution: 1 })
  h.enable()
  const timer = setInterval(tick, everyMs)
  await new Promise((r) => setTimeout(r, durationMs))
  clearInterval(timer)
  h.disable()
  return { p50: h.percentile(50) / 1e6, p99: h.percentile(99) / 1e6, max: h.max / 1e6 }
}

export function table(rows, columns) {
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c] ?? '').length)))
  const line = (cells) => cells.map((c, i) => String(c ?? '').padStart(widths[i])).join('  ')
  console.log(line(columns))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const r of rows) console.log(line(columns.map((c) => r[c])))
}

export const fmt = (v, digits = 2) => (Number.isFinite(v) ? v.toFixed(digits) : String(v))
export const ratio = (a, b) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${(a / b).toFixed(1)}x` : '-')

/** Reads `stream` line by line: each call of the returned function resolves to the next line. */
export function lines(stream) {
  const queue = []
  const waiters = []
  let buf = ''
  stream.on('data', (d) => {
    buf += String(d)
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl)
      buf = buf.slice(nl + 1)
      const w = waiters.shift()
      if (w) w(line)
      else queue.push(line)
    }
  })
  return () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((r) => waiters.push(r)))
}
