#!/bin/sh
# run-test.sh - automake LOG_COMPILER for our tests.
# Runs one test, keeps its whole output for the .log file, and copies
# Check's summary lines to fd 9 (the console, see AM_TESTS_FD_REDIRECT) so
# that `make check` prints every suite's "N%: Checks: ..." line.
out=$(mktemp "${TMPDIR:-/tmp}/billing-test.XXXXXX") || exit 99
case "$1" in
    *.sh) sh "$@" >"$out" 2>&1 ;;
    *) "$@" >"$out" 2>&1 ;;
esac
rc=$?
cat "$out"
name=$(basename "$1")
if { true >&9; } 2>/dev/null; then
    grep -E '^[0-9]+%: Checks: ' "$out" | sed "s|^|$name: |" >&9
fi
rm -f "$out"
exit $rc
