#!/bin/sh
# check-dedupe.sh - `billing rate` finds repeated event ids exactly, with
# the id set in memory and spread over many temporary runs alike.
#
# From the shipped example, make U unique events (every event copied 40
# times under new ids) and a stream R that holds them all plus exact
# repeats and conflicting repeats (same id, another quantity), shuffled
# and split over two files, one read from stdin. Then:
#   - R with 64K of dedupe memory (dozens of runs, merged) and with the
#     default 64M (no run) prints the same invoices as U without dedupe;
#   - the summary counts every repeat: duplicates and rejected conflicts;
#   - each conflict is named with both places, and the exit status is 1;
#   - --strict stops at a conflict and prints no invoices.
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="$builddir/billing/billing"
ex="$srcdir/examples/gpu-cloud"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-dedupe.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

checks=0
failures=0
check() {
    checks=$((checks + 1))
    if [ "$2" = ok ]; then
        echo "ok $1"
    else
        failures=$((failures + 1))
        echo "FAIL $1"
    fi
}

# U: 40 copies of each example event with ids ID-k1..ID-k40 (the example's
# own two deliberate repeats left out).
awk '{ id = $0; sub(/.*"id":"/, "", id); sub(/".*/, "", id); if (seen[id]++) next
       for (k = 1; k <= 40; k++) { l = $0; sub(/"id":"[^"]*/, "&-k" k, l); print l } }' \
    "$ex/events.jsonl" >"$tmp/unique.jsonl"
unique=$(wc -l <"$tmp/unique.jsonl")
# Exact repeats: every 3rd unique event. Conflicts: every 7th, with quantity 999.
awk 'NR % 3 == 0' "$tmp/unique.jsonl" >"$tmp/repeats.jsonl"
awk 'NR % 7 == 0 { sub(/"quantity":"[^"]*"/, "\"quantity\":\"999\""); print }' \
    "$tmp/unique.jsonl" >"$tmp/conflicts.jsonl"
dups=$(wc -l <"$tmp/repeats.jsonl")
conflicts=$(wc -l <"$tmp/conflicts.jsonl")
# Shuffle deterministically, but keep each id's original before its repeats:
# the originals are sorted by a key, and every repeat goes after all of them
# in its own shuffled order.
awk '{ printf "%08d\t%s\n", (NR * 7919) % 100003, $0 }' "$tmp/unique.jsonl" | sort -n |
    cut -f2- >"$tmp/r1.jsonl"
cat "$tmp/repeats.jsonl" "$tmp/conflicts.jsonl" |
    awk '{ printf "%08d\t%s\n", (NR * 104729) % 100019, $0 }' | sort -n | cut -f2- >"$tmp/r2.jsonl"
# Half of the originals in the second file too, so that repeats cross files.
head -n 2000 "$tmp/r1.jsonl" >"$tmp/a.jsonl"
tail -n +2001 "$tmp/r1.jsonl" >"$tmp/b.jsonl"
cat "$tmp/r2.jsonl" >>"$tmp/b.jsonl"

rate() {
    # shellcheck disable=SC2086 # the prefix (run-test.sh, valgrind) is words
    ${BILLING_TEST_WRAP:-} "$billing" rate --format table --pricebook "$ex/pricebook.json" --accounts "$ex/accounts.json" "$@"
}

rate --no-dedupe "$tmp/unique.jsonl" >"$tmp/ref.txt" 2>"$tmp/ref.err"
rc=$?
[ $rc -eq 0 ] && [ ! -s "$tmp/ref.err" ] && r=ok || r=fail
check "reference: $unique unique events rate cleanly" $r
grep -v '^Events:' "$tmp/ref.txt" >"$tmp/ref.inv"

for mem in 64K 64M; do
    rate --verbose --dedupe-memory $mem "$tmp/a.jsonl" - <"$tmp/b.jsonl" >"$tmp/out-$mem.txt" \
        2>"$tmp/err-$mem.txt"
    rc=$?
    [ $rc -eq 1 ] && r=ok || r=fail
    check "$mem: exit status 1 for the rejected conflicts (got $rc)" $r
    grep -v '^Events:' "$tmp/out-$mem.txt" >"$tmp/out-$mem.inv"
    cmp -s "$tmp/ref.inv" "$tmp/out-$mem.inv" && r=ok || r=fail
    check "$mem: invoices equal to the unique events' invoices" $r
    [ $r = ok ] || diff "$tmp/ref.inv" "$tmp/out-$mem.inv" | head -20
    total=$((unique + dups + conflicts))
    want="Events: $total read, $unique rated, $dups duplicates, $conflicts rejected"
    [ "$(grep '^Events:' "$tmp/out-$mem.txt")" = "$want" ] && r=ok || r=fail
    check "$mem: summary '$want'" $r
    [ $r = ok ] || grep '^Events:' "$tmp/out-$mem.txt"
    n=$(grep -c "field 'id': already rated with different content at " "$tmp/err-$mem.txt")
    [ "$n" -eq "$conflicts" ] && r=ok || r=fail
    check "$mem: one message per conflict ($n of $conflicts)" $r
    # One conflict, by hand: unique line 7 is the first one. Its original
    # is line $l of a.jsonl or b.jsonl (stdin); the conflict is in stdin.
    id=$(sed -n '7s/.*"id":"\([^"]*\)".*/\1/p' "$tmp/unique.jsonl")
    l=$(grep -n "\"id\":\"$id\"" "$tmp/a.jsonl" | cut -d: -f1)
    first="$tmp/a.jsonl:$l"
    if [ -z "$l" ]; then
        first="(stdin):$(grep -n "\"id\":\"$id\"" "$tmp/b.jsonl" | head -n 1 | cut -d: -f1)"
    fi
    c=$(grep -n "\"id\":\"$id\".*\"quantity\":\"999\"" "$tmp/b.jsonl" | cut -d: -f1)
    want="billing: (stdin):$c: event '$id': field 'id': already rated with different content at $first"
    grep -qxF "$want" "$tmp/err-$mem.txt" && r=ok || r=fail
    check "$mem: the conflict of '$id' names both places" $r
done
runs=$(sed -n 's/.* \([0-9]*\) runs, \([0-9]*\) merges.*/\1 \2/p' "$tmp/err-64K.txt")
set -- $runs
[ "${1:-0}" -gt 32 ] && [ "${2:-0}" -ge 1 ] && r=ok || r=fail
check "64K: the ids were spread over runs and merged (runs, merges: $runs)" $r
runs=$(sed -n 's/.* \([0-9]*\) runs, \([0-9]*\) merges.*/\1 \2/p' "$tmp/err-64M.txt")
[ "$runs" = "0 0" ] && r=ok || r=fail
check "64M: everything stayed in memory (runs, merges: $runs)" $r
grep -v '^billing: dedupe:' "$tmp/err-64K.txt" >"$tmp/e1"
grep -v '^billing: dedupe:' "$tmp/err-64M.txt" >"$tmp/e2"
cmp -s "$tmp/e1" "$tmp/e2" && r=ok || r=fail
check "the messages do not depend on the memory" $r

rate --strict --dedupe-memory 64K "$tmp/a.jsonl" "$tmp/b.jsonl" >"$tmp/strict.out" 2>"$tmp/strict.err"
rc=$?
[ $rc -eq 1 ] && [ ! -s "$tmp/strict.out" ] && [ "$(grep -c 'already rated' "$tmp/strict.err")" -eq 1 ] &&
    grep -q -- '--strict: stopped' "$tmp/strict.err" && r=ok || r=fail
check "--strict stops at the first conflict, no invoices (exit $rc)" $r

rate --temp-dir "$tmp/missing" --dedupe-memory 64K "$tmp/unique.jsonl" >/dev/null 2>"$tmp/tmpdir.err"
rc=$?
[ $rc -eq 4 ] && grep -q "temporary file in $tmp/missing" "$tmp/tmpdir.err" && r=ok || r=fail
check "an unusable --temp-dir is an error naming it (exit $rc)" $r

# A file changed in place while being rated (same size, mtime put back):
# the repeat read again is not what was rated, so the run fails (exit 4)
# rather than take the wrong event back. The FIFO holds the run open
# after both files were read.
#
# Synchronized on an event, not on time: the tool reads its files in
# order, so it opens the FIFO only after it has read c1 and c2 to the
# end, and our open of the FIFO for writing returns exactly then. Should
# the tool exit before opening it, the subshell opens the FIFO itself
# (read-write never blocks) so that our open still returns and the check
# fails on the tool's exit status instead of hanging.
head -n 1 "$tmp/unique.jsonl" >"$tmp/c1.jsonl"
cp "$tmp/c1.jsonl" "$tmp/c2.jsonl"
mkfifo "$tmp/hold.jsonl"
(
    rate "$tmp/c1.jsonl" "$tmp/c2.jsonl" "$tmp/hold.jsonl" >/dev/null 2>"$tmp/changed.err"
    echo $? >"$tmp/changed.rc"
    exec 4<>"$tmp/hold.jsonl"
) &
pid=$!
exec 3>"$tmp/hold.jsonl"
cp -p "$tmp/c2.jsonl" "$tmp/c2.orig"
sed 's/"resource":"\(.\)/"resource":"Z/' "$tmp/c2.orig" |
    dd of="$tmp/c2.jsonl" conv=notrunc status=none
touch -r "$tmp/c2.orig" "$tmp/c2.jsonl"
echo >&3
exec 3>&-
wait $pid
rc=$(cat "$tmp/changed.rc")
[ $rc -eq 4 ] && grep -q "c2.jsonl: changed while being rated" "$tmp/changed.err" && r=ok || r=fail
check "a file changed in place while being rated is an error, not a wrong total (exit $rc)" $r
[ $r = ok ] || cat "$tmp/changed.err"

passed=$((checks - failures))
echo "$((passed * 100 / checks))%: Checks: $checks, Failures: $failures, Errors: 0"
[ $failures -eq 0 ]
