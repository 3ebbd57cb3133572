#!/bin/sh
# run-test.sh - automake LOG_COMPILER for our tests.
# Runs one test, keeps its whole output for the .log file, and copies
# Check's summary lines to fd 9 (the console, see AM_TESTS_FD_REDIRECT) so
# that `make check` prints every suite's "N%: Checks: ..." line.
#
# With BILLING_VALGRIND=1 (make check-valgrind), test programs run under
# valgrind through libtool (so that the real binary is checked, not its
# wrapper script); any error or definite leak fails the test.
# Script tests get the same command prefix in $BILLING_TEST_WRAP for the
# programs they run.
out=$(mktemp "${TMPDIR:-/tmp}/billing-test.XXXXXX") || exit 99
BILLING_TEST_WRAP=
if [ "${BILLING_VALGRIND:-0}" = 1 ]; then
    BILLING_TEST_WRAP="$(cd "${top_builddir:-..}" && pwd)/libtool --mode=execute valgrind --quiet"
    BILLING_TEST_WRAP="$BILLING_TEST_WRAP --error-exitcode=99 --leak-check=full"
    BILLING_TEST_WRAP="$BILLING_TEST_WRAP --errors-for-leak-kinds=definite,indirect"
    BILLING_TEST_WRAP="$BILLING_TEST_WRAP --show-leak-kinds=definite,indirect"
fi
if [ "${BILLING_HELGRIND:-0}" = 1 ]; then
    BILLING_TEST_WRAP="$(cd "${top_builddir:-..}" && pwd)/libtool --mode=execute valgrind --quiet"
    BILLING_TEST_WRAP="$BILLING_TEST_WRAP --tool=helgrind --error-exitcode=99"
fi
export BILLING_TEST_WRAP
case "$1" in
    *.sh) sh "$@" >"$out" 2>&1 ;;
    # Word splitting of the prefix is intended.
    # shellcheck disable=SC2086
    *) $BILLING_TEST_WRAP "$@" >"$out" 2>&1 ;;
esac
rc=$?
cat "$out"
name=$(basename "$1")
if { true >&9; } 2>/dev/null; then
    grep -E '^[0-9]+%: Checks: ' "$out" | sed "s|^|$name: |" >&9
fi
rm -f "$out"
exit $rc
