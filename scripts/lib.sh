# lib.sh - shared settings and helpers for the service scripts.
# Sourced (not executed) by pg.sh, kafka.sh, services.sh and test.sh.
#
# Locations, all overridable from the environment:
#   BILLING_VAR    run-time state: data dirs, logs, PID files and
#                  services.env. Default <repo>/var (ignored by git).
#   BILLING_CACHE  downloads that survive a `rm -rf var` (the Kafka jars).
#                  Default ${XDG_CACHE_HOME:-$HOME/.cache}/billing, outside
#                  the repository so that a fresh clone reuses it.

# shellcheck shell=bash

BILLING_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
BILLING_VAR=${BILLING_VAR:-$BILLING_ROOT/var}
BILLING_CACHE=${BILLING_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/billing}
BILLING_ENV_FILE=$BILLING_VAR/services.env

billing_log() {
    printf '%s: %s\n' "${0##*/}" "$*" >&2
}

billing_die() {
    billing_log "error: $*"
    exit 1
}

# billing_abs PATH: make PATH absolute (it need not exist yet). The
# scripts hand these paths to servers that run elsewhere (cwd, user).
billing_abs() {
    case "$1" in
        /*) printf '%s\n' "$1" ;;
        *) printf '%s/%s\n' "$(pwd -P)" "$1" ;;
    esac
}

BILLING_VAR=$(billing_abs "$BILLING_VAR")
BILLING_CACHE=$(billing_abs "$BILLING_CACHE")
BILLING_ENV_FILE=$BILLING_VAR/services.env

# billing_env_update NAME [TEXT]: replace the block "# begin NAME" ..
# "# end NAME" of services.env by TEXT (remove it when TEXT is empty).
# Each service owns its block, so pg.sh and kafka.sh can update the file
# in any order and repeatedly without duplicating lines. The file is
# replaced atomically (rename) so a concurrent reader never sees half.
billing_env_update() {
    local name=$1 text=${2:-} tmp
    mkdir -p "$BILLING_VAR"
    tmp=$(mktemp "$BILLING_VAR/.services.env.XXXXXX")
    if [ -f "$BILLING_ENV_FILE" ]; then
        awk -v b="# begin $name" -v e="# end $name" '
            $0 == b { skip = 1; next }
            $0 == e { skip = 0; next }
            !skip' "$BILLING_ENV_FILE" >"$tmp"
    else
        printf '# services.env - written by scripts/*.sh; source it: . %s\n' \
            "$BILLING_ENV_FILE" >"$tmp"
    fi
    if [ -n "$text" ]; then
        printf '# begin %s\n%s\n# end %s\n' "$name" "$text" "$name" >>"$tmp"
    fi
    chmod 644 "$tmp"
    mv -f "$tmp" "$BILLING_ENV_FILE"
}

# billing_pid_alive PID: true while PID runs. A zombie counts as gone:
# in a container PID 1 may be slow to reap (or never reap) orphans.
billing_pid_alive() {
    local state
    kill -0 "$1" 2>/dev/null || return 1
    state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
    [ "$state" != Z ]
}

# billing_wait_pid_gone PID SECONDS: poll until PID has exited.
billing_wait_pid_gone() {
    local pid=$1 n=$(($2 * 10))
    while [ "$n" -gt 0 ] && billing_pid_alive "$pid"; do
        sleep 0.1
        n=$((n - 1))
    done
    ! billing_pid_alive "$pid"
}

# billing_free_port [NOT]: a loopback TCP port free now, other than NOT:
# the kernel's pick for a bind to port 0, released at once for the caller
# to bind (as tests/check-demo.sh finds its ports). A fixed offset from
# another service's port may fall in the ephemeral range (32768-60999),
# where any client connection can hold it.
billing_free_port() {
    local port
    while :; do
        port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') ||
            return 1
        [ "$port" = "${1:-}" ] || break
    done
    printf '%s\n' "$port"
}

# billing_shquote STRING: STRING as one single-quoted shell word, so
# that services.env stays correct for paths with spaces (POSIX sh too).
billing_shquote() {
    printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

# billing_configure_build DIR [CONFIGURE-ARGS...]: autogen, then configure
# the source tree out of tree in DIR (absolute), and cd there. An in-tree
# ./configure makes configure refuse a build directory ("source directory
# already configured") and would let VPATH pick up in-tree objects and
# generated files, so it is cleaned first (make distclean).
billing_configure_build() {
    local dir=$1
    shift
    cd "$BILLING_ROOT"
    if [ -f config.status ]; then
        billing_log "the source tree is configured in-tree: make distclean"
        make distclean >/dev/null 2>&1 || true
        [ ! -f config.status ] ||
            billing_die "could not distclean the in-tree build; remove it by hand (git clean -xdf, careful)"
    fi
    ./autogen.sh
    mkdir -p "$dir"
    cd "$dir"
    "$BILLING_ROOT/configure" "$@" >configure.out 2>&1 || {
        cat configure.out
        billing_die "configure failed (config.log in $dir)"
    }
}
