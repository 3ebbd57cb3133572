#!/bin/bash
# pg.sh start|stop|status|env - a private PostgreSQL cluster for the tests
# and for development.
#
# The cluster is our own: initdb'ed into a directory of ours, started with
# pg_ctl from Debian's postgresql package, never the system cluster
# (pg_ctlcluster / the "15 main" cluster are not touched, and the port
# differs). Layout, PG_BASE defaulting to $BILLING_VAR/pg:
#   PG_BASE/data             the cluster (PGDATA)
#   PG_BASE/.s.PGSQL.<port>  Unix socket (PGHOST=PG_BASE)
#   PG_BASE/postgresql.log   server log
# The server listens on that socket and on 127.0.0.1:<port> only; port
# BILLING_PG_PORT, default 54329.
#
# Authentication is `trust` on the socket and on 127.0.0.1: this is a
# throw-away cluster for tests, reachable only from this machine. Never use
# this setup for data that matters. The tests connect as role `billing`
# (the cluster's bootstrap superuser) to database `billing`. Members of
# role `billing_password_login` (which the tests create) must give a
# password (scram-sha-256), so that the tests can prove that .pgpass,
# PGPASSFILE, PGPASSWORD and service files reach the server.
#
# PostgreSQL refuses to run as root. As root we run it as an unprivileged
# system user (BILLING_PG_OSUSER, default `billingpg`, created if missing)
# that owns PG_BASE. That user must be able to reach PG_BASE: when the
# repository lies below a directory it cannot traverse (e.g. /root, mode
# 0700) we do not loosen permissions of the user's home; PG_BASE falls
# back to /var/tmp/billing-<uid>-<hash of BILLING_VAR>/pg instead. The same
# fallback is used when the socket path would exceed the 107-byte limit of
# Unix socket names. `pg.sh env` always prints where it is.
# As a normal user the server simply runs as that user.
#
# `start` is idempotent (already running = success) and returns once the
# server accepts connections and database `billing` exists. `stop` is a
# fast shutdown (immediate if that hangs) and leaves no process behind.
# `status` exits 0 if the server runs, 3 if not. start and env write the
# connection settings to $BILLING_VAR/services.env.
set -eu
umask 022

. "$(dirname "$0")/lib.sh"

PG_PORT=${BILLING_PG_PORT:-54329}
PG_DB=billing
PG_ROLE=billing
PG_OSUSER=${BILLING_PG_OSUSER:-billingpg}

# Binaries: BILLING_PG_BINDIR, else the newest /usr/lib/postgresql/N/bin
# (Debian keeps initdb/pg_ctl/postgres there, not on PATH).
pg_find_bindir() {
    local d
    if [ -n "${BILLING_PG_BINDIR:-}" ]; then
        printf '%s\n' "$BILLING_PG_BINDIR"
        return
    fi
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$d" ] && [ -x "$d/initdb" ] ||
        billing_die "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin: run scripts/install-deps.sh"
    printf '%s\n' "$d"
}

is_root() { [ "$(id -u)" -eq 0 ]; }

# pg_as_server CMD...: run CMD as the user that owns the cluster. From /
# so that a cwd the server user cannot read does not bother initdb.
pg_as_server() {
    if is_root; then
        (cd / && runuser -u "$PG_OSUSER" -- "$@")
    else
        "$@"
    fi
}

# pg_usable_by_server DIR: can the server user reach DIR (which may not
# exist yet)? access(2) checks search permission on every ancestor, so
# testing the deepest existing ancestor is enough; directories we create
# below it are 0755 (umask 022). Before the user exists, ask whether every
# ancestor is searchable by "others", which is what it will be.
pg_usable_by_server() {
    local d=$1
    is_root || return 0 # we run the server ourselves
    while [ ! -d "$d" ]; do d=$(dirname "$d"); done
    if id -u "$PG_OSUSER" >/dev/null 2>&1; then
        (cd / && runuser -u "$PG_OSUSER" -- test -x "$d")
        return
    fi
    while :; do
        case "$(stat -L -c %A "$d")" in
            *x | *t) ;;
            *) return 1 ;;
        esac
        [ "$d" != / ] || return 0
        d=$(dirname "$d")
    done
}

pg_resolve_base() {
    local base hash
    base=$(billing_abs "${BILLING_PG_DIR:-$BILLING_VAR/pg}")
    # sun_path holds 107 bytes plus NUL; ".s.PGSQL.NNNNN.lock" must fit too.
    if [ $((${#base} + 25)) -le 107 ] && pg_usable_by_server "$base"; then
        printf '%s\n' "$base"
        return
    fi
    hash=$(printf '%s' "$BILLING_VAR" | cksum | cut -d ' ' -f 1)
    printf '/var/tmp/billing-%s-%s/pg\n' "$(id -u)" "$hash"
}

ensure_os_user() {
    is_root || return 0
    id -u "$PG_OSUSER" >/dev/null 2>&1 && return 0
    billing_log "creating system user $PG_OSUSER to run PostgreSQL (it refuses to run as root)"
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin "$PG_OSUSER"
}

PG_BIN=$(pg_find_bindir)

pg_setup_paths() {
    PG_BASE=$(pg_resolve_base)
    PG_DATA=$PG_BASE/data
    PG_LOG=$PG_BASE/postgresql.log
}

# Connection settings, as `export` lines.
pg_env_text() {
    local conninfo
    conninfo="host=$PG_BASE port=$PG_PORT dbname=$PG_DB user=$PG_ROLE"
    case "$PG_BASE" in *\ *) conninfo="host='$PG_BASE' port=$PG_PORT dbname=$PG_DB user=$PG_ROLE" ;; esac
    printf 'export PGHOST=%s\n' "$(billing_shquote "$PG_BASE")"
    printf 'export PGPORT=%s\n' "$PG_PORT"
    printf 'export PGDATABASE=%s\n' "$PG_DB"
    printf 'export PGUSER=%s\n' "$PG_ROLE"
    printf 'export BILLING_PG_CONNINFO=%s' "$(billing_shquote "$conninfo")"
}

pg_running() {
    [ -f "$PG_DATA/PG_VERSION" ] || return 1
    pg_as_server "$PG_BIN/pg_ctl" status -D "$PG_DATA" >/dev/null 2>&1
}

pg_psql() {
    "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_BASE" -p "$PG_PORT" -U "$PG_ROLE" "$@"
}

pg_make_base() {
    local parent
    parent=$(dirname "$PG_BASE")
    mkdir -p "$parent"
    case "$PG_BASE" in
        /var/tmp/billing-*)
            # Shared sticky /var/tmp: make sure the directory is ours, not
            # one planted by another user.
            [ "$(stat -c %u "$parent")" = "$(id -u)" ] ||
                billing_die "$parent is not owned by us; remove it"
            billing_log "note: using $PG_BASE (server user cannot reach ${BILLING_PG_DIR:-$BILLING_VAR/pg}, or the socket path is too long)"
            ;;
    esac
    mkdir -p "$PG_BASE"
    chmod 0755 "$PG_BASE"
    if is_root; then
        chown "$PG_OSUSER:" "$PG_BASE"
        # A data dir left by an earlier run under another user name.
        if [ -d "$PG_DATA" ] && [ "$(stat -c %U "$PG_DATA")" != "$PG_OSUSER" ]; then
            chown -R "$PG_OSUSER:" "$PG_DATA"
        fi
    fi
}

pg_initdb() {
    billing_log "initializing cluster in $PG_DATA"
    # C locale, UTF-8: sorting independent of the machine's locales.
    pg_as_server "$PG_BIN/initdb" -D "$PG_DATA" -U "$PG_ROLE" -E UTF8 --locale=C \
        --auth-local=trust --auth-host=trust >"$PG_BASE/initdb.log" 2>&1 || {
        cat "$PG_BASE/initdb.log" >&2
        billing_die "initdb failed"
    }
    pg_as_server sh -c 'printf "\ninclude_if_exists = '"'"'billing.conf'"'"'\n" >>"$1/postgresql.conf"' sh "$PG_DATA"
}

# Client authentication, rewritten at every start (and reloaded when the
# server runs already), so that clusters made by older versions of this
# script get it too. Only the socket and IPv4 loopback; trust, except for
# members of billing_password_login (see the header comment).
pg_write_hba() {
    pg_as_server sh -c 'cat >"$1/pg_hba.conf"' sh "$PG_DATA" <<'EOF'
# Written by scripts/pg.sh at each start; edits are lost.
# Private test cluster: local connections only; trust, except for the
# roles of the password tests.
local   all   +billing_password_login                  scram-sha-256
host    all   +billing_password_login   127.0.0.1/32   scram-sha-256
local   all   all                                      trust
host    all   all                       127.0.0.1/32   trust
EOF
}

# Settings rewritten on every start, so that BILLING_PG_PORT and the
# socket location can change between runs.
pg_write_conf() {
    pg_as_server sh -c 'cat >"$1/billing.conf"' sh "$PG_DATA" <<EOF
# Written by scripts/pg.sh at each start; edits are lost.
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_BASE'
# Small: a test cluster on a 2-core machine next to Kafka.
shared_buffers = 32MB
max_connections = 50
# WAL sized for bulk ingest (doc/operations.md, "PostgreSQL settings"): a
# million-event run writes ~0.5 GB of WAL; at 256MB it forced 6 checkpoints
# and their full-page images (+44% WAL). Durability is unchanged.
max_wal_size = 2GB
checkpoint_timeout = 15min
wal_buffers = 16MB
# fsync stays on: tests of durability must see real behaviour.
fsync = on
timezone = 'UTC'
log_timezone = 'UTC'
logging_collector = off
log_min_messages = warning
EOF
}

cmd_start() {
    pg_setup_paths
    if pg_running; then
        billing_log "PostgreSQL already running ($PG_BASE, port $PG_PORT)"
        pg_write_hba
        pg_as_server "$PG_BIN/pg_ctl" reload -D "$PG_DATA" >/dev/null
    else
        ensure_os_user
        pg_setup_paths # the answer may differ once the user exists
        pg_make_base
        if [ ! -f "$PG_DATA/PG_VERSION" ]; then
            pg_initdb
        elif [ "$(cat "$PG_DATA/PG_VERSION")" != "$(basename "$(dirname "$PG_BIN")")" ]; then
            billing_die "$PG_DATA is a PostgreSQL $(cat "$PG_DATA/PG_VERSION") cluster, binaries are $PG_BIN: remove $PG_BASE"
        fi
        pg_write_conf
        pg_write_hba
        billing_log "starting PostgreSQL ($PG_BASE, 127.0.0.1:$PG_PORT)"
        if ! pg_as_server "$PG_BIN/pg_ctl" start -D "$PG_DATA" -l "$PG_LOG" -w -t 60 >/dev/null; then
            tail -n 20 "$PG_LOG" >&2 || true
            billing_die "PostgreSQL did not start (log: $PG_LOG)"
        fi
    fi
    local n=300
    until "$PG_BIN/pg_isready" -q -h "$PG_BASE" -p "$PG_PORT" -d postgres; do
        n=$((n - 1))
        [ "$n" -gt 0 ] || billing_die "PostgreSQL not ready after 30 s (log: $PG_LOG)"
        sleep 0.1
    done
    if [ -z "$(pg_psql -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" ]; then
        pg_psql -d postgres -c "CREATE DATABASE $PG_DB"
    fi
    billing_env_update postgresql "$(pg_env_text)"
    billing_log "PostgreSQL ready: $PG_DB on $PG_BASE port $PG_PORT"
}

cmd_stop() {
    pg_setup_paths
    billing_env_update postgresql ""
    if ! pg_running; then
        billing_log "PostgreSQL not running"
        return 0
    fi
    billing_log "stopping PostgreSQL ($PG_BASE)"
    if ! pg_as_server "$PG_BIN/pg_ctl" stop -D "$PG_DATA" -m fast -w -t 60 >/dev/null; then
        billing_log "fast shutdown timed out, using immediate"
        pg_as_server "$PG_BIN/pg_ctl" stop -D "$PG_DATA" -m immediate -w -t 30 >/dev/null
    fi
    ! pg_running || billing_die "PostgreSQL still running"
}

cmd_status() {
    pg_setup_paths
    if pg_running; then
        echo "PostgreSQL running: $PG_BASE, 127.0.0.1:$PG_PORT"
        return 0
    fi
    echo "PostgreSQL not running"
    return 3
}

cmd_env() {
    pg_setup_paths
    pg_env_text
    echo
    billing_env_update postgresql "$(pg_env_text)"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    env) cmd_env ;;
    *)
        echo "usage: $0 start|stop|status|env" >&2
        exit 2
        ;;
esac
