// pnpm bench [liveness|spawn|exit|scale|stop|lock|supervisor|ready|cgroup ...]: procward side by side with
// the alternatives, in one run, on this machine. Figures, not pass/fail.
import os from 'node:os'

const all = ['liveness', 'spawn', 'exit', 'scale', 'stop', 'lock', 'supervisor', 'ready', 'cgroup']
const wanted = process.argv.slice(2).length ? process.argv.slice(2) : all
console.log(
  `# procward benchmarks — ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Linux ${os.release()}, node ${process.version}`,
)
for (const name of wanted) {
  if (!all.includes(name)) throw new Error(`unknown benchmark ${name}; one of ${all.join(', ')}`)
  const mod = await import(`./${name}.mjs`)
  await mod.run()
}
