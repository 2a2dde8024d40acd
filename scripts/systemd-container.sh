#!/usr/bin/env bash
# A real systemd for the tests of procward under a service manager
# (__test__/systemd): the host's own Debian systemd booted as PID 1 of a
# container (systemd-nspawn --volatile=yes --boot over the host's `/`: a
# tmpfs root, the host's /usr read-only, its own /etc, /var, pid namespace and
# loopback), with this checkout bound read-only at /opt/procward. Node is
# seen there if it lives under /usr.
#
#   systemd-container.sh start        boot one; prints shell assignments to eval:
#                                       PROCWARD_TEST_SYSTEMD=PID   (the container's init, as the host sees it)
#                                       PROCWARD_TEST_SYSTEMD_DIR=DIR   (for stop)
#   systemd-container.sh stop DIR     power it off, remove its cgroups and DIR
#   systemd-container.sh with CMD...  start one, run CMD with those two exported,
#                                     stop it however CMD ends; CMD's exit status
#
# Drive it with `nsenter -t PID -a systemctl …`. Exits 3 (with the reason on
# stderr) where none can boot here: not root, no cgroup2, no systemd. Where we
# are root with apt and systemd is installed, systemd-nspawn is installed if
# missing (systemd-container, pinned to the installed systemd's version: nothing
# else is upgraded). After stop nothing of it is left on the host: no process,
# cgroup or mount.
set -euo pipefail
# The container outlives any one test: it is not one of the tests' processes
# (whose leak check finds them by this variable).
unset PROCWARD_TEST_TAG
# shellcheck source=scripts/lib-with.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-with.sh"
cd "$(dirname "$0")/.."
CHECKOUT="$(pwd -P)"

die() {
  echo "systemd-container: $*" >&2
  exit 1
}
cannot() {
  echo "systemd-container: cannot boot a systemd container here: $*" >&2
  exit 3
}

V2=/sys/fs/cgroup/unified
V1=/sys/fs/cgroup/systemd
# The cgroup2 tree: a hybrid host has it at /sys/fs/cgroup/unified, a pure
# cgroup2 host at /sys/fs/cgroup.
cgroup2_root() {
  if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then
    echo /sys/fs/cgroup
  elif [ "$(stat -fc %T "$V2" 2>/dev/null)" = cgroup2fs ]; then
    echo "$V2"
  fi
}

install_nspawn() {
  command -v systemd-nspawn >/dev/null 2>&1 && return 0
  local version
  version="$(dpkg-query -W -f='${Version}' systemd 2>/dev/null || true)"
  [ -n "$version" ] || cannot "no systemd-nspawn, and no Debian systemd package to match one to"
  command -v apt-get >/dev/null 2>&1 || cannot "no systemd-nspawn and no apt-get to install it"
  echo "systemd-container: installing systemd-container=$version (systemd-nspawn)" >&2
  if ! DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "systemd-container=$version" >&2; then
    { apt-get -o DPkg::Lock::Timeout=300 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
      "systemd-container=$version"; } >&2 || cannot "could not install systemd-container=$version"
  fi
}

# Removes a cgroup directory tree, deepest first (each must be empty).
remove_cgroup() {
  [ -d "$1" ] || return 0
  find "$1" -depth -type d -exec rmdir {} + 2>/dev/null || true
  [ ! -d "$1" ]
}

# The container's init: nspawn's child running systemd.
init_of() {
  local nspawn="$1" c
  for c in $(cat "/proc/$nspawn/task/$nspawn/children" 2>/dev/null); do
    if [ "$(readlink "/proc/$c/exe" 2>/dev/null)" = /usr/lib/systemd/systemd ] ||
      [ "$(readlink "/proc/$c/exe" 2>/dev/null)" = /lib/systemd/systemd ]; then
      echo "$c"
      return
    fi
  done
}

start() {
  [ "$(id -u)" = 0 ] || cannot "it needs root (systemd-nspawn)"
  local v2
  v2="$(cgroup2_root)"
  [ -n "$v2" ] || cannot "no cgroup2 hierarchy mounted"
  [ -x /usr/lib/systemd/systemd ] || [ -x /lib/systemd/systemd ] || cannot "systemd is not installed"
  command -v nsenter >/dev/null 2>&1 || cannot "no nsenter(1)"
  install_nspawn
  local dir name
  dir="$(mktemp -d /tmp/procward-systemd.XXXXXX)"
  name="procward-$(basename "$dir" | sed 's/^procward-systemd\.//' | tr 'A-Z' 'a-z')"
  echo "$name" >"$dir/name"
  echo "$v2/$name" >"$dir/cgroup2"
  # nspawn makes payload/ and supervisor/ inside the cgroup it runs in: that
  # must be one of our own (in each tree the container's systemd sees), or
  # they are left behind in the root.
  mkdir "$v2/$name"
  if [ "$v2" != /sys/fs/cgroup ] && [ -f "$V1/cgroup.procs" ]; then
    mkdir "$V1/$name"
    echo "$V1/$name" >"$dir/cgroup1"
  fi
  trap 'stop "$dir" >/dev/null 2>&1 || true' EXIT
  # The launcher: moves itself into those cgroups, then becomes nspawn.
  # Session of its own, so that no terminal signal of ours reaches it.
  local v1=""
  [ -f "$dir/cgroup1" ] && v1="$(cat "$dir/cgroup1")"
  SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 setsid bash -c '
    echo $$ >"$1/cgroup.procs"
    [ -z "$2" ] || echo $$ >"$2/cgroup.procs"
    shift 2
    exec "$@"' launcher "$v2/$name" "$v1" \
    systemd-nspawn --quiet --directory=/ --volatile=yes --boot --register=no --keep-unit \
    --machine="$name" --private-network --capability=CAP_SYS_RESOURCE --console=passive \
    --bind-ro="$CHECKOUT":/opt/procward \
    systemd.unit=basic.target systemd.firstboot=off \
    </dev/null >"$dir/console.log" 2>&1 &
  local nspawn=$!
  echo "$nspawn" >"$dir/nspawn"
  local init="" i
  for i in $(seq 300); do
    init="$(init_of "$nspawn")"
    [ -n "$init" ] && break
    kill -0 "$nspawn" 2>/dev/null || {
      cat "$dir/console.log" >&2
      cannot "systemd-nspawn exited (its output above)"
    }
    sleep 0.1
  done
  [ -n "$init" ] || cannot "no init in the container after 30 s"
  echo "$init" >"$dir/init"
  # Booted: basic.target reached and no job left (degraded is fine: some of
  # the host's units cannot run in a container).
  # Until its bus is up, systemctl sees it "offline".
  local state=""
  for i in $(seq 600); do
    state="$(timeout 120 nsenter -t "$init" -a systemctl is-system-running --wait 2>/dev/null || true)"
    [ "$state" = offline ] || [ -z "$state" ] || break
    kill -0 "$nspawn" 2>/dev/null || break
    sleep 0.2
  done
  case "$state" in
  running | degraded) ;;
  *)
    cat "$dir/console.log" >&2
    cannot "the container's systemd did not finish booting (state: ${state:-none})"
    ;;
  esac
  # journald's rate limit off: a unit's LogRateLimitIntervalSec=0 does not
  # reach it here (seen: the default burst, scaled by free space, cut a
  # daemon's output at 32 500 lines), and the tests count every line.
  mkdir -p "/proc/$init/root/etc/systemd/journald.conf.d"
  printf '[Journal]\nRateLimitIntervalSec=0\n' >"/proc/$init/root/etc/systemd/journald.conf.d/procward-tests.conf"
  nsenter -t "$init" -a systemctl restart systemd-journald
  # Its network is loopback only, as online as it will ever be: a unit
  # After=network-online.target (as the documented one) must not wait for
  # systemd-networkd-wait-online's 2 minutes to run out.
  nsenter -t "$init" -a systemctl mask --runtime --quiet systemd-networkd-wait-online.service
  trap - EXIT
  echo "PROCWARD_TEST_SYSTEMD=$init"
  echo "PROCWARD_TEST_SYSTEMD_DIR=$dir"
}

check_dir() {
  [ -n "${1:-}" ] && [ -f "$1/name" ] && [ -f "$1/cgroup2" ] || die "not a directory made by 'systemd-container.sh start': ${1:-(none)}"
}

stop() {
  check_dir "${1:-}"
  local dir="$1" nspawn="" init="" i
  [ -f "$dir/nspawn" ] && nspawn="$(cat "$dir/nspawn")"
  [ -f "$dir/init" ] && init="$(cat "$dir/init")"
  # A pid is ours only while it is still the process we started (nspawn, its
  # init): checked by executable, never signalled blindly.
  if [ -n "$nspawn" ] && [ "$(readlink "/proc/$nspawn/exe" 2>/dev/null)" = /usr/bin/systemd-nspawn ]; then
    [ -n "$init" ] || init="$(init_of "$nspawn")"
    # SIGRTMIN+4: poweroff, the way systemd-nspawn itself asks.
    if [ -n "$init" ] && [ "$(cat "/proc/$init/status" 2>/dev/null | sed -n 's/^PPid:\t//p')" = "$nspawn" ]; then
      kill -s RTMIN+4 "$init" 2>/dev/null || true
    fi
    for i in $(seq 600); do
      kill -0 "$nspawn" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$nspawn" 2>/dev/null; then
      echo "systemd-container: no poweroff after 60 s: killing the container" >&2
      kill -KILL "$nspawn" 2>/dev/null || true
    fi
  fi
  # Whatever is left in its cgroup (a killed nspawn's container) is killed.
  local v2 v1=""
  v2="$(cat "$dir/cgroup2")"
  [ -f "$dir/cgroup1" ] && v1="$(cat "$dir/cgroup1")"
  if [ -d "$v2" ]; then
    for i in $(seq 100); do
      [ -z "$(find "$v2" -name cgroup.procs -exec cat {} + 2>/dev/null)" ] && break
      if [ -f "$v2/cgroup.kill" ]; then echo 1 >"$v2/cgroup.kill" 2>/dev/null || true; fi
      sleep 0.1
    done
  fi
  remove_cgroup "$v2" || echo "systemd-container: could not remove cgroup $v2" >&2
  [ -z "$v1" ] || remove_cgroup "$v1" || echo "systemd-container: could not remove cgroup $v1" >&2
  # nspawn's mount-propagation directory for this machine, and its parents
  # when empty (nspawn makes them; nothing else uses them here).
  local name
  name="$(cat "$dir/name")"
  rm -rf "/run/systemd/nspawn/propagate/$name" "/run/systemd/nspawn/unix-export/$name"
  rmdir /run/systemd/nspawn/propagate /run/systemd/nspawn/unix-export /run/systemd/nspawn 2>/dev/null || true
  rm -rf "$dir"
}

case "${1:-}" in
start) start ;;
stop) stop "${2:-}" ;;
with)
  shift
  with_started systemd-container.sh PROCWARD_TEST_SYSTEMD PROCWARD_TEST_SYSTEMD_DIR "$@"
  ;;
*) die "usage: systemd-container.sh start | stop DIR | with COMMAND [ARGS...]" ;;
esac
