# Sourced by the other scripts: puts the pinned pnpm on PATH. A pnpm of the
# pinned version already on PATH is used as it is; otherwise bootstrap.sh
# installs that version into procward's own cache directory (never globally,
# so a pnpm you installed yourself is left alone) and this adds it to PATH.
PROCWARD_PNPM_VERSION=12.4.2
PROCWARD_CACHE="${PROCWARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/procward}"
PROCWARD_PNPM_DIR="$PROCWARD_CACHE/pnpm@$PROCWARD_PNPM_VERSION"
if [ -x "$PROCWARD_PNPM_DIR/node_modules/.bin/pnpm" ]; then
  case ":$PATH:" in
    *":$PROCWARD_PNPM_DIR/node_modules/.bin:"*) ;;
    *) PATH="$PROCWARD_PNPM_DIR/node_modules/.bin:$PATH" ;;
  esac
  export PATH
fi
