#!/bin/sh
# load-tool.sh - wall time of `billing load` for N accounts (default
# 100 000) into a fresh database, then of loading the same files again
# (nothing changes: the no-op reload), as doc/performance.md records.
#
#   cd BUILDDIR && sh SRCDIR/bench/load-tool.sh [ACCOUNTS] [WORKDIR]
#
# Needs BILLING_PG_CONNINFO (scripts/pg.sh start && . var/services.env) and
# psql. The accounts come from bench/gen_events --accounts-json (one
# account each, Asia/Shanghai, CNY), the price book is
# examples/gpu-cloud/pricebook.json. GRANTS=AMOUNT gives every account a
# trial credit grant of AMOUNT (gen_events --grants; issue 28 measures 1 M
# accounts with a grant each). The database billing_bench_load_<pid>
# is created on that server, migrated, and dropped at the end.
#
# Each line: the wall time; the tool's CPU (user + sys) and peak RSS
# (/usr/bin/time); and the server's CPU: what the postmaster's reaped
# children (the load's backend, and autovacuum workers that ended in the
# meantime) used, from /proc (cutime + cstime of the postmaster), so the
# server must run on this machine and the role may read data_directory
# (the private cluster's superuser may); "-" when it cannot be read.
# The last line is the md5 of the rows loaded (accounts, subscriptions,
# grants, ledger, without the times the server sets): the same for two
# builds that load the same.
set -eu
accounts=${1:-100000}
work=${2:-/tmp/billing-bench}
top=$(pwd) # the build tree
billing=${BILLING:-"$top/billing/billing"} # BILLING=PATH: another build (before/after)
srcdir=$(sed -n 's/^abs_top_srcdir = //p' "$top/Makefile")
pricebook="$srcdir/examples/gpu-cloud/pricebook.json"
db=billing_bench_load_$$
: "${BILLING_PG_CONNINFO:?start scripts/pg.sh and source var/services.env}"
conninfo="$BILLING_PG_CONNINFO dbname=$db"

mkdir -p "$work"
file="$work/accounts-$accounts${GRANTS:+-grants-$GRANTS}.json"
[ -s "$file" ] ||
    "$top/bench/gen_events" --accounts-json --accounts "$accounts" ${GRANTS:+--grants "$GRANTS"} >"$file"
psql -X -q -v ON_ERROR_STOP=1 -d "$BILLING_PG_CONNINFO dbname=postgres" -c "CREATE DATABASE $db"
trap 'psql -X -q -d "$BILLING_PG_CONNINFO dbname=postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"' EXIT
"$billing" db migrate --db "$conninfo" >/dev/null

# The postmaster's reaped children's CPU in ms, or "-".
server_cpu() {
    [ -r "${pidfile:-}" ] || { echo -; return; }
    awk -v hz="$(getconf CLK_TCK)" '{ print int(($16 + $17) * 1000 / hz) }' \
        "/proc/$(head -n 1 "$pidfile")/stat" 2>/dev/null || echo -
}
datadir=$(psql -X -At -d "$BILLING_PG_CONNINFO dbname=postgres" -c "SHOW data_directory" 2>/dev/null) || datadir=
pidfile=${datadir:+$datadir/postmaster.pid}

for run in first again; do
    s0=$(server_cpu)
    start=$(date +%s%N)
    /usr/bin/time -o "$work/load-$run.time" -f '%U %S %M' "$billing" load --db "$conninfo" \
        --pricebook "$pricebook" --accounts "$file" >"$work/load-$run.out"
    end=$(date +%s%N)
    # The load's backend is counted once the postmaster has reaped it: it
    # has left pg_stat_activity, and no child of the postmaster is a zombie
    # or still names the database (it leaves pg_stat_activity before it
    # exits; a figure read then fell into the next run's line).
    while [ "$(psql -X -At -d "$BILLING_PG_CONNINFO dbname=postgres" -c \
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db'")" != 0 ]; do :; done
    [ -r "${pidfile:-}" ] &&
        while ps --ppid "$(head -n 1 "$pidfile")" -o stat=,args= | grep -q -e '^Z' -e " $db\( \|\$\)"; do :; done
    s1=$(server_cpu)
    server=-
    [ "$s0" = - ] || [ "$s1" = - ] || server="$((s1 - s0)) ms"
    tool=$(awk '{ printf "%d ms cpu, %d MiB peak rss", ($1 + $2) * 1000, $3 / 1024 }' "$work/load-$run.time")
    printf '%-6s %8d accounts  %6d ms  tool %s  server %s cpu  %s\n' "$run" "$accounts" \
        $(((end - start) / 1000000)) "$tool" "$server" "$(tail -n 1 "$work/load-$run.out")"
done

# What was loaded, to compare builds (old and new must print the same):
# the md5 of the loaded tables' rows, without the times the server sets
# (created_at, updated_at, recorded_at) and the ledger's generated ids.
psql -X -At -d "$conninfo" -c "SELECT 'tables md5 ' || md5(string_agg(h, '' ORDER BY h))
    FROM (SELECT md5(r) AS h FROM (SELECT 'a' || (to_jsonb(a) - 'created_at' - 'updated_at')::text AS r FROM billing.accounts a
          UNION ALL SELECT 's' || (to_jsonb(s) - 'created_at' - 'updated_at')::text FROM billing.subscriptions s
          UNION ALL SELECT 'g' || (to_jsonb(g) - 'created_at')::text FROM billing.credit_grants g
          UNION ALL SELECT 'l' || (to_jsonb(l) - 'id' - 'recorded_at')::text FROM billing.credit_ledger l) x) y"
