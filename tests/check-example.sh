#!/bin/sh
# check-example.sh - examples/rate_invoice.c prints exactly the invoice in
# example_rate_invoice.expected (a golden file checked by hand: 24 GPU-hour
# x 0.60 = 14.40, 1 instance-hour x 0.48, 500 GB-month x 0.20 = 100.00,
# 73 GB of zero-rated traffic, 10.00 trial credit, 6% tax on 104.88 = 6.29).
set -u
exp="${top_srcdir:-..}/tests/example_rate_invoice.expected"
# shellcheck disable=SC2086 # the prefix (run-test.sh, valgrind) is words
out=$(${BILLING_TEST_WRAP:-} ./example_rate_invoice 2>&1)
rc=$?
if [ $rc -eq 0 ] && [ "$out" = "$(cat "$exp")" ]; then
    echo "example output matches $exp"
    echo "100%: Checks: 1, Failures: 0, Errors: 0"
    exit 0
fi
echo "example exited $rc; output differs from $exp:"
printf '%s\n' "$out" | diff "$exp" - || true
echo "0%: Checks: 1, Failures: 1, Errors: 0"
exit 1
