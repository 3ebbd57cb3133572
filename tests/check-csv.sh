#!/bin/sh
# check-csv.sh - no cell of `billing rate --format csv` runs as a formula.
#
# Account ids such as =HYPERLINK(...), +cmd|'/C_calc'!A0 or @SUM(1+1) are
# valid identifiers, and at 849ae71 the CSV carried them as they are: a
# spreadsheet opening the file ran them (OWASP "CSV Injection"). Every
# cell beginning with = + - @ tab or CR is now quoted with a leading
# single quote, except a plain number (-?digits[.digits]), so negative
# amounts stay numbers (doc/formats.md, "CSV"). itest_close checks the
# same through `billing invoice export --format csv`.
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="$builddir/billing/billing"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-csv.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
. "$srcdir/tests/checklib.sh"

cat >"$tmp/pricebook.json" <<'JSON'
{"currency": "CNY",
 "versions": [{"id": "v1", "effective_from": "2026-01-01T00:00:00Z",
   "rates": [{"meter": "gpu", "model": "*", "region": "*", "price": "0.60"}]}]}
JSON
cat >"$tmp/accounts.json" <<'JSON'
{"accounts": [
  {"id": "=HYPERLINK(\"http://evil.example\",\"x\")", "currency": "CNY", "time_zone": "UTC", "tax_rate": "0"},
  {"id": "+cmd|'/C_calc'!A0", "currency": "CNY", "time_zone": "UTC", "tax_rate": "0"},
  {"id": "@SUM(1+1)", "currency": "CNY", "time_zone": "UTC", "tax_rate": "0"}],
 "grants": [{"id": "-2+3", "account": "@SUM(1+1)", "amount": "1.00",
   "granted_at": "2026-01-01T00:00:00Z", "expires_at": "2027-01-01T00:00:00Z",
   "applies_to": ["usage"]}]}
JSON
for a in '=HYPERLINK(\"http://evil.example\",\"x\")' "+cmd|'/C_calc'!A0" '@SUM(1+1)'; do
    n=$((${n:-0} + 1))
    printf '{"id":"e%d","account":"%s","resource":"r","meter":"gpu","start":"2026-01-05T00:00:00Z","end":"2026-01-05T10:00:00Z","quantity":"1"}\n' \
        "$n" "$a"
done >"$tmp/events.jsonl"

# ${BILLING_TEST_WRAP} is words (valgrind and its options).
# shellcheck disable=SC2086
${BILLING_TEST_WRAP:-} "$billing" rate --pricebook "$tmp/pricebook.json" \
    --accounts "$tmp/accounts.json" --format csv "$tmp/events.jsonl" >"$tmp/out.csv" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ]; then check "billing rate --format csv runs" ok; else
    check "billing rate --format csv runs" fail "exit $rc: $(cat "$tmp/err")"; fi

# has NAME TEXT: the CSV holds TEXT (fixed string).
has() {
    if grep -qF -- "$2" "$tmp/out.csv"; then check "$1" ok; else
        check "$1" fail "no $2 in: $(cat "$tmp/out.csv")"; fi
}
has "=HYPERLINK account quoted with a leading quote" \
    '"'"'"'=HYPERLINK(""http://evil.example"",""x"")",2026-01,'
has "+cmd account quoted with a leading quote" '"'"'"'+cmd|'"'"'/C_calc'"'"'!A0",2026-01,'
has "@SUM account quoted with a leading quote" '"'"'"'@SUM(1+1)",2026-01,'
has "grant id starting with - quoted with a leading quote" ',"'"'"'-2+3"'
has "a negative amount stays a plain number" ',credit,,,,,,,,,,,,-1.00,-1.00,'

# Whatever the ids, no cell starts a formula: every cell that begins with
# one of = + - @ (after its opening quote, if quoted) is a plain number.
bad=$(awk -v q='"' '
    function cell_ok(c) {
        if (substr(c, 1, 1) == q) c = substr(c, 2)
        if (c ~ /^[=+@\t\r-]/ && c !~ /^-[0-9]+(\.[0-9]+)?$/) return 0
        return 1
    }
    NR > 1 {
        line = $0
        sub(/\r$/, "", line) # the CRLF row end
        while (length(line) > 0) {
            if (substr(line, 1, 1) == q) {
                match(line, /^"([^"]|"")*"/); c = substr(line, 1, RLENGTH); line = substr(line, RLENGTH + 1)
            } else {
                i = index(line, ","); if (i == 0) i = length(line) + 1
                c = substr(line, 1, i - 1); line = substr(line, i)
            }
            if (!cell_ok(c)) print NR ": " c
            if (substr(line, 1, 1) == ",") line = substr(line, 2)
        }
    }' "$tmp/out.csv")
if [ -z "$bad" ]; then check "no cell starts a formula" ok; else
    check "no cell starts a formula" fail "$bad"; fi
finish
