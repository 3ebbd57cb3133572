#!/bin/sh
# check-format.sh - scripts/check-format.sh, the tree's clang-format check
# (issue 24): it passes files laid out as .clang-format says, fails a file
# clang-format would change (exit 1, a diff naming the file), refuses a
# missing file (exit 2), and --count sums the changed lines per
# directory. Every C file of the tree is kept formatted (the tree was
# reformatted in one step once the branches of the moment were merged),
# so CI fails on a file clang-format would change. Skipped
# without clang-format. Prints a Check-style summary line.
set -u
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-format.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
. "$srcdir/tests/checklib.sh"
command -v clang-format >/dev/null 2>&1 || { echo "clang-format not found: skipped"; exit 77; }
script="$srcdir/scripts/check-format.sh"

# Every C file of the tree (the tracked ones in a git checkout).
formatted=$(cd "$srcdir" && { git ls-files '*.c' '*.h' 2>/dev/null ||
    find libbilling formats store monthend documents billing billingd bench fuzz tests examples \
        -name '*.[ch]' -print; })
cd "$srcdir" || exit 99
# shellcheck disable=SC2086 # one word per file
"$script" $formatted >"$tmp/out" 2>&1
rc=$?
check "formatted files pass" "$([ $rc -eq 0 ] && [ ! -s "$tmp/out" ] && echo ok)" \
    "status $rc: $(head -c 600 "$tmp/out")"

# A copy of one, beside the tree's .clang-format, with two lines spoiled.
mkdir -p "$tmp/tree/src"
cp .clang-format "$tmp/tree/"
sed -e 's/^    int rc;$/  int rc;/' -e 's/^static int parse_month(const char \*s, int32_t \*out)$/static int parse_month( const char *s,int32_t *out )/' \
    billing/cli.c >"$tmp/tree/src/bad.c"
(cd "$tmp/tree" && "$script" src/bad.c) >"$tmp/out" 2>"$tmp/err"
rc=$?
check "a spoiled file fails with a diff naming it" \
    "$([ $rc -eq 1 ] && grep -q '^--- src/bad.c' "$tmp/out" && grep -q '^-static int parse_month( ' "$tmp/out" &&
        grep -q '^-  int rc;' "$tmp/out" && echo ok)" "status $rc: $(head -c 600 "$tmp/out" "$tmp/err")"
(cd "$tmp/tree" && "$script" --count src/bad.c) >"$tmp/out" 2>/dev/null
rc=$?
n=$(grep -c '^  int rc;$' "$tmp/tree/src/bad.c")
check "--count: the spoiled lines under their directory" \
    "$([ $rc -eq 1 ] && grep -Eq "^src +$((n + 1))\$" "$tmp/out" && grep -Eq "^total +$((n + 1))\$" "$tmp/out" && echo ok)" \
    "status $rc, $n lines spoiled: $(cat "$tmp/out")"
"$script" no/such/file.c >/dev/null 2>"$tmp/err"
rc=$?
check "a missing file is a usage error" "$([ $rc -eq 2 ] && grep -q 'no/such/file.c' "$tmp/err" && echo ok)" \
    "status $rc: $(cat "$tmp/err")"
finish
