#!/bin/bash
# rate-example.sh - the main job with embedded defaults, from a bare
# Debian 12 machine: install what is missing, build (out of tree, in
# _build-run, so it never disturbs a developer's or the tests' build), then
# run `billing rate` over the shipped GPU-cloud example and print the
# invoices as tables. Extra arguments go to `billing rate`
# (e.g. `--format json`, `--account lab-a`); tables stay the default
# unless they choose a --format.
#
# Standard output is `billing rate`'s alone. The installation and the build
# are quiet: their output goes to logs in _build-run/ (install-deps.log,
# configure.out, make.log), and only a failure shows a log's tail. The
# script's own standard error is one line (what it rates, where the man page
# is), plus a "building" line on a terminal that is erased once built.
set -eu

here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/lib.sh"
cd "$BILLING_ROOT"
# BILLING_RATE_EXAMPLE_BUILD: another build directory (tests/check-rate-example.sh).
build=${BILLING_RATE_EXAMPLE_BUILD:-$BILLING_ROOT/_build-run}

mkdir -p "$build"

# quietly LOG CMD...: CMD's output into LOG; on failure its tail and exit.
quietly() {
    local log=$1
    shift
    "$@" >"$log" 2>&1 || {
        [ -z "$building" ] || printf '\n' >&2
        tail -20 "$log" >&2
        billing_die "$1 failed (log: $log)"
    }
}

building=
if [ -t 2 ]; then
    building="rate-example.sh: installing and building (log: ${build#"$BILLING_ROOT"/}/make.log)..."
    printf '%s' "$building" >&2
fi
quietly "$build/install-deps.log" bash scripts/install-deps.sh
if [ -f config.status ]; then
    # An in-tree configuration already exists: use that build.
    quietly "$build/make.log" make -j2
    bin="$BILLING_ROOT/billing/billing"
else
    if [ ! -f configure ]; then
        quietly "$build/autogen.log" ./autogen.sh
    fi
    if [ ! -f "$build/config.status" ]; then
        (cd "$build" && "$BILLING_ROOT/configure" >configure.out 2>&1) ||
            { tail -20 "$build/configure.out" >&2; billing_die "configure failed (log: $build/configure.out)"; }
    fi
    quietly "$build/make.log" make -C "$build" -j2
    bin="$build/billing/billing"
fi
if [ -n "$building" ]; then
    printf '\r%*s\r' "${#building}" '' >&2
fi
# Tables unless the arguments choose a format; the example's own files
# unless they name inputs, and then stdin is not taken for events.
format=--format
inputs=
value=
for arg in "$@"; do
    if [ -n "$value" ]; then
        value=
        continue
    fi
    case $arg in
    --format=*) format= ;;
    --format) format= value=yes ;;
    --pricebook=* | --accounts=* | -) inputs=yes ;;
    --pricebook | --accounts) inputs=yes value=yes ;;
    --*=*) ;;
    --account | --month | --from | --to | --layout | --thousands | --by | --at | --rejects | \
        --input-format | --dedupe-memory | --temp-dir) value=yes ;;
    -*) ;;
    *) inputs=yes ;;
    esac
done
if [ -n "$format" ]; then
    set -- --format table "$@"
fi
man="$(dirname "$bin")/billing.1"
man=${man#"$BILLING_ROOT"/}
if [ -z "$inputs" ]; then
    # The example named here rather than found by `billing rate`, which
    # would say so in a line of three absolute paths.
    example=examples/gpu-cloud
    echo "rate-example.sh: rating $example/ (man page: man -l $man)" >&2
    exec "$bin" rate "$@" --pricebook "$example/pricebook.json" \
        --accounts "$example/accounts.json" "$example/events.jsonl" </dev/null
fi
echo "rate-example.sh: man page: man -l $man" >&2
exec "$bin" rate "$@"
