// Which binary the loader (binding.js) picks, and how it fails where there
// is none. Other platforms are simulated: a preload (fixtures/fake-platform.cjs)
// makes a real Node report another process.platform / process.arch / ldd.
import { execFile } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { FIXTURES, trackProcesses } from '../helpers'

trackProcesses()

const ROOT = join(__dirname, '..', '..')
const require = createRequire(__filename)
const platform = require('../../platform.js') as {
  SUPPORTED: readonly string[]
  platformKey(p: { platform: string; arch: string; musl: boolean }): string
  detectMusl(io: { readLdd(): string; report(): unknown }): boolean
}
const pkg = require('../../package.json') as { version: string; napi: { targets: string[] } }

interface Outcome {
  loaded?: string
  code?: string
  message?: string
  platform?: string
  supported?: string[]
  packageName?: string
}

/** Loads procward from `dir` in a fresh Node that believes it runs on `fake`. */
async function loadAs(fake: Record<string, string>, how: 'cjs' | 'esm' = 'cjs', dir = ROOT): Promise<Outcome> {
  const { stdout, stderr } = await promisify(execFile)(
    process.execPath,
    ['--require', join(FIXTURES, 'fake-platform.cjs'), join(FIXTURES, 'load-procward.cjs'), dir, how],
    { env: { ...process.env, ...fake } },
  )
  // One error, caught: nothing else reported (exit status 0, stderr empty).
  expect(stderr).toBe('')
  const lines = stdout.trim().split('\n')
  expect(lines).toHaveLength(1)
  return JSON.parse(lines[0] as string) as Outcome
}

const fake = (p: string, arch: string, ldd?: string) => ({
  PROCWARD_FAKE_PLATFORM: p,
  PROCWARD_FAKE_ARCH: arch,
  ...(ldd === undefined ? {} : { PROCWARD_FAKE_LDD: ldd }),
})

describe('platform keys', () => {
  it('names Linux binaries by C library and the others by os and cpu', () => {
    expect(platform.platformKey({ platform: 'linux', arch: 'x64', musl: false })).toBe('linux-x64-gnu')
    expect(platform.platformKey({ platform: 'linux', arch: 'arm64', musl: true })).toBe('linux-arm64-musl')
    expect(platform.platformKey({ platform: 'darwin', arch: 'arm64', musl: false })).toBe('darwin-arm64')
    expect(platform.platformKey({ platform: 'win32', arch: 'x64', musl: false })).toBe('win32-x64')
  })

  it('tells musl from glibc by ldd, else by the glibc Node reports, else assumes glibc', () => {
    const noLdd = () => {
      throw new Error('ENOENT')
    }
    const glibcLdd = () => 'TEXTDOMAIN=libc\n# GNU C Library ldd\n'
    const muslLdd = () => 'musl libc (x86_64)\nVersion 1.2.4\n'
    const never = () => {
      throw new Error('report must not be asked when ldd answers')
    }
    expect(platform.detectMusl({ readLdd: muslLdd, report: never })).toBe(true)
    expect(platform.detectMusl({ readLdd: glibcLdd, report: never })).toBe(false)
    expect(platform.detectMusl({ readLdd: noLdd, report: () => ({ header: { glibcVersionRuntime: '2.36' } }) })).toBe(
      false,
    )
    expect(platform.detectMusl({ readLdd: noLdd, report: () => ({ header: {} }) })).toBe(true)
    expect(platform.detectMusl({ readLdd: noLdd, report: () => undefined })).toBe(false)
    expect(platform.detectMusl({ readLdd: noLdd, report: noLdd })).toBe(false)
  })

  it('supports exactly the napi targets, each with its package in npm/', () => {
    const cpu: Record<string, string> = { x86_64: 'x64', aarch64: 'arm64' }
    const fromTargets = pkg.napi.targets.map((t) => {
      const [arch = '', , os, abi] = t.split('-')
      if (os === 'darwin') return `darwin-${cpu[arch]}`
      if (os === 'windows') return `win32-${cpu[arch]}`
      return `${os}-${cpu[arch]}-${abi}`
    })
    expect([...platform.SUPPORTED].sort()).toEqual(fromTargets.sort())
    expect(readdirSync(join(ROOT, 'npm')).sort()).toEqual(fromTargets.sort())
    for (const key of platform.SUPPORTED) {
      const [os, arch, libc] = key.split('-')
      const sub = JSON.parse(readFileSync(join(ROOT, 'npm', key, 'package.json'), 'utf8'))
      expect(sub).toMatchObject({
        name: `procward-${key}`,
        version: pkg.version,
        os: [os],
        cpu: [arch],
        main: `procward.${key}.node`,
        files: [`procward.${key}.node`],
      })
      expect(sub.libc).toEqual(libc === 'gnu' ? ['glibc'] : libc === 'musl' ? ['musl'] : undefined)
    }
  })
})

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

/** A fresh node_modules/ dir for installed copies of procward and its platform packages. */
function nodeModules(): string {
  const top = mkdtempSync(join(tmpdir(), 'procward-platform-'))
  dirs.push(top)
  return join(top, 'node_modules')
}

/**
 * node_modules/procward as a package manager would lay it out from a
 * tarball: the shipped JS and no binary, its package.json with or without
 * the optionalDependencies on every platform package.
 */
function installedMain({ optionalDependencies }: { optionalDependencies: boolean }, top = nodeModules()): string {
  const main = join(top, 'procward')
  mkdirSync(main, { recursive: true })
  for (const f of ['index.js', 'index.mjs', 'binding.js', 'platform.js', 'lib'])
    cpSync(join(ROOT, f), join(main, f), { recursive: true })
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
  if (optionalDependencies) {
    manifest.optionalDependencies = Object.fromEntries(platform.SUPPORTED.map((k) => [`procward-${k}`, pkg.version]))
  }
  writeFileSync(join(main, 'package.json'), JSON.stringify(manifest))
  return main
}

describe('loading on a platform without a binary', () => {
  const supportedList = platform.SUPPORTED.join(', ')

  for (const [p, arch, key] of [
    ['win32', 'arm64', 'win32-arm64'],
    ['freebsd', 'x64', 'freebsd-x64'],
    ['linux', 'riscv64', 'linux-riscv64-gnu'],
    ['darwin', 'ia32', 'darwin-ia32'],
  ] as const) {
    it(`throws ERR_PROCWARD_UNSUPPORTED_PLATFORM on ${key}, from require and from import`, async () => {
      for (const how of ['cjs', 'esm'] as const) {
        const out = await loadAs(fake(p, arch), how)
        expect(out.code).toBe('ERR_PROCWARD_UNSUPPORTED_PLATFORM')
        expect(out.platform).toBe(key)
        expect(out.supported).toEqual([...platform.SUPPORTED])
        expect(out.message).toContain(key)
        expect(out.message).toContain(supportedList)
      }
    })
  }

  it('says which package is missing on a supported platform whose optional dependency was skipped', async () => {
    // Installed from the registry: the platform packages are listed, this one is not there.
    const main = installedMain({ optionalDependencies: true })
    const darwin = await loadAs(fake('darwin', 'arm64'), 'esm', main)
    expect(darwin).toMatchObject({
      code: 'ERR_PROCWARD_BINARY_NOT_FOUND',
      platform: 'darwin-arm64',
      packageName: 'procward-darwin-arm64',
    })
    expect(darwin.message).toContain('procward-darwin-arm64')
    expect(darwin.message).toContain('skipped the optional dependency')
    const windows = await loadAs(fake('win32', 'x64'), 'cjs', main)
    expect(windows).toMatchObject({
      code: 'ERR_PROCWARD_BINARY_NOT_FOUND',
      platform: 'win32-x64',
      packageName: 'procward-win32-x64',
    })
    // musl told apart by ldd: this machine's glibc binary must not be taken.
    const musl = await loadAs(fake('linux', 'x64', 'musl libc (x86_64)\n'), 'cjs', main)
    expect(musl).toMatchObject({ code: 'ERR_PROCWARD_BINARY_NOT_FOUND', platform: 'linux-x64-musl' })
    expect((await loadAs({}, 'cjs', main)).code).toBe('ERR_PROCWARD_BINARY_NOT_FOUND')
  })

  it('tells a package packed without its platform packages from one whose package was skipped', async () => {
    // `npm pack` of a checkout, guard bypassed: no binary, no optionalDependencies.
    // The package manager is not to blame, and the message must not say so.
    const main = installedMain({ optionalDependencies: false })
    for (const [env, key] of [
      [{}, 'linux-x64-gnu'],
      [fake('darwin', 'arm64'), 'darwin-arm64'],
    ] as const) {
      for (const how of ['cjs', 'esm'] as const) {
        const out = await loadAs(env, how, main)
        expect(out).toMatchObject({
          code: 'ERR_PROCWARD_BINARY_NOT_PACKAGED',
          platform: key,
          packageName: `procward-${key}`,
        })
        expect(out.message).toContain('packed without its platform packages')
        expect(out.message).not.toContain('skipped')
        expect(out.message).not.toContain('--no-optional')
      }
    }
    // A checkout: the same, on a platform it has no build for.
    const checkout = await loadAs(fake('darwin', 'arm64'), 'cjs')
    expect(checkout.code).toBe('ERR_PROCWARD_BINARY_NOT_PACKAGED')
    expect(checkout.message).toContain('pnpm run build')
  })

  it('loads the local build on this machine, with or without ldd', async () => {
    expect(await loadAs({}, 'cjs')).toEqual({ loaded: 'function' })
    expect(await loadAs({}, 'esm')).toEqual({ loaded: 'function' })
    expect(await loadAs(fake('linux', 'x64', ''))).toEqual({ loaded: 'function' })
  })
})

describe('loading from an installed platform package', () => {
  const key = 'linux-x64-gnu'
  const local = join(ROOT, `procward.${key}.node`)

  /** node_modules with procward (no binary of its own) and procward-<key> beside it. */
  function install(platformVersion: string): string {
    const top = nodeModules()
    const main = installedMain({ optionalDependencies: true }, top)
    const sub = join(top, `procward-${key}`)
    mkdirSync(sub)
    const manifest = JSON.parse(readFileSync(join(ROOT, 'npm', key, 'package.json'), 'utf8'))
    writeFileSync(join(sub, 'package.json'), JSON.stringify({ ...manifest, version: platformVersion }))
    cpSync(local, join(sub, `procward.${key}.node`))
    return main
  }

  it.runIf(existsSync(local))('loads procward-<platform> when procward has no binary of its own', async () => {
    expect(await loadAs({}, 'esm', install(pkg.version))).toEqual({ loaded: 'function' })
  })

  it.runIf(existsSync(local))('refuses a platform package of another version', async () => {
    const out = await loadAs({}, 'cjs', install('0.0.1-other'))
    expect(out.code).toBe('ERR_PROCWARD_BINARY_VERSION_MISMATCH')
    expect(out.message).toContain('0.0.1-other')
  })
})

describe('packing', () => {
  const npm = (args: string[], cwd: string) =>
    promisify(execFile)('npm', args, { cwd, env: { ...process.env, npm_config_update_notifier: 'false' } }).then(
      (r) => ({ ok: true, ...r }),
      (e: { stdout: string; stderr: string }) => ({ ok: false, stdout: e.stdout, stderr: e.stderr }),
    )

  it('refuses `npm pack` of the checkout: it would make a package that cannot load anywhere', async () => {
    const dest = mkdtempSync(join(tmpdir(), 'procward-pack-'))
    dirs.push(dest)
    const r = await npm(['pack', '--pack-destination', dest], ROOT)
    expect(r.ok).toBe(false)
    expect(r.stderr).toContain('refusing to pack procward@')
    expect(r.stderr).toContain(`procward-linux-x64-gnu@${pkg.version}`)
    expect(readdirSync(dest)).toEqual([])
  })

  it('packs once every platform package is an optional dependency of this version', async () => {
    const stage = mkdtempSync(join(tmpdir(), 'procward-pack-'))
    dirs.push(stage)
    for (const f of [
      'index.js',
      'index.mjs',
      'index.d.ts',
      'index.d.mts',
      'binding.js',
      'platform.js',
      'lib',
      'bin',
      'scripts',
    ]) {
      cpSync(join(ROOT, f), join(stage, f), { recursive: true })
    }
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
    const all = Object.fromEntries(platform.SUPPORTED.map((k) => [`procward-${k}`, pkg.version]))
    // One missing, or one of another version: still refused.
    for (const bad of [
      { ...all, 'procward-win32-x64': undefined },
      { ...all, 'procward-darwin-arm64': '0.0.1' },
    ]) {
      writeFileSync(join(stage, 'package.json'), JSON.stringify({ ...manifest, optionalDependencies: bad }))
      const r = await npm(['pack', '--dry-run'], stage)
      expect(r.ok).toBe(false)
      expect(r.stderr).toContain('refusing to pack')
    }
    writeFileSync(join(stage, 'package.json'), JSON.stringify({ ...manifest, optionalDependencies: all }))
    const r = await npm(['pack', '--json'], stage)
    expect(r.ok).toBe(true)
    const [packed] = JSON.parse(r.stdout) as { filename: string; files: { path: string }[] }[]
    expect(existsSync(join(stage, packed?.filename ?? ''))).toBe(true)
    expect(packed?.files.map((f) => f.path)).toContain('index.d.mts')
    expect(packed?.files.filter((f) => f.path.endsWith('.node'))).toEqual([])
  })

  it('publishes nothing while a platform package is not ready (prepublishOnly)', async () => {
    const stage = mkdtempSync(join(tmpdir(), 'procward-publish-'))
    dirs.push(stage)
    for (const f of ['package.json', 'platform.js', 'npm', 'scripts'])
      cpSync(join(ROOT, f), join(stage, f), { recursive: true })
    // One binary there, one of another version: both named, and nothing
    // reaches a registry (none is configured: any publish would fail).
    for (const key of platform.SUPPORTED) rmSync(join(stage, 'npm', key, `procward.${key}.node`), { force: true })
    writeFileSync(join(stage, 'npm', 'linux-x64-gnu', 'procward.linux-x64-gnu.node'), 'x')
    const winManifest = join(stage, 'npm', 'win32-x64', 'package.json')
    writeFileSync(winManifest, JSON.stringify({ ...JSON.parse(readFileSync(winManifest, 'utf8')), version: '0.0.1' }))
    const r = await promisify(execFile)(process.execPath, [join(stage, 'scripts', 'prepublish.cjs')], {
      cwd: stage,
      env: { ...process.env, npm_config_registry: 'http://127.0.0.1:9/' },
    }).then(
      () => ({ ok: true, stderr: '' }),
      (e: { stderr: string }) => ({ ok: false, stderr: e.stderr }),
    )
    expect(r.ok).toBe(false)
    expect(r.stderr).toContain('not publishing procward@')
    for (const key of platform.SUPPORTED) {
      if (key === 'linux-x64-gnu') expect(r.stderr).not.toContain(`procward.${key}.node is missing`)
      else expect(r.stderr).toContain(`npm/${key}/procward.${key}.node is missing`)
    }
    expect(r.stderr).toContain('npm/win32-x64/package.json is version 0.0.1')
    // package.json untouched: still refused by the pack guard.
    expect(JSON.parse(readFileSync(join(stage, 'package.json'), 'utf8')).optionalDependencies).toBeUndefined()
  })

  it('names its repository, homepage, bugs and keywords, and types each entry point', () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
    expect(manifest.repository).toEqual({ type: 'git', url: 'git+https://github.com/procward/procward.git' })
    expect(manifest.homepage).toMatch(/^https:\/\/github\.com\/procward\/procward/)
    expect(manifest.bugs.url).toBe('https://github.com/procward/procward/issues')
    expect(manifest.keywords).toEqual(expect.arrayContaining(['process', 'supervisor', 'napi-rs']))
    expect(manifest.exports['.']).toEqual({
      import: { types: './index.d.mts', default: './index.mjs' },
      require: { types: './index.d.ts', default: './index.js' },
    })
    expect(manifest.files).toEqual(expect.arrayContaining(['index.d.ts', 'index.d.mts']))
  })
})
