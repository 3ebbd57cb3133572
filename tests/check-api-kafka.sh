#!/bin/sh
# check-api-kafka.sh - POST /v1/events with api.events=kafka (issue 25)
# against the real broker (BILLING_KAFKA_BROKERS) and the private
# PostgreSQL (BILLING_PG_CONNINFO, a database of its own); without either
# the test FAILS, never skips. One billingd consumes a fresh usage topic
# and serves the API (api.events defaults to kafka then):
#   - valid events are answered 202 "queued" (as doc/openapi.yaml says),
#     an invalid one "rejected" with the pipeline's reason, kept at once
#     in the dead-letter table (source api:key<ID>:<index>) and on the
#     dead-letter topic (read back with Kafka's console consumer);
#   - the consumer stores the queued events exactly once (waited for by
#     polling the database, bounded), and the account's balance moves by
#     their charge;
#   - the same POST again: 202 again, and once the consumer has read past
#     those records (its committed offset, polled) nothing is stored twice
#     and the balance has not moved; a used id with other content is
#     queued, then the consumer's conflict in the dead-letter table;
#   - a second billingd whose broker cannot be reached (an unreachable
#     bootstrap, api.produce_ms=1500): 503 with Retry-After, every valid
#     event listed in not_queued, the invalid one still in the dead-letter
#     table; the same body sent to the first billingd afterwards: stored
#     once (nothing lost);
#   - events of another account from a key bound to one: rejected, never
#     produced; length-delimited protobuf through Kafka stored as the
#     same events as JSON;
#   - kill -9 of a billingd (run under gdb) between the broker's
#     acknowledgement and its answer: the client gets no answer, and its
#     retry stores each event once (the broker has them twice), the
#     invalid one kept once;
#   - every billingd exits 0 on SIGTERM; no sanitizer report.
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="${BILLING_TEST_WRAP:-} $builddir/billing/billing"
billingd="$builddir/billingd/billingd"
demo_month="$builddir/bench/demo_month"
ex="$srcdir/examples/gpu-cloud"
spec="$srcdir/doc/openapi.yaml"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-api-kafka.XXXXXX") || exit 99
topic="api-usage-$$-$(date +%s)"
pids=""

. "$srcdir/tests/checklib.sh"

if [ -z "${BILLING_PG_CONNINFO:-}" ] || [ -z "${BILLING_KAFKA_BROKERS:-}" ]; then
    check "BILLING_PG_CONNINFO and BILLING_KAFKA_BROKERS are set (scripts/services.sh start && . var/services.env)" fail
    finish
fi
api_scratch apik
sql() {
    psql "$BILLING_PG_CONNINFO" -XAtc "$1"
}
$billing db migrate >/dev/null || exit 99
$billing load --pricebook "$ex/pricebook.json" --accounts "$ex/accounts.json" >/dev/null || exit 99
for t in "$topic" "$topic-dead"; do
    "$demo_month" topic --partitions 2 "$BILLING_KAFKA_BROKERS" "$t" >/dev/null || exit 99
done
writer=$($billing apikey create --scope events:write) || exit 99
writer_id=$(echo "$writer" | cut -d_ -f2)
bound=$($billing apikey create --scope events:write --account lab-a) || exit 99
admin=$($billing apikey create --scope admin) || exit 99

# api NAME STATUS PATH KEY [CURL-ARGS...]: one POST (GET with -G); the
# answer (in $tmp/hdr, $tmp/body) has STATUS and matches doc/openapi.yaml.
api() {
    name=$1
    want=$2
    path=$3
    key=$4
    shift 4
    method=POST
    [ "${1:-}" = -G ] && method=GET
    curl -sS -D "$tmp/hdr" -o "$tmp/body" -H "Authorization: Bearer $key" "$@" "$url$path" 2>"$tmp/err"
    api_answer "$name" "$want" "$method" "$path"
}
# until_sql NAME QUERY WANT: poll QUERY (bounded: 60 s) until it prints WANT.
until_sql() {
    i=0
    got=$(sql "$2")
    while [ "$got" != "$3" ] && [ $i -lt 600 ]; do
        sleep 0.1
        i=$((i + 1))
        got=$(sql "$2")
    done
    expect_eq "$1" "$got" "$3"
}
# The charges of lab-a's current month, as the API answers them.
subtotal() {
    curl -sS -H "Authorization: Bearer $admin" "$url/v1/accounts/lab-a/balance" |
        python3 -c "import json, sys; print(json.load(sys.stdin)['subtotal'])"
}

# Two events of lab-a in the current month (the balance's) and an invalid one.
python3 - "$tmp/events.jsonl" "$tmp/other.jsonl" <<'EOF' || exit 99
import json, sys, time
now = int(time.time()) // 3600 * 3600
iso = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
ev = lambda i, acc, h: {"id": "k-%d" % i, "account": acc, "resource": "i-k%d" % i, "meter": "gpu",
                        "start": iso(now - 3 * 3600), "end": iso(now - (3 - h) * 3600),
                        "quantity": "1", "model": "RTX4090", "region": "cn-east-1"}
with open(sys.argv[1], "w") as f:
    f.write(json.dumps(ev(1, "lab-a", 1)) + "\n")
    f.write(json.dumps(ev(2, "lab-a", 2)) + "\n")
    bad = ev(3, "lab-a", 1)
    bad["end"] = bad["start"]
    f.write(json.dumps(bad) + "\n")
with open(sys.argv[2], "w") as f:
    f.write(json.dumps(ev(4, "team-c", 1)) + "\n")
EOF

# Bad settings stop billingd at start (status 3), naming the key.
"$billingd" --set "db=$BILLING_PG_CONNINFO" --set api.listen=127.0.0.1:0 --set api.events=files \
    >/dev/null 2>"$tmp/err"
expect_eq "api.events=files refused" "$?:$(grep -c "key 'api.events': need store or kafka" "$tmp/err")" "3:1"
"$billingd" --set "db=$BILLING_PG_CONNINFO" --set api.listen=127.0.0.1:0 --set api.events=kafka \
    >/dev/null 2>"$tmp/err"
expect_eq "api.events=kafka without a topic refused" \
    "$?:$(grep -c "api.events=kafka: set api.events_topic (or topics)" "$tmp/err")" "3:1"

billingd_start consumer --set http.listen= --set "topics=$topic" --set "group=api-kafka-$$" --set "dead_letter_topic=$topic-dead" \
    --set "kafka.bootstrap.servers=$BILLING_KAFKA_BROKERS" --set batch.linger.ms=20
consumer_url=$url
grep -q "event=api_events_kafka topic=$topic " "$tmp/billingd-consumer.log"
[ $? -eq 0 ] && r=ok || r=fail
check "with topics, api.events defaults to kafka on the first topic" $r "$(grep api_events "$tmp/billingd-consumer.log")"
before=$(subtotal)

api "events through Kafka" 202 /v1/events "$writer" -H "Content-Type: application/x-ndjson" \
    --data-binary "@$tmp/events.jsonl"
expect_eq "202: two queued, the invalid one rejected with the pipeline's reason" \
    "$(jv '(d["events"], d["queued"], d["rejected"], [(r["status"], r.get("id")) for r in d["results"]], d["results"][2]["reason_code"], d["results"][2]["reason"])')" \
    "(3, 2, 1, [('queued', 'k-1'), ('queued', 'k-2'), ('rejected', 'k-3')], 'invalid', \"event 'k-3': field 'end' must be after 'start'\")"
expect_eq "the invalid event is in the dead-letter table at once, with its source" \
    "$(sql "SELECT source, event_id, reason_code FROM billing.rejected_events")" \
    "api:key$writer_id:2|k-3|invalid"
# The dead-letter topic holds it too, with the reason in its headers: read
# with Kafka's own console consumer, from the jars scripts/kafka.sh runs
# the broker from.
cache=${BILLING_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/billing}
libs=$(ls -d "$cache"/kafka-*/libs 2>/dev/null | tail -1)
if [ -z "$libs" ] || ! command -v java >/dev/null; then
    check "the dead-letter topic has the invalid event" fail "no Kafka jars in $cache (scripts/kafka.sh start)"
else
    timeout -k 5 90 java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$libs/*" \
        org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$BILLING_KAFKA_BROKERS" \
        --topic "$topic-dead" --from-beginning --max-messages 1 --timeout-ms 60000 \
        --property print.headers=true >"$tmp/dead" 2>"$tmp/dead.err"
    if grep -q 'billing.reason_code:invalid' "$tmp/dead" && grep -q '"k-3"' "$tmp/dead"; then
        check "the dead-letter topic has the invalid event, its reason in the headers" ok
    else
        check "the dead-letter topic has the invalid event, its reason in the headers" fail \
            "$(head -c 600 "$tmp/dead") $(tail -3 "$tmp/dead.err")"
    fi
fi
until_sql "the consumer stored the queued events" \
    "SELECT count(*) FROM billing.usage_events WHERE event_id IN ('k-1', 'k-2')" 2
after=$(subtotal)
expect_eq "lab-a's charges this month moved by 3 hours of RTX4090" \
    "$(python3 -c "from decimal import Decimal as D; import sys; print(D(sys.argv[2]) - D(sys.argv[1]) > 0)" "$before" "$after")" "True"

api "the same events again" 202 /v1/events "$writer" -H "Content-Type: application/x-ndjson" \
    --data-binary "@$tmp/events.jsonl"
# The consumer has read the 4 records once its committed offsets sum to 4.
until_sql "the consumer read the repeated records" \
    "SELECT coalesce(sum(next_offset), 0) FROM billing.kafka_offsets WHERE topic = '$topic'" 4
expect_eq "the same events again: nothing stored twice" \
    "$(sql "SELECT count(*) FROM billing.usage_events WHERE event_id IN ('k-1', 'k-2')")" 2
expect_eq "the same events again: the charges did not move" "$(subtotal)" "$after"
# The usage topic's messages are keyed by account (one account's events in
# one partition, in order): the 4 records so far, all lab-a's.
if [ -n "$libs" ] && command -v java >/dev/null; then
    timeout -k 5 90 java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$libs/*" \
        org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$BILLING_KAFKA_BROKERS" \
        --topic "$topic" --from-beginning --max-messages 4 --timeout-ms 60000 \
        --property print.key=true --property print.partition=true --property print.value=false \
        >"$tmp/usage-keys" 2>"$tmp/usage-keys.err"
    expect_eq "the usage topic: 4 messages keyed lab-a, in one partition" \
        "$(sort -u "$tmp/usage-keys" | tr '\t' ' ' | sed 's/Partition:[0-9]*/P/' | sort | uniq -c |
            tr -s ' ')" " 1 P lab-a"
fi

# A used id with other content: queued (the API cannot know), then the
# consumer's conflict, in the dead-letter table with its kafka: source.
head -1 "$tmp/events.jsonl" | sed 's/"quantity": "1"/"quantity": "7"/' >"$tmp/changed.jsonl"
api "a used id with other content" 202 /v1/events "$writer" -H "Content-Type: application/x-ndjson" \
    --data-binary "@$tmp/changed.jsonl"
until_sql "a used id with other content: the consumer's conflict, in the dead-letter table" \
    "SELECT reason_code || ' ' || (source LIKE 'kafka:$topic/%') FROM billing.rejected_events WHERE event_id = 'k-1'" \
    "conflict true"
expect_eq "a used id with other content: stored nothing" \
    "$(sql "SELECT count(*) FROM billing.usage_events WHERE event_id = 'k-1'")" 1

api "a bound key sending another account's event" 202 /v1/events "$bound" \
    -H "Content-Type: application/x-ndjson" --data-binary "@$tmp/other.jsonl"
expect_eq "a bound key's event of another account: rejected, not queued" \
    "$(jv '(d["queued"], d["results"][0]["status"], d["results"][0]["reason"])')" \
    "(0, 'rejected', 'account: this key may send events of its own account only')"

# A broker that cannot be reached: nothing queued, 503, nothing lost.
billingd_start nobroker --set http.listen= --set api.events=kafka --set "api.events_topic=$topic" \
    --set kafka.bootstrap.servers=127.0.0.1:9 --set api.produce_ms=1500
nobroker_pid=$pid
sed 's/"k-\([0-9]\)"/"n-\1"/' "$tmp/events.jsonl" >"$tmp/new.jsonl"
api "events while the broker is unreachable" 503 /v1/events "$writer" \
    -H "Content-Type: application/x-ndjson" --data-binary "@$tmp/new.jsonl"
expect_eq "503: the valid events listed as not queued, the invalid one rejected" \
    "$(jv '(d["not_queued"], [r["status"] for r in d["results"]])')" \
    "([0, 1], ['not_queued', 'not_queued', 'rejected'])"
grep -qi '^Retry-After: [0-9]' "$tmp/hdr"
[ $? -eq 0 ] && r=ok || r=fail
check "503 has Retry-After" $r
expect_eq "503: the invalid event is kept in the dead-letter table all the same" \
    "$(sql "SELECT count(*) FROM billing.rejected_events WHERE event_id = 'n-3'")" 1
kill "$nobroker_pid"
wait "$nobroker_pid"
expect_eq "billingd without a broker exits 0 on SIGTERM" "$?" 0
url=$consumer_url
api "the same events once the broker is back" 202 /v1/events "$writer" \
    -H "Content-Type: application/x-ndjson" --data-binary "@$tmp/new.jsonl"
until_sql "nothing lost: the events stored once" \
    "SELECT count(*) FROM billing.usage_events WHERE event_id IN ('n-1', 'n-2')" 2

# Length-delimited protobuf through Kafka: k-1 and k-2 again under ids
# p-1 and p-2, stored as the same events (the rows compared).
python3 - "$tmp/events.jsonl" "$tmp/events.pb" <<'EOF' || exit 99
import calendar, json, sys, time
def varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out
def text(num, s):
    data = s.encode()
    return varint(num << 3 | 2) + varint(len(data)) + data
def stamp(num, s):
    inner = varint(1 << 3) + varint(calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ")))
    return varint(num << 3 | 2) + varint(len(inner)) + inner
body = b""
for line in open(sys.argv[1]).readlines()[:2]:
    e = json.loads(line)
    m = (text(1, e["id"].replace("k-", "p-")) + text(2, e["account"]) + text(3, e["resource"])
         + varint(4 << 3) + varint(1) + stamp(5, e["start"]) + stamp(6, e["end"])
         + text(7, e["quantity"]) + text(8, e["model"]) + text(9, e["region"]))
    body += varint(len(m)) + m
open(sys.argv[2], "wb").write(body)
EOF
api "protobuf through Kafka" 202 /v1/events "$writer" -H "Content-Type: application/x-protobuf" \
    --data-binary "@$tmp/events.pb"
until_sql "protobuf through Kafka: stored as the same events as JSON" \
    "SELECT count(*) FROM billing.usage_events p JOIN billing.usage_events k
       ON k.event_id = replace(p.event_id, 'p-', 'k-') AND (k.account_id, k.resource_id, k.meter,
          k.start_time, k.end_time, k.quantity) = (p.account_id, p.resource_id, p.meter,
          p.start_time, p.end_time, p.quantity)
     WHERE p.event_id IN ('p-1', 'p-2')" 2

# kill -9 between the broker's acknowledgement and the answer: a billingd
# serving the API alone runs under gdb (through libtool, as billingd is
# libtool's wrapper in the build tree), which stops it at the first line
# after every delivery report arrived (found by its comment in
# billingd/api.c) and kills it there with SIGKILL. The client gets no
# answer; its retry, the same body to the consumer's billingd, is a
# duplicate of what the broker already has: each event stored once, the
# invalid one kept once.
line=$(grep -n 'The rejects: in the dead-letter table' "$srcdir/billingd/api.c" | cut -d: -f1)
if ! command -v gdb >/dev/null; then
    check "gdb is installed (scripts/install-deps.sh)" fail
elif [ -z "$line" ]; then
    check "billingd/api.c still has the line the kill -9 test stops at" fail
elif ! gdb -q -batch -ex run --args /bin/true >/dev/null 2>&1; then
    echo "gdb cannot run a program here (no ptrace): the kill -9 case is not run"
else
    cat >"$tmp/under-gdb" <<EOF
#!/bin/sh
exec "$builddir/libtool" --mode=execute gdb -q -batch -ex "break api.c:$((line + 1))" -ex run \\
    -ex "signal SIGKILL" --args "\$@" >"$tmp/gdb.out"
EOF
    chmod +x "$tmp/under-gdb"
    sed 's/"k-\([0-9]\)"/"g-\1"/' "$tmp/events.jsonl" >"$tmp/gdb.jsonl"
    pids_before=$pids
    wrap_before=${BILLING_TEST_WRAP:-}
    BILLING_TEST_WRAP="$tmp/under-gdb"
    billingd_start killed --set http.listen= --set api.events=kafka --set "api.events_topic=$topic" \
        --set "kafka.bootstrap.servers=$BILLING_KAFKA_BROKERS"
    BILLING_TEST_WRAP=$wrap_before
    curl -sS --max-time 300 -o "$tmp/body" -w '%{http_code}' -H "Authorization: Bearer $writer" \
        -H "Content-Type: application/x-ndjson" --data-binary "@$tmp/gdb.jsonl" "$url/v1/events" \
        >"$tmp/code" 2>"$tmp/err"
    curl_rc=$?
    # The connection closed with no answer: an empty reply, or a reset.
    [ "$curl_rc" -eq 56 ] && curl_rc=52
    wait "$pid"
    pids=$pids_before
    expect_eq "billingd killed after the broker's acknowledgement: the client got no answer" \
        "$curl_rc:$(cat "$tmp/code"):$(grep -c 'Breakpoint 1, ' "$tmp/gdb.out")" "52:000:1"
    expect_eq "... and the dead-letter table has nothing of the request yet" \
        "$(sql "SELECT count(*) FROM billing.rejected_events WHERE event_id = 'g-3'")" 0
    url=$consumer_url
    api "the client's retry after the kill" 202 /v1/events "$writer" \
        -H "Content-Type: application/x-ndjson" --data-binary "@$tmp/gdb.jsonl"
    # A last event of the same account (so the same partition, read after
    # the retried records): once it is stored, every record before it was read.
    sed -n 1p "$tmp/events.jsonl" | sed 's/"k-1"/"g-last"/' >"$tmp/last.jsonl"
    api "an event after the retry" 202 /v1/events "$writer" -H "Content-Type: application/x-ndjson" \
        --data-binary "@$tmp/last.jsonl"
    until_sql "kill -9 then retry: the event after it stored" \
        "SELECT count(*) FROM billing.usage_events WHERE event_id = 'g-last'" 1
    expect_eq "kill -9 then retry: each event stored once (the broker had them twice)" \
        "$(sql "SELECT count(*) FROM billing.usage_events WHERE event_id IN ('g-1', 'g-2')")" 2
    expect_eq "kill -9 then retry: the invalid event kept once" \
        "$(sql "SELECT count(*) FROM billing.rejected_events WHERE event_id = 'g-3'")" 1
fi

for p in $pids; do
    kill "$p" 2>/dev/null
done
rc=0
for p in $pids; do
    wait "$p" 2>/dev/null
    s=$?
    [ "$s" -eq 0 ] || [ "$s" -eq 127 ] || rc=$s
done
pids=""
expect_eq "every billingd exits 0 on SIGTERM" "$rc" 0
if grep -l "ERROR: AddressSanitizer\|runtime error:\|LeakSanitizer" "$tmp"/billingd-*.log >/dev/null 2>&1; then
    check "no sanitizer report in billingd's logs" fail "$(grep -h -A5 "Sanitizer\|runtime error" "$tmp"/billingd-*.log | head -20)"
else
    check "no sanitizer report in billingd's logs" ok
fi
finish
