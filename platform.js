// Which prebuilt binary serves this process, and the errors when none does.
// Pure except for `currentKey()`, which reads the running process; the rest
// takes its facts as arguments so that tests can ask about any platform.

const { readFileSync } = require('node:fs')

/** Every platform a binary is built for, as `procward-<key>` packages. */
const SUPPORTED = Object.freeze([
  'linux-x64-gnu',
  'linux-x64-musl',
  'linux-arm64-gnu',
  'linux-arm64-musl',
  'darwin-x64',
  'darwin-arm64',
  'win32-x64',
])

/** `process.platform`-`process.arch`, plus the C library on Linux. */
function platformKey({ platform, arch, musl }) {
  if (platform === 'linux') return `linux-${arch}-${musl ? 'musl' : 'gnu'}`
  return `${platform}-${arch}`
}

/**
 * Is this Node linked against musl? The binary must match the C library of
 * the running Node, not of the distribution. `ldd` names its C library (a
 * glibc script or musl's loader); without it, Node's own report says which
 * glibc it runs on, and a musl build has none to report.
 */
function detectMusl({ readLdd, report }) {
  let ldd = null
  try {
    ldd = readLdd()
  } catch {
    // No /usr/bin/ldd (minimal images): ask Node.
  }
  if (ldd !== null) return ldd.includes('musl')
  try {
    const header = report()?.header
    if (header && typeof header === 'object') return !header.glibcVersionRuntime
  } catch {
    // No report support (some non-Node runtimes): assume glibc, the common case.
  }
  return false
}

function currentKey() {
  const musl =
    process.platform === 'linux' &&
    detectMusl({
      readLdd: () => readFileSync('/usr/bin/ldd', 'latin1'),
      report: () => process.report?.getReport(),
    })
  return platformKey({ platform: process.platform, arch: process.arch, musl })
}

function coded(message, code, props) {
  const err = new Error(message)
  err.code = code
  return Object.assign(err, props)
}

/** No binary is built for this platform. */
function unsupportedPlatform(key) {
  return coded(
    `procward has no native binary for ${key}; it is built for ${SUPPORTED.join(', ')}`,
    'ERR_PROCWARD_UNSUPPORTED_PLATFORM',
    { platform: key, supported: [...SUPPORTED] },
  )
}

/**
 * A binary is built for this platform and this package lists its package
 * among its optionalDependencies, but that package is not installed.
 */
function binaryNotFound(key, packageName) {
  return coded(
    `procward's native binary for ${key} is not installed: the package manager skipped the optional ` +
      `dependency ${packageName} (installed with --no-optional, or a lockfile made on another platform?). ` +
      `Reinstall, or add ${packageName} to your dependencies.`,
    'ERR_PROCWARD_BINARY_NOT_FOUND',
    { platform: key, packageName },
  )
}

/**
 * This copy of procward lists no platform package for this platform: a
 * checkout not built yet, or a package packed without its platform packages
 * (`npm pack` of a checkout). No package manager can bring the binary.
 */
function binaryNotPackaged(key, packageName, version, localPath) {
  return coded(
    `procward ${version} has no native binary for ${key}: neither a local build (${localPath}) ` +
      `nor ${packageName} in its optionalDependencies. This copy was packed without its platform packages, ` +
      'or is a checkout not built yet. In a checkout, build it (`pnpm run build`); ' +
      'otherwise install procward from the npm registry, whose package lists every platform package.',
    'ERR_PROCWARD_BINARY_NOT_PACKAGED',
    { platform: key, packageName },
  )
}

/** The platform package is from another release than this package. */
function binaryVersionMismatch(key, packageName, found, wanted) {
  return coded(
    `procward ${wanted} found ${packageName} ${found}; both must be the same version (reinstall procward)`,
    'ERR_PROCWARD_BINARY_VERSION_MISMATCH',
    { platform: key, packageName },
  )
}

module.exports = {
  SUPPORTED,
  platformKey,
  detectMusl,
  currentKey,
  unsupportedPlatform,
  binaryNotFound,
  binaryNotPackaged,
  binaryVersionMismatch,
}
