#!/bin/sh
# check-format.sh - check C sources against the tree's .clang-format, as
# curl checks its sources with checksrc.pl.
#
#   scripts/check-format.sh [FILE...]          the files given, else every
#                                              tracked .c/.h file
#   scripts/check-format.sh --count [FILE...]  lines clang-format would
#                                              change, per directory
#
# Prints, for each file that clang-format would change, the change as a
# unified diff (nothing is rewritten: run `clang-format -i FILE` for
# that). Exit status: 0 every file as formatted; 1 some file would change;
# 2 usage error, a missing file or no clang-format (scripts/install-deps.sh
# installs it).
set -eu

usage() {
    sed -n '2,/^set -eu/p' "$0" | sed -e '/^set -eu/d' -e 's/^# \{0,1\}//'
}

count=0
case ${1:-} in
--count)
    count=1
    shift
    ;;
-h | --help)
    usage
    exit 0
    ;;
-*)
    echo "check-format.sh: unknown option '$1'" >&2
    exit 2
    ;;
esac

command -v clang-format >/dev/null 2>&1 || {
    echo "check-format.sh: clang-format not found (scripts/install-deps.sh installs it)" >&2
    exit 2
}
top=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$top/.clang-format" ] || {
    echo "check-format.sh: $top/.clang-format not found" >&2
    exit 2
}
if [ $# -eq 0 ]; then
    cd "$top"
    # shellcheck disable=SC2046 # one word per tracked file is wanted
    set -- $(git ls-files '*.c' '*.h')
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-format.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
changed=0
for f in "$@"; do
    [ -f "$f" ] || {
        echo "check-format.sh: $f: no such file" >&2
        exit 2
    }
    # --style=file finds the .clang-format above the file, whatever the current directory.
    clang-format --style=file "$f" >"$tmp/out"
    if diff -u --label "$f" --label "$f (clang-format)" "$f" "$tmp/out" >"$tmp/diff"; then
        continue
    fi
    changed=$((changed + 1))
    if [ $count -eq 1 ]; then
        # Lines of the file that would change, under the file's top directory.
        n=$(tail -n +3 "$tmp/diff" | grep -c '^-' || true)
        echo "$(dirname "$f" | cut -d/ -f1) $n" >>"$tmp/counts"
    else
        cat "$tmp/diff"
    fi
done

if [ $count -eq 1 ] && [ -f "$tmp/counts" ]; then
    sort "$tmp/counts" | awk '
        $1 != d { if (d != "") printf "%-12s %6d\n", d, n; d = $1; n = 0 }
        { n += $2; t += $2 }
        END { if (d != "") printf "%-12s %6d\n", d, n; printf "%-12s %6d\n", "total", t }'
fi
if [ $changed -gt 0 ]; then
    echo "check-format.sh: $changed of $# files differ from .clang-format" >&2
    exit 1
fi
exit 0
