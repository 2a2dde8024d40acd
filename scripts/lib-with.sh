# Sourced by pg-server.sh and systemd-container.sh: the `with COMMAND...`
# both have. Uses the sourcing script's own die, start and stop.
#
#   with_started SCRIPT VAR DIR_VAR COMMAND [ARGS...]
#
# runs `start`, exports the two assignments it printed (VAR=… and
# DIR_VAR=…), runs COMMAND with them, and runs `stop "$DIR_VAR"` however
# COMMAND ends; exits with COMMAND's status. SCRIPT names the script in the
# usage message.
with_started() {
  local script="$1" var="$2" dir_var="$3"
  shift 3
  [ "$#" -gt 0 ] || die "usage: $script with COMMAND [ARGS...]"
  local out
  out="$(start)"
  export "${var?}" "${dir_var?}"
  printf -v "$var" '%s' "$(sed -n "s/^$var=//p" <<<"$out")"
  printf -v "$dir_var" '%s' "$(sed -n "s/^$dir_var=//p" <<<"$out")"
  # The variable's name now, its value at exit.
  # shellcheck disable=SC2064
  trap "stop \"\$$dir_var\"" EXIT
  local status=0
  "$@" || status=$?
  exit "$status"
}
