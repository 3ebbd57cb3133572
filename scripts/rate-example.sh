#!/bin/bash
# rate-example.sh - the main job with embedded defaults, from a bare
# Debian 12 machine: install what is missing, build (out of tree, in
# _build-run, so it never disturbs a developer's or the tests' build), then
# run `billing rate` over the shipped GPU-cloud example and print the
# invoices as tables. Extra arguments go to `billing rate`
# (e.g. `--format json`, `--account lab-a`); tables stay the default
# unless they choose a --format.
set -eu

here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/lib.sh"
cd "$BILLING_ROOT"
build="$BILLING_ROOT/_build-run"

bash scripts/install-deps.sh >&2
if [ -f config.status ]; then
    # An in-tree configuration already exists: use that build.
    make -j2 >&2
    bin="$BILLING_ROOT/billing/billing"
else
    if [ ! -f configure ]; then
        ./autogen.sh >&2
    fi
    mkdir -p "$build"
    if [ ! -f "$build/config.status" ]; then
        (cd "$build" && "$BILLING_ROOT/configure" >configure.out 2>&1) ||
            { cat "$build/configure.out" >&2; billing_die "configure failed"; }
    fi
    make -C "$build" -j2 >&2
    bin="$build/billing/billing"
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
echo "man page: $(dirname "$bin")/billing.1 (man -l to read it)" >&2
if [ -z "$inputs" ]; then
    exec "$bin" rate "$@" </dev/null
fi
exec "$bin" rate "$@"
