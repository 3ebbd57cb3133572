#!/bin/bash
# rate-example.sh - the main job with embedded defaults, from a bare
# Debian 12 machine: install what is missing, build (out of tree, in
# _build-run, so it never disturbs a developer's or the tests' build), then
# run `billing rate` over the shipped GPU-cloud example and print the
# invoices as tables. Extra arguments go to `billing rate`
# (e.g. `--format json`, `--account lab-a`).
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
if [ $# -eq 0 ]; then
    set -- --format table
fi
exec "$bin" rate "$@"
