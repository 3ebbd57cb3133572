#!/bin/sh
# check-jobs.sh - `billing rate -j N` prints byte for byte what -j 1 prints,
# for every N and every chunking: stdout, stderr (the messages of rejected
# records and their order), the exit status and the --rejects file.
#
# Inputs: every golden case (tests/golden/*.args), and generated ones
# mixing what can go wrong in a stream: exact repeats and conflicting
# repeats (same id, another quantity) across files and chunks, lines that
# are not JSON, blank lines, a line over the length limit, unknown
# accounts, a protobuf file, and a dedupe with 64K of memory (runs spilled
# to disk). Each runs with N = 2, 3 and 7 and chunks of odd sizes (a byte
# and up, so that records are cut at every place), against -j 1. Prints a Check-style
# summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="$builddir/billing/billing"
gen="$builddir/bench/gen_events"
golden="$srcdir/tests/golden"
ex="$srcdir/examples/gpu-cloud"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-jobs.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

checks=0
failures=0

# Run billing rate with -j $1 --chunk-bytes $2 and the rest of the arguments,
# into $tmp/out.{json,err,rc,rejects}.
run() {
    jobs=$1
    chunk=$2
    shift 2
    rm -f "$tmp/rejects.jsonl"
    ${BILLING_TEST_WRAP:-} "$billing" rate -j "$jobs" --chunk-bytes "$chunk" --no-progress \
        --rejects "$tmp/rejects.jsonl" "$@" >"$tmp/out.json" 2>"$tmp/out.err"
    echo $? >"$tmp/out.rc"
    [ -f "$tmp/rejects.jsonl" ] && mv "$tmp/rejects.jsonl" "$tmp/out.rejects"
    [ -f "$tmp/out.rejects" ] || : >"$tmp/out.rejects"
}

# Case $1: -j 1 as the reference, then each N:CHUNK-BYTES pair of $2 (a
# space-separated list); the rest are billing rate's arguments.
case_() {
    name=$1
    pairs=$2
    shift 2
    run 1 4194304 "$@"
    for f in json err rc rejects; do
        mv "$tmp/out.$f" "$tmp/ref.$f"
    done
    for pair in $pairs; do
        j=${pair%:*}
        c=${pair#*:}
        checks=$((checks + 1))
        run "$j" "$c" "$@"
        bad=
        for f in json err rc rejects; do
            cmp -s "$tmp/ref.$f" "$tmp/out.$f" || bad="$bad $f"
        done
        rm -f "$tmp/out.rejects"
        if [ -z "$bad" ]; then
            echo "ok $name -j $j --chunk-bytes $c"
            continue
        fi
        failures=$((failures + 1))
        echo "FAIL $name -j $j --chunk-bytes $c: differs from -j 1 in:$bad"
        for f in $bad; do
            diff -u "$tmp/ref.$f" "$tmp/out.$f" | head -20
        done
    done
}

# The golden cases, each as its .args file says, from tests/golden.
cd "$golden" || exit 99
for args in *.args; do
    # shellcheck disable=SC2046
    case_ "${args%.args}" "7:1 2:33 3:4097" $(cat "$args")
done

# Generated: two JSON Lines files and a protobuf file.
"$gen" --accounts 20 --accounts-json >"$tmp/accounts.json" || exit 99
"$gen" --accounts 20 1500 >"$tmp/base.jsonl" || exit 99
"$gen" --accounts 20 --protobuf 700 >"$tmp/c.pb" || exit 99
# a.jsonl: the first 1000 events with trouble mixed in; b.jsonl: the rest,
# exact repeats of every 5th event of a and conflicting repeats of every 11th.
awk 'NR <= 1000 {
         print
         if (NR % 97 == 0) print ""
         if (NR % 101 == 0) print "{\"id\": not json"
         if (NR % 211 == 0) { l = $0; sub(/acct-0000[0-9][0-9]/, "acct-999999", l); sub(/"id":"ev-/, "\"id\":\"unknown-", l); print l }
         if (NR % 89 == 0) print
     }
     NR == 500 { printf "{\"id\":\"long\",\"pad\":\""; for (i = 0; i < 70000; i++) printf "x"; print "\"}" }' \
    "$tmp/base.jsonl" >"$tmp/a.jsonl"
awk 'NR > 1000' "$tmp/base.jsonl" >"$tmp/b.jsonl"
awk 'NR <= 1000 && NR % 5 == 0' "$tmp/base.jsonl" >>"$tmp/b.jsonl"
awk 'NR <= 1000 && NR % 11 == 0 { sub(/"quantity":"[^"]*"/, "\"quantity\":\"7\""); print }' \
    "$tmp/base.jsonl" >>"$tmp/b.jsonl"
# A last line without its newline.
printf '%s' "$(tail -n 1 "$tmp/base.jsonl")" >>"$tmp/b.jsonl"
cd "$tmp" || exit 99
case_ generated "2:333 3:4097 7:65536 7:777" --pricebook "$ex/pricebook.json" \
    --accounts accounts.json a.jsonl b.jsonl c.pb
case_ generated-spilled "3:1000 2:20000" --dedupe-memory 64K --pricebook "$ex/pricebook.json" \
    --accounts accounts.json a.jsonl c.pb b.jsonl
case_ generated-table "2:777" --format table --pricebook "$ex/pricebook.json" \
    --accounts accounts.json b.jsonl a.jsonl
# A protobuf file cut short: the framing error stops the run at the same place.
head -c 30000 c.pb >cut.pb
case_ protobuf-cut "2:1 7:500" --pricebook "$ex/pricebook.json" --accounts accounts.json \
    a.jsonl cut.pb b.jsonl

# Bad thread counts and chunk sizes are usage errors naming the option.
for bad in "-j 0" "-j 65" "--jobs x" "--chunk-bytes 0"; do
    checks=$((checks + 1))
    # shellcheck disable=SC2086
    "$billing" rate $bad --pricebook "$ex/pricebook.json" --accounts accounts.json a.jsonl \
        >/dev/null 2>"$tmp/usage.err"
    rc=$?
    opt=${bad%% *}
    [ "$opt" = -j ] && opt=--jobs
    if [ $rc -eq 2 ] && grep -qF -- "$opt '" "$tmp/usage.err"; then
        echo "ok usage error for $bad"
    else
        failures=$((failures + 1))
        echo "FAIL $bad: exit status $rc, stderr:"
        cat "$tmp/usage.err"
    fi
done

# Output that cannot be written (a full device) fails the run with a message,
# whether the JSON fits in one block of billing/rate_output.c (some 50 KB
# for 20 accounts) or not (about 400 KB for 200).
full() {
    checks=$((checks + 1))
    "$billing" rate "$@" --no-progress --pricebook "$ex/pricebook.json" >/dev/full \
        2>"$tmp/full.err"
    rc=$?
    if [ $rc -eq 4 ] && grep -q "writing the output failed" "$tmp/full.err"; then
        echo "ok output to a full device fails ($*)"
    else
        failures=$((failures + 1))
        echo "FAIL output to a full device ($*): exit status $rc, stderr:"
        cat "$tmp/full.err"
    fi
}
if [ -w /dev/full ]; then
    "$gen" --accounts 200 --accounts-json >"$tmp/accounts-200.json" || exit 99
    "$gen" --accounts 200 3000 >"$tmp/big.jsonl" || exit 99
    full -j 1 --accounts accounts.json a.jsonl
    full -j 2 --accounts accounts-200.json big.jsonl
fi

passed=$((checks - failures))
echo "$((passed * 100 / checks))%: Checks: $checks, Failures: $failures, Errors: 0"
[ $failures -eq 0 ]
