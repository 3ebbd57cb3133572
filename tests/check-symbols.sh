#!/bin/sh
# check-symbols.sh - the shared library exports exactly the functions
# declared BILLING_API in billing.h: nothing internal leaks, nothing
# public is missing. Prints a Check-style summary line.
set -u
hdr="${top_srcdir:-..}/libbilling/billing.h"
so="${top_builddir:-..}/libbilling/.libs/libbilling.so"
if [ ! -f "$so" ]; then
    echo "no shared library at $so (configure --disable-shared?)"
    echo "0%: Checks: 1, Failures: 1, Errors: 0"
    exit 1
fi
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
grep 'BILLING_API' "$hdr" | grep -v '#define' |
    sed -n 's/.*[ *]\(billing_[a-z0-9_]*\)(.*/\1/p' | sort -u >"$tmp/declared"
nm -D --defined-only "$so" | awk '$2 == "T" || $2 == "D" || $2 == "B" || $2 == "R" { print $3 }' |
    grep -v '^_' | sort -u >"$tmp/exported"
if cmp -s "$tmp/declared" "$tmp/exported"; then
    n=$(wc -l <"$tmp/declared")
    echo "exported symbols match the $n public functions"
    echo "100%: Checks: 1, Failures: 0, Errors: 0"
    exit 0
fi
echo "exported symbols differ from billing.h (< declared only, > exported only):"
diff "$tmp/declared" "$tmp/exported"
echo "0%: Checks: 1, Failures: 1, Errors: 0"
exit 1
