#!/bin/bash
# mutation.sh - mutation testing of libbilling (doc/testing.md): change the
# code one small way at a time and check that the unit suites notice. A
# mutant the suites pass "survives": either a test is missing or the
# change does not alter behaviour (an equivalent mutant).
#
#   scripts/mutation.sh [--list FILE] [--reasons FILE] [--universal] [SOURCE...]
#
# SOURCEs are files of libbilling/ (default: every libbilling/*.c). Mutants
# come from:
#   --list FILE   (default scripts/mutants.txt) hand-written mutants, one a
#                 line: FILE <tab> TEXT <tab> REPLACEMENT <tab> what breaks.
#                 TEXT must occur exactly once in FILE; "\n" in TEXT and
#                 REPLACEMENT stands for a newline; '#' starts a comment line;
#   --universal   every mutant universalmutator (PyPI) makes of each
#                 SOURCE, installed in a private venv under var/mutation.
#                 Thousands per file (2329 for credit.c): days. With
#                 BILLING_MUTATION_SAMPLE=N, every k-th of them, at most N
#                 per file. Not for CI.
#
# A survivor is EQUIVALENT when --reasons FILE (default
# scripts/mutants-equivalent.txt) explains it: FILE <tab> MUTANT <tab>
# reason, MUTANT being the "what breaks" column of the list (or, for
# universalmutator, "LINE: TEXT" as the run prints it). Every other
# survivor is a missing test.
#
# The work happens out of tree: a snapshot of the tree (tracked and
# untracked files git does not ignore) in var/mutation/src (BILLING_MUTATION_DIR
# overrides var/mutation), built without sanitizers in var/mutation/build.
# For each mutant the snapshot's file is replaced, the suites are rebuilt
# and run with a time bound (BILLING_MUTANT_TIMEOUT seconds, default 300),
# and the file is put back. Suites: BILLING_MUTATION_TESTS (default every
# unit suite of tests/Makefile.am, those that kill most first, then the
# golden invoices of check-golden.sh). A mutant that does not compile
# counts as killed (the compiler caught it) but is reported apart.
#
# Prints one line per mutant (KILLED, SURVIVED, EQUIVALENT, TIMEOUT,
# NOCOMPILE, STALE), then a report per file (also in var/mutation/report.txt):
# mutants, killed, survived, equivalent, stale, and the score killed /
# (mutants - equivalent). Exits 0 when no mutant survived unexplained, 1
# when some did, 2 on a setup error.
set -eu

here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/lib.sh"
cd "$BILLING_ROOT"

list="$here/mutants.txt"
reasons="$here/mutants-equivalent.txt"
universal=0
while [ $# -gt 0 ]; do
    case "$1" in
        --list) list=$(billing_abs "$2"); shift 2 ;;
        --reasons) reasons=$(billing_abs "$2"); shift 2 ;;
        --universal) universal=1; shift ;;
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
        -*) billing_log "unknown option $1"; exit 2 ;;
        *) break ;;
    esac
done
# Every file of the library unless named.
sources=${*:-$(cd libbilling && ls -- *.c | tr '\n' ' ')}
# Every unit suite: first those that kill most mutants quickly (the run
# stops at the first failing suite), then the others in Makefile order.
first="check_cases check_decimal check_zone check_rating check_credit check_subscriptions check_reference check_properties"
all_unit=$(sed -n 's/^UNIT_TESTS *+*= *//p' tests/Makefile.am | tr '\n' ' ')
default_tests=$first
for t in $all_unit; do
    case " $default_tests " in *" $t "*) ;; *) default_tests="$default_tests $t" ;; esac
done
tests=${BILLING_MUTATION_TESTS:-$default_tests check-golden.sh}
[ -f "$reasons" ] || reasons=/dev/null
limit=${BILLING_MUTANT_TIMEOUT:-300}
work=$(billing_abs "${BILLING_MUTATION_DIR:-$BILLING_VAR/mutation}")
src="$work/src"
build="$work/build"
log="$work/logs"

# ---- snapshot and baseline build ---------------------------------------
mkdir -p "$src" "$build" "$log"
# Copy only files whose content differs, with a new mtime, so that make
# rebuilds exactly those: a file restored with its old mtime over an
# object built from a mutant would leave the mutant in the library.
git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do
        [ -f "$f" ] || continue
        if ! cmp -s "$f" "$src/$f"; then
            mkdir -p "$src/$(dirname "$f")"
            cp "$f" "$src/$f"
        fi
    done
if [ ! -f "$src/configure" ]; then
    (cd "$src" && ./autogen.sh) >"$log/autogen.out" 2>&1 || { cat "$log/autogen.out"; exit 2; }
fi
if [ ! -f "$build/config.status" ]; then
    billing_log "configuring $build (no sanitizers, for speed)"
    (cd "$build" && "$src/configure" CFLAGS="-O1 -g0" >configure.out 2>&1) ||
        { billing_log "configure failed (config.log in $build)"; exit 2; }
fi

# Check's per-test timeouts are for an idle machine; mutants run beside other work.
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-10}

# run_suites LOG: build, then run the suites one at a time, fastest first,
# stopping at the first that fails (the mutant is killed then). Returns 0
# when all pass, 3 when the build fails, else the failing status.
run_suites() {
    local t rc=0
    timeout -k 10 "$limit" make -C "$build" -j2 >"$1.build" 2>&1 || return 3
    : >"$1"
    for t in $tests; do
        timeout -k 10 "$limit" make -C "$build/tests" check TESTS="$t" >>"$1" 2>&1 || rc=$?
        [ "$rc" -eq 0 ] || return "$rc"
    done
    return 0
}

billing_log "baseline: building and running $tests"
if ! run_suites "$log/baseline.out"; then
    billing_log "the unmutated code fails its own suites (see $log/baseline.out*)"
    exit 2
fi

killed=0
survived=0
equivalent=0
stale=0
total=0
nocompile=0
survivors=""
# Per file: mutants run, killed, survived, equivalent, stale.
declare -A f_total f_killed f_survived f_equiv f_stale
for f in $sources; do
    f_total[$f]=0 f_killed[$f]=0 f_survived[$f]=0 f_equiv[$f]=0 f_stale[$f]=0
done

# reason FILE WHAT: the reasons file's explanation of a survivor, or nothing.
reason() {
    awk -F '\t' -v f="$1" -v w="$2" '$1 == f && $2 == w { print $3; exit }' "$reasons"
}

# try WHAT FILE MUTATED-COPY: run the suites against one mutant.
try() {
    local what=$1 file=$2 mutated=$3 rc=0 verdict why name="$2: $1"
    total=$((total + 1))
    f_total[$file]=$((f_total[$file] + 1))
    cp "$src/libbilling/$file" "$work/orig.c"
    # Interrupted mid-mutant: put the original back.
    trap 'cp "$work/orig.c" "$src/libbilling/$file"; exit 130' INT TERM
    cp "$mutated" "$src/libbilling/$file"
    run_suites "$log/mutant-$total.out" || rc=$?
    cp "$work/orig.c" "$src/libbilling/$file"
    trap - INT TERM
    # Sources keep their old mtime: make must rebuild the original next time.
    touch "$src/libbilling/$file"
    case $rc in
        0)
            why=$(reason "$file" "$what")
            if [ -n "$why" ]; then
                verdict=EQUIVALENT
                equivalent=$((equivalent + 1))
                f_equiv[$file]=$((f_equiv[$file] + 1))
                name="$name -- $why"
            else
                verdict=SURVIVED
                survived=$((survived + 1))
                f_survived[$file]=$((f_survived[$file] + 1))
                survivors="$survivors  $name"$'\n'
            fi
            ;;
        3) verdict=NOCOMPILE; nocompile=$((nocompile + 1)); killed=$((killed + 1)) ;;
        124 | 137) verdict=TIMEOUT; killed=$((killed + 1)) ;;
        *) verdict=KILLED; killed=$((killed + 1)) ;;
    esac
    case $verdict in SURVIVED | EQUIVALENT) ;; *) f_killed[$file]=$((f_killed[$file] + 1)) ;; esac
    printf '%-10s %s\n' "$verdict" "$name"
}

# ---- hand-written mutants -------------------------------------------------
if [ "$universal" -eq 0 ]; then
    while IFS=$'\t' read -r file old new what; do
        case "$file" in '' | '#'*) continue ;; esac
        case " $sources " in *" $file "*) ;; *) continue ;; esac
        n=$(python3 -c 'import sys; print(open(sys.argv[1]).read().count(sys.argv[2].replace("\\n", "\n")))' \
            "$src/libbilling/$file" "$old")
        if [ "$n" -ne 1 ]; then
            stale=$((stale + 1))
            f_stale[$file]=$((f_stale[$file] + 1))
            printf '%-10s %s: %s (text found %s times)\n' STALE "$file" "$what" "$n"
            continue
        fi
        python3 -c 'import sys; n = lambda t: t.replace("\\n", "\n"); s = open(sys.argv[1]).read(); open(sys.argv[4], "w").write(s.replace(n(sys.argv[2]), n(sys.argv[3]), 1))' \
            "$src/libbilling/$file" "$old" "$new" "$work/mutant.c"
        try "$what" "$file" "$work/mutant.c"
    done <"$list"
fi

# ---- universalmutator -------------------------------------------------------
if [ "$universal" -eq 1 ]; then
    if [ ! -x "$work/venv/bin/mutate" ]; then
        billing_log "installing universalmutator into $work/venv"
        python3 -m venv "$work/venv"
        "$work/venv/bin/pip" install -q universalmutator >"$log/pip.out" 2>&1 ||
            { cat "$log/pip.out"; exit 2; }
    fi
    for file in $sources; do
        rm -rf "$work/mutants/$file"
        mkdir -p "$work/mutants/$file"
        "$work/venv/bin/mutate" "$src/libbilling/$file" --noCheck \
            --mutantDir "$work/mutants/$file" >"$log/mutate-$file.out" 2>&1
        # Thousands a file: BILLING_MUTATION_SAMPLE=N runs every k-th, at most N.
        count=$(find "$work/mutants/$file" -type f | wc -l)
        step=1
        sample=${BILLING_MUTATION_SAMPLE:-0}
        if [ "$sample" -gt 0 ] && [ "$count" -gt "$sample" ]; then
            step=$(((count + sample - 1) / sample))
        fi
        billing_log "$file: $count mutants, running every ${step}th"
        i=0
        for m in $(find "$work/mutants/$file" -type f | sort -V); do
            i=$((i + 1))
            [ $(((i - 1) % step)) -eq 0 ] || continue
            what=$(diff "$src/libbilling/$file" "$m" | sed -n 's/^> *//p' | head -1)
            line=$(diff "$src/libbilling/$file" "$m" | sed -n '1s/[^0-9].*//p')
            try "$line: $what" "$file" "$m"
        done
    done
fi

# ---- report ------------------------------------------------------------------
# pct KILLED SCORED: the percentage, or "-" when nothing was scored.
pct() {
    if [ "$2" -gt 0 ]; then printf '%d%%' $(($1 * 100 / $2)); else printf -- '-'; fi
}
{
    printf '\n%-14s %7s %7s %8s %10s %5s %6s\n' file mutants killed survived equivalent stale score
    for f in $sources; do
        printf '%-14s %7d %7d %8d %10d %5d %6s\n' "$f" "${f_total[$f]}" "${f_killed[$f]}" \
            "${f_survived[$f]}" "${f_equiv[$f]}" "${f_stale[$f]}" \
            "$(pct "${f_killed[$f]}" $((f_total[$f] - f_equiv[$f])))"
    done
    printf '%-14s %7d %7d %8d %10d %5d %6s\n' all "$total" "$killed" "$survived" "$equivalent" \
        "$stale" "$(pct "$killed" $((total - equivalent)))"
    printf '\nkilled includes %d that did not compile; score = killed / (mutants - equivalent)\n' \
        "$nocompile"
    printf 'suites: %s\n' "$tests"
    if [ "$survived" -gt 0 ]; then
        printf 'survivors (no reason in %s):\n%s' "$reasons" "$survivors"
    fi
} | tee "$work/report.txt"
[ "$survived" -eq 0 ]
