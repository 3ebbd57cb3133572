# checklib.sh - the Check-style reporting of the script tests, and their
# scratch databases (below), sourced by the script tests:
#   check NAME ok|fail [DETAIL]   one line "ok NAME" or "FAIL NAME: DETAIL"
#   finish                        the summary line
#   "100%: Checks: N, Failures: F, Errors: 0"; exits 0 only without failures
# shellcheck shell=sh

checks=0
failures=0
check() {
    checks=$((checks + 1))
    if [ "$2" = ok ]; then
        echo "ok $1"
    else
        failures=$((failures + 1))
        echo "FAIL $1${3:+: $3}"
    fi
}
finish() {
    passed=$((checks - failures))
    echo "$((passed * 100 / checks))%: Checks: $checks, Failures: $failures, Errors: 0"
    [ $failures -eq 0 ]
    exit $?
}

# The scratch databases of the tests that need PostgreSQL (check-api*.sh,
# check-console.sh, check-tools.sh):
#   need_pg        FAIL and finish unless BILLING_PG_CONNINFO is set; else
#                  keep it in $base (the server's connection string)
#   db_new NAME    create database NAME on that server (exit 99 if it
#                  cannot be), to be dropped by db_drop_all
#   db_use NAME    BILLING_PG_CONNINFO (exported) names database NAME
#   db_drop_all    drop every database db_new made, whoever is connected
#                  (for the test's EXIT trap)
base=
dbs_made=
need_pg() {
    if [ -z "${BILLING_PG_CONNINFO:-}" ]; then
        check "BILLING_PG_CONNINFO is set (scripts/services.sh start && . var/services.env)" fail
        finish
    fi
    base=$BILLING_PG_CONNINFO
}
db_new() {
    psql "$base dbname=postgres" -qc "CREATE DATABASE $1" >/dev/null || exit 99
    dbs_made="$dbs_made $1"
}
db_use() {
    BILLING_PG_CONNINFO="$base dbname=$1"
    export BILLING_PG_CONNINFO
}
db_drop_all() {
    for d in $dbs_made; do
        psql "$base dbname=postgres" -qc "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1
    done
}

# billingd serving the API (check-api*.sh, check-console.sh). The caller sets
# $billingd (the program), $tmp (its scratch directory) and pids="":
#   need_api_tools FAIL and finish unless curl, python3-jsonschema and
#                  python3-yaml (tests/openapi-check.py) are installed
#   billingd_stop_all
#                  for the EXIT trap: with failures, the last 40 lines of
#                  each $tmp/billingd-*.log; then SIGTERM to every billingd
#                  of $pids, and a wait for each
#   api_scratch NAME
#                  need_pg and need_api_tools, then a database
#                  billing_NAME_<pid> of the test's own (db_new, db_use),
#                  and an EXIT trap that stops every billingd
#                  (billingd_stop_all), drops it and removes $tmp; INT and
#                  TERM exit 99
#   api_answer NAME WANT METHOD PATH
#                  the answer of a request (status line and headers in
#                  $tmp/hdr, body in $tmp/body, curl's errors in $tmp/err)
#                  has status WANT and matches doc/openapi.yaml ($spec,
#                  tests/openapi-check.py): one check
#   jv EXPR        EXPR (Python, over the JSON of $tmp/body as d) printed
#   expect_eq NAME GOT WANT
#                  one check: GOT is WANT
#   billingd_start NAME SETTING...
#                  billingd (under $BILLING_TEST_WRAP, if set) on
#                  BILLING_PG_CONNINFO with the API on a loopback port the
#                  system picks, and the --set SETTINGs given; stderr in
#                  $tmp/billingd-NAME.log. Waits (bounded: 30 s) for its
#                  event=api_listening line, then sets $url
#                  (http://127.0.0.1:PORT) and $pid, and adds $pid to
#                  $pids; FAILs and finishes if it never comes (it exited,
#                  or hung), with the log's last lines.
billingd_start() {
    name=$1
    shift
    log="$tmp/billingd-$name.log"
    : >"$log"
    # shellcheck disable=SC2086
    ${BILLING_TEST_WRAP:-} "$billingd" --set "db=$BILLING_PG_CONNINFO" --set api.listen=127.0.0.1:0 \
        "$@" 2>"$log" &
    pid=$!
    pids="$pids $pid"
    port=""
    i=0
    while [ $i -lt 600 ] && [ -z "$port" ]; do
        port=$(sed -n 's/.*event=api_listening .*port=\([0-9][0-9]*\).*/\1/p' "$log")
        if [ -z "$port" ]; then
            kill -0 "$pid" 2>/dev/null || break
            i=$((i + 1))
            sleep 0.05
        fi
    done
    if [ -z "$port" ]; then
        check "billingd ($name) serves the API" fail "$(tail -5 "$log")"
        finish
    fi
    url="http://127.0.0.1:$port"
}
need_api_tools() {
    if ! command -v curl >/dev/null || ! python3 -c "import jsonschema, yaml" 2>/dev/null; then
        check "curl, python3-jsonschema and python3-yaml are installed (scripts/install-deps.sh)" fail
        finish
    fi
}
billingd_stop_all() {
    if [ "$failures" -gt 0 ]; then
        for f in "$tmp"/billingd-*.log; do
            [ -f "$f" ] && echo "---- $(basename "$f") (last lines)" && tail -40 "$f"
        done
    fi
    for p in $pids; do
        kill "$p" 2>/dev/null
    done
    for p in $pids; do
        wait "$p" 2>/dev/null
    done
}
api_scratch() {
    need_pg
    need_api_tools
    trap 'billingd_stop_all; db_drop_all; rm -rf "$tmp"' EXIT
    trap 'exit 99' INT TERM
    db_new "billing_$1_$$"
    db_use "billing_$1_$$"
}
api_answer() {
    got=$(sed -n 's/^HTTP\/[0-9.]* \([0-9]*\).*/\1/p' "$tmp/hdr" | tail -1)
    if [ "$got" != "$2" ]; then
        check "$1: $3 $4 is $2" fail "got '$got': $(head -c 400 "$tmp/body") $(cat "$tmp/err")"
    elif ! python3 "$srcdir/tests/openapi-check.py" "$spec" "$3" "$4" "$tmp/hdr" "$tmp/body" \
        2>"$tmp/err"; then
        check "$1: $3 $4 is $2" fail "not as doc/openapi.yaml says: $(cat "$tmp/err")"
    else
        check "$1: $3 $4 is $2, as doc/openapi.yaml says" ok
    fi
}
jv() {
    python3 -c "import json, sys; d = json.load(open(sys.argv[1])); r = ($1); print(r)" "$tmp/body"
}
expect_eq() {
    if [ "$2" = "$3" ]; then
        check "$1" ok
    else
        check "$1" fail "got '$2', want '$3'"
    fi
}
