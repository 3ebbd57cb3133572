#!/bin/sh
# check-ingest.sh - `billing ingest`, `billing rejected list|replay` and
# `billing account balance` against the private PostgreSQL
# (BILLING_PG_CONNINFO; without it the test FAILS, never skips):
#   - the example's events with the account new-d not loaded yet: its
#     events are rejected (unknown_account, exit 1) and listed;
#   - after loading new-d, `rejected replay` stores exactly those, and
#     nothing is left unresolved;
#   - every account's January figures from `account balance` equal the
#     totals of `billing rate` over the same events, to the last digit;
#   - `account balance --at T` inside a month counts the usage before T
#     only: its credit_remaining equals `billing rate --at T`'s credit_left;
#   - ingesting the same file again stores nothing;
#   - `billing ingest -j 2` stores exactly what -j 1 stores (every row of
#     the tables it writes, ids included) from a file whose batches are cut
#     in two slices, with duplicates, conflicts and unknown accounts.
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="${BILLING_TEST_WRAP:-} $builddir/billing/billing"
ex="$srcdir/examples/gpu-cloud"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-ingest.XXXXXX") || exit 99
db="billing_ck_$$"

. "$srcdir/tests/checklib.sh"

if [ -z "${BILLING_PG_CONNINFO:-}" ]; then
    check "BILLING_PG_CONNINFO is set (scripts/services.sh start && . var/services.env)" fail
    finish
fi
base=$BILLING_PG_CONNINFO
drop_dbs() {
    for d in $db ${db}_j1 ${db}_j2; do
        psql "$base dbname=postgres" -qc "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1
    done
}
trap 'rm -rf "$tmp"; drop_dbs' EXIT
psql "$base dbname=postgres" -qc "CREATE DATABASE $db" >/dev/null || exit 99
# A repeated keyword in a conninfo string: the last one wins.
BILLING_PG_CONNINFO="$base dbname=$db"
export BILLING_PG_CONNINFO

$billing db migrate >/dev/null || exit 99
jq 'del(.accounts[] | select(.id == "new-d"))
    | .grants |= map(select(.account != "new-d"))
    | .subscriptions |= map(select(.account != "new-d"))' "$ex/accounts.json" >"$tmp/early.json"
$billing load --pricebook "$ex/pricebook.json" --accounts "$tmp/early.json" >/dev/null || exit 99

newd=$(grep -c '"account":"new-d"' "$ex/events.jsonl")
$billing ingest --quiet "$ex/events.jsonl" >"$tmp/first.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "rejected" "$tmp/first.out" && grep -q ", $newd rejected" "$tmp/first.out" \
    && r=ok || r=fail
check "events of an account not loaded yet are rejected, the rest stored (exit $rc, $newd expected)" $r
[ $r = ok ] || cat "$tmp/first.out"

listed=$($billing rejected list --reason unknown_account --limit 1000 | grep -c "event=")
[ "$listed" -eq "$newd" ] && r=ok || r=fail
check "rejected list shows the $newd unknown_account records ($listed)" $r

$billing load --pricebook "$ex/pricebook.json" --accounts "$ex/accounts.json" >/dev/null || exit 99
$billing rejected replay >"$tmp/replay.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "^$newd replayed: $newd stored" "$tmp/replay.out" && r=ok || r=fail
check "after the account is loaded, replay stores them (exit $rc)" $r
[ $r = ok ] || cat "$tmp/replay.out"
left=$($billing rejected list | wc -l)
all=$($billing rejected list --all | grep -c "(resolved)")
[ "$left" -eq 0 ] && [ "$all" -eq "$newd" ] && r=ok || r=fail
check "nothing is left unresolved; the rows stay, marked resolved ($left, $all)" $r

$billing rate --month 2026-01 --pricebook "$ex/pricebook.json" --accounts "$ex/accounts.json" "$ex/events.jsonl" 2>/dev/null >"$tmp/rate.json"
for acct in lab-a new-d student-b team-c; do
    want=$(jq -r --arg a "$acct" '.invoices[] | select(.account == $a)
        | "subtotal=\(.subtotal) credits=\(.credits_total) tax=\(.tax) total=\(.total)"' \
        "$tmp/rate.json")
    got=$($billing account balance "$acct" --at 2026-01-31T15:59:59Z |
        awk -F= '$1 ~ /^(subtotal|credits|tax|total)$/ { printf "%s%s=%s", sep, $1, $2; sep = " " }')
    [ -n "$want" ] && [ "$want" = "$got" ] && r=ok || r=fail
    check "account balance $acct equals billing rate: $got" $r
    [ $r = ok ] || echo "  billing rate: $want"
done

# --at inside the month: only the usage before the instant counts, as
# `billing rate --at` cuts it (the stored month held all of January's).
for pair in student-b@2026-01-10T12:00:00Z new-d@2026-01-25T03:00:00Z lab-a@2026-01-02T03:30:00Z \
    student-b@2026-01-10T11:00:00.5Z; do
    acct=${pair%@*}
    at=${pair#*@}
    want=$($billing rate --at "$at" --format json --pricebook "$ex/pricebook.json" \
        --accounts "$ex/accounts.json" "$ex/events.jsonl" 2>/dev/null |
        jq -r --arg a "$acct" '.credit[] | select(.account == $a) | .credit_left')
    got=$($billing account balance "$acct" --at "$at" | sed -n 's/^credit_remaining=//p')
    [ -n "$want" ] && [ "$want" = "$got" ] && r=ok || r=fail
    check "account balance $acct --at $at: credit_remaining=$got, billing rate --at: $want" $r
done

$billing ingest --quiet "$ex/events.jsonl" >"$tmp/again.out" 2>&1
grep -q ": 0 stored" "$tmp/again.out" && r=ok || r=fail
check "the same file again stores nothing" $r
[ $r = ok ] || cat "$tmp/again.out"

# -j 2 against -j 1: the example's events four times over under other ids,
# a fourth of them for an account that does not exist, conflicts (an id
# again with another quantity) and replays, in batches of 1 000 records
# (two slices of 500 on two threads).
jq -c '., (.id += "-2"), (.id += "-3"), (.id += "-4" | .account = "ghost"),
    (select(.id | test("1$")) | .quantity = "12345"), (select(.id | test("2$")))' \
    "$ex/events.jsonl" >"$tmp/many.jsonl"
# 16 000 models of usage inside lab-a's subscription, over a rater's cap of
# 4 096: which ones are refused depends on the order, so -j 2 must rate
# such a batch on one rater (batches of 10 000: each slice over the cap;
# then 6 000: slices under it, too many together).
awk 'BEGIN { for (i = 0; i < 16000; i++) {
    t = sprintf("2026-01-10T10:%02d", i % 60)
    printf "{\"id\":\"attr-%d\",\"account\":\"lab-a\",\"resource\":\"i-a1\",", i
    printf "\"meter\":\"gpu\",\"start\":\"%s:00+08:00\",\"end\":\"%s:30+08:00\",", t, t
    printf "\"quantity\":\"1\",\"model\":\"M%d\",\"region\":\"cn-east-1\"}\n", i } }' \
    >"$tmp/models.jsonl"
# Every row the pipeline writes, as text, without the time it was written.
dump_sql="SELECT (to_jsonb(t) - 'received_at' - 'first_seen' - 'updated_at')::text"
for j in 1 2; do
    psql "$base dbname=postgres" -qc "CREATE DATABASE ${db}_j$j" >/dev/null || exit 99
    conn="$base dbname=${db}_j$j"
    BILLING_PG_CONNINFO=$conn $billing db migrate >/dev/null || exit 99
    BILLING_PG_CONNINFO=$conn $billing load --pricebook "$ex/pricebook.json" \
        --accounts "$ex/accounts.json" >/dev/null || exit 99
    BILLING_PG_CONNINFO=$conn $billing ingest -j $j --batch 1000 --quiet "$tmp/many.jsonl" \
        >"$tmp/j$j.out" 2>&1
    echo "exit $?" >>"$tmp/j$j.out"
    BILLING_PG_CONNINFO=$conn $billing ingest -j $j --batch 10000 --quiet "$tmp/models.jsonl" \
        >>"$tmp/j$j.out" 2>&1
    echo "exit $?" >>"$tmp/j$j.out"
    for t in usage_aggregates usage_events event_ids rejected_events; do
        psql "$conn" -Atqc "$dump_sql FROM billing.$t t ORDER BY 1"
    done >"$tmp/j$j.rows"
done
n=$(wc -l <"$tmp/many.jsonl")
cmp -s "$tmp/j1.out" "$tmp/j2.out" && cmp -s "$tmp/j1.rows" "$tmp/j2.rows" &&
    grep -q "^$n records: .* stored, [1-9][0-9]* duplicates, [1-9][0-9]* rejected" "$tmp/j1.out" &&
    grep -q "^16000 records: 8192 stored, 0 duplicates, 7808 rejected" "$tmp/j1.out" &&
    [ "$n" -gt 1000 ] && r=ok || r=fail
check "ingest -j 2 stores exactly what -j 1 stores ($(grep records "$tmp/j2.out" | tr '\n' ' '))" $r
[ $r = ok ] || diff "$tmp/j1.out" "$tmp/j2.out"

# A stored event running now that libbilling refuses (a resource id past
# its 128 bytes, written by psql): the balance's exhaustion estimate stops
# with libbilling's reason and the event named, not a silent skip.
psql "$BILLING_PG_CONNINFO" -qc "INSERT INTO billing.usage_events (event_id, account_id,
    resource_id, meter, start_time, end_time, quantity, model) VALUES ('refused-1', 'lab-a',
    repeat('x', 200), 'gpu', now() - interval '1 hour', now() + interval '1 day', 1, 'RTX4090')" \
    >/dev/null || exit 99
$billing account balance lab-a --format json >"$tmp/refused.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "account 'lab-a': stored event 'refused-1': " "$tmp/refused.out" \
    && r=ok || r=fail
check "account balance names a running stored event libbilling refuses (exit $rc)" $r
[ $r = ok ] || cat "$tmp/refused.out"
finish
