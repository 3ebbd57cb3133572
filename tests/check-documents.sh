#!/bin/sh
# check-documents.sh - the invoice documents a customer receives (issue 27),
# against the private PostgreSQL (BILLING_PG_CONNINFO; without it the test
# FAILS, never skips). Closes the example month, fills the parties with
# SQL (loading them is `billing load`'s), exports PDF, CSV and JSON and
# reads the PDFs' text with pdftotext:
#   - the seller block (and logo) comes from billing.issuers of the price book, the
#     customer block from the account (name, address, tax id, e-mail);
#   - lines are described per meter, model and region, quantities shown
#     with the digits of their unit (doc/formats.md, "Invoice documents");
#   - issue date, period in the account's zone, due date = issue date +
#     the issuer's payment terms; the account credit left;
#   - a 500-line invoice flows over pages, each "Page n of N";
#   - a credit note names the invoice it credits and why; a voided
#     invoice says VOID with its reason;
#   - an account whose language is zh-Hans gets Chinese labels;
#   - every amount and shown quantity of the JSON is in the PDF's text;
#   - every PDF passes qpdf --check; text beyond ASCII (accents, Greek,
#     an emoji, CJK) comes back from it whole.
# Prints a Check-style summary line.
set -u
builddir=$(cd "${top_builddir:-..}" && pwd) || exit 99
srcdir=$(cd "${top_srcdir:-..}" && pwd) || exit 99
billing="${BILLING_TEST_WRAP:-} $builddir/billing/billing"
ex="$srcdir/examples/gpu-cloud"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/billing-documents.XXXXXX") || exit 99
db="billing_documents_$$"

. "$srcdir/tests/checklib.sh"

if [ -z "${BILLING_PG_CONNINFO:-}" ]; then
    check "BILLING_PG_CONNINFO is set (scripts/services.sh start && . var/services.env)" fail
    finish
fi
command -v pdftotext >/dev/null || { check "pdftotext (poppler-utils) is installed" fail; finish; }
command -v qpdf >/dev/null || { check "qpdf is installed (scripts/install-deps.sh)" fail; finish; }
base=$BILLING_PG_CONNINFO
trap 'rm -rf "$tmp"; psql "$base dbname=postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1' EXIT
psql "$base dbname=postgres" -qc "CREATE DATABASE $db" >/dev/null || exit 99
BILLING_PG_CONNINFO="$base dbname=$db"
export BILLING_PG_CONNINFO
sql() { psql "$BILLING_PG_CONNINFO" -XAtq -v ON_ERROR_STOP=1 "$@"; }
$billing db migrate >/dev/null || exit 99
$billing load --pricebook "$ex/pricebook.json" --accounts "$ex/accounts.json" >/dev/null || exit 99
$billing ingest "$ex/events.jsonl" >/dev/null 2>&1 || exit 99

# The parties (the example's issuer, loaded above, is overwritten with
# these figures); any PNG serves as the logo.
logo=$(od -An -v -tx1 "$srcdir/doc/credit-note-example.png" | tr -d ' \n')
sql <<'SQL' || exit 99
INSERT INTO billing.issuers (book_id, legal_name, address, tax_id, contact, payment_instructions,
                             footer, payment_terms_days)
SELECT id, 'Example GPU Cloud Ltd.', E'1 Compute Road\nShanghai 200000', 'CN91310000EX',
       'billing@gpu.example', E'Bank transfer to ICBC 6222 0000 1111\nReference: the invoice number',
       'Example GPU Cloud Ltd. - questions: billing@gpu.example', 15
FROM billing.price_books
ON CONFLICT (book_id) DO UPDATE SET legal_name = EXCLUDED.legal_name, address = EXCLUDED.address,
       tax_id = EXCLUDED.tax_id, contact = EXCLUDED.contact,
       payment_instructions = EXCLUDED.payment_instructions, footer = EXCLUDED.footer,
       payment_terms_days = EXCLUDED.payment_terms_days;
UPDATE billing.accounts SET name = 'Lab A Research', email = 'ap@lab-a.example',
       billing_address = E'7 Campus Way\nHangzhou 310000', tax_id = 'LABA-TAX-42' WHERE id = 'lab-a';
UPDATE billing.accounts SET name = '学生乙', language = 'zh-Hans' WHERE id = 'student-b';
-- A refundable monthly term on an idle instance, cancelled inside it: a
-- fee and a refund line of the unused span on lab-a's January invoice.
INSERT INTO billing.subscriptions (id, account_id, resource_id, plan_id, start_at, terms, cancelled_at)
VALUES ('sub-doc-refund', 'lab-a', 'i-idle', 'rtx4090x8-monthly', '2026-01-10T00:00:00+08:00', 1,
        '2026-01-20T12:30:00+08:00');
SQL
sql -c "UPDATE billing.issuers SET logo_png = decode('$logo', 'hex')" || exit 99
$billing close --period 2026-01 --finalize --grace 0 --quiet >/dev/null 2>&1 || exit 99
$billing invoice void INV-2026-000002 --reason "wrong rate applied" >/dev/null 2>&1 || exit 99
for f in pdf json csv; do
    $billing invoice export --format $f --out "$tmp/$f" --period 2026-01 >/dev/null 2>&1 || exit 99
done
for p in "$tmp"/pdf/*.pdf; do pdftotext -layout "$p" "${p%.pdf}.txt" || exit 99; done
# Every PDF well formed (cross-reference table, objects, deflated streams)
# by a second reader than poppler, which repairs much of it in silence.
bad=
for p in "$tmp"/pdf/*.pdf; do qpdf --check "$p" >/dev/null 2>&1 || bad="$bad $(basename "$p")"; done
[ -z "$bad" ] && r=ok || r=fail
check "every PDF passes qpdf --check$bad" $r

# has NAME FILE STRING...: every STRING is in FILE (fixed strings).
has() {
    name=$1
    file=$2
    shift 2
    miss=
    for s in "$@"; do
        grep -qF -- "$s" "$file" || miss="$miss [$s]"
    done
    [ -z "$miss" ] && r=ok || r=fail
    check "$name" $r "missing:$miss"
}

# Which invoice is whose: the numbers follow the account order.
num_of() { jq -r "select(.account == \"$1\" and .kind == \"invoice\") | .number" "$tmp"/json/*.json; }
a=$(num_of lab-a)
b=$(num_of student-b)
v=INV-2026-000002
cn=$(jq -r 'select(.kind == "credit_note") | .number' "$tmp"/json/*.json)
A="$tmp/pdf/$a.txt"
has "seller block from billing.issuers ($a)" "$A" "Example GPU Cloud Ltd." "1 Compute Road" \
    "Shanghai 200000" "Tax ID CN91310000EX" "billing@gpu.example"
has "customer block: name, address, tax id, e-mail" "$A" "Lab A Research" "7 Campus Way" \
    "Hangzhou 310000" "Tax ID LABA-TAX-42" "ap@lab-a.example" "Account lab-a"
has "readable lines: described per meter, model and region" "$A" \
    "GPU time, A100 80GB, cn-east-1" "GPU-less instance time" "Persistent disk, cn-east-1" \
    "Traffic (free)" "Plan 8×RTX 4090 monthly, RTX 4090, cn-east-1"
has "quantities with the digits of their unit" "$A" "1,935.484" "4,355.420" "100.000"
grep -qE "60000/31|4355\.420304723" "$A" && r=fail || r=ok
check "no raw fractions or long decimals in the PDF" $r
# The refund says what it refunds: the unused span of the term, from the
# cancellation (in the account's zone), and JSON/CSV keep the exact span.
has "a refund line names its unused span and where it starts" "$A" \
    "Unused 20 d 11 h 30 min of plan 8×RTX 4090 monthly" "from 2026-01-20 12:30, RTX 4090, cn-east-1"
r=$(jq -r '.lines[] | select(.kind == "refund") | .unused_from + " " + .unused_to' "$tmp/json/$a.json")
[ "$r" = "2026-01-20T04:30:00Z 2026-02-09T16:00:00Z" ] && r=ok || r="fail"
check "JSON refund line: unused_from and unused_to as billing rate writes them" $r
r=$(jq -r '[.lines[] | select(.kind != "refund") | .unused_from + .unused_to] | join("")' "$tmp/json/$a.json")
[ -z "$r" ] && r=ok || r=fail
check "JSON: no unused span on other lines" $r
grep -q '2026-01-20T04:30:00Z,2026-02-09T16:00:00Z' "$tmp/csv/$a.csv" && r=ok || r=fail
check "CSV refund line has its unused span" $r
issue=$(jq -r .issue_date "$tmp/json/$a.json")
due=$(date -u -d "$issue + 15 days" +%Y-%m-%d)
has "issue date, period in the account's zone, due date = issue + 15 days ($due)" "$A" \
    "Issue date: $issue" "Due date: $due" "Period: 2026-01 (2026-01-01 – 2026-01-31)"
[ "$(jq -r .due_date "$tmp/json/$a.json")" = "$due" ] && r=ok || r=fail
check "JSON due_date is the PDF's" $r
has "account credit left and payment instructions" "$A" \
    "Account credit left after this invoice" "Bank transfer to ICBC 6222 0000 1111" \
    "Page 1 of 1" "Example GPU Cloud Ltd. - questions"
[ "$(pdfimages -list "$tmp/pdf/$a.pdf" 2>/dev/null | awk 'NR > 2' | wc -l)" -ge 1 ] && r=ok || r=fail
check "the issuer's logo is drawn" $r
has "a credit note says what it credits and why ($cn)" "$tmp/pdf/$cn.txt" "CREDIT NOTE" \
    "Credits invoice: $v" "Reason: wrong rate applied" "Total credited"
grep -q "Due date" "$tmp/pdf/$cn.txt" && r=fail || r=ok
check "a credit note has no due date" $r
has "a voided invoice is marked VOID with its reason" "$tmp/pdf/$v.txt" "VOID" \
    "Voided: wrong rate applied" "Amount due (void: nothing to pay)"
has "Chinese labels for a zh-Hans account ($b)" "$tmp/pdf/$b.txt" "发票" "学生乙" "收票方" \
    "应付金额" "第 1 页，共 1 页"
grep -q "Amount due" "$tmp/pdf/$b.txt" && r=fail || r=ok
check "no English labels on the Chinese invoice" $r
has "display names in the account's language, English ones as fallback ($b)" "$tmp/pdf/$b.txt" \
    "GPU 时长, RTX 4090, 华东一区（上海）"

# Display names are loaded with the price book: a reload changes nothing, a
# renamed model is one change and shows on the next export; a bad name is
# refused naming its field.
$billing load --pricebook "$ex/pricebook.json" > "$tmp/load1.out" 2>&1
grep -q '^display names   0 added, 0 changed, 12 unchanged$' "$tmp/load1.out" && r=ok || r=fail
check "reloading the display names changes nothing" $r "$(cat "$tmp/load1.out")"
jq '.names.models["A100-80G"] = "NVIDIA A100 80 GB"' "$ex/pricebook.json" > "$tmp/renamed.json"
cp "$ex/logo.png" "$tmp/logo.png"
$billing load --pricebook "$tmp/renamed.json" > "$tmp/load2.out" 2>&1
grep -q '^display names   0 added, 1 changed, 11 unchanged$' "$tmp/load2.out" && r=ok || r=fail
check "a renamed model is one change" $r "$(cat "$tmp/load2.out")"
$billing invoice export --format pdf --out "$tmp/pdf2" "$a" >/dev/null 2>&1 &&
    pdftotext -layout "$tmp/pdf2/$a.pdf" - | grep -qF "GPU time, NVIDIA A100 80 GB, cn-east-1" &&
    r=ok || r=fail
check "the new name shows on the next export" $r
jq '.names.plans["a100x8-daily"] = {"zh-Hans": "包日"}' "$ex/pricebook.json" > "$tmp/bad.json"
$billing load --pricebook "$tmp/bad.json" > "$tmp/load3.out" 2>&1
grep -q 'names.plans.a100x8-daily.en: missing' "$tmp/load3.out" && r=ok || r=fail
check "a display name without English is refused, naming the field" $r "$(cat "$tmp/load3.out")"

# Every figure of the PDF is the JSON's: amounts, shown quantities, totals.
bad=
for j in "$tmp"/json/*.json; do
    t="$tmp/pdf/$(basename "$j" .json).txt"
    for s in $(jq -r '(.lines[] | .amount, .quantity_shown), .subtotal, .tax, .total,
                      .before_credit, .taxable' "$j"); do
        grep -qF -- "$s" "$t" || bad="$bad $(basename "$j"):$s"
    done
done
[ -z "$bad" ] && r=ok || r=fail
check "every amount and quantity of the JSON is in the PDF" $r "$bad"
head -1 "$tmp/csv/$a.csv" | grep -q ',description,quantity_shown' &&
    grep -qF 'GPU time, A100 80GB, cn-east-1' "$tmp/csv/$a.csv" && r=ok || r=fail
check "CSV has the description and shown quantity" $r

# A 500-line invoice (a draft written as a close would) flows over pages.
id=$(sql <<'SQL'
WITH inv AS (INSERT INTO billing.invoices (account_id, currency, month, period_start, period_end,
                                           subtotal, total)
  SELECT id, currency, '2026-02-01', '2026-02-01T00:00:00+08', '2026-03-01T00:00:00+08', 5.00, 5.00
  FROM billing.accounts WHERE id = 'team-c' RETURNING id),
l AS (INSERT INTO billing.invoice_lines (invoice_id, line_no, kind, meter, model, region,
                                         quantity, unit, unit_price, amount)
  SELECT inv.id, g, 'usage', 'storage', '*', 'region-' || g, 1, 'GB-month', 0.01, 0.01
  FROM inv, generate_series(1, 500) g)
SELECT id FROM inv;
SQL
) || exit 99
$billing invoice export "$id" --format pdf --out "$tmp/long" >/dev/null 2>&1
pdftotext -layout "$tmp/long/draft-$id.pdf" "$tmp/long.txt" 2>/dev/null
pages=$(grep -c "Page [0-9]* of " "$tmp/long.txt")
n=$(grep -cE "^ *[0-9]+ +Persistent disk, region-[0-9]+ " "$tmp/long.txt")
[ "$pages" -ge 2 ] && grep -q "Page 1 of $pages" "$tmp/long.txt" &&
    grep -q "Page $pages of $pages" "$tmp/long.txt" && [ "$n" -eq 500 ] &&
    grep -q "region-500 " "$tmp/long.txt" && grep -q "Amount due" "$tmp/long.txt" && r=ok || r=fail
check "a 500-line invoice flows over $pages pages, every line and 'Page n of N' on each ($n lines)" $r
[ "$(grep -c "Description" "$tmp/long.txt")" -eq "$pages" ] && r=ok || r=fail
check "the line table's head is repeated on every page" $r

# Characters beyond the ASCII font made once per run (pdfwrite.c's F0):
# Latin letters with accents and Greek (per-document Latin subset), a
# character outside the BMP (UTF-16 surrogates in the ToUnicode map)
# beside CJK: the text comes back whole, and the file stays well formed.
sql -c "UPDATE billing.accounts SET name = 'Équipe C — Zürich αβγ 😀 丙' WHERE id = 'team-c'" ||
    exit 99
$billing invoice export --format pdf --out "$tmp/uni" --period 2026-01 >/dev/null 2>&1
r=fail
for p in "$tmp"/uni/*.pdf; do
    pdftotext -layout "$p" - 2>/dev/null | grep -qF "Équipe C — Zürich αβγ 😀 丙" &&
        qpdf --check "$p" >/dev/null 2>&1 && r=ok
done
check "a name in accented Latin, Greek, an emoji and CJK comes back whole from the PDF" $r

# Pictures for doc/ (DOC_PICTURES=DIR): a typical invoice and a credit note.
if [ -n "${DOC_PICTURES:-}" ]; then
    pdftoppm -r 60 -png -singlefile "$tmp/pdf/$a.pdf" "$DOC_PICTURES/invoice-example"
    pdftoppm -r 60 -png -singlefile "$tmp/pdf/$cn.pdf" "$DOC_PICTURES/credit-note-example"
fi
finish
