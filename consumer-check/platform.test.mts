import { readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname } from 'node:path'
import { expect, it } from 'vitest'

const require = createRequire(import.meta.url)

it('takes its binary from the procward-linux-x64-gnu package; procward itself ships none', () => {
  const main = dirname(require.resolve('procward/package.json'))
  expect(readdirSync(main).filter((f) => f.endsWith('.node'))).toEqual([])
  // Resolved from inside procward, as its loader does: pnpm links an
  // optional dependency only into the package that declares it.
  const binary = createRequire(require.resolve('procward')).resolve('procward-linux-x64-gnu')
  expect(binary).toMatch(/procward\.linux-x64-gnu\.node$/)
  expect(require('procward').isProcessRunning(process.pid)).toBe(true)
  expect(require.cache[binary]).toBeDefined()
})

it('depends on every platform package its loader knows, of its own version, optionally', () => {
  const pkg = require('procward/package.json') as { version: string; optionalDependencies?: Record<string, string> }
  // The loader's own list (platform.js, not exported: reached from
  // inside the package), which the repository's tests hold to the build
  // targets.
  const { SUPPORTED } = createRequire(require.resolve('procward'))('./platform.js') as { SUPPORTED: string[] }
  expect(SUPPORTED.length).toBeGreaterThan(0)
  expect(pkg.optionalDependencies).toEqual(Object.fromEntries(SUPPORTED.map((p) => [`procward-${p}`, pkg.version])))
})
