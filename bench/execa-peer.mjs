// execa's side of `pnpm bench exec`. execa 10 needs Node ≥ 22 (it throws at
// import under Node 20), so under an older Node bench/exec.mjs runs this file
// under the newer Node the test command caches (bench/peers.mjs) with the same
// workload as its own side, and reads the one JSON line it prints; under
// Node ≥ 22 it imports the same functions and runs them in its own process.
//
//   round <n>                                      /bin/true n times: sequential()'s summary
//   tree <timeoutMs> <options JSON> <NAME=value> <script>
//                                                  `sh -c script` timed out once, NAME=value
//                                                  in its environment: ms until execa settled
import { fileURLToPath } from 'node:url'
import { sequential } from './util.mjs'

/** execa's `execa`; throws where it cannot be loaded (not installed, or Node < 22). */
export async function loadExeca() {
  const mod = await import('execa')
  return mod.execa ?? mod.default
}

/** One round of `n` runs of /bin/true to completion, output captured: sequential()'s summary. */
export async function execaRound(n) {
  const execa = await loadExeca()
  return sequential(() => execa('/bin/true'), n)
}

/**
 * `sh -c script` with `timeout: timeoutMs` and execa's `options`, `env` its
 * environment: ms from the call until execa settled (rejected, here).
 */
export async function execaTree(script, timeoutMs, options, env) {
  const execa = await loadExeca()
  const t0 = performance.now()
  await execa('sh', ['-c', script], { ...options, env, timeout: timeoutMs }).catch(() => {})
  return performance.now() - t0
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [mode, ...rest] = process.argv.slice(2)
  let out
  if (mode === 'round' && Number(rest[0]) > 0) {
    out = await execaRound(Number(rest[0]))
  } else if (mode === 'tree' && rest.length === 4) {
    const [timeoutMs, options, tag, script] = rest
    const eq = tag.indexOf('=')
    const env = { ...process.env, [tag.slice(0, eq)]: tag.slice(eq + 1) }
    out = await execaTree(script, Number(timeoutMs), JSON.parse(options), env)
  } else {
    throw new Error(`usage: node bench/execa-peer.mjs round <n> | tree <timeoutMs> <options> <NAME=value> <script>`)
  }
  console.log(JSON.stringify(out))
}
