#!/usr/bin/env bash
# Installs everything procward needs to build and test, assuming only node,
# npm, cargo and python3 with pip: pnpm (the pinned version, privately: see
# env.sh), the node modules, the release addon. On x86_64 glibc Linux that
# build is linked by zig against glibc 2.17, as it ships (scripts/build.sh:
# zig comes from PyPI's `ziglang`, at the version scripts/cross-toolchain.sh
# pins, installed on first use) and checked to need nothing newer.
# Safe to rerun; a rerun is a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/env.sh
. scripts/env.sh

if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version)" != "$PROCWARD_PNPM_VERSION" ]; then
  echo "bootstrap: installing pnpm@$PROCWARD_PNPM_VERSION into $PROCWARD_PNPM_DIR (your global pnpm, if any, is untouched)" >&2
  mkdir -p "$PROCWARD_PNPM_DIR"
  npm install --prefix "$PROCWARD_PNPM_DIR" --no-save --no-fund --no-audit --no-package-lock "pnpm@$PROCWARD_PNPM_VERSION" >&2
  # shellcheck source=scripts/env.sh
  . scripts/env.sh
fi
# procward/pg's tests need a PostgreSQL server and nftables (host loss on
# loopback), the PID 1 tests tini. Installed only where we are root with apt; elsewhere those
# tests say why they skip.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  missing=()
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
  command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || missing+=(nftables)
  # tini: procward run as PID 1 is tested beside tini as PID 1 (__test__/cli/pid-one).
  command -v tini >/dev/null 2>&1 || missing+=(tini)
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "bootstrap: installing ${missing[*]} (for procward/pg's tests)" >&2
    { apt-get -o DPkg::Lock::Timeout=300 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}"; } >&2 ||
      echo "bootstrap: could not install ${missing[*]}; procward/pg's tests will skip" >&2
  fi
fi
pnpm install --frozen-lockfile --reporter=append-only >&2
pnpm run build >&2
