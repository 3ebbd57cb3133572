#!/bin/sh
# console.sh [ACCOUNT] - the web console's account page on loopback
# (issue 26: goal under 200 KB and interactive under 300 ms): its weight
# and its time to interactive in Debian's headless Chromium
# (bench/console-timing.py, python3-selenium), against this build's
# billingd on a free port and the database of $BILLING_PG_CONNINFO,
# loaded beforehand (README "Run billingd": the example is enough;
# ACCOUNT default student-b). Run from the build tree: ../bench/console.sh
# RUNS (default 30) page loads after one warm-up. Prints the page's bytes
# (files and API answers, as transferred), the median and p90 of the time
# from navigation to the account's figures shown, and as the baseline of
# the same run the median time of the balance request alone (the page's
# slowest API answer), with the page's time as a ratio of it.
set -eu
account=${1:-student-b}
builddir=$(pwd)
srcdir=$(cd "$(dirname "$0")/.." && pwd)
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
key=$("$builddir/billing/billing" apikey create --scope accounts:read --account "$account" \
    --label console-bench)
port=$($py -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp)
"$builddir/billingd/billingd" --set db="$BILLING_PG_CONNINFO" --set api.listen="127.0.0.1:$port" \
    --set api.console_dir="$srcdir/billingd/console" 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
i=0
until curl -sf -o /dev/null "http://127.0.0.1:$port/console/"; do
    i=$((i + 1))
    [ $i -le 300 ] && kill -0 $pid 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.1
done
$py "$srcdir/bench/console-timing.py" "http://127.0.0.1:$port" "$key" "$account" "${RUNS:-30}"
