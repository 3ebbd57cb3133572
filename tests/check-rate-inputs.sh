#!/bin/sh
# check-rate-inputs.sh - `billing rate` takes only the inputs it is given.
#
# At 0adefcb each input left out was silently taken from the shipped
# example: a forgotten event file rated the example's events against the
# user's price book, `--account` (a typo of `--accounts`) loaded the
# example's accounts, and events piped in without '-' were ignored for the
# example's. Now the example serves only a run given no input at all, and
# any other missing input is a usage error naming it. Also `billing load
# --book` with an id the database domain would refuse is a usage error
# naming the option and the rule, before any connection is tried.
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="$builddir/billing/billing"
g="$srcdir/tests/golden"
pb="$g/pricebook.json"
acc="$g/1-three-hour-run.accounts.json"
ev="$g/1-three-hour-run.events.jsonl"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-inputs.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

checks=0
failures=0
# check NAME EXPECTED-RC STDERR-SUBSTRING [STDOUT-SUBSTRING [NOT-IN-STDERR]]: after a
# run into $tmp/out and $tmp/err; empty substrings are not looked for.
check() {
    checks=$((checks + 1))
    if [ "$rc" -eq "$2" ] && { [ -z "$3" ] || grep -qF -- "$3" "$tmp/err"; } &&
        { [ -z "${4:-}" ] || grep -qF -- "$4" "$tmp/out"; } &&
        { [ -z "${5:-}" ] || ! grep -qF -- "$5" "$tmp/err"; }; then
        echo "ok $1"
    else
        failures=$((failures + 1))
        echo "FAIL $1: exit $rc (expected $2), stderr:"
        cat "$tmp/err"
    fi
}

# ${BILLING_TEST_WRAP} is words (valgrind and its options).
# shellcheck disable=SC2086
run() {
    ${BILLING_TEST_WRAP:-} "$billing" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

run rate --pricebook "$pb" --accounts "$acc" </dev/null
check "forgotten event file is an error, not the example's events" 2 \
    "missing an event file ('-' for standard input)" "" example

run rate --pricebook "$pb" --account lab-a "$ev" </dev/null
check "--account for --accounts names the missing option" 2 \
    "missing --accounts FILE (--account ID only picks one account to print"

run rate --accounts "$acc" "$ev" </dev/null
check "missing price book named" 2 "missing --pricebook FILE"

run rate --pricebook "$pb" --accounts "$acc" <"$ev"
check "events piped in without '-' are rated" 0 "" '"events_rated": 1' example

cat "$ev" | { run rate --pricebook "$pb" --accounts "$acc"; echo "$rc" >"$tmp/rc"; }
rc=$(cat "$tmp/rc")
check "events from a pipe without '-' are rated" 0 "" '"events_rated": 1' example

run rate </dev/null
check "no input at all rates the example, saying so" 0 "no input given: rating the shipped example"

run load --pricebook "$pb" --book "a b" --db "host=/nonexistent"
check "--book with a space names the option and the rule" 2 \
    "--book 'a b': an id is 1 to 128 bytes of printable ASCII without spaces"

run rate --pricebook cn="$pb" --pricebook us="$pb" --accounts "$acc" "$ev" </dev/null
check "several price books: an account without \"book\" is named" 3 \
    "field 'book': missing: with several --pricebook ID=FILE, every account names the book"

run rate --pricebook cn="$pb" --pricebook "$pb" --accounts "$acc" "$ev" </dev/null
check "several price books: each needs an id" 2 "with several price books, each is ID=FILE"

run rate --pricebook cn="$pb" --pricebook cn="$pb" --accounts "$acc" "$ev" </dev/null
check "several price books: ids differ" 2 "--pricebook: id 'cn' given twice"

# --rejects: a conflicting repeat from a file is kept as its line; from a pipe, encoded.
run rate --rejects "$tmp/r.jsonl" --pricebook "$pb" --accounts "$acc" "$g/9-rejected.events.jsonl" \
    </dev/null
check "--rejects: a conflict read from a file is kept as its line" 1 "6 rejected records written" ""
if ! grep -q '"line":8,.*"text":".*\\"quantity\\":\\"4\\"' "$tmp/r.jsonl"; then
    failures=$((failures + 1))
    echo "FAIL: line 8 not kept as text"
fi
run rate --rejects "$tmp/r.jsonl" --pricebook "$pb" --accounts "$acc" - <"$g/9-rejected.events.jsonl"
check "--rejects: a conflict from stdin is kept encoded" 1 "6 rejected records written" ""
if ! grep -q '"line":8,.*"protobuf_base64"' "$tmp/r.jsonl"; then
    failures=$((failures + 1))
    echo "FAIL: line 8 from stdin not kept as protobuf"
fi

passed=$((checks - failures))
echo "$((passed * 100 / checks))%: Checks: $checks, Failures: $failures, Errors: 0"
[ $failures -eq 0 ]
