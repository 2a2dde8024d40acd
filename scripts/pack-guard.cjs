// prepack: refuses to pack procward without its platform packages. The main
// package ships no binary; it reaches one only through optionalDependencies
// on procward-<platform>@<version>. Packed without them (`npm pack` of a
// checkout), it installs everywhere and loads nowhere. They are added by
// scripts/prepublish.cjs (the prepublishOnly of `npm publish`, which
// publishes npm/<platform>/ first) or by scripts/pack.sh.
const { readFileSync } = require('node:fs')
const { join } = require('node:path')

const pkg = JSON.parse(readFileSync(join(process.cwd(), 'package.json'), 'utf8'))
// The platforms the loader looks for: one per napi target (a test holds them equal).
const keys = require(join(process.cwd(), 'platform.js')).SUPPORTED
const have = pkg.optionalDependencies ?? {}
const missing = keys.map((k) => `${pkg.name}-${k}`).filter((name) => have[name] !== pkg.version)
if (missing.length > 0) {
  console.error(
    `${pkg.name}: refusing to pack ${pkg.name}@${pkg.version} without its platform packages: ` +
      `optionalDependencies lack ${missing.map((n) => `${n}@${pkg.version}`).join(', ')}. ` +
      'Without them no install can bring a native binary. Publish with `npm publish` ' +
      '(its prepublishOnly publishes npm/<platform>/ and adds them), ' +
      'or pack with `bash scripts/pack.sh`.',
  )
  process.exit(1)
}
