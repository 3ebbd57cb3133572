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

for run in first again; do
    start=$(date +%s%N)
    "$billing" load --db "$conninfo" --pricebook "$pricebook" \
        --accounts "$file" >"$work/load-$run.out"
    end=$(date +%s%N)
    printf '%-6s %8d accounts  %6d ms  %s\n' "$run" "$accounts" $(((end - start) / 1000000)) \
        "$(tail -n 1 "$work/load-$run.out")"
done
