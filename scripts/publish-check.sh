#!/usr/bin/env bash
# The release as users meet it, end to end, against throwaway npm registries
# on loopback (Verdaccio, storage in a temp dir, no uplinks):
#   1. a staged copy of the checkout refuses `npm pack` (no platform packages);
#   2. `npm publish` there, the release command: its prepublishOnly
#      (scripts/prepublish.cjs) publishes every npm/<platform>/ package and
#      adds them to optionalDependencies, then the main package goes out;
#   3. the published tarballs, fetched back: the main one lists them, ships
#      no binary, no scripts or devDependencies, and every file its README
#      links to; each platform one has its LICENSE and repository;
#      @arethetypeswrong/cli finds the types clean;
#   4. `pnpm add procward` in a fresh project takes this platform's binary
#      through optionalDependencies, and no other platform's; the installed
#      package spawns a real process and reports its exit, from CJS and ESM;
#   5. on a second, empty registry, this platform alone, exactly as
#      docs/contributing.md ("Publishing", this platform alone) says:
#      `npm run pack:all`, `npm publish` of ./dist/procward-<platform>-*.tgz,
#      then of the main tarball; `npm install procward` and `pnpm add
#      procward` in fresh projects, and the same run there.
# This machine's binary is the local build (`pnpm run build`). The other
# platforms' packages carry the cross-built binaries where
# scripts/cross-build.sh left them in npm/<platform>/, else a placeholder
# file: they are published only so that the install sees every package a
# real release has (and must skip them by os/cpu/libc); none is ever loaded.
# The tools come from the npm registry into procward's cache, as
# scripts/test.sh's: never devDependencies.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/env.sh
. scripts/env.sh

VERDACCIO_VERSION=6.8.0
ATTW_VERSION=0.18.5

# npm install into $PROCWARD_CACHE/<dir>; $3: the package.json to start from.
cached_install() {
  local dir="$PROCWARD_CACHE/$1"
  if [ ! -e "$dir/.installed" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    printf '%s\n' "$3" >"$dir/package.json"
    (cd "$dir" && npm install --no-fund --no-audit --no-save "$2" >&2)
    touch "$dir/.installed"
  fi
  echo "$dir"
}
# Verdaccio 6.8 on Node 20 wants node-fetch 2.7.0 (the override).
VERDACCIO_DIR="$(cached_install "verdaccio@$VERDACCIO_VERSION" "verdaccio@$VERDACCIO_VERSION" \
  '{"private":true,"overrides":{"node-fetch":"2.7.0"}}')"
ATTW_DIR="$(cached_install "arethetypeswrong-cli@$ATTW_VERSION" "@arethetypeswrong/cli@$ATTW_VERSION" '{"private":true}')"

VERSION="$(node -p 'require("./package.json").version')"
KEY="$(node -p 'require("./platform.js").currentKey()')"
[ -f "procward.$KEY.node" ] || { echo "publish-check: no local build procward.$KEY.node (pnpm run build)" >&2; exit 1; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/procward-publish.XXXXXX")"
REGISTRY_PID=
stop_registry() {
  if [ -n "$REGISTRY_PID" ]; then
    kill "$REGISTRY_PID" 2>/dev/null || true
    wait "$REGISTRY_PID" 2>/dev/null || true
    REGISTRY_PID=
  fi
}
cleanup() {
  stop_registry
  rm -rf "$WORK"
}
trap cleanup EXIT

# ---- a registry --------------------------------------------------------------
# start_registry NAME: an empty Verdaccio under $WORK/NAME with a user who
# may publish; sets REGISTRY and points every npm and pnpm below
# (prepublish.cjs's npm publish too) at it, and only at it.
start_registry() {
  local dir="$WORK/$1" port token
  port="$(node -e '
    const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close() })')"
  REGISTRY="http://127.0.0.1:$port/"
  mkdir -p "$dir"
  cat >"$dir/config.yaml" <<EOF
storage: $dir/storage
auth:
  htpasswd:
    file: $dir/htpasswd
uplinks: {}
packages:
  '**':
    access: \$all
    publish: \$authenticated
web:
  enable: false
server:
  keepAliveTimeout: 0
log: { type: stdout, format: pretty, level: warn }
EOF
  node "$VERDACCIO_DIR/node_modules/verdaccio/bin/verdaccio" \
    --config "$dir/config.yaml" --listen "127.0.0.1:$port" >"$dir/log" 2>&1 &
  REGISTRY_PID=$!
  for _ in $(seq 1 300); do
    curl -fsS "${REGISTRY}-/ping" >/dev/null 2>&1 && break
    kill -0 "$REGISTRY_PID" 2>/dev/null || { cat "$dir/log" >&2; exit 1; }
    sleep 0.1
  done
  curl -fsS "${REGISTRY}-/ping" >/dev/null || { cat "$dir/log" >&2; exit 1; }
  token="$(curl -fsS -X PUT -H 'content-type: application/json' \
    -d '{"name":"publisher","password":"publish-check"}' \
    "${REGISTRY}-/user/org.couchdb.user:publisher" | node -p 'JSON.parse(require("fs").readFileSync(0)).token')"
  cat >"$dir/npmrc" <<EOF
registry=$REGISTRY
//127.0.0.1:$port/:_authToken=$token
fund=false
audit=false
update-notifier=false
EOF
  export NPM_CONFIG_USERCONFIG="$dir/npmrc" npm_config_registry="$REGISTRY"
  echo "publish-check: registry $REGISTRY (verdaccio $VERDACCIO_VERSION, $1)"
}

# ---- a staged checkout -------------------------------------------------------
STAGE="$WORK/stage"
mkdir -p "$STAGE"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do
    [ -e "$f" ] || continue # deleted in the work tree
    mkdir -p "$STAGE/$(dirname "$f")"
    cp -p "$f" "$STAGE/$f"
  done
# The same checkout for the documented local publish (5), before the
# release command rewrites its package.json, with this machine's build
# where `pnpm run build` leaves it (`npm run pack:all` packs that one).
cp -a "$STAGE" "$WORK/stage-local"
cp "procward.$KEY.node" "$WORK/stage-local/"
for dir in npm/*/; do
  k="$(basename "$dir")"
  if [ "$k" = "$KEY" ]; then
    cp "procward.$KEY.node" "$STAGE/npm/$k/"
  elif [ -f "npm/$k/procward.$k.node" ]; then
    cp "npm/$k/procward.$k.node" "$STAGE/npm/$k/"
  else
    printf 'placeholder: not a binary (publish-check)\n' >"$STAGE/npm/$k/procward.$k.node"
  fi
done
mapfile -t PLATFORMS < <(node -p 'require("./platform.js").SUPPORTED.join("\n")')
# The documented local publish packs first, with the user's own npm and
# pnpm configuration (the registries come after).
LOCAL="$WORK/stage-local"
(cd "$LOCAL" && npm run pack:all) >"$WORK/pack-local.log" 2>&1 || { cat "$WORK/pack-local.log" >&2; exit 1; }

start_registry release

# 1. Without its platform packages, the package is refused.
if (cd "$STAGE" && npm pack --pack-destination "$WORK" >"$WORK/refused.log" 2>&1); then
  echo "publish-check: npm pack of a checkout was not refused" >&2
  exit 1
fi
grep -q 'refusing to pack' "$WORK/refused.log" || { cat "$WORK/refused.log" >&2; exit 1; }
echo "publish-check: npm pack of the checkout refused (no platform packages)"

# 2. The release command.
(cd "$STAGE" && npm publish) >"$WORK/publish.log" 2>&1 || { cat "$WORK/publish.log" >&2; exit 1; }
for k in "${PLATFORMS[@]}" ""; do
  name="procward${k:+-$k}"
  got="$(npm view "$name@$VERSION" version)"
  [ "$got" = "$VERSION" ] || { echo "publish-check: $name@$VERSION not published" >&2; exit 1; }
done
echo "publish-check: npm publish published procward@$VERSION and ${#PLATFORMS[@]} platform packages"

# 3. What was published, fetched back into DIR ($1).
check_published() {
  local dir="$1"
  mkdir -p "$dir/main" "$dir/platform"
  (cd "$dir" && npm pack "procward@$VERSION" "procward-$KEY@$VERSION" >/dev/null 2>&1)
  tar xzf "$dir/procward-$VERSION.tgz" -C "$dir/main"
  tar xzf "$dir/procward-$KEY-$VERSION.tgz" -C "$dir/platform"
  node -e '
    const fs = require("fs")
    const path = require("path")
    const [dir, root, version, key, ...keys] = process.argv.slice(1)
    const main = dir + "/main/package"
    const pkg = require(main + "/package.json")
    const want = Object.fromEntries(keys.map((k) => ["procward-" + k, version]))
    if (JSON.stringify(pkg.optionalDependencies) !== JSON.stringify(want))
      throw new Error("published optionalDependencies: " + JSON.stringify(pkg.optionalDependencies))
    // Of the checkout alone: they name scripts/, tests and tools it does not ship.
    for (const field of ["scripts", "devDependencies"])
      if (field in pkg) throw new Error("the published manifest keeps " + field + ": " + JSON.stringify(pkg[field]))
    const binaries = fs.readdirSync(main, { recursive: true }).filter((f) => f.endsWith(".node"))
    if (binaries.length) throw new Error("the main package ships binaries: " + binaries)
    // Every link of its README to a file lands inside the package.
    const readme = fs.readFileSync(main + "/README.md", "utf8")
    const dead = [...readme.matchAll(/\]\(([^)\s]+)\)/g)]
      .map((m) => m[1])
      .filter((l) => !/^[a-z][a-z0-9+.-]*:/i.test(l) && !l.startsWith("#"))
      .map((l) => l.split("#")[0])
      .filter((l) => !fs.existsSync(path.join(main, l)))
    if (dead.length) throw new Error("README links to files the package does not ship: " + [...new Set(dead)].join(", "))
    const license = fs.readFileSync(root + "/LICENSE", "utf8")
    if (fs.readFileSync(main + "/LICENSE", "utf8") !== license) throw new Error("procward: LICENSE differs from the checkout one")
    // The platform package: its LICENSE, and where its source is.
    const plat = dir + "/platform/package"
    const pm = require(plat + "/package.json")
    if (!fs.existsSync(plat + "/LICENSE") || fs.readFileSync(plat + "/LICENSE", "utf8") !== license)
      throw new Error("procward-" + key + " ships no LICENSE, or another one")
    const repo = { ...pkg.repository, directory: "npm/" + key }
    if (JSON.stringify(pm.repository) !== JSON.stringify(repo))
      throw new Error("procward-" + key + " repository: " + JSON.stringify(pm.repository))
    if (pm.license !== pkg.license) throw new Error("procward-" + key + " license: " + pm.license)
  ' "$dir" "$ROOT" "$VERSION" "$KEY" "${PLATFORMS[@]}"
  echo "publish-check: procward@$VERSION as published: every platform package listed; no binary, scripts or devDependencies; every file its README links to; procward-$KEY with its LICENSE and repository"
}
check_published "$WORK/published"
"$ATTW_DIR/node_modules/.bin/attw" --format ascii "$WORK/published/procward-$VERSION.tgz"

# 4. A user's install: install_and_run DIR npm|pnpm makes a fresh project
# there, installs procward@VERSION from the registry, and runs it.
cat >"$WORK/check.cjs" <<'EOF'
// From the installed package, by name: a supervised child's exit.
const assert = require('node:assert')
const { createRequire } = require('node:module')
async function main() {
  const procward = require('procward')
  const esm = await import('procward')
  assert.strictEqual(esm.spawnSupervised, procward.spawnSupervised)
  const binary = createRequire(require.resolve('procward')).resolve(`procward-${process.argv[2]}`)
  const child = procward.spawnSupervised('sh', ['-c', 'exit 7'])
  const exit = await child.exited
  assert.deepStrictEqual(exit, { pid: child.pid, code: 7, signal: null })
  assert.strictEqual(procward.isProcessRunning(child.pid, child.identity), false)
  const sleeper = esm.spawnSupervised('sleep', ['1000'])
  assert.strictEqual(esm.isProcessRunning(sleeper.pid, sleeper.identity), true)
  const stopped = await sleeper.stop({ graceMs: 5000 })
  assert.strictEqual(stopped.outcome, 'exited')
  assert.strictEqual(esm.isProcessRunning(sleeper.pid), false)
  assert.ok(require.cache[binary], 'the binary came from the platform package')
  console.log(`publish-check: the installed procward ran: sh exited ${exit.code}, sleep stopped by ${stopped.signals.join(',')}`)
}
main().catch((err) => {
  console.error(err)
  process.exit(1)
})
EOF
install_and_run() {
  local app="$1" tool="$2" installed
  mkdir "$app"
  printf '{ "name": "procward-publish-check-app", "private": true, "version": "0.0.0" }\n' >"$app/package.json"
  if [ "$tool" = pnpm ]; then
    (cd "$app" && pnpm add "procward@$VERSION" --registry "$REGISTRY" \
      --store-dir "$app.pnpm-store" --reporter=append-only) >"$app.log" 2>&1 ||
      { cat "$app.log" >&2; exit 1; }
    installed="$(ls "$app/node_modules/.pnpm" | grep '^procward-' || true)"
    [ "$installed" = "procward-$KEY@$VERSION" ] ||
      { echo "publish-check: installed platform packages: ${installed:-none}; want procward-$KEY@$VERSION only" >&2; exit 1; }
  else
    (cd "$app" && npm install "procward@$VERSION" --registry "$REGISTRY" --cache "$app.npm-cache") >"$app.log" 2>&1 ||
      { cat "$app.log" >&2; exit 1; }
    installed="$(cd "$app/node_modules" && ls -d procward-* 2>/dev/null || true)"
    [ "$installed" = "procward-$KEY" ] ||
      { echo "publish-check: installed platform packages: ${installed:-none}; want procward-$KEY only" >&2; exit 1; }
  fi
  echo "publish-check: $tool installed procward@$VERSION, procward-$KEY and no other platform package"
  cp "$WORK/check.cjs" "$app/"
  (cd "$app" && node check.cjs "$KEY")
}
install_and_run "$WORK/app" pnpm
stop_registry

# 5. This platform alone, on an empty registry, exactly as
# docs/contributing.md ("Publishing", this platform alone) says.
start_registry local
# ./ first: npm takes dist/x.tgz for a GitHub repository, dist/x.tgz.git.
for t in "./dist/procward-$KEY-$VERSION.tgz" "./dist/procward-$VERSION.tgz"; do
  (cd "$LOCAL" && npm publish "$t" --registry "$REGISTRY") >>"$WORK/publish-local.log" 2>&1 ||
    { cat "$WORK/publish-local.log" >&2; exit 1; }
done
echo "publish-check: npm publish ./dist/procward-$KEY-$VERSION.tgz, then ./dist/procward-$VERSION.tgz: this platform alone"
check_published "$WORK/published-local"
install_and_run "$WORK/app-npm" npm
install_and_run "$WORK/app-pnpm" pnpm
echo "publish-check: ok"
