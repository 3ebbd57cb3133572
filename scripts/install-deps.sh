#!/bin/bash
# install-deps.sh - install, from Debian 12's packages, everything the
# build, the tests and the services need. Idempotent: when every package
# is already installed it does nothing (no apt-get update, which is the
# slow part), so scripts/test.sh can call it on every run.
#
# Needs root (or sudo) only when something is missing.
set -eu

packages="
build-essential
autoconf
automake
libtool
pkg-config
libpq-dev
libgmp-dev
protobuf-c-compiler
libprotobuf-c-dev
librdkafka-dev
libmicrohttpd-dev
libsodium-dev
check
libjansson-dev
postgresql
tzdata
valgrind
procps
util-linux
passwd
ca-certificates
libcairo2-dev
zlib1g-dev
fonts-dejavu-core
fonts-droid-fallback
poppler-utils
qpdf
jq
python3
python3-jsonschema
python3-yaml
gnuplot-nox
curl
systemd
openssl
chromium
chromium-driver
python3-selenium
clang-format
gdb
"
# postgresql: the server binaries for scripts/pg.sh (its system cluster is
#   never used). util-linux: runuser, setsid, flock. passwd: useradd.
#   procps: ps/pgrep for checks. ca-certificates: Maven over https.
# libcairo2-dev (with freetype): `billing invoice export --format pdf`
#   (FreeType reads the fonts, cairo the PNG logos); zlib1g-dev: its
#   streams, deflated by documents/pdfwrite.c; fonts-dejavu-core and
#   fonts-droid-fallback: the fonts it embeds (subset), Latin and CJK; poppler-utils: pdftotext/pdfinfo in the tests;
#   qpdf: tests/check-documents.sh checks every PDF's structure with it.
# jq: the ingest script test reads billing rate's JSON; python3:
#   scripts/mutation.sh and the example's event generator.
# libsodium-dev: the HTTP API's keys (random secrets, BLAKE2b hash).
# python3-jsonschema, python3-yaml: tests/check-api.sh checks every
#   answer against doc/openapi.yaml; openssl makes its TLS test certificate.
# gnuplot-nox: scripts/demo.sh's pictures (PNG through its cairo
#   terminal, no X); curl: the demo reads billingd's /metrics.
# systemd: systemd-analyze, which rates billingd.service in the tests
#   (tests/check-unit.sh); nothing is started with it.
# chromium, chromium-driver, python3-selenium: tests/check-console.sh
#   drives the web console in a real headless browser (Debian's, no
#   browser download at run time).
# gdb: tests/check-api-kafka.sh stops billingd between the broker's
#   acknowledgement and its answer, to kill -9 it there.
# clang-format: scripts/check-format.sh checks C files against .clang-format.
# Java and Maven fetch and run Kafka (scripts/kafka.sh). This machine kind
# may bring its own JDK and Maven; install Debian's only when missing.
command -v java >/dev/null 2>&1 || packages="$packages openjdk-17-jre-headless"
command -v mvn >/dev/null 2>&1 || packages="$packages maven"

missing=""
for p in $packages; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$status" = installed ] || missing="$missing $p"
done

if [ -z "$missing" ]; then
    echo "install-deps.sh: all packages installed"
    exit 0
fi

echo "install-deps.sh: installing:$missing"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 ||
        { echo "install-deps.sh: not root and no sudo; install:$missing" >&2; exit 1; }
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086 # word splitting of the package list is wanted
$sudo apt-get update -q
# shellcheck disable=SC2086
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
