#!/usr/bin/env bash
# Installs what building procward for other targets needs, on a Debian 12
# x86_64 machine, and prints the directory of the linker wrappers:
#
#   - Debian's Rust (rustc-web, rust-web-src, cargo-web, rust-web-clippy):
#     the one rustup installs here cannot fetch other targets' standard
#     libraries, Debian's can compile them from source (-Zbuild-std);
#   - zig (PyPI `ziglang`), the linker for every target;
#   - qemu-user and Debian's arm64 C library, to run the aarch64 Linux
#     build (`--with-qemu`);
#   - for Windows (`--with-windows`): mingw-w64 (the linker), an empty
#     libnode.dll/libnode.a (napi-build asks for one; Node-API is resolved at
#     load time on Windows), and Wine 8 with a prefix set to Windows 10 and
#     a ProcessPrng shim (scripts/wine/processprng.c) to run the build;
#   - one linker wrapper per target under the cache directory.
#
# Idempotent: when everything is present it only checks versions and
# rewrites nothing, in well under a second. Needs root for apt-get (CI and
# the developers' machines are root).
#
# Usage: scripts/cross-toolchain.sh [--with-qemu] [--with-windows]
#        scripts/cross-toolchain.sh --zig-only
#   --zig-only: zig and the wrappers, nothing else: what `pnpm run build`
#   needs to link this machine's own x86_64 glibc build against glibc 2.17
#   (scripts/build.sh; bootstrap.sh runs it); no root, no apt-get.
#   → prints the wrapper dir (its sibling macos-sdk is the SDK root for the
#   Apple targets, libnode the LIBNODE_PATH and wine-prefix the WINEPREFIX
#   for Windows)
set -euo pipefail

WITH_QEMU=0
WITH_WINDOWS=0
ZIG_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --zig-only) ZIG_ONLY=1 ;;
    --with-qemu) WITH_QEMU=1 ;;
    --with-windows) WITH_WINDOWS=1 ;;
    *) echo "cross-toolchain: unknown option $arg" >&2; exit 2 ;;
  esac
done

# Oldest Debian Rust that builds the crate (Cargo.toml rust-version, and
# std::io::pipe): bookworm's own 1.85 does not; bookworm-security has 1.96.
MIN_RUST_MINOR=87
ZIG_VERSION=0.17.1
CACHE="${PROCWARD_CROSS_CACHE:-$HOME/.cache/procward/cross}"
WRAPPERS="$CACHE/linkers"

log() { echo "cross-toolchain: $*" >&2; }

debian_rust_ok() {
  [ -x /usr/bin/cargo ] && [ -x /usr/bin/rustc ] && [ -x /usr/bin/cargo-clippy ] &&
    [ -d /usr/lib/rustlib/src/rust/library/std ] || return 1
  local minor
  minor="$(/usr/bin/rustc --version | sed -n 's/^rustc 1\.\([0-9]*\)\..*/\1/p')"
  [ -n "$minor" ] && [ "$minor" -ge "$MIN_RUST_MINOR" ]
}

APT_UPDATED=0
apt_install() {
  if [ "$APT_UPDATED" = 0 ]; then
    # The package lists of a fresh machine are stale or absent; the Rust
    # that is new enough comes from bookworm-security.
    log "apt-get update"
    apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
    APT_UPDATED=1
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "$@" >&2
}

if [ "$ZIG_ONLY" = 0 ] && ! debian_rust_ok; then
  apt_install rustc-web rust-web-src cargo-web rust-web-clippy
  debian_rust_ok || {
    log "Debian's Rust is $(/usr/bin/rustc --version 2>&1); need 1.$MIN_RUST_MINOR or newer"
    exit 1
  }
fi

# qemu-user runs Node's arm64 build; Debian's arm64 C and C++ runtime is
# the root it loads its shared libraries from (qemu-aarch64 -L).
if [ "$WITH_QEMU" = 1 ] && { ! command -v qemu-aarch64 >/dev/null 2>&1 ||
  [ ! -e /usr/aarch64-linux-gnu/lib/libstdc++.so.6 ]; }; then
  apt_install qemu-user libc6-arm64-cross libstdc++6-arm64-cross libgcc-s1-arm64-cross
fi

# mingw-w64 links the Windows build; Wine runs it.
if [ "$WITH_WINDOWS" = 1 ] && { ! command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 ||
  ! command -v wine >/dev/null 2>&1 || ! command -v wineserver >/dev/null 2>&1; }; then
  apt_install gcc-mingw-w64-x86-64 wine wine64
fi

zig_dir() {
  python3 -c 'import os, ziglang; print(os.path.dirname(ziglang.__file__))' 2>/dev/null
}
ZIG_DIR="$(zig_dir || true)"
if [ -z "$ZIG_DIR" ] || [ "$("$ZIG_DIR/zig" version 2>/dev/null)" != "$ZIG_VERSION" ]; then
  log "pip install ziglang==$ZIG_VERSION"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
    "ziglang==$ZIG_VERSION" >&2
  ZIG_DIR="$(zig_dir)"
fi
ZIG="$ZIG_DIR/zig"

# One wrapper per target: rustc calls it as `cc`; it runs `zig cc` for the
# zig target and drops or rewrites what zig does not take.
#   -arch X, -mmacosx-version-min=V: rustc's Apple flags; -target says both.
#   -liconv: rustc's Apple std asks for it; libSystem already has iconv.
#   a lone -Wl: napi-build passes `-Wl -undefined dynamic_lookup` as three
#     arguments; `-undefined dynamic_lookup` alone is what zig understands
#     (a Node addon resolves napi_* against the node binary at load time).
#   -lgcc_s: glibc targets; zig has no libgcc_s to link against. The
#     unwinder goes in statically instead (-lunwind: zig's LLVM libunwind),
#     so the binary needs nothing of the process that loads it (unlinked,
#     _Unwind_* would be left to whatever libgcc_s the host process has).
#   extra arguments ($3): -Wl,-x for macOS drops local symbols at link time
#     (rustc's own strip needs rust-objcopy, and a strip after the link
#     would void the signature zig puts on an arm64 binary).
write_wrapper() {
  local name="$1" zig_target="$2" extra="${3:-}" file="$WRAPPERS/$1"
  local body
  body="$(cat <<EOF
#!/usr/bin/env bash
# Generated by scripts/cross-toolchain.sh: rustc's linker for $name.
args=()
skip=0
for a in "\$@"; do
  if [ "\$skip" = 1 ]; then skip=0; continue; fi
  case "\$a" in
    -arch) skip=1 ;;
    -mmacosx-version-min=*|-liconv|-Wl|-lgcc_s) ;;
    *) args+=("\$a") ;;
  esac
done
exec "$ZIG" cc -target $zig_target "\${args[@]}"${extra:+ $extra}
EOF
)"
  if [ ! -x "$file" ] || [ "$(cat "$file")" != "$body" ]; then
    printf '%s\n' "$body" >"$file.tmp"
    chmod +x "$file.tmp"
    mv "$file.tmp" "$file"
  fi
}

mkdir -p "$WRAPPERS"
# glibc 2.17 for Linux on both CPUs: the oldest glibc Rust's std supports,
# so the binaries load on every distribution Node's own builds load on
# (Debian 11, Ubuntu 20.04, RHEL 8, Amazon Linux 2 among them). The x86_64
# one links this machine's own build (rustup's Rust, scripts/build.sh).
# The oldest macOS Node 20 runs on, per CPU: without a version zig would
# stamp the newest it knows, and older macOS would refuse the binary.
write_wrapper x86_64-apple-darwin x86_64-macos.10.15 -Wl,-x
write_wrapper aarch64-apple-darwin aarch64-macos.11.0 -Wl,-x
write_wrapper x86_64-unknown-linux-gnu x86_64-linux-gnu.2.17 -lunwind
write_wrapper aarch64-unknown-linux-gnu aarch64-linux-gnu.2.17 -lunwind
write_wrapper x86_64-unknown-linux-musl x86_64-linux-musl
write_wrapper aarch64-unknown-linux-musl aarch64-linux-musl
# Windows links with mingw-w64's gcc, as it is.
if [ "$WITH_WINDOWS" = 1 ]; then
  body='#!/usr/bin/env bash
# Generated by scripts/cross-toolchain.sh: the linker for x86_64-pc-windows-gnu.
exec x86_64-w64-mingw32-gcc "$@"'
  file="$WRAPPERS/x86_64-pc-windows-gnu"
  if [ ! -x "$file" ] || [ "$(cat "$file")" != "$body" ]; then
    printf '%s\n' "$body" >"$file.tmp" && chmod +x "$file.tmp" && mv "$file.tmp" "$file"
  fi
  # napi-build wants a libnode to link against on windows-gnu; napi-sys
  # loads every Node-API symbol from the running node.exe instead, so
  # empty files do.
  mkdir -p "$CACHE/libnode"
  [ -f "$CACHE/libnode/libnode.dll" ] || : >"$CACHE/libnode/libnode.dll"
  [ -f "$CACHE/libnode/libnode.a" ] || x86_64-w64-mingw32-ar rcs "$CACHE/libnode/libnode.a"
  # A Wine prefix set to Windows 10 (Node refuses older ones: exit 216),
  # with the ProcessPrng shim in its system32.
  here="$(cd "$(dirname "$0")" && pwd)"
  prefix="$CACHE/wine-prefix"
  shim="$prefix/drive_c/windows/system32/bcryptprimitives.dll"
  if [ ! -f "$prefix/.procward-win10" ]; then
    log "creating the Wine prefix $prefix (Windows 10)"
    rm -rf "$prefix"
    WINEPREFIX="$prefix" WINEDEBUG=-all WINEARCH=win64 wineboot -i >&2 2>/dev/null || true
    WINEPREFIX="$prefix" WINEDEBUG=-all wine winecfg -v win10 >&2 2>/dev/null
    WINEPREFIX="$prefix" wineserver -w
    touch "$prefix/.procward-win10"
  fi
  if [ ! -f "$shim" ] || [ "$here/wine/processprng.c" -nt "$shim" ]; then
    x86_64-w64-mingw32-gcc -shared -O2 -o "$shim" "$here/wine/processprng.c" \
      "$here/wine/processprng.def" -ladvapi32
  fi
fi

# zig's own macOS SDK stubs (libSystem.tbd, SDKSettings.json): what rustc
# asks xcrun for on a Mac; cross-build.sh names it in SDKROOT.
ln -sfn "$ZIG_DIR/lib/libc/darwin" "$CACHE/macos-sdk"

echo "$WRAPPERS"
