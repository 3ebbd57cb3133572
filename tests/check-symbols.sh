#!/bin/sh
# check-symbols.sh - each installed shared library exports exactly the
# functions its public header declares with its export macro: libbilling
# those marked BILLING_API in billing.h, libbilling-config those marked
# BILLING_CONFIG_API in billing_config.h. Nothing internal leaks, nothing
# public is missing. Prints a Check-style summary line.
set -u
src="${top_srcdir:-..}"
build="${top_builddir:-..}"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
checks=0
failures=0

# check HEADER MACRO SHARED_OBJECT
check() {
    checks=$((checks + 1))
    if [ ! -f "$3" ]; then
        echo "no shared library at $3 (configure --disable-shared?)"
        failures=$((failures + 1))
        return
    fi
    grep "$2 " "$1" | grep -v '#define' |
        sed -n 's/.*[ *]\(billing_[a-z0-9_]*\)(.*/\1/p' | sort -u >"$tmp/declared"
    nm -D --defined-only "$3" | awk '$2 == "T" || $2 == "D" || $2 == "B" || $2 == "R" { print $3 }' |
        grep -v '^_' | sort -u >"$tmp/exported"
    if cmp -s "$tmp/declared" "$tmp/exported"; then
        echo "$(basename "$3"): exported symbols match the $(wc -l <"$tmp/declared") public functions"
        return
    fi
    echo "$(basename "$3"): exported symbols differ from $(basename "$1") (< declared only, > exported only):"
    diff "$tmp/declared" "$tmp/exported"
    failures=$((failures + 1))
}

check "$src/libbilling/billing.h" BILLING_API "$build/libbilling/.libs/libbilling.so"
check "$src/formats/billing_config.h" BILLING_CONFIG_API "$build/formats/.libs/libbilling-config.so"
if [ "$failures" -eq 0 ]; then
    echo "100%: Checks: $checks, Failures: 0, Errors: 0"
    exit 0
fi
echo "$(( (checks - failures) * 100 / checks ))%: Checks: $checks, Failures: $failures, Errors: 0"
exit 1
