#!/bin/sh
# check-example.sh - the example programs of examples/ print exactly their
# golden output (files checked by hand):
#  - rate_invoice: example_rate_invoice.expected (24 GPU-hour x 0.60 =
#    14.40, 1 instance-hour x 0.48, 500 GB-month x 0.20 = 100.00, 73 GB of
#    zero-rated traffic, 10.00 trial credit, 6% tax on 104.88 = 6.29);
#  - live_cost over example_live_cost.input for new-d of examples/gpu-cloud:
#    example_live_cost.expected (stdout, then stderr; 4.80 an hour against
#    10.00: 5.20 left at 11:00 lasts until 12:05 +08, 0.40 left at 12:00
#    still runs out at 12:05, nothing left at 13:00; the bad line's number
#    and message; exit status 1 because of it).
# BILLING_EXAMPLE_DIR (default .) holds the programs, so that
# check-install.sh can run the same comparison on programs built against
# the installed libraries.
set -u
src="${top_srcdir:-..}"
dir="${BILLING_EXAMPLE_DIR:-.}"
checks=0
failures=0

# compare NAME EXPECTED_RC EXPECTED_FILE ACTUAL_RC ACTUAL_OUTPUT
compare() {
    checks=$((checks + 1))
    if [ "$4" -eq "$2" ] && [ "$5" = "$(cat "$3")" ]; then
        echo "$1: output matches $3"
        return
    fi
    failures=$((failures + 1))
    echo "$1 exited $4 (expected $2); output differs from $3:"
    printf '%s\n' "$5" | diff "$3" - || true
}

# shellcheck disable=SC2086 # the prefix (run-test.sh, valgrind) is words
out=$(${BILLING_TEST_WRAP:-} "$dir/example_rate_invoice" 2>&1)
compare rate_invoice 0 "$src/tests/example_rate_invoice.expected" $? "$out"

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086
${BILLING_TEST_WRAP:-} "$dir/example_live_cost" "$src/examples/gpu-cloud/pricebook.json" \
    "$src/examples/gpu-cloud/accounts.json" new-d <"$src/tests/example_live_cost.input" \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
out=$(cat "$tmp/out" "$tmp/err")
compare live_cost 1 "$src/tests/example_live_cost.expected" $rc "$out"

if [ "$failures" -eq 0 ]; then
    echo "100%: Checks: $checks, Failures: 0, Errors: 0"
    exit 0
fi
echo "$(( (checks - failures) * 100 / checks ))%: Checks: $checks, Failures: $failures, Errors: 0"
exit 1
