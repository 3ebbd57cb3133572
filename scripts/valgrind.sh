#!/bin/bash
# valgrind.sh - every unit suite, the API example, and the billing tool's
# golden and dedupe tests under valgrind (memcheck, full leak check): any
# invalid access, use of uninitialised memory or definite leak fails.
#
#   scripts/valgrind.sh
#
# Valgrind cannot run ASan-instrumented programs, so this uses its own
# build without sanitizers, in _build-valgrind (BILLING_VALGRIND_BUILD_DIR
# overrides). Needs no services: the integration suites, which drive
# libpq and librdkafka, are left to the sanitizer run of scripts/test.sh.
# Takes a few minutes: valgrind is 20-50 times slower.
set -eu

here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/lib.sh"
if [ -n "${BILLING_VALGRIND_BUILD_DIR:-}" ]; then
    build=$(billing_abs "$BILLING_VALGRIND_BUILD_DIR")
else
    build=$BILLING_ROOT/_build-valgrind
fi

bash "$BILLING_ROOT/scripts/install-deps.sh"
billing_configure_build "$build" --enable-werror
make -j2
make -j2 -C tests check-valgrind
