#!/bin/sh
# check-api-random.sh - GET /v1/accounts/{id}/balance equal, byte for byte,
# to `billing account balance --format json` on a random scenario (issue
# 25), against billingd serving the API alone and the private PostgreSQL
# (BILLING_PG_CONNINFO, a database of its own; without it the test FAILS,
# never skips). The scenario is drawn from a seed (printed;
# BILLING_TEST_SEED=S repeats a run):
#   - 24 accounts from bench/gen_events --accounts-json: a trial grant of
#     40.00 each for January, that most use up; a monthly plan every 6th;
#     2 000 January events (gen_events --seed), a quarter of them again a
#     month later (February into March);
#   - from the seed: a fee grant (usage and plan fees, random amount,
#     expiring at a random instant of February or March) for most
#     accounts; a refundable monthly plan from late January cancelled in
#     February for every 4th (its refund returns credit to the fee grant
#     that paid the fee, and the rest is carried to the account credit);
#   - January and February closed and finalized (so their credit history
#     counts), then part of one account's credit refunded out of band, and
#     a tenth of the January events stored again late (new ids);
# and then, for every account, at many instants (inside January, before
# and at the trial's expiry, in February and March, a second before and
# at its fee grant's expiry, a second after the instant its credit runs
# out, and now): the API's answer with ?at= is what the command line
# prints with --at, byte for byte (each grant's remaining and expiry, the
# account credit, the exhaustion instant, the month's charges), valid
# against doc/openapi.yaml; at each, what the grants listed have left
# plus the account credit left is the credit left; at March's first
# instant the credit left is what the finalized February invoices left
# (their credit_remaining less what expired, plus the account credit
# left, less the refund): the issued months count as issued, not as the
# late events would make them; and the scenario exercised what it is
# about (exhausted credit, account credit, grants left after a finalized
# month, a running burn, expiries), or the test fails.
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="${BILLING_TEST_WRAP:-} $builddir/billing/billing"
billingd="$builddir/billingd/billingd"
ex="$srcdir/examples/gpu-cloud"
spec="$srcdir/doc/openapi.yaml"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-apirandom.XXXXXX") || exit 99
pids=""

. "$srcdir/tests/checklib.sh"

api_scratch apirandom
sql() {
    psql "$BILLING_PG_CONNINFO" -XAtc "$1"
}

seed=${BILLING_TEST_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "random scenario: BILLING_TEST_SEED=$seed"
accounts=24
"$builddir/bench/gen_events" --accounts-json --accounts $accounts --grants 40.00 --plans 6 \
    >"$tmp/base.json" &&
    "$builddir/bench/gen_events" --seed "$seed" --accounts $accounts 2000 >"$tmp/jan.jsonl" || exit 99
# The seed's additions: fee grants, late refundable plans cancelled in
# February, and a quarter of the events again 31 days later.
python3 - "$seed" "$tmp/base.json" "$tmp/jan.jsonl" "$tmp/accounts.json" "$tmp/events.jsonl" \
    "$tmp/late.jsonl" <<'EOF' || exit 99
import datetime, json, random, sys
rng = random.Random(int(sys.argv[1]))
d = json.load(open(sys.argv[2]))
cst = datetime.timezone(datetime.timedelta(hours=8))
iso = lambda t: t.isoformat()
for i, a in enumerate(d["accounts"]):
    n = a["id"].split("-")[1]
    if rng.random() < 0.8:
        expires = datetime.datetime(2026, 2, 5, tzinfo=cst) + datetime.timedelta(
            seconds=rng.randrange(40 * 86400))
        d["grants"].append({"id": "fees-" + n, "account": a["id"],
                            "amount": "%d.%02d" % (rng.randrange(100, 3000), rng.randrange(100)),
                            "granted_at": "2026-01-15T00:00:00+08:00", "expires_at": iso(expires),
                            "applies_to": ["usage", "subscription"], "priority": 1})
    if i % 4 == 3:
        start = datetime.datetime(2026, 1, rng.randrange(20, 32), 10, tzinfo=cst)
        cancel = datetime.datetime(2026, 2, rng.randrange(2, 21), 10, tzinfo=cst)
        d["subscriptions"].append({"id": "late-" + n, "account": a["id"], "resource": "i-%s-9" % n,
                                   "plan": "rtx4090x8-monthly", "start": iso(start), "terms": 3,
                                   "cancelled_at": iso(cancel)})
json.dump(d, open(sys.argv[4], "w"), indent=1)
shift = lambda s: iso(datetime.datetime.fromisoformat(s) + datetime.timedelta(days=31))
with open(sys.argv[5], "w") as out, open(sys.argv[6], "w") as late:
    for line in open(sys.argv[3]):
        out.write(line)
        e = json.loads(line)
        if rng.random() < 0.25:
            f = dict(e, id="f-" + e["id"], start=shift(e["start"]), end=shift(e["end"]))
            out.write(json.dumps(f) + "\n")
        if rng.random() < 0.1:
            late.write(json.dumps(dict(e, id="late-" + e["id"])) + "\n")
EOF
$billing db migrate >/dev/null || exit 99
$billing load --pricebook "$ex/pricebook.json" --accounts "$tmp/accounts.json" >/dev/null || exit 99
$billing ingest "$tmp/events.jsonl" >/dev/null 2>&1 || exit 99
for p in 2026-01 2026-02; do
    $billing close --period $p --finalize --grace 0 --quiet >/dev/null 2>"$tmp/close.err" || {
        check "billing close --period $p --finalize" fail "$(tail -3 "$tmp/close.err")"
        finish
    }
done
# Half the account credit of the first account that has some after
# February refunded out of band (against its February invoice).
refunded=$(sql "SELECT i.account_id || ' ' || billing.invoice_number_text(s.prefix, i.number)
                  FROM billing.invoices i JOIN billing.invoice_series s ON s.series = i.series
                 WHERE i.month = '2026-02-01' AND i.kind = 'invoice' AND i.status = 'finalized'
                 ORDER BY i.account_id" | while read -r acct number; do
    left=$($billing account balance "$acct" --at 2026-03-01T00:00:00+08:00 |
        sed -n 's/^account_credit_left=//p')
    half=$(python3 -c "from decimal import Decimal as D; import sys; print((D(sys.argv[1]) / 2).quantize(D('0.01'), rounding='ROUND_DOWN'))" "$left")
    case $half in 0.00 | -*) continue ;; esac
    $billing invoice refund "$number" --amount "$half" --reason "random scenario" \
        --reference "h-$acct" >/dev/null 2>&1 || exit 99
    echo "$acct $half"
    break
done)
echo "refunded out of band: ${refunded:-nothing}"
# Late January events, stored after January was finalized: the balance
# counts January as issued, not as these events would make it.
$billing ingest "$tmp/late.jsonl" >/dev/null 2>&1 || exit 99
$billing invoice export --format json --out "$tmp/feb" --period 2026-02 >/dev/null 2>&1 || exit 99
admin=$($billing apikey create --scope admin) || exit 99
billingd_start main --set http.listen=

# ---- the balance at each instant --------------------------------------
# compare.py: for every account and instant, the API's answer with ?at=
# and the command line's --format json output; prints one line per
# mismatch ("DIFF account at: api vs cli"), per invariant broken ("SUM
# ..."), and the counts of what the scenario exercised ("SEEN ...").
cat >"$tmp/compare.py" <<'EOF'
import datetime, glob, json, shlex, subprocess, sys, urllib.request
from decimal import Decimal as D
url, key, billing, accounts_file, events_file, feb_dir, refunded, out_dir = sys.argv[1:9]
billing = shlex.split(billing)
accounts = json.load(open(accounts_file))
cst = datetime.timezone(datetime.timedelta(hours=8))
fmt = lambda t: t.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
parse = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
fixed = [datetime.datetime(*x, tzinfo=cst) for x in [
    (2026, 1, 10, 12), (2026, 1, 20), (2026, 1, 31, 23, 59, 59), (2026, 2, 1), (2026, 2, 1, 8, 30),
    (2026, 2, 15), (2026, 3, 1), (2026, 3, 3), (2026, 3, 20), (2026, 4, 2)]]
# What the finalized February invoices left, less the refund out of band:
# the credit left at March's first instant (no March usage counted yet).
march = fmt(datetime.datetime(2026, 3, 1, tzinfo=cst))
left = {}
for name in glob.glob(feb_dir + "/INV-*.json"):
    inv = json.load(open(name))
    left[inv["account"]] = (D(inv["credit_remaining"]) + D(inv["account_credit_left"]) -
                            sum(D(e["amount"]) for e in inv["expired_credits"]))
if refunded:
    acct, amount = refunded.split()
    left[acct] -= D(amount)
def api(acct, at):
    q = "" if at is None else "?at=" + at
    req = urllib.request.Request("%s/v1/accounts/%s/balance%s" % (url, acct, q),
                                 headers={"Authorization": "Bearer " + key})
    with urllib.request.urlopen(req) as r:
        return r.read().decode()
def cli(acct, at):
    args = billing + ["account", "balance", acct, "--format", "json"]
    if at is not None:
        args += ["--at", at]
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout.rstrip("\n")
seen = {"issued": 0, "pairs": 0, "exhausted": 0, "account_credit": 0, "history": 0, "burning": 0, "expiry": 0}
bad = 0
def one(acct, at):
    global bad
    a = api(acct, at)
    c = cli(acct, at)
    seen["pairs"] += 1
    if at is None:
        # now: the two may be a second apart; equal but for the instant
        ja, jc = json.loads(a), json.loads(c)
        for j in (ja, jc):
            if j["exhausts_at"] == j["at"]:
                j["exhausts_at"] = "at"
            j["at"] = "now"
        same = ja == jc
    else:
        same = a == c
    if not same:
        bad += 1
        if bad <= 5:
            print("DIFF %s %s: %s vs %s" % (acct, at, a, c))
        return None
    b = json.loads(a)
    with open("%s/%s@%s.json" % (out_dir, acct, at or "now"), "w") as f:
        f.write(a)
    if at == march and acct in left:
        seen["issued"] += 1
        if D(b["credit_remaining"]) != left[acct]:
            print("ISSUED %s %s: %s, but February's invoice left %s" % (
                acct, at, b["credit_remaining"], left[acct]))
    total = sum(D(g["remaining"]) for g in b["grants"]) + D(b["account_credit_left"])
    if total != D(b["credit_remaining"]):
        print("SUM %s %s: grants %s + account credit %s != %s" % (
            acct, at, [g["remaining"] for g in b["grants"]], b["account_credit_left"],
            b["credit_remaining"]))
    if D(b["credit_remaining"]) == 0 and D(b["subtotal"]) > 0:
        seen["exhausted"] += 1
    if D(b["account_credit_left"]) > 0:
        seen["account_credit"] += 1
    if b["month"] >= "2026-02" and any(g["grant"].startswith("fees-") and
                                       D(g["remaining"]) != D(amounts[g["grant"]])
                                       for g in b["grants"]):
        seen["history"] += 1
    if b["running_events"] > 0 and b["exhausts_at"] not in (None, b["at"]):
        seen["burning"] += 1
    return b
amounts = {g["id"]: g["amount"] for g in accounts["grants"]}
# Thirty seconds into each account's first event (a minute long or more): a burn running.
first = {}
for line in open(events_file):
    e = json.loads(line)
    t = parse(e["start"])
    if e["account"] not in first or t < first[e["account"]]:
        first[e["account"]] = t
expiry = {g["account"]: parse(g["expires_at"]) for g in accounts["grants"] if g["id"].startswith("fees-")}
for a in accounts["accounts"]:
    acct = a["id"]
    instants = list(fixed)
    if acct in first:
        instants.append(first[acct] + datetime.timedelta(seconds=30))
    if acct in expiry:
        instants += [expiry[acct] - datetime.timedelta(seconds=1), expiry[acct]]
        seen["expiry"] += 1
    for t in instants:
        b = one(acct, fmt(t))
        if b is not None and b["exhausts_at"] not in (None, b["at"]):
            z = parse(b["exhausts_at"]) + datetime.timedelta(seconds=1)
            one(acct, fmt(z))
    one(acct, None)
print("SEEN " + " ".join("%s=%d" % kv for kv in sorted(seen.items())))
print("BAD %d" % bad)
EOF
mkdir "$tmp/answers"
python3 "$tmp/compare.py" "$url" "$admin" "$billing" "$tmp/accounts.json" "$tmp/events.jsonl" \
    "$tmp/feb" "$refunded" "$tmp/answers" \
    >"$tmp/compare.out" 2>&1
rc=$?
grep -v '^SUM\|^ISSUED' "$tmp/compare.out" | head -20
pairs=$(sed -n 's/^SEEN .*pairs=\([0-9]*\).*/\1/p' "$tmp/compare.out")
[ $rc -eq 0 ] && grep -q '^BAD 0$' "$tmp/compare.out" && [ "${pairs:-0}" -gt 200 ] && r=ok || r=fail
check "seed $seed: ${pairs:-0} balances (every account, each instant): the API's ?at= answer is billing account balance --at --format json, byte for byte" \
    $r "$(grep '^DIFF\|^BAD\|Error\|error' "$tmp/compare.out" | head -5)"
grep -q '^SUM' "$tmp/compare.out" && r=fail || r=ok
check "seed $seed: at each instant, what the grants listed have left plus the account credit left is the credit left" \
    $r "$(grep '^SUM' "$tmp/compare.out" | head -3)"
grep -q '^ISSUED' "$tmp/compare.out" && r=fail || r=ok
check "seed $seed: at March's first instant, the credit left is what the finalized February invoices left (less what was refunded out of band), late January events stored after it notwithstanding" \
    $r "$(grep '^ISSUED' "$tmp/compare.out" | head -3)"
seen=$(sed -n 's/^SEEN //p' "$tmp/compare.out")
r=ok
for what in exhausted account_credit history burning expiry issued; do
    case " $seen " in *" $what=0 "* | *" $what= "*) r=fail ;; esac
    case " $seen " in *" $what="*) ;; *) r=fail ;; esac
done
check "seed $seed: the scenario exercised exhausted credit, account credit, grants after finalized months, a burn, grant expiries ($seen)" $r

# The answer's form, with and without at, and a bad at.
for q in "?at=2026-02-15T00:00:00%2B08:00" ""; do
    code=$(curl -s -D "$tmp/h" -o "$tmp/b" -w '%{http_code}' -H "Authorization: Bearer $admin" \
        "$url/v1/accounts/acct-000003/balance$q")
    why=$(python3 "$srcdir/tests/openapi-check.py" --status 200 "$spec" GET /v1/accounts/{id}/balance \
        "$tmp/h" "$tmp/b" 2>&1) && [ "$code" = 200 ] && r=ok || r=fail
    check "GET .../balance${q:+ with at}: 200, as doc/openapi.yaml says" $r "$code $why"
done
code=$(curl -s -D "$tmp/h" -o "$tmp/b" -w '%{http_code}' -H "Authorization: Bearer $admin" \
    "$url/v1/accounts/acct-000003/balance?at=2026-02-30T00:00:00Z")
python3 "$srcdir/tests/openapi-check.py" --status 400 "$spec" GET /v1/accounts/{id}/balance \
    "$tmp/h" "$tmp/b" >/dev/null 2>&1 && [ "$code" = 400 ] &&
    grep -q "at '2026-02-30T00:00:00Z': expected an RFC 3339 instant" "$tmp/b" && r=ok || r=fail
check "a bad at: 400 naming it, as the command line says it" $r "$code $(cat "$tmp/b")"
$billing account balance acct-000003 --at 2026-02-30T00:00:00Z >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "at '2026-02-30T00:00:00Z': expected an RFC 3339 instant" "$tmp/err" && r=ok || r=fail
check "... and billing account balance --at the same: exit 2, the same words" $r "$(cat "$tmp/err")"
code=$(curl -s -o "$tmp/b" -w '%{http_code}' -H "Authorization: Bearer $admin" \
    "$url/v1/accounts/nobody/balance?at=2026-02-15T00:00:00Z")
$billing account balance nobody --format json >/dev/null 2>"$tmp/err"
cli_rc=$?
[ "$code" = 404 ] && [ $cli_rc -eq 3 ] && r=ok || r=fail
check "an unknown account: 404 from the API, exit 3 from billing account balance --format json" $r \
    "$code $cli_rc $(cat "$tmp/err")"

for p in $pids; do
    kill "$p" 2>/dev/null
done
rc=0
for p in $pids; do
    wait "$p" 2>/dev/null || rc=$?
done
pids=""
[ $rc -eq 0 ] && r=ok || r=fail
check "billingd exits 0 on SIGTERM" $r "$rc"
if grep -l "ERROR: AddressSanitizer\|runtime error:\|LeakSanitizer" "$tmp"/billingd-*.log >/dev/null 2>&1; then
    check "no sanitizer report in billingd's log" fail "$(grep -h -A5 "Sanitizer\|runtime error" "$tmp"/billingd-*.log | head -20)"
else
    check "no sanitizer report in billingd's log" ok
fi
finish
