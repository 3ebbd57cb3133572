#!/bin/sh
# check-load.sh - `billing load` streams the accounts file (issue 28),
# against the private PostgreSQL (BILLING_PG_CONNINFO; without it the test
# FAILS, never skips). The files are generated here, never committed:
#   - an accounts file larger than 64 MiB (the bound of the whole file
#     before; now a bound per element) loads, with the counts of every
#     kind, the rows in the tables, and a reload that changes nothing;
#   - an element larger than 64 MiB is refused, naming it, before any row;
#   - a load whose transaction is retried (a deadlock forced) checks and
#     copies the accounts file again, and loads every row;
#   - a file of 70 001 accounts whose element 70 000 is bad is refused
#     naming accounts[70000], and nothing is written;
#   - a file whose grant 70 000 differs from the stored one is refused
#     naming that grant, and the new accounts of the same file are not
#     written either (the load is one transaction);
#   - a reload of the file last loaded skips its rows (the digest of
#     migration 0020), but an account changed by another writer since is
#     changed back: that write forgot the digest;
#   - the digest is of the price book too: the same accounts file with
#     another price book is checked again (a reload skips that check),
#     and refused when that book lacks a plan it subscribes to.
#   - an account and a grant of the file inserted by other writers while
#     the load runs (uncommitted when the load reaches them, committed
#     while it waits) are skipped, not refused: the load's first INSERT
#     without ON CONFLICT fails on them and runs again with it.
#   - into tables vacuumed while empty (statistics that say so), the
#     INSERTs of accounts, grants and opening entries run without nested
#     loops (a nested loop over the growing table made a first load
#     quadratic), and into tables with rows they are left to the planner.
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="${BILLING_TEST_WRAP:-} $builddir/billing/billing"
book="$srcdir/examples/gpu-cloud/pricebook.json"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-load.XXXXXX") || exit 99
db="billing_load_$$"

. "$srcdir/tests/checklib.sh"

need_pg
trap 'rm -rf "$tmp"; db_drop_all' EXIT
db_new "$db"
db_use "$db"
$billing db migrate >/dev/null || exit 99

# gen N [PAD] [BAD_ACCOUNT] [GRANT_AMOUNT_70000]: an accounts file of N
# accounts (a-0 ... a-N-1) with a grant each (g-0 ...), each account with
# a description of PAD bytes; account BAD_ACCOUNT gets tax rate "abc";
# grant 70000 gets that amount (default 10.00).
gen() {
    awk -v n="$1" -v pad="${2:-0}" -v bad="${3:--1}" -v g7="${4:-10.00}" 'BEGIN {
        d = ""
        if (pad > 0) {
            d = "x"
            while (length(d) < pad) d = d d
            d = substr(d, 1, pad)
        }
        printf "{\"accounts\": [\n"
        for (i = 0; i < n; i++)
            printf "%s{\"id\": \"a-%d\", \"currency\": \"CNY\", \"time_zone\": \"Asia/Shanghai\", \"tax_rate\": \"%s\"%s}\n",
                (i ? "," : ""), i, (i == bad ? "abc" : "0.06"), (pad > 0 ? ", \"description\": \"" d "\"" : "")
        printf "], \"grants\": [\n"
        for (i = 0; i < n; i++)
            printf "%s{\"id\": \"g-%d\", \"account\": \"a-%d\", \"amount\": \"%s\", \"granted_at\": \"2026-01-01T00:00:00+08:00\", \"expires_at\": \"2026-02-01T00:00:00+08:00\", \"applies_to\": [\"usage\"]}\n",
                (i ? "," : ""), i, i, (i == 70000 ? g7 : "10.00")
        printf "]}\n"
    }'
}

# rows TABLE: the rows of billing.TABLE.
rows() {
    psql "$BILLING_PG_CONNINFO" -XAtc "SELECT count(*) FROM billing.$1"
}

# 1. More than 64 MiB in 3 000 accounts of 23 000 bytes each.
gen 3000 23000 >"$tmp/big.json"
size=$(wc -c <"$tmp/big.json")
[ "$size" -gt 67108864 ] && r=ok || r=fail
check "the generated file is larger than 64 MiB" $r "$size bytes"
$billing load --pricebook "$book" --accounts "$tmp/big.json" >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "^accounts  *3000 added, 0 changed, 0 unchanged$" "$tmp/out" &&
    grep -q "^credit grants  *3000 added, 0 changed, 0 unchanged$" "$tmp/out" &&
    [ "$(rows accounts)" = 3000 ] && [ "$(rows credit_grants)" = 3000 ] &&
    [ "$(rows credit_ledger)" = 3000 ]; then
    r=ok
else
    r=fail
fi
check "a file of more than 64 MiB loads, every row counted and stored" $r "status $rc: $(head -c 600 "$tmp/out")"
$billing load --pricebook "$book" --accounts "$tmp/big.json" >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "^accounts  *0 added, 0 changed, 3000 unchanged$" "$tmp/out" &&
    grep -q "^credit grants  *0 added, 0 changed, 3000 unchanged$" "$tmp/out" &&
    grep -q "^0 changed$" "$tmp/out" && [ "$(rows credit_ledger)" = 3000 ]; then
    r=ok
else
    r=fail
fi
check "reloading it changes nothing" $r "status $rc: $(head -c 600 "$tmp/out")"
rm -f "$tmp/big.json"

# 2. One element of more than 64 MiB.
gen 1 67200000 >"$tmp/huge.json"
$billing load --pricebook "$book" --accounts "$tmp/huge.json" >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 3 ] && grep -q "huge.json: accounts\[0\]: .* bytes, more than the 64 MiB" "$tmp/out" &&
    [ "$(rows accounts)" = 3000 ]; then
    r=ok
else
    r=fail
fi
check "an element of more than 64 MiB is refused, named" $r "status $rc: $(head -c 600 "$tmp/out")"
rm -f "$tmp/huge.json"

# 3. Element 70 000 of the accounts is bad: named, nothing written.
db_new "${db}_b"
db_use "${db}_b"
$billing db migrate >/dev/null || exit 99
gen 70001 0 70000 >"$tmp/bad.json"
$billing load --pricebook "$book" --accounts "$tmp/bad.json" >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 3 ] && grep -q "bad.json: accounts\[70000\]" "$tmp/out" &&
    [ "$(rows accounts)" = 0 ] && [ "$(rows price_books)" = 0 ]; then
    r=ok
else
    r=fail
fi
check "a bad element 70 000 is named and nothing is written" $r "status $rc: $(head -c 600 "$tmp/out")"

# 4. Grant 70 000 would change: refused by name, and the load's new accounts
# are not written (one transaction).
gen 70001 >"$tmp/first.json"
$billing load --pricebook "$book" --accounts "$tmp/first.json" >"$tmp/out" 2>&1 || {
    check "the 70 001 accounts load" fail "$(head -c 600 "$tmp/out")"
    finish
    exit 1
}
gen 70011 0 -1 11.00 >"$tmp/second.json"
$billing load --pricebook "$book" --accounts "$tmp/second.json" >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 3 ] && grep -q "credit grant 'g-70000' is stored with other terms" "$tmp/out" &&
    [ "$(rows accounts)" = 70001 ] && [ "$(rows credit_grants)" = 70001 ]; then
    r=ok
else
    r=fail
fi
check "a changed grant 70 000 is refused by name and no new account is written" $r \
    "status $rc, $(rows accounts) accounts: $(head -c 600 "$tmp/out")"

# 5. The digest: first.json is the file last loaded (the refused load wrote
# nothing). A reload counts its rows unchanged; an account written by
# another writer forgets the digest, and the next reload changes it back.
$billing load --pricebook "$book" --accounts "$tmp/first.json" >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "^accounts  *0 added, 0 changed, 70001 unchanged$" "$tmp/out" &&
    grep -q "^credit grants  *0 added, 0 changed, 70001 unchanged$" "$tmp/out" &&
    [ "$(rows load_digests)" = 1 ]; then
    r=ok
else
    r=fail
fi
check "the file last loaded reloads unchanged, its digest kept" $r "status $rc: $(head -c 600 "$tmp/out")"
psql "$BILLING_PG_CONNINFO" -XAtqc "UPDATE billing.accounts SET tax_rate = 0.07 WHERE id = 'a-5'" || exit 99
forgot=$(rows load_digests)
$billing load --pricebook "$book" --accounts "$tmp/first.json" >"$tmp/out" 2>&1
rc=$?
rate=$(psql "$BILLING_PG_CONNINFO" -XAtc "SELECT tax_rate FROM billing.accounts WHERE id = 'a-5'")
if [ $rc -eq 0 ] && [ "$forgot" = 0 ] &&
    grep -q "^accounts  *0 added, 1 changed, 70000 unchanged$" "$tmp/out" &&
    grep -q "^credit grants  *0 added, 0 changed, 70001 unchanged$" "$tmp/out" &&
    [ "$rate" = 0.06 ] && [ "$(rows load_digests)" = 1 ]; then
    r=ok
else
    r=fail
fi
check "an account written since the last load is changed back by the same file" $r \
    "status $rc, digests after the update $forgot, tax rate $rate: $(head -c 600 "$tmp/out")"

# 6. The example's accounts, then the same file with a book that renamed
# the plan of subscription sub-team-c-1: the check runs again and refuses.
db_new "${db}_c"
db_use "${db}_c"
$billing db migrate >/dev/null || exit 99
accounts="$srcdir/examples/gpu-cloud/accounts.json"
sed 's/"a100x8-daily"/"a100x8-daily-2"/g' "$book" >"$tmp/book2.json"
cp "$srcdir/examples/gpu-cloud/logo.png" "$tmp/" || exit 99
$billing load --pricebook "$book" --accounts "$accounts" >"$tmp/out" 2>&1 || {
    check "the example's files load" fail "$(head -c 600 "$tmp/out")"
    finish
    exit 1
}
$billing load --pricebook "$tmp/book2.json" --accounts "$accounts" >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 3 ] && grep -q "a100x8-daily" "$tmp/out" && [ "$(rows load_digests)" = 1 ] &&
    [ "$(rows plans)" = 4 ]; then
    r=ok
else
    r=fail
fi
check "the file last loaded is checked again with another price book" $r \
    "status $rc, $(rows plans) plans: $(head -c 600 "$tmp/out")"

# 7. A retried transaction checks and copies the accounts file again (the
# rows are copied from the check's parse, whose catalog the first attempt
# used). A deadlock forces the retry: this session locks accounts, the
# load takes its advisory lock and waits for accounts, then this session
# waits for the advisory lock. The load's deadlock_timeout (10 s) is far
# shorter than this session's (5 min) and the cycle is closed as soon as
# the load is seen waiting, so the load finds the deadlock and is the one
# aborted (40P01, retried); this session's COMMIT shows it.
db_new "${db}_d"
db_use "${db}_d"
$billing db migrate >/dev/null || exit 99
gen 300 >"$tmp/small.json"
mkfifo "$tmp/sql" || exit 99
psql "$BILLING_PG_CONNINFO" -X -At -v ON_ERROR_STOP=1 <"$tmp/sql" >"$tmp/psql.out" 2>&1 &
psql_pid=$!
exec 3>"$tmp/sql"
echo "SET deadlock_timeout = '5min'; BEGIN; LOCK TABLE billing.accounts IN SHARE MODE; SELECT 'locked';" >&3
until grep -q '^locked$' "$tmp/psql.out" || ! kill -0 $psql_pid 2>/dev/null; do :; done
PGOPTIONS='-c deadlock_timeout=10s' $billing load --pricebook "$book" --accounts "$tmp/small.json" \
    >"$tmp/out" 2>&1 &
load_pid=$!
until [ "$(psql "$BILLING_PG_CONNINFO" -XAtc "SELECT count(*) FROM pg_locks WHERE NOT granted
        AND relation = 'billing.accounts'::regclass")" != 0 ] || ! kill -0 $load_pid 2>/dev/null; do :; done
echo "SELECT pg_advisory_xact_lock(7091318301203063140); COMMIT; SELECT 'committed';" >&3
exec 3>&-
wait $load_pid
rc=$?
wait $psql_pid
if [ $rc -eq 0 ] && grep -q '^committed$' "$tmp/psql.out" &&
    grep -q "^accounts  *300 added, 0 changed, 0 unchanged$" "$tmp/out" &&
    grep -q "^credit grants  *300 added, 0 changed, 0 unchanged$" "$tmp/out" &&
    [ "$(rows accounts)" = 300 ] && [ "$(rows credit_ledger)" = 300 ]; then
    r=ok
else
    r=fail
fi
check "a load retried after a deadlock checks and copies the file again" $r \
    "status $rc, psql: $(head -c 300 "$tmp/psql.out"), load: $(head -c 600 "$tmp/out")"

# 8. Rows of the file that other writers insert while the load runs: the
# load's INSERT of accounts, then of grants, tried without ON CONFLICT
# (store/load.c, add_rows), waits for each writer and fails on its row;
# it is then run again with ON CONFLICT, which skips the row, as a load
# always did. Session 1 holds account a-5 uncommitted, session 2 grant g-6
# (its account a-6 stored before); each commits once the load is seen
# waiting for it.
db_new "${db}_e"
db_use "${db}_e"
$billing db migrate >/dev/null || exit 99
psql "$BILLING_PG_CONNINFO" -XAtq -v ON_ERROR_STOP=1 -c "INSERT INTO billing.accounts
    (id, currency, time_zone, tax_rate) VALUES ('a-6', 'CNY', 'Asia/Shanghai', 0.06)" || exit 99
mkfifo "$tmp/sql1" "$tmp/sql2" || exit 99
psql "$BILLING_PG_CONNINFO" -X -At -v ON_ERROR_STOP=1 <"$tmp/sql1" >"$tmp/psql1.out" 2>&1 &
psql1_pid=$!
psql "$BILLING_PG_CONNINFO" -X -At -v ON_ERROR_STOP=1 <"$tmp/sql2" >"$tmp/psql2.out" 2>&1 &
psql2_pid=$!
exec 4>"$tmp/sql1" 5>"$tmp/sql2"
echo "BEGIN; INSERT INTO billing.accounts (id, currency, time_zone, tax_rate)
    VALUES ('a-5', 'CNY', 'Asia/Shanghai', 0.06); SELECT 'inserted';" >&4
echo "BEGIN; INSERT INTO billing.credit_grants (id, account_id, currency, amount, granted_at,
    expires_at, kinds) VALUES ('g-6', 'a-6', 'CNY', 10.00, '2026-01-01T00:00:00+08:00',
    '2026-02-01T00:00:00+08:00', 1); SELECT 'inserted';" >&5
until { grep -q '^inserted$' "$tmp/psql1.out" && grep -q '^inserted$' "$tmp/psql2.out"; } ||
    ! kill -0 $psql1_pid 2>/dev/null || ! kill -0 $psql2_pid 2>/dev/null; do :; done
$billing load --pricebook "$book" --accounts "$tmp/small.json" >"$tmp/out" 2>&1 &
load_pid=$!
# waiting TABLE: whether the load waits for another transaction in its INSERT into TABLE.
waiting() {
    [ "$(psql "$BILLING_PG_CONNINFO" -XAtc "SELECT count(*) FROM pg_stat_activity
        WHERE wait_event_type = 'Lock' AND wait_event = 'transactionid'
        AND query LIKE '%INSERT INTO billing.$1 %'")" != 0 ]
}
until waiting accounts || ! kill -0 $load_pid 2>/dev/null; do :; done
echo "COMMIT; SELECT 'committed';" >&4
exec 4>&-
until waiting credit_grants || ! kill -0 $load_pid 2>/dev/null; do :; done
echo "COMMIT; SELECT 'committed';" >&5
exec 5>&-
wait $load_pid
rc=$?
wait $psql1_pid
wait $psql2_pid
if [ $rc -eq 0 ] && grep -q '^committed$' "$tmp/psql1.out" && grep -q '^committed$' "$tmp/psql2.out" &&
    grep -q "^accounts  *298 added, 0 changed, 2 unchanged$" "$tmp/out" &&
    grep -q "^credit grants  *299 added, 0 changed, 1 unchanged$" "$tmp/out" &&
    [ "$(rows accounts)" = 300 ] && [ "$(rows credit_grants)" = 300 ] &&
    [ "$(rows credit_ledger)" = 300 ]; then
    r=ok
else
    r=fail
fi
check "an account and a grant inserted meanwhile by other writers are skipped, not refused" $r \
    "status $rc, psql: $(head -c 300 "$tmp/psql1.out") / $(head -c 300 "$tmp/psql2.out"), load: $(head -c 600 "$tmp/out")"

# 9. A first load into tables vacuumed while empty: a statement trigger of
# this test's own records enable_nestloop as each INSERT of accounts,
# grants and ledger entries starts. Empty: off (SQL_NO_NESTLOOP_IF_EMPTY);
# a second load, into tables with rows: on, as configured.
db_new "${db}_f"
db_use "${db}_f"
$billing db migrate >/dev/null || exit 99
psql "$BILLING_PG_CONNINFO" -XAtq -v ON_ERROR_STOP=1 <<'SQL' || exit 99
VACUUM ANALYZE;
CREATE TABLE public.nestloop_seen (n serial, tbl text, setting text);
CREATE FUNCTION public.nestloop_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.nestloop_seen (tbl, setting) VALUES (TG_TABLE_NAME, current_setting('enable_nestloop'));
    RETURN NULL;
END $$;
CREATE TRIGGER nestloop_record BEFORE INSERT ON billing.accounts FOR EACH STATEMENT EXECUTE FUNCTION public.nestloop_record();
CREATE TRIGGER nestloop_record BEFORE INSERT ON billing.credit_grants FOR EACH STATEMENT EXECUTE FUNCTION public.nestloop_record();
CREATE TRIGGER nestloop_record BEFORE INSERT ON billing.credit_ledger FOR EACH STATEMENT EXECUTE FUNCTION public.nestloop_record();
SQL
# seen: the settings recorded, in order, as "table=setting" words.
seen() {
    psql "$BILLING_PG_CONNINFO" -XAtc "SELECT string_agg(tbl || '=' || setting, ' ' ORDER BY n) FROM public.nestloop_seen"
}
$billing load --pricebook "$book" --accounts "$tmp/small.json" >"$tmp/out" 2>&1
rc=$?
first=$(seen)
gen 310 >"$tmp/more.json"
psql "$BILLING_PG_CONNINFO" -XAtqc "TRUNCATE public.nestloop_seen" || exit 99
$billing load --pricebook "$book" --accounts "$tmp/more.json" >>"$tmp/out" 2>&1
rc2=$?
second=$(seen)
if [ $rc -eq 0 ] && [ $rc2 -eq 0 ] &&
    [ "$first" = "accounts=off credit_grants=off credit_ledger=off" ] &&
    [ "$second" = "accounts=on credit_grants=on credit_ledger=on" ] &&
    grep -q "^accounts  *10 added, 0 changed, 300 unchanged$" "$tmp/out" &&
    [ "$(rows accounts)" = 310 ] && [ "$(rows credit_ledger)" = 310 ]; then
    r=ok
else
    r=fail
fi
check "into tables vacuumed while empty the load's INSERTs run without nested loops" $r \
    "status $rc and $rc2, first load: $first, second: $second: $(head -c 600 "$tmp/out")"

finish
