#!/bin/sh
# run-corpus.sh - automake LOG_COMPILER of the fuzz targets: runs target
# $1 once over each input of its seed corpus, $FUZZ_CORPUS_DIR/NAME/.
#
# FUZZ_MODE=replay (the ordinary build): the target's own main (replay.c)
# takes the directory and prints the Check summary line. FUZZ_MODE=
# libfuzzer (configure --enable-fuzzing): libFuzzer runs each file, given
# by name, once, without fuzzing and without writing anything, and this
# script prints the summary line. Files whose names start with '.' are
# skipped in both modes. As tests/run-test.sh does, the summary
# is copied to fd 9 (the console) so that `make check` shows it.
#
# Time-bound as tests/run-test.sh is: each run gets BILLING_TEST_TIMEOUT
# seconds (default 600), so that a hang fails instead of blocking CI.
prog=$1
name=$(basename "$prog")
corpus="${FUZZ_CORPUS_DIR:-corpus}/$name"
limit=${BILLING_TEST_TIMEOUT:-600}
out=$(mktemp "${TMPDIR:-/tmp}/billing-fuzz.XXXXXX") || exit 99
if [ ! -d "$corpus" ]; then
    echo "no seed corpus $corpus" >"$out"
    echo "0%: Checks: 1, Failures: 0, Errors: 1" >>"$out"
    rc=1
elif [ "${FUZZ_MODE:-replay}" = libfuzzer ]; then
    # libFuzzer runs an input given by file name once (no fuzzing); one
    # process per input, so that a failure does not hide the others.
    n=0
    failures=0
    for f in "$corpus"/*; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        if ! timeout -k 10 "$limit" "$prog" "$f" >>"$out" 2>&1; then
            echo "FAIL $f" >>"$out"
            failures=$((failures + 1))
        fi
    done
    if [ "$n" -gt 0 ]; then
        echo "$(((n - failures) * 100 / n))%: Checks: $n, Failures: $failures, Errors: 0" >>"$out"
    else
        echo "0%: Checks: 0, Failures: 0, Errors: 1" >>"$out"
    fi
    rc=0
    [ "$failures" -eq 0 ] && [ "$n" -gt 0 ] || rc=1
else
    timeout -k 10 "$limit" "$prog" "$corpus" >"$out" 2>&1
    rc=$?
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "$name: TIMEOUT after ${limit}s (BILLING_TEST_TIMEOUT), killed" >>"$out"
        echo "0%: Checks: 1, Failures: 0, Errors: 1" >>"$out"
    fi
fi
cat "$out"
if { true >&9; } 2>/dev/null; then
    grep -E '^[0-9]+%: Checks: ' "$out" | sed "s|^|$name: |" >&9
fi
rm -f "$out"
exit $rc
