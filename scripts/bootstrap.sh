#!/usr/bin/env bash
# Installs everything procward needs to build and test, assuming only node,
# npm and cargo: pnpm (the pinned version), the node modules, the release
# addon. Safe to rerun; a rerun is a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

PNPM_VERSION=12.4.2
if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version)" != "$PNPM_VERSION" ]; then
  echo "bootstrap: installing pnpm@$PNPM_VERSION" >&2
  npm install --global --no-fund --no-audit "pnpm@$PNPM_VERSION" >&2
fi
pnpm install --frozen-lockfile --reporter=append-only >&2
pnpm run build >&2
