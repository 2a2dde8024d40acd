#!/usr/bin/env bash
# `pnpm run build` (release) and `pnpm run build:debug`: napi build of this
# machine's addon, procward.<platform>.node in the checkout's root.
#
# On x86_64 glibc Linux the release build is the binary that ships
# (procward-linux-x64-gnu), so it is linked as the arm64 one is: by zig
# against glibc 2.17 (scripts/cross-toolchain.sh --zig-only installs zig
# from PyPI and writes the wrapper), then checked by scripts/check-binary.cjs,
# which refuses a symbol newer than GLIBC_2.17. Linked by the system's cc it
# would ask for the build machine's glibc (2.34 here: no Debian 11, Ubuntu
# 20.04, RHEL 8 or Amazon Linux 2). The debug build keeps the system's
# linker: it is never shipped.
#
# Usage: scripts/build.sh [--release] [napi build options...]
set -euo pipefail
cd "$(dirname "$0")/.."

release=0
for a in "$@"; do
  if [ "$a" = --release ]; then release=1; fi
done
KEY="$(node -p 'require("./platform.js").currentKey()')"
zig=0
if [ "$release" = 1 ] && [ "$KEY" = linux-x64-gnu ]; then
  zig=1
  LINKERS="$(bash scripts/cross-toolchain.sh --zig-only)"
  # In RUSTFLAGS, not CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER: with
  # --target (napi passes it) RUSTFLAGS reach only the target's crates, so
  # build scripts and proc macros, which run here, keep the system's linker
  # (the target's linker setting would link them too: the host is the target).
  export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C linker=$LINKERS/x86_64-unknown-linux-gnu"
fi
napi build --platform --no-js --dts binding.d.ts "$@"
# Elsewhere (a Mac, an arm64 or musl machine) the build is a developer's,
# by the system's linker; the shipped ones come from scripts/cross-build.sh,
# which checks each.
if [ "$zig" = 1 ]; then
  node scripts/check-binary.cjs "procward.$KEY.node" "$KEY"
fi
