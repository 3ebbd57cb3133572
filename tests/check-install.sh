#!/bin/sh
# check-install.sh - what an embedder gets from `make install`: installs
# the tree into a temporary DESTDIR, checks the layout (headers under
# include/billing/, the .proto files where libbilling.pc's protodir says,
# a .pc file for each library), then builds examples/*.c against the
# INSTALLED libraries with nothing but
#   $CC file.c $(pkg-config --cflags --libs libbilling-config)
# (PKG_CONFIG_SYSROOT_DIR maps the DESTDIR), checks that they run against
# the installed shared libraries, and compares their output with the
# golden files (check-example.sh). Prints a Check-style summary line.
set -u
src=$(cd "${top_srcdir:-..}" && pwd)
build=$(cd "${top_builddir:-..}" && pwd)
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
root="$tmp/root"
checks=0
failures=0

# ok CONDITION_RC MESSAGE
ok() {
    checks=$((checks + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok: $2"
    else
        echo "FAILED: $2"
        failures=$((failures + 1))
    fi
}

# in_root PATH - PATH under the DESTDIR (pkgconf may have prefixed it already).
in_root() {
    case "$1" in
        "$root"/*) echo "$1" ;;
        *) echo "$root$1" ;;
    esac
}

summary() {
    echo "$(( (checks - failures) * 100 / (checks > 0 ? checks : 1) ))%: Checks: $checks, Failures: $failures, Errors: 0"
    [ "$failures" -eq 0 ]
    exit $?
}

# The install, quietly; its log is shown if it fails.
${MAKE:-make} -C "$build" install DESTDIR="$root" >"$tmp/install.log" 2>&1
rc=$?
[ $rc -eq 0 ] || cat "$tmp/install.log"
ok $rc "make install DESTDIR=$root"
[ $rc -eq 0 ] || summary

pc=$(find "$root" -name libbilling-config.pc | head -n 1)
test -n "$pc"
ok $? "libbilling-config.pc installed"
[ -n "$pc" ] || summary
pcdir=$(dirname "$pc")
libdir=$(dirname "$pcdir")
test -f "$pcdir/libbilling.pc"
ok $? "libbilling.pc installed"

# The installed .pc files first; gmp's and jansson's from the system.
PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
PKG_CONFIG_SYSROOT_DIR="$root"
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
pkgconfig=${PKG_CONFIG:-pkg-config}
flags=$($pkgconfig --cflags --libs libbilling-config)
ok $? "pkg-config --cflags --libs libbilling-config: $flags"
inc=$($pkgconfig --variable=includedir libbilling)
inc=$(in_root "$inc")
test -f "$inc/billing/billing.h" && test -f "$inc/billing/billing_config.h"
ok $? "headers in $inc/billing/"
protodir=$(in_root "$($pkgconfig --variable=protodir libbilling)")
test -f "$protodir/billing/v1/usage_event.proto" &&
    test -f "$protodir/billing/v1/credit_alert.proto"
ok $? "billing/v1/*.proto in protodir $protodir"
# The systemd unit, with the installed program's path in it.
service=$(find "$root" -path '*/systemd/system/billingd.service' | head -n 1)
test -n "$service" && grep -q "^ExecStart=/.*/billingd --config /" "$service"
ok $? "billingd.service installed into systemd's unit directory (${service#"$root"})"

# Out of tree: the source alone, the installed headers and libraries, the
# configure's sanitizer flags (the installed libraries carry them), and
# warnings as errors to show that the installed headers are clean.
for name in rate_invoice live_cost; do
    # shellcheck disable=SC2086 # flags are words
    ${CC:-cc} -std=c99 -Wall -Wextra -Werror ${SAN_CFLAGS:-} "$src/examples/$name.c" \
        -o "$tmp/example_$name" $flags ${SAN_LDFLAGS:-} >"$tmp/cc.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || cat "$tmp/cc.log"
    ok $rc "examples/$name.c builds against the installed libraries"
done
[ "$failures" -eq 0 ] || summary

# They run against the installed shared libraries, not the build tree's.
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
ldd "$tmp/example_rate_invoice" | grep -q "$libdir/libbilling-config.so" &&
    ldd "$tmp/example_rate_invoice" | grep -q "$libdir/libbilling.so"
ok $? "examples load libbilling and libbilling-config from $libdir"
BILLING_EXAMPLE_DIR="$tmp" sh "$src/tests/check-example.sh" >"$tmp/example.log" 2>&1
rc=$?
cat "$tmp/example.log" | grep -v '%: Checks:'
ok $rc "installed-library examples print their golden output"
summary
