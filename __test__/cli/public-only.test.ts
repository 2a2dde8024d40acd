// The CLI is a thin parser over the library's public exports: it loads
// the package entry and Node's own modules, never a file of lib/.
import { readFileSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const CLI = join(__dirname, '..', '..', 'bin', 'procward.js')

describe('bin/procward.js', () => {
  it('requires only the package entry and node: modules', () => {
    const source = readFileSync(CLI, 'utf8')
    const required = [...source.matchAll(/require\(\s*(['"`])([^'"`]+)\1\s*\)/g)].map((m) => m[2])
    expect(required).toContain('..')
    for (const name of required) {
      const builtin = name?.startsWith('node:') || builtinModules.includes(name as string)
      expect(builtin || name === '..', `bin/procward.js requires ${name}`).toBe(true)
    }
    expect(source).not.toMatch(/import\(|\/lib\//)
  })
})
