#!/bin/sh
# check-golden.sh - `billing rate` output compared byte for byte with the
# hand-checked expected files in tests/golden/.
#
# A case NAME is NAME.args (the arguments after `billing rate`, paths
# relative to tests/golden/) with NAME.expected.json or NAME.expected.txt
# (stdout), optionally NAME.expected.stderr (default: empty) and
# NAME.expected.rc (default: 0). With NAME.expected.rejects, the run gets
# `--rejects FILE` and FILE is compared with it too. Prints a Check-style
# summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
billing="$builddir/billing/billing"
golden="${top_srcdir:-..}/tests/golden"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-golden.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
cd "$golden" || exit 99

# Compare $2 (expected file) with $3 (actual); print a diff when they differ.
same() {
    if [ -f "$2" ]; then
        exp="$2"
    else
        exp=/dev/null
    fi
    if cmp -s "$exp" "$3"; then
        return 0
    fi
    echo "FAIL $1: $3 differs from $exp:"
    diff -u "$exp" "$3" | head -60
    return 1
}

checks=0
failures=0
for args in *.args; do
    name=${args%.args}
    checks=$((checks + 1))
    # Word splitting of the arguments is intended: they contain no spaces.
    # shellcheck disable=SC2046
    rejects=
    [ -f "$name.expected.rejects" ] && rejects="--rejects $tmp/$name.rejects"
    # shellcheck disable=SC2046,SC2086
    ${BILLING_TEST_WRAP:-} "$billing" rate $rejects $(cat "$args") >"$tmp/$name.out" 2>"$tmp/$name.err"
    echo $? >"$tmp/$name.rc"
    # The rejects file's name varies with the temporary directory: shown as TMP/.
    if [ -n "$rejects" ]; then
        sed -i "s|$tmp/|TMP/|g" "$tmp/$name.out" "$tmp/$name.err"
    fi
    [ -f "$name.expected.rc" ] || echo 0 >"$tmp/$name.exprc"
    [ -f "$name.expected.rc" ] && cp "$name.expected.rc" "$tmp/$name.exprc"
    out="$name.expected.json"
    [ -f "$out" ] || out="$name.expected.txt"
    ok=1
    same "$name (stdout)" "$out" "$tmp/$name.out" || ok=0
    same "$name (stderr)" "$name.expected.stderr" "$tmp/$name.err" || ok=0
    same "$name (exit status)" "$tmp/$name.exprc" "$tmp/$name.rc" || ok=0
    if [ -n "$rejects" ]; then
        same "$name (rejects)" "$name.expected.rejects" "$tmp/$name.rejects" || ok=0
    fi
    if [ $ok -eq 1 ]; then
        echo "ok $name"
    else
        failures=$((failures + 1))
    fi
done
passed=$((checks - failures))
echo "$((passed * 100 / checks))%: Checks: $checks, Failures: $failures, Errors: 0"
[ $failures -eq 0 ]
