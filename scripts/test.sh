#!/bin/bash
# test.sh - THE test command: what CI runs (.ci/run) and what README.md
# documents. From a bare Debian 12 machine to a full `make check`:
#
#   1. scripts/install-deps.sh   (no-op when everything is installed)
#   2. ./autogen.sh, then configure --enable-werror --enable-sanitizers in
#      the out-of-tree build directory _build (BILLING_BUILD_DIR overrides)
#   3. make -j2
#   4. scripts/services.sh start (private PostgreSQL + Kafka; the first run
#      downloads the Kafka jars) and load var/services.env
#   5. make -j2 check: unit suites, integration suites, script tests, fuzz
#      corpora; each prints its Check summary line ("N%: Checks: ...")
#   6. scripts/valgrind.sh: the unit suites and the billing tool's tests
#      again under valgrind, in their own build without sanitizers
#   7. always (trap): scripts/services.sh stop
#
# Exits non-zero if any step or any test fails; a failing run prints
# tests/test-suite.log.
set -eu

here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/lib.sh"
cd "$BILLING_ROOT"
build=$(billing_abs "${BILLING_BUILD_DIR:-$BILLING_ROOT/_build}")
t0=$(date +%s)

step() {
    printf '\n==> %s (%ss)\n' "$*" "$(($(date +%s) - t0))"
}

step "dependencies"
bash scripts/install-deps.sh

step "autogen and configure in $build"
billing_configure_build "$build" --enable-werror --enable-sanitizers

step "build"
make -j2

services_up=0
cleanup() {
    rc=$?
    if [ "$services_up" = 1 ]; then
        step "stop services"
        bash "$BILLING_ROOT/scripts/services.sh" stop || rc=1
    fi
    printf '\n==> %s after %ss\n' "$([ "$rc" = 0 ] && echo PASSED || echo FAILED)" "$(($(date +%s) - t0))"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "start services"
services_up=1
bash "$BILLING_ROOT/scripts/services.sh" start
# shellcheck disable=SC1090 # written by the service scripts
. "$BILLING_ENV_FILE"

# Sanitizer reports must fail the tests, with a stack to read.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

step "make check"
if ! make -j2 check; then
    cat tests/test-suite.log 2>/dev/null || true
    exit 1
fi

step "valgrind: unit suites and the billing tool's tests (scripts/valgrind.sh)"
if ! bash "$BILLING_ROOT/scripts/valgrind.sh"; then
    cat "$BILLING_ROOT/_build-valgrind/tests/test-suite.log" 2>/dev/null || true
    exit 1
fi
