// Other runtimes as columns beside procward: Bun from the npm registry
// (@oven/bun-linux-x64, the same cached copy the test command uses).
import { execFile, execFileSync } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const BUN_VERSION = '1.4.5'
const here = dirname(fileURLToPath(import.meta.url))

/** Path of a Bun executable, installing the cached copy on first use; null where there is none for this machine. */
export function bunPath() {
  if (process.env.PROCWARD_BUN) return process.env.PROCWARD_BUN
  if (process.platform !== 'linux' || process.arch !== 'x64') return null
  const cache = process.env.PROCWARD_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'procward')
  const dir = join(cache, `@oven/bun-linux-x64@${BUN_VERSION}`)
  const bin = join(dir, 'node_modules/@oven/bun-linux-x64/bin/bun')
  if (!existsSync(bin)) {
    try {
      mkdirSync(dir, { recursive: true })
      execFileSync(
        'npm',
        ['install', '--prefix', dir, '--no-save', '--no-fund', '--no-audit', `@oven/bun-linux-x64@${BUN_VERSION}`],
        { stdio: 'ignore' },
      )
    } catch {
      return null
    }
  }
  return existsSync(bin) ? bin : null
}

/** Runs one round of `mode` under Bun; resolves to its JSON, or null without Bun. */
export function bunRound(mode, n) {
  const bun = bunPath()
  if (!bun) return Promise.resolve(null)
  return new Promise((resolve, reject) => {
    execFile(bun, [join(here, 'bun-peer.mjs'), mode, String(n)], { maxBuffer: 64 << 20 }, (err, stdout) => {
      if (err) reject(err)
      else resolve(JSON.parse(stdout))
    })
  })
}
