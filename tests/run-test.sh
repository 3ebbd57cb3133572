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
#
# Every test is time-bound: automake's driver has none, so a test that
# hangs (a FIFO nobody opens, a lost wake-up) would block `make check` and
# CI forever. The bound is generous, BILLING_TEST_TIMEOUT seconds (default
# 600; the slowest suite takes well under a minute with sanitizers), and 20
# times that under valgrind, which is 20-50 times slower. timeout(1) runs
# the test in its own process group and kills the whole group, so that
# the children of a script test go too; exit status 124 is reported as a
# failure with its reason.
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
limit=${BILLING_TEST_TIMEOUT:-600}
if [ "${BILLING_VALGRIND:-0}" = 1 ]; then
    limit=$((limit * 20))
fi
case "$1" in
    *.sh) timeout -k 10 "$limit" sh "$@" >"$out" 2>&1 ;;
    # Word splitting of the prefix is intended.
    # shellcheck disable=SC2086
    *) timeout -k 10 "$limit" $BILLING_TEST_WRAP "$@" >"$out" 2>&1 ;;
esac
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "$1: TIMEOUT: no result after ${limit}s (BILLING_TEST_TIMEOUT), killed" >>"$out"
    echo "0%: Checks: 1, Failures: 0, Errors: 1" >>"$out"
fi
cat "$out"
name=$(basename "$1")
if { true >&9; } 2>/dev/null; then
    grep -E '^[0-9]+%: Checks: ' "$out" | sed "s|^|$name: |" >&9
fi
rm -f "$out"
exit $rc
