// The CLI is a thin parser over the library's public exports: bin/ and
// lib/cli/ load the package entry, Node's own modules and one another —
// and, on the --postgres path only, procward/pg's inside (lib/pg.js: the
// lock and the size of a purpose), and what the platform supports
// (lib/os.js: asked of the binding, never read from /proc by the CLI).
import { readdirSync, readFileSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const ROOT = join(__dirname, '..', '..')
const CLI_DIR = join(ROOT, 'lib', 'cli')

function requires(file: string): string[] {
  const source = readFileSync(file, 'utf8')
  expect(source).not.toMatch(/import\(/)
  return [...source.matchAll(/require\(\s*(['"`])([^'"`]+)\1\s*\)/g)].map((m) => m[2] as string)
}

const builtin = (name: string) => name.startsWith('node:') || builtinModules.includes(name)

describe('the CLI', () => {
  it('bin/procward.js loads lib/cli/main.js only (and node: modules)', () => {
    const names = new Set(requires(join(ROOT, 'bin', 'procward.js')).filter((n) => !builtin(n)))
    expect([...names]).toEqual(['../lib/cli/main.js'])
  })

  it('lib/cli/ requires only the package entry, node: modules, its own files (and procward/pg)', () => {
    const own = new Set(readdirSync(CLI_DIR).map((f) => `./${f}`))
    for (const file of readdirSync(CLI_DIR)) {
      for (const name of requires(join(CLI_DIR, file))) {
        const ok =
          builtin(name) ||
          own.has(name) ||
          name === '../..' ||
          name === '../../package.json' ||
          (file === 'common.js' && name === '../os.js') ||
          (file === 'lock.js' && name === '../pg.js')
        expect(ok, `lib/cli/${file} requires ${name}`).toBe(true)
      }
    }
  })

  it('loads the package and the binding only inside a verb (so --help needs no native binary)', () => {
    for (const file of readdirSync(CLI_DIR)) {
      const source = readFileSync(join(CLI_DIR, file), 'utf8')
      for (const line of source.split('\n')) {
        if (/require\('\.\.\/\.\.'\)|require\('\.\.\/(pg|os)\.js'\)/.test(line)) {
          // Never at the top level of a module.
          expect(line, `lib/cli/${file}`).toMatch(/^\s+/)
        }
      }
    }
  })
})
