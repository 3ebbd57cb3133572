#!/bin/sh
# api-documents.sh - latency of billingd's invoice, usage and quote routes
# (doc/http-api-documents.md) against the services of scripts/services.sh,
# on a database of its own: the example loaded, ingested, January closed
# and finalized. One client on one keep-alive connection (python3
# http.client), N requests per route after 20 of warm-up; prints p50 and
# p99 in milliseconds and requests per second, and as the ratios of the
# same run: the PDF revalidated by its ETag (304) against the PDF sent
# (200), usage by day (raw events, a rater per day) against by month (the
# stored aggregates), and GET .../INV.json against `billing invoice show --format json`
# run as a process (the command line's cost of the same document).
#
#   bench/api-documents.sh [BUILD_DIR] [N]    (default _rel, 2000)
#
# Use a build without sanitizers (../configure CFLAGS='-O2 -g').
set -eu
srcdir=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$srcdir/_rel}" && pwd)
n=${2:-2000}
billing="$build/billing/billing"
ex="$srcdir/examples/gpu-cloud"
db="billing_bench_apidoc_$$"
base=${BILLING_PG_CONNINFO:?run scripts/services.sh start and . var/services.env}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-apidoc.XXXXXX")
dpid=
cleanup() {
    [ -n "$dpid" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
    rm -rf "$tmp"
    psql "$base dbname=postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
}
trap cleanup EXIT
psql "$base dbname=postgres" -qc "CREATE DATABASE $db" >/dev/null
BILLING_PG_CONNINFO="$base dbname=$db"
export BILLING_PG_CONNINFO
$billing db migrate >/dev/null
$billing load --pricebook "$ex/pricebook.json" --accounts "$ex/accounts.json" >/dev/null
$billing ingest "$ex/events.jsonl" >/dev/null 2>&1
$billing close --period 2026-01 --finalize --grace 0 --quiet >/dev/null 2>&1
key=$($billing apikey create --scope admin)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$build/billingd/billingd" --set "db=$BILLING_PG_CONNINFO" --set "api.listen=127.0.0.1:$port" \
    --set http.listen= --set api.rate=1000000 >"$tmp/billingd.log" 2>&1 &
dpid=$!
i=0
until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/invoices")" = 401 ]; do
    i=$((i + 1))
    [ $i -lt 300 ] || { echo "billingd did not start" >&2; cat "$tmp/billingd.log" >&2; exit 1; }
    sleep 0.1
done
# The baseline: the command line writing the same JSON, one process per document.
cli_ms=$(python3 - "$billing" "$n" <<'EOF'
import subprocess, sys, time
billing, n = sys.argv[1], min(int(sys.argv[2]), 200)
t = time.perf_counter()
for _ in range(n):
    subprocess.run([billing, "invoice", "show", "INV-2026-000001", "--format", "json"],
                   check=True, stdout=subprocess.DEVNULL)
print("%.3f" % ((time.perf_counter() - t) * 1000 / n))
EOF
)
python3 - "$port" "$key" "$n" "$cli_ms" <<'EOF'
import http.client, json, sys, time
port, key, n, cli_ms = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
c = http.client.HTTPConnection("127.0.0.1", port)
auth = {"Authorization": "Bearer " + key}
def run(method, path, body=None, headers=None, want=200):
    h = dict(auth, **(headers or {}))
    lat = []
    for i in range(n + 20):
        t = time.perf_counter()
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        r.read()
        if r.status != want:
            sys.exit("%s %s: %d" % (method, path, r.status))
        if i >= 20:
            lat.append(time.perf_counter() - t)
    lat.sort()
    return lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99)] * 1000, n / sum(lat)
c.request("GET", "/v1/invoices/INV-2026-000001.pdf", headers=auth)
r = c.getresponse()
r.read()
etag = r.getheader("ETag")
quote = json.dumps({"account": "team-c", "model": "RTX4090", "region": "cn-east-1",
                    "start": "2026-03-02T00:00:00+08:00", "seconds": 3600})
rows = [
    ("GET /v1/invoices?period=2026-01", run("GET", "/v1/invoices?period=2026-01")),
    ("GET /v1/invoices/INV-2026-000001.json", run("GET", "/v1/invoices/INV-2026-000001.json")),
    ("GET /v1/invoices/INV-2026-000001.csv", run("GET", "/v1/invoices/INV-2026-000001.csv")),
    ("GET /v1/invoices/INV-2026-000001.pdf", run("GET", "/v1/invoices/INV-2026-000001.pdf")),
    ("  same, If-None-Match (304)", run("GET", "/v1/invoices/INV-2026-000001.pdf",
                                         headers={"If-None-Match": etag}, want=304)),
    ("GET /v1/accounts/lab-a/usage?from=2026-01", run("GET", "/v1/accounts/lab-a/usage?from=2026-01")),
    ("  group_by=resource", run("GET", "/v1/accounts/lab-a/usage?from=2026-01&group_by=resource")),
    ("  group_by=month", run("GET", "/v1/accounts/lab-a/usage?from=2026-01&group_by=month")),
    ("  group_by=day", run("GET", "/v1/accounts/lab-a/usage?from=2026-01&group_by=day")),
    ("POST /v1/quote", run("POST", "/v1/quote", body=quote,
                           headers={"Content-Type": "application/json"})),
]
print("%-44s %9s %9s %10s" % ("route (%d requests, one connection)" % n, "p50 ms", "p99 ms", "req/s"))
for name, (p50, p99, rps) in rows:
    print("%-44s %9.3f %9.3f %10.0f" % (name, p50, p99, rps))
pdf = dict(rows)["GET /v1/invoices/INV-2026-000001.pdf"]
nm = dict(rows)["  same, If-None-Match (304)"]
js = dict(rows)["GET /v1/invoices/INV-2026-000001.json"]
print("ratio PDF 200 / 304 (p50): %.1f" % (pdf[0] / nm[0]))
day = dict(rows)["  group_by=day"]
month = dict(rows)["  group_by=month"]
print("ratio usage group_by=day / group_by=month (p50): %.1f" % (day[0] / month[0]))
print("ratio `billing invoice show --format json` process (%.3f ms) / GET .json p50: %.1f"
      % (cli_ms, cli_ms / js[0]))
EOF
