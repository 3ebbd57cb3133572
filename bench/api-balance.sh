#!/bin/sh
# api-balance.sh - GET /v1/accounts/{id}/balance at a steady rate with
# 10 000 accounts (issue 25: p99 <= 5 ms at 2 000 requests/s), beside
# GET /v1/accounts/{id}/grants (the key's check and one indexed query,
# no rating) at the same rate in the same run, and with PEER=1 beside
# bench/peer-balance (a small Go server reading the same tables, see its
# README) answering the same balance route: the ratios of the p99s first,
# then each one's latency. The services of scripts/services.sh
# (PostgreSQL), a database of its own: the example's price book,
# ACCOUNTS accounts from bench/gen_events (a 10.00 trial grant each, a
# monthly plan every 10th) and EVENTS events of theirs, stored with
# `billing ingest`, then VACUUM (ANALYZE) as after any bulk load
# (VACUUM=0: not); billingd serving the API alone.
#
#   bench/api-balance.sh [BUILD_DIR] [RATES] [SECONDS]   (default _rel, 2000, 20)
#   ACCOUNTS=10000 EVENTS=200000 CONNECTIONS=8 PEER=1 CURRENT=1 \
#       bench/api-balance.sh _rel 500,1000,2000 10
#
# RATES is one rate or several separated by commas, run one after the
# other, each on every server. The load client (bench/api_get.c) sends
# RATE requests a second in all over CONNECTIONS keep-alive connections,
# each request for a random account, each at its scheduled instant (open
# loop: a request's latency runs from the instant it was due, so a stall
# counts against every request it delayed). gen_events writes January
# 2026; CURRENT=1 moves every instant (events, grants, subscriptions) by
# the same whole number of days so that January starts on the first of
# the current month: the month a balance shows then has usage, and the
# trial grants are valid now. PEER=1 needs Go (PATH or /usr/local/go/bin)
# and the modules of bench/peer-balance/go.mod (the Go module proxy, or
# a module cache). billingd's and the peer's peak RSS (VmHWM) and CPU
# time per request are printed at the end. BASELINE=DIR (another build
# directory, e.g. of main) serves the same database from that build's
# billingd beside ours, measured in turn at each rate (ours, the
# baseline, then the peer): the ratio of the p99s and each one's CPU per
# request.
#
# PostgreSQL's CPU (bench/server-cpu.sh, when the server runs here) is
# measured around each server's rounds too and printed per balance
# request beside each one's own. PER_SECOND=1 prints each round's
# latency second by second on stderr (bench/api_get.c's
# API_GET_PER_SECOND), to see when a tail happened.
#
# Use a build without sanitizers (../configure CFLAGS='-O2 -g').
set -eu
srcdir=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$srcdir/_rel}" && pwd)
rates=$(echo "${2:-2000}" | tr ',' ' ')
seconds=${3:-20}
accounts=${ACCOUNTS:-10000}
events=${EVENTS:-200000}
conns=${CONNECTIONS:-8}
baseline=${BASELINE:+$(cd "$BASELINE" && pwd)}
peer=${PEER:-0}
current=${CURRENT:-0}
billing="$build/billing/billing"
billingd="$build/billingd/billingd"
get="$build/bench/api_get"
gen="$build/bench/gen_events"
ex="$srcdir/examples/gpu-cloud"
db="billing_bench_apibal_$$"
base=${BILLING_PG_CONNINFO:?run scripts/services.sh start and . var/services.env}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-apibal.XXXXXX")
dpid=
ppid_=
bpid=
cleanup() {
    for p in $dpid $bpid $ppid_; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$tmp"
    psql "$base dbname=postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
}
trap cleanup EXIT
. "$srcdir/bench/server-cpu.sh"
[ "${PER_SECOND:-0}" != 1 ] || export API_GET_PER_SECOND=1
psql "$base dbname=postgres" -qc "CREATE DATABASE $db" >/dev/null
BILLING_PG_CONNINFO="$base dbname=$db"
export BILLING_PG_CONNINFO
$billing db migrate >/dev/null
"$gen" --accounts-json --accounts "$accounts" --grants 10.00 --plans 10 >"$tmp/accounts.json"
"$gen" --accounts "$accounts" "$events" >"$tmp/events.jsonl"
if [ "$current" = 1 ]; then
    # Every RFC 3339 instant moved by the days from 2026-01-01 to the first of this month.
    python3 - "$tmp/accounts.json" "$tmp/events.jsonl" <<'PY'
import datetime, re, sys
today = datetime.date.today()
delta = datetime.date(today.year, today.month, 1) - datetime.date(2026, 1, 1)
pat = re.compile(r'"(\d{4})-(\d{2})-(\d{2})T([^"]*)"')
def move(m):
    d = datetime.date(int(m.group(1)), int(m.group(2)), int(m.group(3))) + delta
    return '"%s"' % (d.isoformat() + "T" + m.group(4))
for name in sys.argv[1:]:
    with open(name) as f:
        text = f.read()
    with open(name, "w") as f:
        f.write(pat.sub(move, text))
PY
fi
$billing load --pricebook "$ex/pricebook.json" --accounts "$tmp/accounts.json" >/dev/null
$billing ingest --quiet "$tmp/events.jsonl" >/dev/null 2>&1
# What an operator does after a bulk load (doc/operations.md, "After a bulk
# load"): without it the first read of every freshly loaded page sets its
# hint bits and writes it out again, and autovacuum comes to do the same
# within a minute or so, mid-run (doc/performance.md: the cold tail of
# issue 25). VACUUM=0 leaves the tables as loaded.
if [ "${VACUUM:-1}" = 1 ]; then
    t0=$(date +%s%N)
    psql "$BILLING_PG_CONNINFO" -Xqc "VACUUM (ANALYZE)"
    vacuumed="VACUUM (ANALYZE) in $((($(date +%s%N) - t0) / 1000000)) ms"
else
    vacuumed="not vacuumed"
fi
key=$($billing apikey create --scope accounts:read)
echo "$accounts accounts, $events events stored (CURRENT=$current, $vacuumed); $rates requests/s for $seconds s each on $conns connections"

# serve BILLINGD: a billingd serving the API alone on a free port, into $sport and $spid.
serve() {
    sport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$1" --set "db=$BILLING_PG_CONNINFO" --set "api.listen=127.0.0.1:$sport" --set http.listen= \
        --set api.rate=1000000 >"$tmp/billingd-$sport.log" 2>&1 &
    spid=$!
    i=0
    until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$sport/v1/plans")" = 401 ]; do
        i=$((i + 1))
        [ $i -lt 300 ] || { tail -5 "$tmp/billingd-$sport.log"; exit 1; }
        kill -0 "$spid"
        sleep 0.1
    done
}
serve "$billingd"
port=$sport
dpid=$spid
if [ -n "$baseline" ]; then
    serve "$baseline/billingd/billingd"
    bport=$sport
    bpid=$spid
    for a in 1 2 3; do
        acct=$(printf 'acct-%06d' $((a * 997 % accounts)))
        ours=$(curl -s -H "Authorization: Bearer $key" "http://127.0.0.1:$port/v1/accounts/$acct/balance")
        theirs=$(curl -s -H "Authorization: Bearer $key" "http://127.0.0.1:$bport/v1/accounts/$acct/balance")
        if [ "$(echo "$ours" | sed 's/"at":"[^"]*",//')" != "$(echo "$theirs" | sed 's/"at":"[^"]*",//')" ]; then
            echo "the baseline's answer differs for $acct:"
            echo "  ours:      $ours"
            echo "  baseline:  $theirs"
        fi
    done
fi
if [ "$peer" = 1 ]; then
    go=$(command -v go || echo /usr/local/go/bin/go)
    (cd "$srcdir/bench/peer-balance" && "$go" build -o "$tmp/peer-balance" .)
    pport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$tmp/peer-balance" -listen "127.0.0.1:$pport" -db "$BILLING_PG_CONNINFO" -conns 4 \
        >"$tmp/peer.log" 2>&1 &
    ppid_=$!
    i=0
    until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$pport/healthz")" = 204 ]; do
        i=$((i + 1))
        [ $i -lt 300 ] || { tail -5 "$tmp/peer.log"; exit 1; }
        kill -0 "$ppid_"
        sleep 0.1
    done
    # The same figures from both on the same account and second, or the comparison means little.
    for a in 1 2 3; do
        acct=$(printf 'acct-%06d' $((a * 997 % accounts)))
        ours=$(curl -s -H "Authorization: Bearer $key" "http://127.0.0.1:$port/v1/accounts/$acct/balance")
        theirs=$(curl -s -H "Authorization: Bearer $key" "http://127.0.0.1:$pport/v1/accounts/$acct/balance")
        if [ "$(echo "$ours" | sed 's/"at":"[^"]*",//; s/"exhausts_at":"[^"]*"/"exhausts_at":X/')" != \
            "$(echo "$theirs" | sed 's/"at":"[^"]*",//; s/"exhausts_at":"[^"]*"/"exhausts_at":X/')" ]; then
            echo "the peer's answer differs for $acct:"
            echo "  ours:  $ours"
            echo "  peer:  $theirs"
        fi
    done
fi
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
p99() { echo "$1" | sed -n 's/.* p99_ms=\([0-9.]*\) .*/\1/p'; }
ratio() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$1" "$2"; }
load() { "$get" 127.0.0.1 "$1" "$key" /v1/accounts/ "$2" "$accounts" "$3" "$4" "$conns" || true; }
# A short warm-up of every route (connections, prepared statements, pages).
load "$port" /balance 200 2 >/dev/null
load "$port" /grants 200 2 >/dev/null
[ "$peer" != 1 ] || load "$pport" /balance 200 2 >/dev/null
[ -z "$baseline" ] || load "$bport" /balance 200 2 >/dev/null
dt=0
bt=0
pt=0
n=0
# PostgreSQL's CPU seconds during each one's rounds (empty when unknown).
ds=0
bs=0
ps=0
# add_cpu TOTAL BEFORE: TOTAL + (server CPU now - BEFORE), or empty when unknown.
add_cpu() {
    now=$(server_cpu)
    [ -n "$1" ] && [ -n "$2" ] && [ -n "$now" ] && echo "$1 + $now - $2" | bc || true
}
for rate in $rates; do
    [ "${PER_SECOND:-0}" != 1 ] || echo "-- ours, $rate/s" >&2
    t0=$(ticks "$dpid")
    s0=$(server_cpu)
    balance=$(load "$port" /balance "$rate" "$seconds")
    dt=$((dt + $(ticks "$dpid") - t0))
    ds=$(add_cpu "$ds" "$s0")
    n=$((n + rate * seconds))
    if [ -n "$baseline" ]; then
        [ "${PER_SECOND:-0}" != 1 ] || echo "-- baseline, $rate/s" >&2
        t0=$(ticks "$bpid")
        s0=$(server_cpu)
        baseb=$(load "$bport" /balance "$rate" "$seconds")
        bt=$((bt + $(ticks "$bpid") - t0))
        bs=$(add_cpu "$bs" "$s0")
    fi
    if [ "$peer" = 1 ]; then
        [ "${PER_SECOND:-0}" != 1 ] || echo "-- peer, $rate/s" >&2
        t0=$(ticks "$ppid_")
        s0=$(server_cpu)
        peerb=$(load "$pport" /balance "$rate" "$seconds")
        pt=$((pt + $(ticks "$ppid_") - t0))
        ps=$(add_cpu "$ps" "$s0")
    fi
    grants=$(load "$port" /grants "$rate" "$seconds")
    echo "== $rate requests/s"
    [ -z "$baseline" ] || echo "balance p99 / baseline balance p99: $(ratio "$(p99 "$balance")" "$(p99 "$baseb")")"
    [ "$peer" != 1 ] || echo "balance p99 / peer balance p99: $(ratio "$(p99 "$balance")" "$(p99 "$peerb")")"
    echo "balance p99 / grants p99: $(ratio "$(p99 "$balance")" "$(p99 "$grants")")"
    echo "balance: $balance"
    [ -z "$baseline" ] || echo "base:    $baseb"
    [ "$peer" != 1 ] || echo "peer:    $peerb"
    echo "grants:  $grants"
done
# server_ms SECONDS: PostgreSQL's CPU per balance request in ms, or "unknown".
server_ms() { [ -n "$1" ] && ratio "$(echo "$1 * 1000" | bc)" "$n" || echo unknown; }
echo "billingd peak RSS: $(sed -n 's/^VmHWM:[[:space:]]*//p' "/proc/$dpid/status"), CPU per balance request: $(ratio $((dt * 1000)) $((hz * n))) ms, PostgreSQL's: $(server_ms "$ds") ms"
[ -z "$baseline" ] ||
    echo "baseline billingd peak RSS: $(sed -n 's/^VmHWM:[[:space:]]*//p' "/proc/$bpid/status"), CPU per balance request: $(ratio $((bt * 1000)) $((hz * n))) ms, PostgreSQL's: $(server_ms "$bs") ms"
[ "$peer" != 1 ] ||
    echo "peer peak RSS: $(sed -n 's/^VmHWM:[[:space:]]*//p' "/proc/$ppid_/status"), CPU per balance request: $(ratio $((pt * 1000)) $((hz * n))) ms, PostgreSQL's: $(server_ms "$ps") ms"
