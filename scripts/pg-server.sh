#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests of procward/pg: a fresh cluster
# in a temporary directory, listening on 127.0.0.1 on a free port (and on a
# unix socket in that directory), trust authentication, user `procward`.
#
#   pg-server.sh start          start one; prints shell assignments to eval:
#                                 PROCWARD_TEST_PG_URL=postgres://procward@127.0.0.1:PORT/postgres
#                                 PROCWARD_TEST_PG_DIR=DIR   (for restart and stop)
#   pg-server.sh restart DIR    restart it in place (same port, same data)
#   pg-server.sh stop DIR       stop it and remove DIR
#   pg-server.sh with CMD...    start one, run CMD with those two exported,
#                               stop it however CMD ends; CMD's exit status
#
# Exits 3 (with the reason on stderr) where no server can run here: no
# PostgreSQL binaries, or root without a `postgres` user to run them as
# (initdb refuses root). Needs nothing but the server binaries and node.
set -euo pipefail
# The server outlives any one test: it is not one of the tests' processes
# (whose leak check finds them by this variable).
unset PROCWARD_TEST_TAG
# shellcheck source=scripts/lib-with.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-with.sh"

die() {
  echo "pg-server: $*" >&2
  exit 1
}
cannot() {
  echo "pg-server: cannot start PostgreSQL here: $*" >&2
  exit 3
}

# The newest installed server: Debian keeps each major in its own directory.
find_bindir() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
      echo "$d"
      return
    fi
  done
  if command -v pg_config >/dev/null 2>&1; then
    d="$(pg_config --bindir)"
    [ -x "$d/initdb" ] && {
      echo "$d"
      return
    }
  fi
  d="$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")"
  [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && echo "$d"
  return 0
}

# Runs a command as the server's owner (read from DIR/owner).
as_owner() {
  local dir="$1"
  shift
  local owner
  owner="$(cat "$dir/owner")"
  if [ "$owner" = "$(id -un)" ]; then
    "$@"
  elif command -v runuser >/dev/null 2>&1; then
    runuser -u "$owner" -- "$@"
  else
    su -s /bin/sh "$owner" -c "$(printf '%q ' "$@")"
  fi
}

pg_ctl_in() {
  local dir="$1"
  shift
  as_owner "$dir" "$(cat "$dir/bindir")/pg_ctl" -D "$dir/data" "$@"
}

start() {
  local bindir owner dir port
  bindir="$(find_bindir)"
  [ -n "$bindir" ] || cannot "no PostgreSQL server binaries (initdb, pg_ctl) found; Debian: apt-get install postgresql"
  command -v node >/dev/null 2>&1 || cannot "node is needed to find a free port"
  owner="$(id -un)"
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || cannot "initdb refuses to run as root and there is no 'postgres' user to run it as"
    owner=postgres
  fi
  # Under /tmp when the owner is another user: it must reach the directory.
  local base="${TMPDIR:-/tmp}"
  [ "$owner" = "$(id -un)" ] || base=/tmp
  dir="$(mktemp -d "$base/procward-pg.XXXXXX")"
  chmod 700 "$dir"
  echo "$bindir" >"$dir/bindir"
  echo "$owner" >"$dir/owner"
  [ "$owner" = "$(id -un)" ] || chown -R "$owner" "$dir"
  # Whatever fails from here on leaves nothing behind.
  trap 'pg_ctl_in "$dir" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
  if ! as_owner "$dir" "$bindir/initdb" -D "$dir/data" -U procward --auth=trust --no-sync -E UTF8 \
    --no-instructions >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2
    cannot "initdb failed (above)"
  fi
  # A port nothing listens on now. Another process may take it before the
  # server binds it: then the start fails and we try another.
  local tries=0
  while :; do
    port="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
    # fsync off: a throwaway cluster; a restart (fast or immediate) still
    # keeps every committed row, the OS keeps the files.
    if as_owner "$dir" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200 -c log_min_messages=warning" \
      start >/dev/null 2>&1; then
      break
    fi
    tries=$((tries + 1))
    if [ "$tries" -ge 3 ]; then
      cat "$dir/server.log" >&2 || true
      cannot "the server did not start (log above)"
    fi
  done
  echo "$port" >"$dir/port"
  trap - EXIT
  echo "PROCWARD_TEST_PG_URL=postgres://procward@127.0.0.1:$port/postgres"
  echo "PROCWARD_TEST_PG_DIR=$dir"
}

check_dir() {
  [ -n "${1:-}" ] && [ -f "$1/bindir" ] && [ -d "$1/data" ] || die "not a directory made by 'pg-server.sh start': ${1:-(none)}"
}

restart() {
  check_dir "${1:-}"
  # fast: every session is told (57P01) and ended, as on a failover.
  pg_ctl_in "$1" -m fast -w -t 30 restart -l "$1/server.log" \
    -o "-c listen_addresses=127.0.0.1 -p $(cat "$1/port") -k $1 -c fsync=off -c max_connections=200 -c log_min_messages=warning" \
    >/dev/null
}

stop() {
  check_dir "${1:-}"
  pg_ctl_in "$1" -m fast -w -t 30 stop >/dev/null 2>&1 || pg_ctl_in "$1" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$1"
}

case "${1:-}" in
start) start ;;
restart) restart "${2:-}" ;;
stop) stop "${2:-}" ;;
with)
  shift
  with_started pg-server.sh PROCWARD_TEST_PG_URL PROCWARD_TEST_PG_DIR "$@"
  ;;
*) die "usage: pg-server.sh start | restart DIR | stop DIR | with COMMAND [ARGS...]" ;;
esac
