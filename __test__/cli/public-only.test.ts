// The CLI is a thin parser over the library's public exports: bin/ and
// lib/cli/ load the package entry, Node's own modules and one another —
// and, by name, the few package-internal modules a verb needs beside it
// (never through a door in the public entry): on the --postgres path,
// procward/pg's inside (lib/pg.js: the lock and the size of a purpose);
// for procward run, an init's duties, notify-out.js's voice and the spawn
// option that gives COMMAND the terminal; for procward up, the same duties
// and voice; and for
// every verb, what the platform supports (lib/os.js: asked of the binding,
// never read from /proc by the CLI).
import { readdirSync, readFileSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const ROOT = join(__dirname, '..', '..')
const CLI_DIR = join(ROOT, 'lib', 'cli')

/** The one dynamic import: a group's config file, the user's module (procward up, status -f). */
const IMPORTS_USER_CONFIG = 'group-file.js'

function requires(file: string): string[] {
  const source = readFileSync(file, 'utf8')
  if (!file.endsWith(`/${IMPORTS_USER_CONFIG}`)) expect(source).not.toMatch(/import\(/)
  return [...source.matchAll(/require\(\s*(['"`])([^'"`]+)\1\s*\)/g)].map((m) => m[2] as string)
}

const builtin = (name: string) => name.startsWith('node:') || builtinModules.includes(name)

describe('the CLI', () => {
  it('bin/procward.js loads lib/cli/early-signals.js first, then lib/cli/main.js (and node: modules)', () => {
    expect(requires(join(ROOT, 'bin', 'procward.js')).filter((n) => !builtin(n))).toEqual([
      '../lib/cli/early-signals.js',
      '../lib/cli/main.js',
    ])
    // What runs before the signals are taken is Node's own start-up, and
    // this file's node: modules: nothing of ours.
    expect(requires(join(CLI_DIR, 'early-signals.js')).filter((n) => !builtin(n))).toEqual([])
  })

  /** The package-internal modules a verb may require by name, beside the entry. */
  const INTERNALS: Record<string, string[]> = {
    'common.js': ['../os.js'],
    'lock.js': ['../pg.js'],
    'run.js': ['../init.js', '../supervisor/notify-out.js', '../spawn-options.js', '../supervisor/sockets.js'],
    'up.js': ['../init.js', '../supervisor/notify-out.js'],
    // A pidfd-checked SIGHUP to the recorded supervisor.
    'reload.js': ['../supervisor/procfs.js'],
  }

  it('lib/cli/ requires only the package entry, node: modules, its own files (and the internals a verb names)', () => {
    const own = new Set(readdirSync(CLI_DIR).map((f) => `./${f}`))
    for (const file of readdirSync(CLI_DIR)) {
      for (const name of requires(join(CLI_DIR, file))) {
        const ok =
          builtin(name) ||
          own.has(name) ||
          name === '../..' ||
          name === '../../package.json' ||
          (INTERNALS[file] ?? []).includes(name)
        expect(ok, `lib/cli/${file} requires ${name}`).toBe(true)
      }
    }
  })

  it('no door to the internals through the global symbol registry: it holds brands (cross-copy checks) only', () => {
    const files = [join(ROOT, 'index.js')]
    const walk = (dir: string) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        if (e.isDirectory()) walk(join(dir, e.name))
        else if (e.name.endsWith('.js')) files.push(join(dir, e.name))
      }
    }
    walk(join(ROOT, 'lib'))
    const keys = new Set<string>()
    for (const file of files) {
      for (const m of readFileSync(file, 'utf8').matchAll(/Symbol\.for\(\s*'([^']*)'/g)) keys.add(m[1] as string)
    }
    const brands = ['procward.error', 'procward.execError', 'procward.lock', 'procward.supervised']
    // Node's own well-known symbols, for runtimes that lack them.
    const node = ['nodejs.dispose', 'nodejs.asyncDispose']
    expect([...keys].filter((k) => !brands.includes(k) && !node.includes(k))).toEqual([])
    expect(keys.size).toBeGreaterThan(0) // the scan read the sources
  })

  it('loads the package and the binding only inside a verb (so --help needs no native binary)', () => {
    for (const file of readdirSync(CLI_DIR)) {
      const source = readFileSync(join(CLI_DIR, file), 'utf8')
      for (const line of source.split('\n')) {
        // The entry, or anything else of the package outside lib/cli/.
        if (/require\('\.\.\//.test(line)) {
          // Never at the top level of a module.
          expect(line, `lib/cli/${file}`).toMatch(/^\s+/)
        }
      }
    }
  })
})
