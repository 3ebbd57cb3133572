# checklib.sh - the Check-style reporting of the script tests, sourced by
# check-demo.sh, check-manpages.sh and check-ingest.sh:
#   check NAME ok|fail [DETAIL]   one line "ok NAME" or "FAIL NAME: DETAIL"
#   finish                        the summary line
#   "100%: Checks: N, Failures: F, Errors: 0"; exits 0 only without failures
# shellcheck shell=sh

checks=0
failures=0
check() {
    checks=$((checks + 1))
    if [ "$2" = ok ]; then
        echo "ok $1"
    else
        failures=$((failures + 1))
        echo "FAIL $1${3:+: $3}"
    fi
}
finish() {
    passed=$((checks - failures))
    echo "$((passed * 100 / checks))%: Checks: $checks, Failures: $failures, Errors: 0"
    [ $failures -eq 0 ]
    exit $?
}
