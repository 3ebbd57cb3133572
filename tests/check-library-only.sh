#!/bin/sh
# check-library-only.sh - `configure --disable-programs` builds libbilling
# alone, with GMP and protobuf-c only (issue 27): configure runs with a
# pkg-config that knows no other package (libpq, librdkafka,
# libmicrohttpd, Check, jansson and cairo are "not installed"), `make`
# builds proto/ and libbilling/ and nothing else, `make install` installs
# the library, its header and its .pc file, the installed library needs no
# library but GMP, protobuf-c and libc, and examples/rate_invoice.c built
# against it prints its golden invoice. The example loads its zone with
# libbilling-config, which a library-only build does not have: a
# 20-line stand-in below reads the TZif file and calls billing_zone_new.
#
# Configures from the source tree, so the source tree must not be
# configured in-tree (configure refuses a second build then): the test
# skips (77) in that case and says so. CI builds out of tree.
set -u
src=$(cd "${top_srcdir:-..}" && pwd)
if [ -f "$src/config.status" ]; then
    echo "check-library-only: $src is configured in-tree; run from an out-of-tree build (scripts/test.sh does)"
    exit 77
fi
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
checks=0
failures=0
ok() {
    checks=$((checks + 1))
    if [ "$1" -eq 0 ]; then echo "ok: $2"; else echo "FAILED: $2"; failures=$((failures + 1)); fi
}
summary() {
    echo "$(( (checks - failures) * 100 / (checks > 0 ? checks : 1) ))%: Checks: $checks, Failures: $failures, Errors: 0"
    [ "$failures" -eq 0 ]
    exit $?
}

# A pkg-config that answers only for gmp and libprotobuf-c: any other
# module named in its arguments is "not found".
real=$(command -v "${PKG_CONFIG:-pkg-config}")
cat >"$tmp/pkg-config" <<PC
#!/bin/sh
for a in "\$@"; do
    for w in \$a; do
        case "\$w" in
            -* | [0-9]* | '<'* | '>'* | '='* | '!'* | gmp | libprotobuf-c | libbilling) ;;
            *) echo "Package \$w was not found (library-only test)" >&2; exit 1 ;;
        esac
    done
done
exec "$real" "\$@"
PC
chmod +x "$tmp/pkg-config"
"$tmp/pkg-config" --exists libpq 2>/dev/null
[ $? -ne 0 ]
ok $? "the stand-in pkg-config refuses libpq"

mkdir "$tmp/build"
(cd "$tmp/build" && "$src/configure" --disable-programs --prefix=/usr \
    PKG_CONFIG="$tmp/pkg-config" CFLAGS="-O1 -g0") >"$tmp/configure.log" 2>&1
rc=$?
[ $rc -eq 0 ] || tail -20 "$tmp/configure.log"
ok $rc "configure --disable-programs with only gmp and libprotobuf-c known"
[ $rc -eq 0 ] || summary
grep -q 'checking for LIBPQ' "$tmp/configure.log"
[ $? -ne 0 ]
ok $? "configure does not look for libpq"

${MAKE:-make} -C "$tmp/build" -j2 >"$tmp/make.log" 2>&1
rc=$?
[ $rc -eq 0 ] || tail -30 "$tmp/make.log"
ok $rc "make builds the library"
[ $rc -eq 0 ] || summary
test -f "$tmp/build/libbilling/libbilling.la" && ! test -e "$tmp/build/formats/libbilling-config.la" &&
    ! test -e "$tmp/build/billing/billing" && ! test -e "$tmp/build/billingd/billingd"
ok $? "libbilling built; libbilling-config, billing and billingd not"

root="$tmp/root"
${MAKE:-make} -C "$tmp/build" install DESTDIR="$root" >"$tmp/install.log" 2>&1
rc=$?
[ $rc -eq 0 ] || tail -20 "$tmp/install.log"
ok $rc "make install DESTDIR=$root"
lib=$(find "$root" -name 'libbilling.so.*' -type f | head -n 1)
pc=$(find "$root" -name libbilling.pc | head -n 1)
test -n "$lib" && test -n "$pc" && test -f "$root/usr/include/billing/billing.h" &&
    ! test -e "$root/usr/include/billing/billing_config.h"
ok $? "installed: libbilling.so, billing.h and libbilling.pc only"
[ -n "$lib" ] && [ -n "$pc" ] || summary
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
bad=$(printf '%s\n' $needed | grep -v -e '^libgmp\.so' -e '^libprotobuf-c\.so' -e '^libc\.so' \
    -e '^libm\.so' -e '^libpthread\.so' -e '^ld-linux' || true)
[ -z "$bad" ]
ok $? "the library needs only GMP, protobuf-c and libc (NEEDED: $needed)"

# The stand-in for libbilling-config's zone loader.
mkdir -p "$tmp/inc/billing"
cat >"$tmp/inc/billing/billing_config.h" <<'H'
#include <billing/billing.h>
#include <stddef.h>
billing_status billing_config_zone_load(const char *name, billing_zone **out, char *err, size_t size);
H
cat >"$tmp/zone.c" <<'C'
#include <stdio.h>
#include <billing/billing_config.h>
billing_status billing_config_zone_load(const char *name, billing_zone **out, char *err, size_t size)
{
    static unsigned char buf[1 << 20];
    char path[512];
    size_t n;
    FILE *f;

    snprintf(path, sizeof(path), "/usr/share/zoneinfo/%s", name);
    if ((f = fopen(path, "rb")) == NULL) {
        snprintf(err, size, "%s: cannot open", path);
        return BILLING_ERR_ZONE;
    }
    n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    return billing_zone_new(name, buf, n, out, err, size);
}
C
PKG_CONFIG_PATH=$(dirname "$pc")
PKG_CONFIG_SYSROOT_DIR="$root"
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
flags=$("$tmp/pkg-config" --cflags --libs libbilling)
ok $? "pkg-config --cflags --libs libbilling: $flags"
# shellcheck disable=SC2086 # flags are words
${CC:-cc} -std=c99 -Wall -Wextra -Werror -I"$tmp/inc" "$src/examples/rate_invoice.c" "$tmp/zone.c" \
    -o "$tmp/example_rate_invoice" $flags >"$tmp/cc.log" 2>&1
rc=$?
[ $rc -eq 0 ] || cat "$tmp/cc.log"
ok $rc "examples/rate_invoice.c builds against the installed library alone"
[ $rc -eq 0 ] || summary
out=$(LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/example_rate_invoice" 2>&1)
rc=$?
[ $rc -eq 0 ] && [ "$out" = "$(cat "$src/tests/example_rate_invoice.expected")" ]
r=$?
[ $r -eq 0 ] || printf '%s\n' "$out" | diff "$src/tests/example_rate_invoice.expected" - | head -20
ok $r "it prints the golden invoice (tests/example_rate_invoice.expected)"
summary
