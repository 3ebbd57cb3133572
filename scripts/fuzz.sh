#!/bin/bash
# fuzz.sh - coverage-guided fuzzing of every decoder of outside input with
# libFuzzer (doc/fuzzing.md):
#
#   scripts/fuzz.sh [SECONDS-PER-TARGET] [TARGET...]
#
# SECONDS-PER-TARGET defaults to 60. TARGETs are fuzz_event_pb,
# fuzz_event_json, fuzz_event_stream, fuzz_tzif, fuzz_config, fuzz_rater
# fuzz_accounts and fuzz_api (default: all), fuzzed one after the other on
# one core.
#
#   1. scripts/install-deps.sh, then clang from Debian's packages if it is
#      missing, then libclang-rt-N-dev (N = clang's major version) if clang
#      cannot link a libFuzzer program: on Debian 12 clang only recommends
#      it, so an install without recommends lacks libFuzzer (needs root or
#      sudo only when something is missing);
#   2. configure CC=clang --enable-fuzzing out of tree in _build-fuzz
#      (BILLING_FUZZ_DIR overrides) and build. If the source tree has an
#      in-tree configuration, configure refuses to build out of tree next
#      to it, and a developer's in-tree build must not be disturbed: then
#      a snapshot of the tree (tracked and untracked files that git does
#      not ignore) is copied to _build-fuzz/src and built instead;
#   3. run each target for the given time on its working corpus
#      _build-fuzz/corpus/TARGET: the seeds of fuzz/corpus/TARGET plus what
#      earlier runs found (the source corpus is never written), with its
#      dictionary fuzz/dict/TARGET.dict and a per-target -max_len. Crashes,
#      leaks, timeouts and out-of-memory inputs go to
#      _build-fuzz/artifacts/TARGET/, the output to _build-fuzz/logs/.
#
# BILLING_FUZZ_FLAGS adds libFuzzer flags, for example "-fork=1
# -ignore_crashes=1" to go on after a crash and collect every one.
#
# Prints one line of figures per target. Exits 0 if no target found
# anything, 1 if one did (naming each reproducer and how to rerun it).
set -eu

here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/lib.sh"
cd "$BILLING_ROOT"

all_targets="fuzz_event_pb fuzz_event_json fuzz_event_stream fuzz_tzif fuzz_config fuzz_rater fuzz_accounts fuzz_api"
seconds=60
if [ $# -gt 0 ]; then
    case "$1" in
        '' | *[!0-9]*) billing_die "usage: $0 [SECONDS-PER-TARGET] [TARGET...]" ;;
    esac
    seconds=$1
    shift
fi
targets=${*:-$all_targets}
for t in $targets; do
    case " $all_targets " in
        *" $t "*) ;;
        *) billing_die "unknown target '$t' (targets: $all_targets)" ;;
    esac
done

# Largest input per target: a protobuf event is at most 4096 bytes (a bit
# more, to test the bound), a JSON line 64 KiB, a zone or config file 1 MiB.
# An event stream's target makes its own filler up to 1 MiB (see
# fuzz/fuzz_event_stream.c), so its inputs need not be large.
max_len() {
    case "$1" in
        fuzz_event_pb) echo 4112 ;;
        fuzz_event_json | fuzz_event_stream) echo 65536 ;;
        # Each input is read twice and its first accounts invoiced: keep them small.
        fuzz_accounts) echo 65536 ;;
        # The rater target reads a few hundred choices; more bytes are ignored.
        fuzz_rater) echo 4096 ;;
        # An HTTP request: three short lines and a body of a few events.
        fuzz_api) echo 16384 ;;
        *) echo 1048576 ;;
    esac
}

build=$(billing_abs "${BILLING_FUZZ_DIR:-$BILLING_ROOT/_build-fuzz}")

# ---- 1. tools -----------------------------------------------------------
bash scripts/install-deps.sh >&2
# apt_install PACKAGE...: install Debian packages, as root or through sudo.
apt_install() {
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || billing_die "not root and no sudo; install $*"
        sudo="sudo"
    fi
    $sudo apt-get update -q
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}
# libfuzzer_links: true when clang links a program with -fsanitize=fuzzer.
libfuzzer_links() {
    local dir rc=0
    dir=$(mktemp -d)
    printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' \
        >"$dir/t.c"
    clang -fsanitize=fuzzer "$dir/t.c" -o "$dir/t" >"$dir/out" 2>&1 || rc=1
    rm -rf "$dir"
    return $rc
}
if ! command -v clang >/dev/null 2>&1; then
    billing_log "installing clang"
    apt_install clang
fi
if ! libfuzzer_links; then
    major=$(clang --version | sed -n 's/.*clang version \([0-9][0-9]*\).*/\1/p' | head -1)
    billing_log "clang cannot link libFuzzer: installing libclang-rt-$major-dev"
    apt_install "libclang-rt-$major-dev"
    libfuzzer_links || billing_die "clang still cannot link -fsanitize=fuzzer programs"
fi

# ---- 2. build -----------------------------------------------------------
mkdir -p "$build"
if [ -f "$BILLING_ROOT/config.status" ]; then
    src="$build/src"
    billing_log "the source tree is configured in-tree: building a snapshot of it in $src"
    command -v git >/dev/null 2>&1 || billing_die "git is needed to snapshot the source tree"
    mkdir -p "$src"
    # tar keeps modification times, so make rebuilds only what changed.
    git ls-files -z --cached --others --exclude-standard |
        tar --null --files-from=- --ignore-failed-read -cf - |
        (cd "$src" && tar -xpf -)
else
    src=$BILLING_ROOT
fi
# A build directory configured for another source location starts over.
if [ -f "$build/config.status" ] && [ "$(cat "$build/.fuzz-srcdir" 2>/dev/null)" != "$src" ]; then
    billing_log "the source location changed: reconfiguring $build from scratch"
    find "$build" -mindepth 1 -maxdepth 1 ! -name src ! -name corpus ! -name artifacts \
        ! -name logs -exec rm -rf {} +
fi
if [ ! -f "$src/configure" ]; then
    (cd "$src" && ./autogen.sh) >"$build/autogen.out" 2>&1 ||
        { cat "$build/autogen.out" >&2; billing_die "autogen.sh failed"; }
fi
if [ ! -f "$build/config.status" ]; then
    billing_log "configuring $build (CC=clang --enable-fuzzing)"
    (cd "$build" && "$src/configure" CC=clang --enable-fuzzing >configure.out 2>&1) ||
        { cat "$build/configure.out" >&2; billing_die "configure failed (config.log in $build)"; }
    printf '%s\n' "$src" >"$build/.fuzz-srcdir"
fi
billing_log "building in $build"
make -C "$build" -j2 >"$build/make.out" 2>&1 ||
    { tail -40 "$build/make.out" >&2; billing_die "build failed (whole log: $build/make.out)"; }

# ---- 3. fuzz ------------------------------------------------------------
# libFuzzer reports leaks and undefined behaviour as crashes, with stacks.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

found=0
summary=""
for t in $targets; do
    work="$build/corpus/$t"
    art="$build/artifacts/$t"
    log="$build/logs/$t.log"
    mkdir -p "$work" "$art" "$build/logs"
    # Seeds join the working corpus; files already there are kept.
    cp -n "$src/fuzz/corpus/$t/"* "$work/" 2>/dev/null || true
    flags=()
    if [ -f "$src/fuzz/dict/$t.dict" ]; then
        flags=("-dict=$src/fuzz/dict/$t.dict")
    fi
    # Word splitting of the extra flags is intended.
    # shellcheck disable=SC2206
    flags+=(${BILLING_FUZZ_FLAGS:-})
    before=$(find "$art" -type f | wc -l)
    billing_log "fuzzing $t for ${seconds}s (log: $log)"
    rc=0
    "$build/fuzz/$t" -max_total_time="$seconds" -max_len="$(max_len "$t")" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art/" "${flags[@]}" \
        "$work" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
    files=$(find "$work" -type f | wc -l)
    kib=$(find "$work" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s / 1024 }')
    line=$(printf '%-16s %10s execs %7s exec/s  %-20s corpus %5s files %6s KiB' "$t" \
        "${execs:-?}" "${speed:-?}" "${cov:-cov: ?}" "$files" "$kib")
    if [ "$rc" -ne 0 ] || [ "$(find "$art" -type f | wc -l)" -gt "$before" ]; then
        found=1
        line="$line  FOUND (exit $rc)"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|fuzz: )' "$log" | head -5 >&2 || true
        sed -n 's/.*Test unit written to \([^ ]*\).*/\1/p' "$log" | while IFS= read -r f; do
            billing_log "$t: reproducer $f; rerun: $build/fuzz/$t $f"
        done
    fi
    summary="$summary$line"$'\n'
done

printf '\n%s' "$summary"
if [ "$found" -ne 0 ]; then
    billing_log "a target found a crash: see the reproducers above and doc/fuzzing.md"
    exit 1
fi
billing_log "no crash in ${seconds}s per target"
