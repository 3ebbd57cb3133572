#!/bin/sh
# check-circles.sh - no circles between the files of a part (issue 24).
#
# A part is a directory of DIST_SUBDIRS in the top Makefile.am (libbilling,
# formats, store, billing, billingd and any directory added later) except
# proto (generated code) and tests, bench and fuzz (many small programs,
# not one module). Inside each part, "file A uses file B" when A's object
# has an undefined symbol that B's object defines (nm on the objects of
# the build tree: this also sees what #include lines do not, such as a
# function declared in a third header). A circle is a set of files that
# reach each other through such uses (a strongly connected component of
# more than one file).
#
# tests/circles.allow lists the uses that may close a circle, one a line:
#     PART/FROM.c PART/TO.c REASON
# The circles are computed without the listed uses, so a new use that
# closes a circle by another way still fails. A listed use that no longer
# exists fails too (the line must go). REASON must appear word for word
# in a comment of FROM.c, beside the use, unless it starts with "being
# removed" (a temporary entry for files another change is moving).
# Prints a Check-style summary line.
set -u
src="${top_srcdir:-..}"
build="${top_builddir:-..}"
allow="${CIRCLES_ALLOW:-$src/tests/circles.allow}"
tmp=$(mktemp -d) || exit 99
[ -n "${CIRCLES_KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT
checks=0
failures=0
failed_parts=0

fail() {
    echo "$1"
    failures=$((failures + 1))
}

# parts: the directories of DIST_SUBDIRS that are one module each.
parts() {
    sed -n 's/^DIST_SUBDIRS *= *//p' "$src/Makefile.am" | tr ' \t' '\n\n' |
        grep -v -x -e '' -e proto -e tests -e bench -e fuzz
}

# source_of PART OBJECT: the C file (base name) an object of the build
# tree was compiled from, "PREFIX-NAME.o" (automake's per-target objects)
# or "NAME.o"; nothing when the source is gone (a stale object).
source_of() {
    o=$(basename "$2" .o)
    for name in "$o" "${o#*-}"; do
        if [ -f "$src/$1/$name.c" ] || [ -f "$build/$1/$name.c" ]; then
            echo "$name.c"
            return
        fi
    done
}

# symbols PART: "FILE d SYMBOL" and "FILE u SYMBOL" lines for every object
# of the part (a source compiled into several targets: the union; libtool
# keeps its PIC objects in .libs/, alone there with --disable-static).
symbols() {
    for obj in "$build/$1"/*.o "$build/$1"/.libs/*.o; do
        [ -f "$obj" ] || continue
        c=$(source_of "$1" "$obj")
        [ -n "$c" ] || continue
        nm "$obj" | awk -v f="$1/$c" '
            NF == 2 && $1 == "U" { print f, "u", $2; next }
            NF == 3 && $2 ~ /^[TDBRGSVWC]$/ { print f, "d", $3 }'
    done | sort -u
}

# edges: "FROM TO SYMBOL" for each use between two files (first symbol).
edges() {
    awk 'NR == FNR { if ($2 == "d") def[$3] = def[$3] " " $1; next }
         $2 == "u" && ($3 in def) {
             n = split(def[$3], to, " ")
             for (i = 1; i <= n; i++)
                 if (to[i] != $1 && !((($1 " " to[i])) in seen)) {
                     seen[$1 " " to[i]] = 1
                     print $1, to[i], $3
                 }
         }' "$1" "$1"
}

# circles: the strongly connected components of more than one file of the
# graph "FROM TO ..." on stdin (Tarjan), one line each, files sorted.
circles() {
    awk '{ if (!($1 in out)) { nodes[++nn] = $1; out[$1] = "" }
           if (!($2 in out)) { nodes[++nn] = $2; out[$2] = "" }
           out[$1] = out[$1] " " $2 }
    function visit(v,    n, w, i, ws, comp) {
        index_of[v] = low[v] = ++counter
        stack[++sp] = v; on[v] = 1
        n = split(out[v], ws, " ")
        for (i = 1; i <= n; i++) {
            w = ws[i]
            if (!(w in index_of)) {
                visit(w)
                if (low[w] < low[v]) low[v] = low[w]
            } else if (on[w] && index_of[w] < low[v])
                low[v] = index_of[w]
        }
        if (low[v] != index_of[v]) return
        comp = ""; n = 0
        do { w = stack[sp--]; on[w] = 0; comp = comp " " w; n++ } while (w != v)
        if (n > 1) print comp
    }
    END { for (i = 1; i <= nn; i++) if (!(nodes[i] in index_of)) visit(nodes[i]) }' |
        while read -r comp; do
            echo "$comp" | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//'
            echo
        done
}

# The allow file without comments and blank lines: "FROM TO REASON".
grep -v -e '^#' -e '^[[:space:]]*$' "$allow" >"$tmp/allow" 2>/dev/null || : >"$tmp/allow"
parts >"$tmp/parts"
# The allow file itself: each line names two files of one part, and a reason.
checks=1
while read -r from to reason; do
    p=${from%%/*}
    if [ -z "$reason" ] || [ "${to%%/*}" != "$p" ] || ! grep -q -x -- "$p" "$tmp/parts"; then
        fail "tests/circles.allow: \"$from $to $reason\" is not PART/FROM.c PART/TO.c REASON within one part"
    fi
done <"$tmp/allow"
[ "$failures" -eq 0 ] || failed_parts=1

# check_part PART: the uses of PART, its allowed ones, its circles.
check_part() {
    part=$1
    symbols "$part" >"$tmp/syms"
    if [ ! -s "$tmp/syms" ]; then
        fail "$part: no objects in $build/$part (build the tree first)"
        return
    fi
    edges "$tmp/syms" >"$tmp/edges"
    # The listed uses of this part: each must exist, close a circle (its
    # two files are in one circle of all the uses) and carry its comment.
    awk -v p="$part/" 'index($1, p) == 1' "$tmp/allow" >"$tmp/allowed"
    circles <"$tmp/edges" >"$tmp/all-circles"
    while read -r from to reason; do
        if ! awk -v a="$from" -v b="$to" '$1 == a && $2 == b { found = 1 } END { exit !found }' "$tmp/edges"; then
            fail "$part: tests/circles.allow lists $from -> $to, which is not a use any more: remove the line"
            continue
        fi
        if ! awk -v a="$from" -v b="$to" '{ x = y = 0; for (i = 1; i <= NF; i++) { x += $i == a; y += $i == b } }
                x && y { found = 1 } END { exit !found }' "$tmp/all-circles"; then
            fail "$part: tests/circles.allow lists $from -> $to, which closes no circle any more: remove the line"
            continue
        fi
        case "$reason" in "being removed"*) continue ;; esac
        if ! grep -qF -- "$reason" "$src/$from"; then
            fail "$part: $from has no comment \"$reason\" (tests/circles.allow's reason for $from -> $to)"
        fi
    done <"$tmp/allowed"
    awk -v a="$tmp/allowed" 'BEGIN { while ((getline l <a) > 0) { split(l, w, " "); ok[w[1] " " w[2]] = 1 } }
        !(($1 " " $2) in ok)' "$tmp/edges" >"$tmp/kept"
    n_files=$(awk '{ print $1 }' "$tmp/syms" | sort -u | wc -l)
    n_uses=$(wc -l <"$tmp/edges")
    n_allowed=$(wc -l <"$tmp/allowed")
    circles <"$tmp/kept" >"$tmp/circles"
    if [ ! -s "$tmp/circles" ]; then
        echo "$part: $n_files files, $n_uses uses, no circle ($n_allowed uses allowed by tests/circles.allow)"
        return
    fi
    while read -r comp; do
        fail "$part: circle $comp, through:"
        for f in $comp; do
            for g in $comp; do
                awk -v a="$f" -v b="$g" '$1 == a && $2 == b { print "    " $1 " -> " $2 " (" $3 ")" }' "$tmp/kept"
            done
        done
    done <"$tmp/circles"
}

for part in $(cat "$tmp/parts"); do
    ls "$src/$part"/*.c >/dev/null 2>&1 || continue
    checks=$((checks + 1))
    before=$failures
    check_part "$part"
    [ "$failures" -eq "$before" ] || failed_parts=$((failed_parts + 1))
done
if [ "$checks" -eq 0 ]; then
    echo "check-circles: no part read from $src/Makefile.am's DIST_SUBDIRS"
    exit 1
fi
echo "$(( (checks - failed_parts) * 100 / checks ))%: Checks: $checks, Failures: $failed_parts, Errors: 0"
[ "$failures" -eq 0 ]
