#!/bin/sh
# check-suite-table.sh - doc/testing.md's table of suites and the suites
# tests/Makefile.am runs must name the same suites, both ways: a suite
# missing from the table is undocumented, a row without a suite documents
# a test that no longer runs. Rows may name several suites (`a`, `b`);
# `fuzz/...` rows are the fuzz targets, run by fuzz/Makefile.am.
set -eu
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
mk="$top_srcdir/tests/Makefile.am"
doc="$top_srcdir/doc/testing.md"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Suites: every name added to UNIT_TESTS, INTEGRATION_TESTS or SCRIPT_TESTS.
sed -n 's/^\(UNIT_TESTS\|INTEGRATION_TESTS\|SCRIPT_TESTS\) *+*= *//p' "$mk" |
    tr ' \t' '\n\n' | grep -v '^$' | grep -v '^\$' | sort -u >"$tmp/made"
# Table: the first column of the table under "| suite |", each `name`.
awk -F '|' '/^\| suite \|/ { t = 1; next } t && !/^\|/ { exit } t && !/^\|---/ { print $2 }' "$doc" |
    grep -o '`[^`]*`' | tr -d '`' | grep -v '^fuzz/' | sort -u >"$tmp/doc"

[ -s "$tmp/made" ] || { echo "check-suite-table: no suites read from $mk" >&2; exit 1; }
[ -s "$tmp/doc" ] || { echo "check-suite-table: no suite table read from $doc" >&2; exit 1; }
rc=0
for s in $(comm -23 "$tmp/made" "$tmp/doc"); do
    echo "check-suite-table: suite $s (tests/Makefile.am) has no row in doc/testing.md's suite table" >&2
    rc=1
done
for s in $(comm -13 "$tmp/made" "$tmp/doc"); do
    echo "check-suite-table: doc/testing.md's suite table names $s, which tests/Makefile.am does not run" >&2
    rc=1
done
n=$(wc -l <"$tmp/made")
[ "$rc" -eq 0 ] && echo "check-suite-table: $n suites, each with its row in doc/testing.md"
exit "$rc"
