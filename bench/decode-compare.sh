#!/bin/sh
# decode-compare.sh - bench_decode.c of this tree built twice, statically,
# against the libraries of two built trees (an older one first), and run
# alternately, so that their ratio is measured in the same conditions
# (doc/performance.md, "Decoders"):
#
#   bench/decode-compare.sh OLD_SRC OLD_BUILD NEW_SRC NEW_BUILD [EVENTS [ROUNDS [RUNS]]]
#
# e.g. bench/decode-compare.sh /tmp/base /tmp/base/_b . _b 1000000 3 3
# Both trees must have been built (make) without sanitizers. The checksums
# printed must match: both builds decoded the same events the same way.
set -eu
if [ $# -lt 4 ]; then
    echo "usage: $0 OLD_SRC OLD_BUILD NEW_SRC NEW_BUILD [EVENTS [ROUNDS [RUNS]]]" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# build SRC BUILD OUT
build() {
    ${CC:-gcc} -O2 -g -I"$2" -I"$2/include" -I"$1/libbilling" -I"$1/formats" -I"$here" \
        -o "$3" "$here/bench_decode.c" "$here/workload.c" \
        "$2/formats/.libs/libbillingformats.a" "$2/formats/.libs/libbilling-config.a" \
        "$2/libbilling/.libs/libbilling.a" -lprotobuf-c -lgmp -ljansson
}
build "$1" "$2" "$tmp/old"
build "$3" "$4" "$tmp/new"
run=0
while [ "$run" -lt "${7:-3}" ]; do
    echo "old:"
    "$tmp/old" "${5:-1000000}" "${6:-3}"
    echo "new:"
    "$tmp/new" "${5:-1000000}" "${6:-3}"
    run=$((run + 1))
done
