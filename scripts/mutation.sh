#!/bin/bash
# mutation.sh - mutation testing of libbilling's rating code (doc/testing.md):
# change the code one small way at a time and check that the unit suites
# notice. A mutant the suites pass "survives": either a test is missing or
# the change does not alter behaviour (an equivalent mutant).
#
#   scripts/mutation.sh [--list FILE] [--universal] [SOURCE...]
#
# SOURCEs are files of libbilling/ (default: rater.c month.c credit.c
# decimal.c currency.c). Mutants come from:
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
# The work happens out of tree: a snapshot of the tree (tracked and
# untracked files git does not ignore) in var/mutation/src (BILLING_MUTATION_DIR
# overrides var/mutation), built without sanitizers in var/mutation/build.
# For each mutant the snapshot's file is replaced, the suites are rebuilt
# and run with a time bound (BILLING_MUTANT_TIMEOUT seconds, default 300),
# and the file is put back. Suites: BILLING_MUTATION_TESTS (default the
# unit suites of rating, the reference rater, the hand-computed cases,
# decimals and the golden invoices). A mutant that does not compile counts as killed (the
# compiler caught it) but is reported apart.
#
# Prints one line per mutant (KILLED, SURVIVED, TIMEOUT, NOCOMPILE, STALE)
# and the score: killed / (mutants - stale). Exits 0 when every mutant
# was killed, 1 when some survived, 2 on a setup error.
set -eu

here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/lib.sh"
cd "$BILLING_ROOT"

list="$here/mutants.txt"
universal=0
while [ $# -gt 0 ]; do
    case "$1" in
        --list) list=$(billing_abs "$2"); shift 2 ;;
        --universal) universal=1; shift ;;
        -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
        -*) billing_log "unknown option $1"; exit 2 ;;
        *) break ;;
    esac
done
sources=${*:-rater.c month.c credit.c decimal.c currency.c}
tests=${BILLING_MUTATION_TESTS:-check_cases check_reference check_decimal check_rating check_properties check-golden.sh}
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
stale=0
total=0
nocompile=0
survivors=""

# try NAME FILE MUTATED-COPY: run the suites against one mutant.
try() {
    local name=$1 file=$2 mutated=$3 rc=0 verdict
    total=$((total + 1))
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
        0) verdict=SURVIVED; survived=$((survived + 1)); survivors="$survivors  $name"$'\n' ;;
        3) verdict=NOCOMPILE; nocompile=$((nocompile + 1)); killed=$((killed + 1)) ;;
        124 | 137) verdict=TIMEOUT; killed=$((killed + 1)) ;;
        *) verdict=KILLED; killed=$((killed + 1)) ;;
    esac
    printf '%-9s %s\n' "$verdict" "$name"
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
            printf '%-9s %s: %s (text found %s times)\n' STALE "$file" "$what" "$n"
            continue
        fi
        python3 -c 'import sys; n = lambda t: t.replace("\\n", "\n"); s = open(sys.argv[1]).read(); open(sys.argv[4], "w").write(s.replace(n(sys.argv[2]), n(sys.argv[3]), 1))' \
            "$src/libbilling/$file" "$old" "$new" "$work/mutant.c"
        try "$file: $what" "$file" "$work/mutant.c"
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
            try "$file:$line: $what" "$file" "$m"
        done
    done
fi

scored=$((total))
pct=0
[ "$scored" -gt 0 ] && pct=$((killed * 100 / scored))
printf '\nmutants %d, killed %d (of which %d did not compile), survived %d, stale %d\n' \
    "$total" "$killed" "$nocompile" "$survived" "$stale"
printf 'score %d%% (killed / mutants run)\n' "$pct"
if [ "$survived" -gt 0 ]; then
    printf 'survivors:\n%s' "$survivors"
    exit 1
fi
exit 0
