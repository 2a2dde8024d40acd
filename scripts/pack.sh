#!/usr/bin/env bash
# Packs procward as it is published, napi-rs style, into DEST (default dist/):
#   procward-<version>.tgz           JS, types and the loader, no binary; its
#                                    package.json gains optionalDependencies
#                                    on every procward-<platform>@<version>
#                                    and loses scripts and devDependencies;
#   procward-<platform>-<version>.tgz  one per npm/<platform>/ that has its
#                                    binary (the local build procward.<platform>.node,
#                                    else npm/<platform>/procward.<platform>.node
#                                    from scripts/cross-build.sh).
# The package manager installs the one platform package whose os/cpu/libc
# match; binding.js loads it. optionalDependencies are added here, not kept
# in package.json: the lockfile cannot record packages that are not
# published yet, so a frozen install of this repository would fail. The
# main package is packed from a staged copy of the files `npm pack` would
# take, with them added: a plain `npm pack` of the checkout is refused
# (scripts/pack-guard.cjs, the prepack script).
# Publish the platform packages first, then the main one (`npm publish`
# does both: see scripts/publish-check.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="$(mkdir -p "${1:-$ROOT/dist}" && cd "${1:-$ROOT/dist}" && pwd)"
cd "$ROOT"
# The project's pnpm (packs as it installs: workspace-free, no lifecycle
# surprises), from its cache when it is not on PATH: `npm run pack:all`
# works from any shell once `npm run setup` has run.
. "$ROOT/scripts/env.sh"
command -v pnpm >/dev/null || {
  echo "pack: pnpm not found; run \`npm run setup\` (scripts/bootstrap.sh) first" >&2
  exit 1
}
WORK="$(mktemp -d "${TMPDIR:-/tmp}/procward-pack.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

VERSION="$(node -p 'require("./package.json").version')"
# napi target triples → platform keys, as the loader names them (linux-x64-gnu,
# darwin-arm64, win32-x64: process.platform-process.arch, plus the C library on Linux).
mapfile -t KEYS < <(node -e '
  const { targets } = require("./package.json").napi
  const cpu = { x86_64: "x64", aarch64: "arm64" }
  for (const t of targets) {
    const [arch, , os, abi] = t.split("-")
    if (os === "darwin") console.log(`darwin-${cpu[arch]}`)
    else if (os === "windows") console.log(`win32-${cpu[arch]}`)
    else console.log(`${os}-${cpu[arch]}-${abi}`)
  }')

for key in "${KEYS[@]}"; do
  # A local build of this machine's platform first (fresh from `pnpm run
  # build`), else what scripts/cross-build.sh put in npm/<platform>/.
  binary="procward.$key.node"
  [ -f "$binary" ] || binary="npm/$key/procward.$key.node"
  [ -f "$binary" ] || { echo "pack: no binary for $key, skipped" >&2; continue; }
  mkdir -p "$WORK/$key"
  cp "npm/$key/package.json" "npm/$key/README.md" "npm/$key/LICENSE" "$WORK/$key/"
  cp "$binary" "$WORK/$key/procward.$key.node"
  (cd "$WORK/$key" && pnpm pack --pack-destination "$DEST" >/dev/null)
  echo "pack: procward-$key-$VERSION.tgz"
done

# What `npm pack` would take from the checkout, staged.
mkdir -p "$WORK/main"
npm pack --dry-run --json --ignore-scripts 2>/dev/null |
  node -e 'for (const f of JSON.parse(require("fs").readFileSync(0, "utf8"))[0].files) console.log(f.path)' |
  while IFS= read -r f; do
    mkdir -p "$WORK/main/$(dirname "$f")"
    cp "$f" "$WORK/main/$f"
  done
node -e '
  const fs = require("fs")
  const [file, version, ...keys] = process.argv.slice(1)
  const pkg = JSON.parse(fs.readFileSync(file, "utf8"))
  pkg.optionalDependencies = Object.fromEntries(keys.map((k) => [`procward-${k}`, version]))
  // As published: no scripts or devDependencies, which belong to the
  // checkout (they name scripts/, tests and tools the package lacks).
  delete pkg.scripts
  delete pkg.devDependencies
  fs.writeFileSync(file, `${JSON.stringify(pkg, null, 2)}\n`)
' "$WORK/main/package.json" "$VERSION" "${KEYS[@]}"
(cd "$WORK/main" && pnpm pack --pack-destination "$DEST" >/dev/null)
echo "pack: procward-$VERSION.tgz (optionalDependencies: ${KEYS[*]})"
