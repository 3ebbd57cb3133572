#!/bin/sh
# check-api-group.sh - the group commit of POST /v1/events in store mode
# (api.events=store, billingd/api_events.c; issue 25) against the private
# PostgreSQL (BILLING_PG_CONNINFO, databases of its own); without it the
# test FAILS, never skips. Four requests of JSON Lines with overlapping
# ids (the same ten events in all four, an id sent twice identically and
# one with two contents inside one request, one id with other content in
# two requests, an invalid event, an unknown account):
#   - sent one after the other to a billingd on one database: the
#     sequential answers and rows;
#   - sent at once to a billingd on another database, the first one's
#     transaction held on a table lock (a psql session; waited for in
#     pg_stat_activity) until the three others have had their keys
#     checked one by one (pg_stat_activity again), so that they queue behind it and
#     commit together: their new rows have one transaction id (xmin),
#     not the first request's;
#   - every request's statuses equal the sequential ones (accepted,
#     duplicate, conflict, rejected with the same reason), but for the
#     ids sent by several requests, where the order decides who is first:
#     for each, one accepted and the others duplicate (or conflict) in
#     both runs; the stored events and aggregates equal the sequential
#     ones (the id with two contents stored once, with one of them);
#   - the four requests sent again (a client's retry): nothing accepted,
#     nothing stored twice, the aggregates unchanged;
#   - answers validated against doc/openapi.yaml.
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="${BILLING_TEST_WRAP:-} $builddir/billing/billing"
billingd="$builddir/billingd/billingd"
ex="$srcdir/examples/gpu-cloud"
spec="$srcdir/doc/openapi.yaml"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-api-group.XXXXXX") || exit 99
pids=""
lockpid=""

. "$srcdir/tests/checklib.sh"

api_scratch apigrp_seq
seq_db=$BILLING_PG_CONNINFO
db_new "billing_apigrp_con_$$"
db_use "billing_apigrp_con_$$"
con_db=$BILLING_PG_CONNINFO
trap 'exec 3>&- 2>/dev/null; [ -z "$lockpid" ] || wait "$lockpid"; billingd_stop_all; db_drop_all; rm -rf "$tmp"' EXIT
for d in "$seq_db" "$con_db"; do
    BILLING_PG_CONNINFO=$d $billing db migrate >/dev/null || exit 99
    BILLING_PG_CONNINFO=$d $billing load --pricebook "$ex/pricebook.json" \
        --accounts "$ex/accounts.json" >/dev/null || exit 99
done
sql() {
    psql "$BILLING_PG_CONNINFO" -XAtc "$1"
}

# The four bodies, req-0.jsonl .. req-3.jsonl.
python3 - "$tmp" <<'EOF' || exit 99
import json, sys
out = sys.argv[1]
def ev(i, acc="lab-a", q="1", h=0):
    return {"id": i, "account": acc, "resource": "i-" + i, "meter": "gpu",
            "start": "2026-01-05T%02d:00:00Z" % h, "end": "2026-01-05T%02d:30:00Z" % h,
            "quantity": q, "model": "RTX4090", "region": "cn-east-1"}
accs = ["lab-a", "student-b", "team-c"]
reqs = []
for r in range(4):
    evs = [ev("u-%d-%d" % (r, k), accs[k % 3], str(1 + k % 4), k % 20) for k in range(30)]
    evs += [ev("s-%d" % k, accs[k % 3], "2", k) for k in range(10)]
    reqs.append(evs)
reqs[0].append(dict(ev("bad-0"), end="2026-01-05T00:00:00Z"))
reqs[1] += [ev("d-1", q="3"), ev("d-1", q="3"), ev("c-1", q="1"), ev("c-1", q="2")]
# Other content (the resource), the same aggregates whichever is stored.
reqs[2].append(dict(ev("x-1", q="2"), resource="i-x-1a"))
reqs[3].append(dict(ev("x-1", q="2"), resource="i-x-1b"))
reqs[3].append(ev("nobody-3", acc="no-such-account"))
for r, evs in enumerate(reqs):
    with open("%s/req-%d.jsonl" % (out, r), "w") as f:
        for e in evs:
            f.write(json.dumps(e) + "\n")
EOF

# post R NAME: request R's body to $url with $key; the answer in $tmp/NAME-R.json.
post() {
    curl -sS -m 120 -D "$tmp/$2-$1.hdr" -o "$tmp/$2-$1.json" -H "Authorization: Bearer $key" \
        -H "Content-Type: application/x-ndjson" --data-binary "@$tmp/req-$1.jsonl" \
        "$url/v1/events" 2>"$tmp/$2-$1.err"
}
# rows: the stored events (but x-1) and aggregates of BILLING_PG_CONNINFO.
rows() {
    sql "SELECT event_id, account_id, resource_id, meter, quantity, start_time, end_time
         FROM billing.usage_events WHERE event_id <> 'x-1' ORDER BY event_id" &&
        sql "SELECT account_id, meter, month, quantity, quantity_den, event_count
             FROM billing.usage_aggregates ORDER BY 1, 2, 3, 4"
}

# Sequential.
BILLING_PG_CONNINFO=$seq_db
key=$($billing apikey create --scope events:write) || exit 99
billingd_start seq --set api.events=store --set http.listen=
for r in 0 1 2 3; do
    post $r seq
    cp "$tmp/seq-$r.hdr" "$tmp/hdr"
    cp "$tmp/seq-$r.json" "$tmp/body"
    : >"$tmp/err"
    api_answer "sequential request $r" 200 POST /v1/events
done
rows >"$tmp/seq-rows" || exit 99

# At once, on the other database: request 0 held on a lock, 1 to 3 queued behind it.
BILLING_PG_CONNINFO=$con_db
key=$($billing apikey create --scope events:write) || exit 99
billingd_start con --set api.events=store --set http.listen=
mkfifo "$tmp/lock" || exit 99
psql "$con_db" -XAtq <"$tmp/lock" >"$tmp/lock.out" 2>&1 &
lockpid=$!
exec 3>"$tmp/lock"
echo "BEGIN; LOCK TABLE billing.usage_events IN EXCLUSIVE MODE; SELECT 'locked';" >&3
# poll NAME QUERY WANT: poll QUERY (bounded: 60 s) until it prints WANT; one check.
poll() {
    i=0
    got=$(sql "$2")
    while [ "$got" != "$3" ] && [ $i -lt 600 ]; do
        sleep 0.1
        i=$((i + 1))
        got=$(sql "$2")
    done
    expect_eq "$1" "$got" "$3"
}
me="datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
poll "the table lock is held" "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
    WHERE c.relname = 'usage_events' AND l.mode = 'ExclusiveLock' AND l.granted" 1
post 0 con &
p0=$!
poll "request 0 waits on the lock" "SELECT count(*) FROM pg_stat_activity WHERE $me AND wait_event_type = 'Lock'" 1
# One at a time, each once the one before had its key checked on its own connection (then
# it is parsed and queued): a connection accepted by a thread of libmicrohttpd that
# is busy with another waits for that thread.
checked() {
    poll "$1" "SELECT count(*) FROM pg_stat_activity
        WHERE $me AND state = 'idle' AND query LIKE '%FROM billing.api_keys WHERE id%'" "$2"
}
post 1 con &
p1=$!
checked "request 1 had its key checked" 1
post 2 con &
p2=$!
checked "request 2 had its key checked" 2
post 3 con &
p3=$!
checked "request 3 had its key checked" 3
echo "COMMIT;" >&3
exec 3>&-
wait "$lockpid"
lockpid=
for p in $p0 $p1 $p2 $p3; do
    wait "$p"
done
for r in 0 1 2 3; do
    cp "$tmp/con-$r.hdr" "$tmp/hdr"
    cp "$tmp/con-$r.json" "$tmp/body"
    : >"$tmp/err"
    api_answer "request $r sent at once with the others" 200 POST /v1/events
done
expect_eq "requests 1 to 3 committed in one transaction, request 0 in another" \
    "$(sql "SELECT count(DISTINCT xmin::text) FILTER (WHERE event_id ~ '^u-[123]-') || ' ' ||
        count(DISTINCT xmin::text) FROM billing.usage_events WHERE event_id ~ '^u-'")" "1 2"

# The statuses: equal to the sequential ones; for the ids of several requests, the same
# outcomes per id (one accepted, the others duplicate or conflict) whatever the order.
compare() {
    python3 - "$tmp" "$1" "$2" <<'EOF'
import json, sys
tmp, a, b = sys.argv[1:4]
shared = lambda i: i.startswith("s-") or i == "x-1"
bad = []
per = {a: {}, b: {}}
for run in (a, b):
    for r in range(4):
        d = json.load(open("%s/%s-%d.json" % (tmp, run, r)))
        for x in d["results"]:
            if shared(x.get("id", "")):
                per[run].setdefault(x["id"], []).append(x["status"])
for r in range(4):
    da = json.load(open("%s/%s-%d.json" % (tmp, a, r)))
    db = json.load(open("%s/%s-%d.json" % (tmp, b, r)))
    if len(da["results"]) != len(db["results"]):
        bad.append("request %d: %d results, %d" % (r, len(da["results"]), len(db["results"])))
        continue
    for x, y in zip(da["results"], db["results"]):
        if x.get("id") != y.get("id") or x["index"] != y["index"]:
            bad.append("request %d: %s vs %s" % (r, x, y))
        elif not shared(x.get("id", "")) and x != y:
            bad.append("request %d: %s vs %s" % (r, x, y))
    if not bad and (da["events"], da["accepted"] + da["duplicates"] + da["rejected"]) != \
            (db["events"], db["accepted"] + db["duplicates"] + db["rejected"]):
        bad.append("request %d: counts %s vs %s" % (r, da, db))
for i in per[a]:
    if sorted(per[a][i]) != sorted(per[b].get(i, [])):
        bad.append("%s: %s vs %s" % (i, sorted(per[a][i]), sorted(per[b].get(i, []))))
print("; ".join(bad[:5]) if bad else "same")
EOF
}
expect_eq "sent at once: every status as sent one after the other" "$(compare seq con)" same
expect_eq "the statuses of the ids of several requests" \
    "$(python3 -c '
import json, sys
st = {}
for r in range(4):
    for x in json.load(open("%s/con-%d.json" % (sys.argv[1], r)))["results"]:
        st.setdefault(x.get("id"), []).append(x["status"])
print(sorted(st["s-0"]), sorted(st["x-1"]), st["d-1"], st["c-1"], st["bad-0"], st["nobody-3"])' "$tmp")" \
    "['accepted', 'duplicate', 'duplicate', 'duplicate'] ['accepted', 'conflict'] ['accepted', 'duplicate'] ['accepted', 'conflict'] ['rejected'] ['rejected']"
rows >"$tmp/con-rows" || exit 99
expect_eq "the stored events and aggregates equal the sequential ones" \
    "$(cmp -s "$tmp/seq-rows" "$tmp/con-rows" && echo same || diff "$tmp/seq-rows" "$tmp/con-rows" | head -5)" same
expect_eq "x-1 stored once, with one of its contents" \
    "$(sql "SELECT count(*), bool_and(resource_id IN ('i-x-1a', 'i-x-1b')) FROM billing.usage_events WHERE event_id = 'x-1'")" "1|t"

# A retry of all four: nothing accepted, nothing counted twice.
before=$(sql "SELECT count(*) || ' ' || sum(event_count) || ' ' || sum(quantity) FROM billing.usage_aggregates")
rp=""
for r in 0 1 2 3; do
    post $r retry &
    rp="$rp $!"
done
for p in $rp; do
    wait "$p"
done
expect_eq "the retried requests: nothing accepted" "$(python3 -c '
import json, sys
print(sum(json.load(open("%s/retry-%d.json" % (sys.argv[1], r)))["accepted"] for r in range(4)))' "$tmp")" 0
expect_eq "the retried requests: the aggregates unchanged" \
    "$(sql "SELECT count(*) || ' ' || sum(event_count) || ' ' || sum(quantity) FROM billing.usage_aggregates")" "$before"
expect_eq "the retried requests: no event stored twice" \
    "$(sql "SELECT count(*) - count(DISTINCT event_id) FROM billing.usage_events")" 0
finish
