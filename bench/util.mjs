// Small measuring helpers shared by the benchmarks.
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { createInterface } from 'node:readline'

export const now = () => process.hrtime.bigint()
export const us = (ns) => Number(ns) / 1000

export function quantile(sorted, q) {
  if (sorted.length === 0) return Number.NaN
  const i = Math.min(sorted.length - 1, Math.max(0, Math.round(q * (sorted.length - 1))))
  return sorted[i]
}

export function stats(values) {
  const s = [...values].sort((a, b) => a - b)
  return { p50: quantile(s, 0.5), p95: quantile(s, 0.95), p99: quantile(s, 0.99), max: s[s.length - 1], n: s.length }
}

/** Throughput and JS-thread time per call of `n` rounds that took `secs`, one call time (µs) a round. */
export function summarise(secs, callUs) {
  const mean = callUs.reduce((a, b) => a + b, 0) / callUs.length
  return { perSec: callUs.length / secs, call: { ...stats(callUs), mean } }
}

/**
 * `start()` then its returned promise (an exit), `n` times one after another:
 * rounds per second and the JS-thread time of each `start()` call.
 */
export async function sequential(start, n) {
  const callUs = []
  const t0 = performance.now()
  for (let i = 0; i < n; i++) {
    const c0 = performance.now()
    const wait = start()
    callUs.push((performance.now() - c0) * 1000)
    await wait
  }
  return summarise((performance.now() - t0) / 1000, callUs)
}

/**
 * Best of rounds figure by figure: the highest `perSec`, the lowest of every
 * other number (times), `n` as it is; null for no rounds.
 */
export function bestEach(rounds) {
  const merge = (vals, key) => {
    if (typeof vals[0] === 'object') {
      return Object.fromEntries(
        Object.keys(vals[0]).map((k) => [
          k,
          merge(
            vals.map((v) => v[k]),
            k,
          ),
        ]),
      )
    }
    if (key === 'n') return vals[0]
    return key === 'perSec' ? Math.max(...vals) : Math.min(...vals)
  }
  return rounds.length ? merge(rounds, '') : null
}

/**
 * Side by side on a shared machine: each contender (`(n) => Promise<result
 * | null>`, null when it cannot run here) gets a warm-up round of `warm`,
 * then `rounds` rounds of `n`, interleaved so that drift hits all alike.
 * Returns each contender's best of rounds, figure by figure (`bestEach`), or null.
 */
export async function bestOfInterleaved(contenders, { n, warm, rounds = 3 }) {
  const names = Object.keys(contenders)
  for (const name of names) await contenders[name](warm)
  const res = Object.fromEntries(names.map((name) => [name, []]))
  for (let round = 0; round < rounds; round++) {
    for (const name of names) {
      const r = await contenders[name](n)
      if (r) res[name].push(r)
    }
  }
  return Object.fromEntries(names.map((name) => [name, bestEach(res[name])]))
}

const targets = []

/**
 * A target of the benchmarks: printed at once and again in the closing
 * summary. `met` null: not measured here (`figures` says why).
 */
export function target(name, figures, met) {
  const verdict = met === null ? 'not measured' : met ? 'met' : 'not met'
  targets.push({ target: name, figures, verdict })
  console.log(`target ${name}: ${figures} → ${verdict}`)
}

/** The targets recorded in this run, as one table. */
export function printTargets() {
  if (targets.length === 0) return
  console.log('\n## Targets (this run)\n')
  table(targets, ['target', 'figures', 'verdict'])
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

/** Table rows from [api, result] pairs, leaving out what was not measured (null). */
export const rowsOf = (pairs, toRow) => pairs.filter(([, r]) => r).map(([api, r]) => ({ api, ...toRow(r) }))

/**
 * The `[api, result]` pairs of procward and its peers in both runtimes, from
 * a best whose keys are procward, cp, bun (Bun.spawn in a Bun process of its
 * own) and underBun ({ procward, bun } alternating in one Bun process);
 * `labels` names procward's, child_process's and Bun's API.
 */
export function withPeers(best, [procward, cp, bun]) {
  return [
    [procward, best.procward],
    [cp, best.cp],
    [`${bun} (under Bun)`, best.bun],
    [`${procward} (under Bun, one process)`, best.underBun?.procward],
    [`${bun} (under Bun, one process)`, best.underBun?.bun],
  ]
}

/**
 * bestOfInterleaved over contenders given as `{ key: [api label, run] }`, and
 * the table rows of their bests (`toRow(result, best)`, all the bests by key
 * at hand), leaving out what was not measured. Returns `{ best, rows }`.
 */
export async function interleavedRows(contenders, options, toRow) {
  const entries = Object.entries(contenders)
  const best = await bestOfInterleaved(Object.fromEntries(entries.map(([key, [, run]]) => [key, run])), options)
  const rows = rowsOf(
    entries.map(([key, [api]]) => [api, best[key]]),
    (r) => toRow(r, best),
  )
  return { best, rows }
}

/**
 * The `toRow` of a throughput table: runs a second (column `rate`), that
 * against procward's (column `vs`), the JS-thread µs a call, mean and the
 * `percentiles` named (p50, p99).
 */
export const throughputRow = (rate, vs, percentiles) => (r, best) => ({
  [rate]: fmt(r.perSec, 0),
  [vs]: ratio(r.perSec, best.procward.perSec),
  'µs/call mean': fmt(r.call.mean, 0),
  ...Object.fromEntries(percentiles.map((p) => [p, fmt(r.call[p], 0)])),
})

export function table(rows, columns) {
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c] ?? '').length)))
  const line = (cells) => cells.map((c, i) => String(c ?? '').padStart(widths[i])).join('  ')
  console.log(line(columns))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const r of rows) console.log(line(columns.map((c) => r[c])))
}

export const fmt = (v, digits = 2) => (Number.isFinite(v) ? v.toFixed(digits) : String(v))
/** a / b as `1.23x` (three significant figures at most, for ratios near 1 to be told apart). */
export function ratio(a, b) {
  if (!(Number.isFinite(a) && Number.isFinite(b) && b > 0)) return '-'
  const r = a / b
  return `${r.toFixed(r >= 100 ? 0 : r >= 10 ? 1 : 2)}x`
}

/** Reads `stream` line by line: each call of the returned function resolves to the next line. */
export function lines(stream) {
  // readline's iterator buffers the lines that come before they are asked for.
  const it = createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY })[Symbol.asyncIterator]()
  return () => it.next().then((r) => r.value)
}
