#!/bin/sh
# check-rate-example.sh - scripts/rate-example.sh shows only the result
# (issue 27). The build is this tree's; a stand-in `make` on PATH prints
# 150 lines as a real build does, a stand-in `dpkg-query` says every
# package is installed, and BILLING_RATE_EXAMPLE_BUILD points the script at
# a temporary build directory whose billing/billing runs this build's:
#   - standard output is exactly `billing rate`'s, for the README's runs
#     (no arguments, --account lab-a --month 2026-01 --by resource,
#     --format csv), and the script's standard error one short line;
#   - make's output is kept in the build directory's make.log;
#   - a failing build prints the log's tail (not all of it) and its name,
#     and nothing on standard output.
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-rate-example.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

. "$srcdir/tests/checklib.sh"

mkdir -p "$tmp/bin" "$tmp/build/billing"
: >"$tmp/build/config.status"
printf '#!/bin/sh\nexec "%s/billing/billing" "$@"\n' "$builddir" >"$tmp/build/billing/billing"
printf '#!/bin/sh\nseq 1 150\n[ ! -e "%s/fail" ] || { echo "stand-in make: error: boom" >&2; exit 2; }\n' \
    "$tmp" >"$tmp/bin/make"
printf '#!/bin/sh\nprintf installed\n' >"$tmp/bin/dpkg-query"
chmod +x "$tmp/build/billing/billing" "$tmp/bin/make" "$tmp/bin/dpkg-query"

example() {
    PATH="$tmp/bin:$PATH" BILLING_RATE_EXAMPLE_BUILD="$tmp/build" \
        bash "$srcdir/scripts/rate-example.sh" "$@" >"$tmp/out" 2>"$tmp/err"
}
rate() {
    "$builddir/billing/billing" rate "$@" --pricebook "$srcdir/examples/gpu-cloud/pricebook.json" \
        --accounts "$srcdir/examples/gpu-cloud/accounts.json" \
        "$srcdir/examples/gpu-cloud/events.jsonl" </dev/null 2>/dev/null
}

example
rc=$?
rate --format table >"$tmp/expected"
check "no arguments: exit 0, standard output exactly billing rate's table (exit $rc)" \
    "$([ $rc -eq 0 ] && [ -s "$tmp/out" ] && cmp -s "$tmp/out" "$tmp/expected" && echo ok)"
check "... standard error one short line ($(wc -l <"$tmp/err") lines: $(head -1 "$tmp/err"))" \
    "$([ "$(wc -l <"$tmp/err")" = 1 ] && [ "$(wc -c <"$tmp/err")" -le $((100 + ${#tmp})) ] && echo ok)"
check "... make's output kept in make.log" \
    "$([ "$(wc -l <"$tmp/build/make.log" 2>/dev/null)" = 150 ] && echo ok)"

example --account lab-a --month 2026-01 --by resource
rc=$?
rate --format table --account lab-a --month 2026-01 --by resource >"$tmp/expected"
check "--account lab-a --month 2026-01 --by resource: the same as billing rate's (exit $rc)" \
    "$([ $rc -eq 0 ] && [ -s "$tmp/out" ] && cmp -s "$tmp/out" "$tmp/expected" &&
        [ "$(wc -l <"$tmp/err")" = 1 ] && echo ok)"

example --format csv
rc=$?
rate --format csv >"$tmp/expected"
check "--format csv: standard output is the CSV alone (exit $rc)" \
    "$([ $rc -eq 0 ] && [ -s "$tmp/out" ] && cmp -s "$tmp/out" "$tmp/expected" && echo ok)"

: >"$tmp/fail"
example
rc=$?
check "a failing build: nonzero exit, nothing on standard output, the log's tail and name (exit $rc, $(wc -l <"$tmp/err") lines)" \
    "$([ $rc -ne 0 ] && [ ! -s "$tmp/out" ] && grep -q 'boom' "$tmp/err" &&
        grep -q "$tmp/build/make.log" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -le 25 ] && echo ok)"
finish
