#!/bin/sh
# check-manpages.sh - every --help matches its man page, both ways:
#   - each command of `billing --help`: every option its `billing CMD
#     --help` names (--long, and -x short) is in the man page's section
#     "BILLING CMD...", and every option that section defines (a .TP item)
#     is in the --help;
#   - billing(1)'s SYNOPSIS: every option of `billing CMD --help` is in
#     the SYNOPSIS lines of CMD, and every option those lines name is in
#     the --help;
#   - billingd: every option of `billingd --help` is in billingd(8) and
#     every option of its OPTIONS section in the --help; every key of its
#     CONFIGURATION section is named by the --help's "Keys:" paragraph and
#     the reverse.
# Reads doc/billing.1.in and doc/billingd.8.in from the source tree.
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="${BILLING_TEST_WRAP:-} $builddir/billing/billing"
billingd="${BILLING_TEST_WRAP:-} $builddir/billingd/billingd"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-man.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

. "$srcdir/tests/checklib.sh"

# Roff to plain text: font escapes gone, \- as -, quotes dropped.
plain() {
    sed -e 's/\\f[BIRP]//g; s/\\-/-/g; s/\\(em/-/g; s/\\&//g; s/"//g'
}
# Long and short options named in text: --word, and -x at a word start.
opts() {
    grep -oE '(^|[^a-zA-Z0-9-])--?[a-zA-Z][a-zA-Z0-9.-]*' | sed -E 's/^[^-]*//; s/[.-]+$//' |
        grep -vE '^-[a-zA-Z][a-zA-Z0-9]' | sort -u
}
# Section of man page $1 whose .SH title starts with $2, to the next .SH.
section() {
    awk -v t="$2" '/^\.SH/ { on = (index($0, t) > 0) ; next } on' "$1"
}
# The options a section defines: the line after each .TP.
defined() {
    awk '/^\.TP/ { getline; print }' | plain | opts
}
missing() { # WANTED-FILE HAVE-FILE -> the wanted ones not had, space-separated
    comm -23 "$1" "$2" | tr '\n' ' '
}
both_ways() { # NAME HELP-FILE SECTION-FILE
    # --help: billing(1) DESCRIPTION says once that every subcommand takes it.
    opts <"$2" >"$tmp/hall"
    grep -vx -e '--help' "$tmp/hall" >"$tmp/h"
    plain <"$3" | opts >"$tmp/m"
    defined <"$3" >"$tmp/d"
    check "$1: every --help option is in the man page" \
        "$([ -s "$tmp/h" ] && [ -z "$(missing "$tmp/h" "$tmp/m")" ] && echo ok)" \
        "missing from the man page: $(missing "$tmp/h" "$tmp/m")"
    check "$1: every man page option is in --help" \
        "$([ -z "$(missing "$tmp/d" "$tmp/hall")" ] && echo ok)" \
        "missing from --help: $(missing "$tmp/d" "$tmp/hall")"
}

man1=$srcdir/doc/billing.1.in
check "billing(1) says every subcommand accepts --help" \
    "$(section "$man1" DESCRIPTION | tr '\n' ' ' | plain | grep -q 'Every subcommand accepts .BR --help' && echo ok)"
cmds=$($billing --help | awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { exit }')
check "billing --help lists commands ($(echo $cmds))" "$([ -n "$cmds" ] && echo ok)"
for c in $cmds; do
    $billing "$c" --help >"$tmp/help" 2>&1
    title=$(echo "BILLING $c" | tr '[:lower:]' '[:upper:]')
    section "$man1" "\"$title" >"$tmp/sec"
    check "billing(1) has a section $title" "$([ -s "$tmp/sec" ] && echo ok)"
    both_ways "billing $c" "$tmp/help" "$tmp/sec"
    # The SYNOPSIS lines of the command (each of its verbs), to the next .br or .PP.
    section "$man1" SYNOPSIS | awk -v c="$c" '/^\.(br|PP)/ { on = 0 }
        $0 ~ "^\\.B billing " c "( |$)" { on = 1 } on' | plain | opts >"$tmp/syn"
    opts <"$tmp/help" | grep -vx -e '--help' -e '-h' >"$tmp/h"
    check "billing $c: every --help option is in the SYNOPSIS" \
        "$([ -s "$tmp/h" ] && [ -z "$(missing "$tmp/h" "$tmp/syn")" ] && echo ok)" \
        "missing from the SYNOPSIS: $(missing "$tmp/h" "$tmp/syn")"
    check "billing $c: every SYNOPSIS option is in --help" \
        "$([ -z "$(missing "$tmp/syn" "$tmp/h")" ] && echo ok)" \
        "missing from --help: $(missing "$tmp/syn" "$tmp/h")"
done

man8=$srcdir/doc/billingd.8.in
$billingd --help >"$tmp/dhelp" 2>&1
section "$man8" "OPTIONS" >"$tmp/dsec"
both_ways "billingd" "$tmp/dhelp" "$tmp/dsec"
# Configuration keys: the .TP items of CONFIGURATION ("kafka. property"
# is the kafka.* passthrough) against the --help's "Keys:" paragraph.
section "$man8" "CONFIGURATION" | awk '/^\.TP/ { getline; print $2 }' | plain |
    sed 's/^kafka\.$/kafka.*/' | sort -u >"$tmp/mkeys"
awk '/^Keys:/ { on = 1 } on && /^$/ { exit } on' "$tmp/dhelp" | sed 's/^Keys://' |
    tr '\n' ' ' | tr ',' '\n' | sed -E 's/^ *(and )?//; s/ .*//; s/=.*//' | grep -E '^[a-z]' | sort -u >"$tmp/hkeys"
check "billingd: every key of billingd(8) CONFIGURATION is in --help" \
    "$([ -s "$tmp/mkeys" ] && [ -z "$(missing "$tmp/mkeys" "$tmp/hkeys")" ] && echo ok)" \
    "missing from --help: $(missing "$tmp/mkeys" "$tmp/hkeys")"
check "billingd: every key of --help is in billingd(8) CONFIGURATION" \
    "$([ -s "$tmp/hkeys" ] && [ -z "$(missing "$tmp/hkeys" "$tmp/mkeys")" ] && echo ok)" \
    "missing from the man page: $(missing "$tmp/hkeys" "$tmp/mkeys")"

finish
