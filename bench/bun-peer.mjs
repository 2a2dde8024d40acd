// The Bun.spawn side of `pnpm bench spawn` and `pnpm bench exit`, run under
// Bun by those benchmarks (bench/peers.mjs) with the same workload as the
// Node side: `bun bench/bun-peer.mjs spawn|exit <n>` prints one JSON line of
// raw samples, which the Node side summarises with the same code as its own.
const [mode, nArg] = process.argv.slice(2)
const n = Number(nArg)
const now = () => Bun.nanoseconds()

async function spawnRound() {
  const callUs = []
  const t0 = now()
  for (let i = 0; i < n; i++) {
    const c0 = now()
    const p = Bun.spawn(['/bin/true'], { stdio: ['ignore', 'ignore', 'ignore'] })
    callUs.push((now() - c0) / 1000)
    await p.exited
  }
  return { secs: (now() - t0) / 1e9, callUs }
}

async function exitRound() {
  const latUs = []
  for (let i = 0; i < n; i++) {
    const p = Bun.spawn(['sleep', '100'], { stdio: ['ignore', 'ignore', 'ignore'] })
    await new Promise((r) => setTimeout(r, 2))
    const done = p.exited.then(() => now())
    const t0 = now()
    process.kill(p.pid, 'SIGKILL')
    latUs.push(((await done) - t0) / 1000)
  }
  return { latUs }
}

if (mode === 'spawn') console.log(JSON.stringify(await spawnRound()))
else if (mode === 'exit') console.log(JSON.stringify(await exitRound()))
else throw new Error(`usage: bun bench/bun-peer.mjs spawn|exit <n>, got ${mode}`)
