// pnpm bench [liveness|spawn|exit|scale|stop|exec|lock|supervisor|ready|cgroup|memory|soak ...] [--cycles N]:
// procward side by side with the alternatives, in one run, on this machine.
// Figures, not pass/fail: each target is printed with its figures and "met"
// or "not met", and again together at the end. A peer that needs another
// runtime runs in a process of its own: Bun's (bench/bun-peer.mjs), and
// execa's under the cached Node 24 when this Node is older than 22
// (bench/execa-peer.mjs; `exec` takes about 100 s: execa's timed-out tree
// settles only when the tree's 30 s sleeps end; `memory` about 35 s: pm2's
// memory check comes every 30 s). `soak` (100 000 cycles, a few
// minutes) runs only when named, and so do `split` (one spawn's JS-thread
// time step by step; needs the spawn-trace build, see bench/split.mjs) and
// `restart` (what a restart after kill -9 is made of).
import os from 'node:os'
import { printTargets } from './util.mjs'

const all = ['liveness', 'spawn', 'exit', 'scale', 'stop', 'exec', 'lock', 'supervisor', 'ready', 'cgroup', 'memory']
const known = [...all, 'soak', 'split', 'restart', 'handover']
// Options (`--name value`) are for the benchmarks to read from process.argv.
const args = process.argv.slice(2)
const names = args.filter((a, i) => !a.startsWith('--') && !args[i - 1]?.startsWith('--'))
const wanted = names.length ? names : all
for (const name of wanted) {
  if (!known.includes(name)) throw new Error(`unknown benchmark ${name}; one of ${known.join(', ')}`)
}
console.log(
  `# procward benchmarks — ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Linux ${os.release()}, node ${process.version}`,
)
for (const name of wanted) {
  const mod = await import(`./${name}.mjs`)
  await mod.run()
}
printTargets()
// Every process a benchmark started is gone by now (each ends its own by
// pid); pm2's client may keep sockets to its killed daemon open for good.
process.exit()
