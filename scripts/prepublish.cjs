// prepublishOnly of `npm publish`, the release command. Publishes every
// platform package, npm/<platform>/ with its binary procward.<platform>.node
// (scripts/cross-build.sh leaves them there), then adds them to this
// package.json's optionalDependencies and drops its scripts and
// devDependencies, so that npm packs and publishes the main package as it
// ships (npm reads the manifest again after this script).
// Refuses before publishing anything when a platform package is missing, is
// misnamed, has another version or has no binary: a release without one of
// them would leave that platform's users with ERR_PROCWARD_BINARY_NOT_FOUND.
// A platform package already published at this version is left as it is
// (a release retried after a failure).
//
// Not `napi prepublish`: it names the windows-gnu package win32-x64-gnu,
// where procward's loader, npm/ directory and builds say win32-x64.
// The flags given to `npm publish` reach the inner ones through npm's
// environment (npm_config_*: --registry, --dry-run). On --dry-run too,
// package.json gains the optionalDependencies: what a real publish packs.
const { execFileSync } = require('node:child_process')
const { existsSync, readFileSync, statSync, writeFileSync } = require('node:fs')
const { join } = require('node:path')

const root = process.cwd()
const pkgPath = join(root, 'package.json')
const pkg = JSON.parse(readFileSync(pkgPath, 'utf8'))
const { SUPPORTED } = require(join(root, 'platform.js'))

const problems = []
// Each platform package ships a copy of the project's LICENSE.
const licensePath = join(root, 'LICENSE')
const projectLicense = existsSync(licensePath) ? readFileSync(licensePath, 'utf8') : null
if (projectLicense === null) problems.push('LICENSE is missing')
const packages = SUPPORTED.map((key) => {
  const dir = join(root, 'npm', key)
  const name = `${pkg.name}-${key}`
  const manifestPath = join(dir, 'package.json')
  if (!existsSync(manifestPath)) {
    problems.push(`npm/${key}/package.json is missing`)
    return { key, dir, name }
  }
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'))
  if (manifest.name !== name) problems.push(`npm/${key}/package.json names ${manifest.name}, not ${name}`)
  if (manifest.version !== pkg.version) {
    problems.push(`npm/${key}/package.json is version ${manifest.version}, not ${pkg.version}`)
  }
  const binary = join(dir, `procward.${key}.node`)
  if (!existsSync(binary) || statSync(binary).size === 0) problems.push(`npm/${key}/procward.${key}.node is missing`)
  const license = join(dir, 'LICENSE')
  if (projectLicense !== null && (!existsSync(license) || readFileSync(license, 'utf8') !== projectLicense)) {
    problems.push(`npm/${key}/LICENSE is missing or differs from LICENSE`)
  }
  return { key, dir, name }
})
if (problems.length > 0) {
  console.error(`${pkg.name}: not publishing ${pkg.name}@${pkg.version}; its platform packages are not ready:`)
  for (const p of problems) console.error(`  ${p}`)
  process.exit(1)
}

function published(name) {
  try {
    const out = execFileSync('npm', ['view', `${name}@${pkg.version}`, 'version'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    })
    return out.trim() === pkg.version
  } catch {
    return false // E404: not published yet
  }
}

for (const { dir, name } of packages) {
  if (published(name)) {
    console.log(`${name}@${pkg.version} is published already: left as it is`)
    continue
  }
  execFileSync('npm', ['publish'], { cwd: dir, stdio: 'inherit' })
}

pkg.optionalDependencies = {
  ...pkg.optionalDependencies,
  ...Object.fromEntries(packages.map(({ name }) => [name, pkg.version])),
}
// The manifest as published: scripts and devDependencies are the
// checkout's own (scripts/, tests, tools the package does not ship).
delete pkg.scripts
delete pkg.devDependencies
writeFileSync(pkgPath, `${JSON.stringify(pkg, null, 2)}\n`)
console.log(`${pkg.name}: optionalDependencies on ${packages.map(({ name }) => name).join(', ')}`)
console.log(
  `${pkg.name}: package.json rewritten as published (no scripts, no devDependencies): \`git checkout package.json\` restores it`,
)
