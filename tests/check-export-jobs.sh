#!/bin/sh
# check-export-jobs.sh - `billing invoice export --period -j N` writes the
# same files as -j 1, byte for byte (cmp), in PDF, JSON and CSV, for
# several N (more workers than invoices too), against the private
# PostgreSQL (BILLING_PG_CONNINFO; without it the test FAILS, never
# skips). The month: the example's four accounts copied 20 times (80
# finalized invoices, one account named in Chinese, one voided with its
# credit note: 81 files; more than one chunk of 64, so that the workers
# share them). PDFs carry SOURCE_DATE_EPOCH as their creation
# date: without it they differ by the second they were written. Also: a
# worker that cannot write stops the export with status 3, as -j 1 does.
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="${BILLING_TEST_WRAP:-} $builddir/billing/billing"
ex="$srcdir/examples/gpu-cloud"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-export-jobs.XXXXXX") || exit 99
db="billing_export_jobs_$$"

. "$srcdir/tests/checklib.sh"

if [ -z "${BILLING_PG_CONNINFO:-}" ]; then
    check "BILLING_PG_CONNINFO is set (scripts/services.sh start && . var/services.env)" fail
    finish
fi
base=$BILLING_PG_CONNINFO
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"; psql "$base dbname=postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1' EXIT
psql "$base dbname=postgres" -qc "CREATE DATABASE $db" >/dev/null || exit 99
BILLING_PG_CONNINFO="$base dbname=$db"
export BILLING_PG_CONNINFO
SOURCE_DATE_EPOCH=1767225600
export SOURCE_DATE_EPOCH

# Copy K of the example: every account, grant, subscription and event id gets "-K".
jq '[range(1; 21) as $k | .accounts[] | .id += "-\($k)"] as $a
    | [range(1; 21) as $k | .grants[] | .id += "-\($k)" | .account += "-\($k)"] as $g
    | [range(1; 21) as $k | .subscriptions[] | .id += "-\($k)" | .account += "-\($k)"] as $s
    | .accounts = $a | .grants = $g | .subscriptions = $s' "$ex/accounts.json" >"$tmp/accounts.json" ||
    exit 99
for k in $(seq 1 20); do
    jq -c --arg k "$k" '.id += "-" + $k | .account += "-" + $k' "$ex/events.jsonl"
done >"$tmp/events.jsonl" || exit 99
{
    $billing db migrate &&
        $billing load --pricebook "$ex/pricebook.json" --accounts "$tmp/accounts.json" &&
        $billing ingest --quiet "$tmp/events.jsonl" &&
        $billing close --period 2026-01 --finalize --grace 0 --quiet &&
        psql "$BILLING_PG_CONNINFO" -qc "UPDATE billing.accounts SET name = '清华大学' WHERE id = 'lab-a-3'" &&
        $billing invoice void INV-2026-000005 --reason "check-export-jobs"
} >"$tmp/setup" 2>&1 || {
    cat "$tmp/setup"
    exit 99
}

for format in pdf json csv; do
    for j in 1 2 3 64; do
        $billing invoice export --period 2026-01 --format $format --out "$tmp/$format-$j" -j $j \
            >"$tmp/out" 2>&1
        echo $? >"$tmp/rc-$format-$j"
        cp "$tmp/out" "$tmp/out-$format-$j"
    done
    n=$(ls "$tmp/$format-1" | wc -l)
    grep -q "^billing: invoice export: 81 file(s) written" "$tmp/out-$format-1" && [ "$n" -eq 81 ] &&
        [ "$(cat "$tmp/rc-$format-1")" -eq 0 ] && r=ok || r=fail
    check "$format -j 1: 81 files, status 0 ($n)" $r "$(cat "$tmp/out-$format-1")"
    for j in 2 3 64; do
        diff=""
        for f in "$tmp/$format-1"/*; do
            cmp -s "$f" "$tmp/$format-$j/$(basename "$f")" || diff="$diff $(basename "$f")"
        done
        m=$(ls "$tmp/$format-$j" | wc -l)
        [ -z "$diff" ] && [ "$m" -eq "$n" ] && [ "$(cat "$tmp/rc-$format-$j")" -eq 0 ] &&
            grep -q "^billing: invoice export: 81 file(s) written" "$tmp/out-$format-$j" && r=ok || r=fail
        check "$format -j $j: the same $m files as -j 1, byte for byte" $r "differ:$diff; $(cat "$tmp/out-$format-$j")"
    done
done
# The chunked reads give each invoice the rows its own read gives it:
# every 8th file (and the credit note) exported alone, by its number.
diff=""
for f in $(ls "$tmp/pdf-1" | awk 'NR % 8 == 1 || /^CN-/'); do
    num=${f%.pdf}
    for format in pdf json csv; do
        $billing invoice export "$num" --format $format --out "$tmp/one" >/dev/null 2>&1 &&
            cmp -s "$tmp/one/$num.$format" "$tmp/$format-2/$num.$format" || diff="$diff $num.$format"
    done
done
[ -z "$diff" ] && [ -n "$(ls "$tmp/one")" ] && r=ok || r=fail
check "invoices exported alone are the files of the period's export ($(ls "$tmp/one" | wc -l))" $r "differ:$diff"
grep -lq "清华大学" "$tmp/json-2/"*.json && r=ok || r=fail
check "the Chinese name is in an exported invoice" $r

# A file that cannot be written (a directory in its place): status 3 and
# its path named, as with one worker; the other workers stop.
mkdir -p "$tmp/blocked/INV-2026-000010.json"
$billing invoice export --period 2026-01 --format json --out "$tmp/blocked" -j 3 >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 3 ] && grep -q "INV-2026-000010.json: Is a directory" "$tmp/out" && r=ok || r=fail
check "a file that cannot be written stops -j 3 with status 3 (exit $rc)" $r "$(cat "$tmp/out")"
finish
