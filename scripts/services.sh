#!/bin/bash
# services.sh start|stop|status|env - the services the integration tests
# and billingd need: the private PostgreSQL (pg.sh) and Kafka (kafka.sh).
#
#   scripts/services.sh start && . var/services.env
#
# start: both, PostgreSQL first (seconds) then Kafka (its first start
#   downloads the jars). If Kafka fails, PostgreSQL is stopped again so a
#   failed start leaves nothing running.
# stop: both, each even if the other fails; exits non-zero if one did.
# status: exits 0 only if both run.
# env: the export lines of both, also written to $BILLING_VAR/services.env.
set -eu

here=$(dirname "$0")
. "$here/lib.sh"

case "${1:-}" in
    start)
        bash "$here/pg.sh" start
        if ! bash "$here/kafka.sh" start; then
            bash "$here/pg.sh" stop || true
            billing_die "Kafka did not start"
        fi
        billing_log "services ready; environment in $BILLING_ENV_FILE"
        ;;
    stop)
        rc=0
        bash "$here/kafka.sh" stop || rc=1
        bash "$here/pg.sh" stop || rc=1
        exit $rc
        ;;
    status)
        rc=0
        bash "$here/pg.sh" status || rc=$?
        bash "$here/kafka.sh" status || rc=$?
        exit $rc
        ;;
    env)
        bash "$here/pg.sh" env
        bash "$here/kafka.sh" env
        ;;
    *)
        echo "usage: $0 start|stop|status|env" >&2
        exit 2
        ;;
esac
