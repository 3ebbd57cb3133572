#!/bin/sh
# check-options.sh - every numeric option of the `billing` tool takes the
# same spellings (cli_count, billing/main.c): decimal digits only, from 1
# to the option's maximum. Anything else (0, past the maximum, a sign, a
# space, a suffix, nothing, a number past 64 bits) is a usage error: exit
# status 2 and a message naming the option and the value. The smallest and
# largest accepted values get past the option parsing: `billing rate`
# rates the example; the database commands go on to connect and fail on
# the unreachable server (status 5), not on the option (invoice export:
# before it creates its --out directory). -jN, -j N and
# --jobs=N are refused naming the option as typed. The other kinds of
# argument (month, choice, size, instant, duration) are refused the same
# way. Needs no server.
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="$builddir/billing/billing"
ex="$srcdir/examples/gpu-cloud"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-options.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
. "$srcdir/tests/checklib.sh"

# A server that cannot be there: a socket directory that does not exist.
nodb="host=$tmp/no-such-dir"
: >"$tmp/empty.jsonl"

# Run billing with the words "$@" (before: the subcommand and its
# other arguments, in $pre; after: in $post); status into $tmp/rc.
run() {
    # shellcheck disable=SC2086
    # A value let through by mistake may make a run loop (chunks of 0
    # bytes): a bounded wait turns that into a failure (status 124).
    timeout 300 ${BILLING_TEST_WRAP:-} "$billing" $pre "$@" $post >"$tmp/out" 2>"$tmp/err"
    echo $? >"$tmp/rc"
}

# Option $1 with maximum $2 of the command in $pre/$post; accepted values
# end with status $3.
option() {
    opt=$1
    max=$2
    good_rc=$3
    over=$((max + 1))
    for bad in 0 "$over" +2 -1 " 2" 2x "" 0x10 99999999999999999999999; do
        run "$opt" "$bad"
        rc=$(cat "$tmp/rc")
        if [ "$rc" -eq 2 ] && grep -qF -- "$opt '$bad': expected " "$tmp/err"; then
            check "$pre $opt '$bad' refused" ok
        else
            check "$pre $opt '$bad' refused" fail "status $rc: $(head -c 300 "$tmp/err")"
        fi
    done
    for good in 1 "$max"; do
        run "$opt" "$good"
        rc=$(cat "$tmp/rc")
        if [ "$rc" -eq "$good_rc" ] && ! grep -qF -- "$opt '" "$tmp/err"; then
            check "$pre $opt $good accepted" ok
        else
            check "$pre $opt $good accepted" fail "status $rc: $(head -c 300 "$tmp/err")"
        fi
    done
}

pre="rate --no-progress"
post="--pricebook $ex/pricebook.json --accounts $ex/accounts.json $ex/events.jsonl"
option --jobs 64 0
option --chunk-bytes 1073741824 0
pre=ingest
post="--db $nodb $tmp/empty.jsonl"
option --jobs 64 5
option --batch 50000 5
pre="close --period 2026-01"
post="--db $nodb"
option --jobs 64 5
pre="invoice export --period 2026-01 --format pdf --out $tmp/pdf"
post="--db $nodb"
option --jobs 64 5
# The short form in its three spellings (-jN, -j N, and --jobs=N for the
# long one): refused values are named as typed.
for cmd in "rate --no-progress" ingest "close --period 2026-01" "rerate --period 2026-01" \
    "invoice export --period 2026-01 --format pdf --out $tmp/pdf"; do
    for spelled in "-j0:-j/--jobs '0'" "-j 0:-j/--jobs '0'" "--jobs=0:--jobs '0'" "-jx:-j/--jobs 'x'"; do
        # shellcheck disable=SC2086
        timeout 300 ${BILLING_TEST_WRAP:-} "$billing" $cmd ${spelled%%:*} --db "$nodb" \
            >"$tmp/out" 2>"$tmp/err"
        rc=$?
        if [ $rc -eq 2 ] && grep -qF -- "${spelled#*:}: expected " "$tmp/err"; then
            check "$cmd ${spelled%%:*} refused as typed" ok
        else
            check "$cmd ${spelled%%:*} refused as typed" fail "status $rc: $(head -c 300 "$tmp/err")"
        fi
    done
done
pre="invoice list"
post="--db $nodb"
option --limit 100000000 5
pre="rejected list"
post="--db $nodb"
option --limit 100000000 5

# The other kinds of the option table (billing/options.c): a value the
# kind refuses is a usage error naming the option and the value, with
# what the kind wants; each command has its own rows (ingest --format is
# not rate's, rerate has no --finalize).
kind() { # WORDS... -- EXPECTED-STDERR-TEXT
    words=""
    while [ "$1" != -- ]; do words="$words $1"; shift; done
    # shellcheck disable=SC2086
    timeout 300 ${BILLING_TEST_WRAP:-} "$billing" $words --db "$nodb" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "$2" "$tmp/err"; then
        check "$words refused" ok
    else
        check "$words refused" fail "status $rc: $(head -c 300 "$tmp/err")"
    fi
}
kind rate --month 2026-13 -- "--month '2026-13': expected YYYY-MM (1900-01..2199-12)"
kind rate --from 1899-12 -- "--from '1899-12': expected YYYY-MM"
kind rate --format xml -- "--format 'xml': expected json, table or csv"
kind rate --layout wide -- "--layout 'wide': expected compact or full"
kind rate --dedupe-memory 63K -- "--dedupe-memory '63K': expected a size from 64K to 64G (suffix K, M or G)"
kind rate --dedupe-memory 65G -- "--dedupe-memory '65G': expected a size from 64K to 64G"
kind rate --at 2026-01-05T12:00:00 -- "--at '2026-01-05T12:00:00': expected an RFC 3339 instant"
kind close --period 2026-01 --grace 3w -- "--grace '3w': expected a duration such as 3d"
kind close --period 2026-1 -- "--period '2026-1': expected YYYY-MM"
kind invoice list --status paid -- "--status 'paid': expected draft, finalized or void"
kind invoice list --period 2026-00 -- "--period '2026-00': expected YYYY-MM"
kind ingest --format table x.jsonl -- "--format 'table': expected jsonl or protobuf"
kind rerate --period 2026-01 --finalize -- "unknown or ambiguous option '--finalize'"
kind db migrate --to 10000 -- "--to '10000': expected a schema version from 1 to 9999"
kind account balance a --at noon -- "--at 'noon': expected an RFC 3339 instant"
finish
