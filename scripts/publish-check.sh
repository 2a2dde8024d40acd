#!/usr/bin/env bash
# The release as users meet it, end to end, against a throwaway npm registry
# on loopback (Verdaccio, storage in a temp dir, no uplinks):
#   1. a staged copy of the checkout refuses `npm pack` (no platform packages);
#   2. `npm publish` there, the release command: its prepublishOnly
#      (scripts/prepublish.cjs) publishes every npm/<platform>/ package and
#      adds them to optionalDependencies, then the main package goes out;
#   3. the published main tarball, fetched back, has them, ships no binary,
#      and @arethetypeswrong/cli finds its types clean;
#   4. `pnpm add procward` in a fresh project takes this platform's binary
#      through optionalDependencies, and no other platform's; the installed
#      package spawns a real process and reports its exit, from CJS and ESM.
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
KEY="$(node -p 'require("./lib/platform").currentKey()')"
[ -f "procward.$KEY.node" ] || { echo "publish-check: no local build procward.$KEY.node (pnpm run build)" >&2; exit 1; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/procward-publish.XXXXXX")"
REGISTRY_PID=
cleanup() {
  if [ -n "$REGISTRY_PID" ]; then
    kill "$REGISTRY_PID" 2>/dev/null || true
    wait "$REGISTRY_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# ---- the registry ------------------------------------------------------------
PORT="$(node -e '
  const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close() })')"
REGISTRY="http://127.0.0.1:$PORT/"
mkdir -p "$WORK/registry"
cat >"$WORK/registry/config.yaml" <<EOF
storage: $WORK/registry/storage
auth:
  htpasswd:
    file: $WORK/registry/htpasswd
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
  --config "$WORK/registry/config.yaml" --listen "127.0.0.1:$PORT" >"$WORK/registry/log" 2>&1 &
REGISTRY_PID=$!
for _ in $(seq 1 300); do
  curl -fsS "${REGISTRY}-/ping" >/dev/null 2>&1 && break
  kill -0 "$REGISTRY_PID" 2>/dev/null || { cat "$WORK/registry/log" >&2; exit 1; }
  sleep 0.1
done
curl -fsS "${REGISTRY}-/ping" >/dev/null || { cat "$WORK/registry/log" >&2; exit 1; }
TOKEN="$(curl -fsS -X PUT -H 'content-type: application/json' \
  -d '{"name":"publisher","password":"publish-check"}' \
  "${REGISTRY}-/user/org.couchdb.user:publisher" | node -p 'JSON.parse(require("fs").readFileSync(0)).token')"
# Every npm and pnpm below (prepublish.cjs's npm publish too) reads only this.
cat >"$WORK/npmrc" <<EOF
registry=$REGISTRY
//127.0.0.1:$PORT/:_authToken=$TOKEN
fund=false
audit=false
update-notifier=false
EOF
export NPM_CONFIG_USERCONFIG="$WORK/npmrc" npm_config_registry="$REGISTRY"
echo "publish-check: registry $REGISTRY (verdaccio $VERDACCIO_VERSION)"

# ---- a staged checkout -------------------------------------------------------
STAGE="$WORK/stage"
mkdir -p "$STAGE"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do
    [ -e "$f" ] || continue # deleted in the work tree
    mkdir -p "$STAGE/$(dirname "$f")"
    cp -p "$f" "$STAGE/$f"
  done
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

# 1. Without its platform packages, the package is refused.
if (cd "$STAGE" && npm pack --pack-destination "$WORK" >"$WORK/refused.log" 2>&1); then
  echo "publish-check: npm pack of a checkout was not refused" >&2
  exit 1
fi
grep -q 'refusing to pack' "$WORK/refused.log" || { cat "$WORK/refused.log" >&2; exit 1; }
echo "publish-check: npm pack of the checkout refused (no platform packages)"

# 2. The release command.
(cd "$STAGE" && npm publish) >"$WORK/publish.log" 2>&1 || { cat "$WORK/publish.log" >&2; exit 1; }
mapfile -t PLATFORMS < <(node -p 'require("./lib/platform").SUPPORTED.join("\n")')
for k in "${PLATFORMS[@]}" ""; do
  name="procward${k:+-$k}"
  got="$(npm view "$name@$VERSION" version)"
  [ "$got" = "$VERSION" ] || { echo "publish-check: $name@$VERSION not published" >&2; exit 1; }
done
echo "publish-check: npm publish published procward@$VERSION and ${#PLATFORMS[@]} platform packages"

# 3. What was published.
mkdir "$WORK/published"
(cd "$WORK/published" && npm pack "procward@$VERSION" >/dev/null 2>&1)
tar xzf "$WORK/published/procward-$VERSION.tgz" -C "$WORK/published"
node -e '
  const [dir, version, ...keys] = process.argv.slice(1)
  const pkg = require(dir + "/package/package.json")
  const want = Object.fromEntries(keys.map((k) => ["procward-" + k, version]))
  if (JSON.stringify(pkg.optionalDependencies) !== JSON.stringify(want))
    throw new Error("published optionalDependencies: " + JSON.stringify(pkg.optionalDependencies))
  const binaries = require("fs").readdirSync(dir + "/package", { recursive: true }).filter((f) => f.endsWith(".node"))
  if (binaries.length) throw new Error("the main package ships binaries: " + binaries)
' "$WORK/published" "$VERSION" "${PLATFORMS[@]}"
echo "publish-check: the published package lists every platform package and ships no binary"
"$ATTW_DIR/node_modules/.bin/attw" --format ascii "$WORK/published/procward-$VERSION.tgz"

# 4. A user's install.
APP="$WORK/app"
mkdir "$APP"
printf '{ "name": "procward-publish-check-app", "private": true, "version": "0.0.0" }\n' >"$APP/package.json"
(cd "$APP" && pnpm add "procward@$VERSION" --registry "$REGISTRY" \
  --store-dir "$WORK/pnpm-store" --reporter=append-only) >"$WORK/add.log" 2>&1 ||
  { cat "$WORK/add.log" >&2; exit 1; }
installed="$(ls "$APP/node_modules/.pnpm" | grep '^procward-' || true)"
[ "$installed" = "procward-$KEY@$VERSION" ] ||
  { echo "publish-check: installed platform packages: ${installed:-none}; want procward-$KEY@$VERSION only" >&2; exit 1; }
echo "publish-check: pnpm add procward installed procward-$KEY@$VERSION and no other platform package"
cat >"$APP/check.cjs" <<'EOF'
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
(cd "$APP" && node check.cjs "$KEY")
echo "publish-check: ok"
