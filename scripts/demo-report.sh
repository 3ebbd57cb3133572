# demo-report.sh - the results of scripts/demo.sh, sourced by it: the
# summary (every figure a SQL query on the demo database), a few invoices
# exported as PDF, JSON and CSV, and two pictures drawn by gnuplot.
# Uses demo.sh's variables: db_conninfo, topic, group, period, out,
# build, report, http_port.
# shellcheck shell=bash

# psql with a table layout for people.
table() { # TITLE SQL
    printf '\n%s\n' "$1"
    psql "$db_conninfo" -X -q -v ON_ERROR_STOP=1 -P footer=off -c "$2" | sed 's/^/   /'
}

# shorten_sql EXPR N: SQL for the text EXPR whole if it has at most N
# characters, else cut after its last word that fits N - 3 and "..." added
# (a word longer than that is cut where it must be).
shorten_sql() {
    local e=$1 n=$2
    printf "CASE WHEN length(%s) <= %d THEN %s ELSE coalesce(substring(left(%s, %d) FROM '^(.*\\S)\\s'), left(%s, %d)) || '...' END" \
        "$e" "$n" "$e" "$e" "$((n - 2))" "$e" "$((n - 3))"
}

month_filter="i.month = '$period-01' AND i.status = 'finalized'"

report_summary() {
    table "Accounts" "
        SELECT CASE split_part(id, '-', 1) WHEN 'stu' THEN 'students (10.00 trial)'
                    WHEN 'lab' THEN 'labs (a100x8-monthly)' WHEN 'team' THEN 'teams'
                    ELSE split_part(id, '-', 1) END AS kind,
               count(*) AS accounts
        FROM billing.accounts GROUP BY 1
        UNION ALL SELECT 'all', count(*) FROM billing.accounts ORDER BY 1"
    table "Revenue of $period per meter and currency (finalized invoices' lines)" "
        SELECT i.currency, l.kind AS line, coalesce(l.meter, l.plan_id) AS meter_or_plan,
               count(*) AS lines, sum(l.amount) AS amount
        FROM billing.invoices i JOIN billing.invoice_lines l ON l.invoice_id = i.id
        WHERE $month_filter GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
    table "Invoices of $period" "
        SELECT i.currency, count(*) AS invoices, sum(i.subtotal) AS subtotal,
               sum(i.credits) AS credits, sum(i.tax) AS tax, sum(i.total) AS total
        FROM billing.invoices i WHERE $month_filter GROUP BY 1"
    table "Trial credit (ledger entries of $period's invoices)" "
        SELECT l.entry, c.code AS currency, count(*) AS entries,
               round(-sum(l.amount_minor) / 10::numeric ^ c.digits, c.digits) AS amount
        FROM billing.credit_ledger l JOIN billing.invoices i ON i.id = l.invoice_id
        JOIN billing.currencies c ON c.code = i.currency
        WHERE $month_filter AND l.entry IN ('apply', 'expire') GROUP BY 1, 2, c.digits
        UNION ALL
        SELECT 'granted', a.currency, count(*), round(sum(g.amount), c.digits)
        FROM billing.credit_grants g JOIN billing.accounts a ON a.id = g.account_id
        JOIN billing.currencies c ON c.code = a.currency
        GROUP BY 2, c.digits ORDER BY 1"
    table "Credit alerts billingd published (topic $topic-alerts, loaded into public.demo_alerts)" "
        SELECT kind, split_part(alert_id, '/', 2) AS credit_used, threshold AS balance_threshold,
               count(*) AS alerts,
               count(DISTINCT account_id) AS accounts
        FROM public.demo_alerts GROUP BY 1, 2, 3 ORDER BY 3 DESC"
    table "Records of $topic (billing.kafka_offsets, usage_events, rejected_events)" "
        WITH c AS (SELECT sum(next_offset) AS n FROM billing.kafka_offsets
                   WHERE consumer_group = '$group' AND topic = '$topic'),
             s AS (SELECT count(*) AS n FROM billing.usage_events
                   WHERE source LIKE 'kafka:' || '$topic' || '/%'),
             r AS (SELECT count(*) AS n FROM billing.rejected_events WHERE kafka_topic = '$topic')
        SELECT c.n AS consumed, s.n AS stored, c.n - s.n - r.n AS duplicates, r.n AS rejected
        FROM c, s, r"
    table "Rejected records and why (billing rejected list)" "
        SELECT reason_code, count(*) AS records, $(shorten_sql 'min(reason)' 70) AS example
        FROM billing.rejected_events WHERE kafka_topic = '$topic' GROUP BY 1 ORDER BY 1"
    table "Reconciliation" "
        WITH t AS (SELECT sum(i.subtotal) AS subtotal, sum(i.credits) AS credits,
                          sum(i.tax) AS tax, sum(i.total) AS total
                   FROM billing.invoices i WHERE $month_filter),
             l AS (SELECT sum(l.amount) AS lines FROM billing.invoices i
                   JOIN billing.invoice_lines l ON l.invoice_id = i.id WHERE $month_filter)
        SELECT 'lines = subtotals' AS check, l.lines || ' = ' || t.subtotal AS figures,
               CASE WHEN l.lines = t.subtotal THEN 'ok' ELSE 'MISMATCH' END AS result FROM t, l
        UNION ALL
        SELECT 'subtotal - credits + tax = total', (t.subtotal - t.credits + t.tax) || ' = ' || t.total,
               CASE WHEN t.subtotal - t.credits + t.tax = t.total THEN 'ok' ELSE 'MISMATCH' END
        FROM t"
    printf '\n   The generator reported %s replays and %s malformed records (%s).\n' \
        "$(report_get replays)" "$(report_get malformed)" \
        "$(printf '%s\n' "$report" | awk '/^malformed\./ { sub("malformed.", "", $1); printf "%s%s %s", s, $1, $2; s = ", " }')"
}

# A student, a lab and a team: the largest invoice of each. export.log
# says which file each export wrote (a line per file, this run's only).
report_exports() {
    local dir=$out/invoices log=$out/export.log id number f file msg
    mkdir -p "$dir"
    : >"$log"
    printf '\nInvoices exported (PDF, JSON, CSV) into %s:\n' "$dir"
    for id in $(q "SELECT DISTINCT ON (split_part(i.account_id, '-', 1)) i.id
                   FROM billing.invoices i WHERE $month_filter
                   ORDER BY split_part(i.account_id, '-', 1), i.total DESC, i.id"); do
        number=$("$build/billing/billing" invoice show "$id" --format json | jq -r .number)
        for f in pdf json csv; do
            file=$dir/$number.$f
            msg=$("$build/billing/billing" invoice export "$id" --format "$f" --out "$dir" 2>&1 >/dev/null) &&
                [ -s "$file" ] || {
                printf '%s: export failed: %s\n' "$file" "$msg" >>"$log"
                billing_die "export of $file failed ($log)"
            }
            printf '%s: written (invoice id %s)\n' "$file" "$id" >>"$log"
        done
    done
    (cd "$dir" && ls -1 ./*.pdf | sed 's|^\./|   |; s|\.pdf$|.{pdf,json,csv}|')
    printf '   all invoices: %s/billing/billing invoice list --period %s\n' "$build" "$period"
}

# Usage at list price per local day and meter (subscriptions' included
# usage left out), and each term's fee on its first day. The same
# computation as the invoices' lines, done in SQL for the picture (the
# rounding to cents is per invoice line there, here only in the sum).
daily_sql="
WITH ev AS (
    SELECT e.meter, e.model, e.region, (e.start_time AT TIME ZONE a.time_zone)::date AS day,
           e.quantity * extract(epoch FROM e.end_time - e.start_time)::numeric AS qs
    FROM billing.usage_events e JOIN billing.accounts a ON a.id = e.account_id
    WHERE NOT EXISTS (
        SELECT 1 FROM billing.subscriptions s JOIN billing.plans p ON p.id = s.plan_id
        WHERE s.account_id = e.account_id AND s.resource_id = e.resource_id
          AND e.meter IN ('gpu', 'gpuless') AND e.start_time >= s.start_at
          AND e.start_time < s.start_at + s.terms * CASE p.period WHEN 'day'
              THEN interval '1 day' ELSE interval '1 month' END)),
priced AS (
    SELECT ev.day, ev.meter,
           ev.qs * r.price / CASE ev.meter WHEN 'storage' THEN 86400 * extract(day FROM
               date_trunc('month', ev.day) + interval '1 month - 1 day')::numeric
               ELSE 3600 END AS amount
    FROM ev JOIN billing.rates r ON r.meter = ev.meter AND r.model IN (ev.model, '*')
         AND r.region IN (ev.region, '*')
         AND r.version_id = (SELECT max(id) FROM billing.price_versions)),
fees AS (
    SELECT (s.start_at AT TIME ZONE a.time_zone)::date + (t * CASE p.period WHEN 'day' THEN 1
               ELSE 0 END) AS day, f.fee AS amount
    FROM billing.subscriptions s JOIN billing.plans p ON p.id = s.plan_id
    JOIN billing.accounts a ON a.id = s.account_id
    JOIN billing.plan_fees f ON f.plan_id = s.plan_id
         AND f.version_id = (SELECT max(id) FROM billing.price_versions)
    CROSS JOIN generate_series(0, s.terms - 1) t
    WHERE p.period = 'day' OR t = 0)
SELECT d::date,
       coalesce((SELECT sum(amount) FROM priced WHERE day = d AND meter = 'gpu'), 0)::numeric(14,2),
       coalesce((SELECT sum(amount) FROM priced WHERE day = d AND meter = 'gpuless'), 0)::numeric(14,2),
       coalesce((SELECT sum(amount) FROM priced WHERE day = d AND meter = 'storage'), 0)::numeric(14,2),
       coalesce((SELECT sum(amount) FROM fees WHERE day = d), 0)::numeric(14,2)
FROM generate_series(date '$period-01', date '$period-01' + interval '1 month - 1 day',
                     interval '1 day') d ORDER BY 1"

plot_daily() {
    local data=$out/revenue-per-day.dat
    local fees days
    psql "$db_conninfo" -X -q -A -t -F ' ' -v ON_ERROR_STOP=1 -c "$daily_sql" >"$data"
    # The day rows again as SQL, summed there: exact, where awk's sums
    # would be floating point.
    days="(VALUES $(awk '{ printf "%s(%s, %s, %s, %s)", (NR > 1 ? ", " : ""), $2, $3, $4, $5 }' "$data"))
          v(gpu, gpuless, storage, fee)"
    fees=$(q "SELECT sum(fee) FROM $days")
    gnuplot <<EOF
set terminal pngcairo size 1100,550 font "DejaVu Sans,10"
set output "$out/revenue-per-day.png"
set title "Usage revenue per day of $period by meter (CNY, list price, before credit and tax; plan fees of $fees not shown)"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.8
set key outside right top
set ylabel "CNY"
set xtics rotate by -60 font ",8"
set grid ytics
plot "$data" using 2:xtic(stringcolumn(1)[9:10]) title "gpu", \
     "" using 3 title "gpuless", "" using 4 title "storage"
EOF
    printf '   %s\n' "$out/revenue-per-day.png"
    table "Daily chart against the invoices (usage lines; the invoices round each line to cents)" "
        WITH d AS (SELECT 'gpu' AS meter, sum(gpu) AS chart FROM $days
                   UNION ALL SELECT 'gpuless', sum(gpuless) FROM $days
                   UNION ALL SELECT 'storage', sum(storage) FROM $days
                   UNION ALL SELECT 'fee', sum(fee) FROM $days),
        l AS (SELECT coalesce(l.meter, 'fee') AS meter, sum(l.amount) AS invoices
              FROM billing.invoices i JOIN billing.invoice_lines l ON l.invoice_id = i.id
              WHERE $month_filter AND l.kind IN ('usage', 'fee') GROUP BY 1)
        SELECT d.meter, d.chart, l.invoices, d.chart - l.invoices AS difference
        FROM d LEFT JOIN l USING (meter) ORDER BY 1"
}

# RFC 3339 in UTC, for SQL.
utc="'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'"

# place_labels FIRST LAST (epoch seconds of the picture's x range): the
# alert marks "TIME BALANCE LABEL EPOCH" on stdin, in time order, out as
# "TIME BALANCE LABEL LABEL_Y": each label half a unit (about a line) above
# its point, and raised further while it would touch an earlier label. Two
# labels touch when their centres are closer than their half widths plus
# a margin across (7 px a character, the 1000 px picture's plot at least
# 850 px wide) and closer than 0.6 CNY up and down (at least 18 px, a line
# of the 10 pt font being 14). Alerts crossed in one batch, or minutes
# apart, thus stack instead of printing "80%" over "100%".
place_labels() {
    awk -v first="$1" -v last="$2" '
        BEGIN { span = last > first ? last - first : 1 }
        {
            x[NR] = ($4 - first) / span * 850; w[NR] = length($3) * 7
            y[NR] = $2 + 0.5
            do {
                moved = 0
                for (j = 1; j < NR; j++) {
                    dx = x[NR] - x[j]; dy = y[NR] - y[j]
                    if (dx < 0) dx = -dx
                    if (dy < 0) dy = -dy
                    if (dx < (w[NR] + w[j]) / 2 + 7 && dy < 0.6) {
                        y[NR] = y[j] + 0.6; moved = 1
                    }
                }
            } while (moved)
            printf "%s %s %s %.2f\n", $1, $2, $3, y[NR]
        }'
}

# One trial account's credit, exact, at its grant and at the end of each
# of its records until the credit is gone: `billing rate --at` over its
# events as stored (`billing account balance --at` cannot: it rates the
# month's stored aggregates, which hold no instants).
plot_credit() {
    local acct data=$out/credit-burn-down.dat marks=$out/credit-alerts.dat t events left t0 t1
    acct=$(q "SELECT account_id FROM public.demo_alerts WHERE kind = 'exhausted'
              AND account_id IN (SELECT account_id FROM public.demo_alerts GROUP BY 1
                                 HAVING count(*) >= 2)
              ORDER BY account_id LIMIT 1")
    [ -n "$acct" ] || acct=$(q "SELECT account_id FROM public.demo_alerts ORDER BY 1 LIMIT 1")
    if [ -z "$acct" ]; then
        printf '   (no credit alert was published: no burn-down picture)\n'
        return
    fi
    events=$out/$acct.events.jsonl
    q "SELECT json_build_object('id', event_id, 'account', account_id, 'resource', resource_id,
              'meter', meter, 'start', to_char(start_time AT TIME ZONE 'UTC', $utc),
              'end', to_char(end_time AT TIME ZONE 'UTC', $utc), 'quantity', quantity::text,
              'model', model, 'region', region)
       FROM billing.usage_events WHERE account_id = '$acct' ORDER BY start_time, event_id" >"$events"
    : >"$data"
    for t in $(q "SELECT to_char(g.granted_at AT TIME ZONE 'UTC', $utc)
                  FROM billing.credit_grants g WHERE g.account_id = '$acct'
                  UNION
                  SELECT to_char(e.end_time AT TIME ZONE 'UTC', $utc)
                  FROM billing.usage_events e JOIN billing.credit_grants g
                       ON g.account_id = e.account_id
                  WHERE e.account_id = '$acct' AND e.meter <> 'traffic'
                    AND e.end_time > g.granted_at AND e.end_time <= g.expires_at
                  ORDER BY 1"); do
        left=$("$build/billing/billing" rate --pricebook "$BILLING_ROOT/examples/gpu-cloud/pricebook.json" \
            --accounts "$out/accounts.json" --account "$acct" --at "$t" --format json "$events" |
            jq -r '.credit[0].credit_left // "0"')
        printf '%s %s\n' "$t" "$left" >>"$data"
        [ "$left" != 0 ] || break
    done
    # Each alert at its crossing: the threshold the credit reached at
    # crossed_at, which lies on the burn-down line. (Its balance field is
    # the credit left after the batch that raised it: 0 for every alert of
    # an account whose whole month came in one batch.)
    q "SELECT to_char(crossed_at AT TIME ZONE 'UTC', $utc), threshold, regexp_replace(split_part(alert_id, '/', 2), 'pct$', '%'),
              extract(epoch FROM crossed_at)::bigint
       FROM public.demo_alerts WHERE account_id = '$acct' ORDER BY crossed_at, alert_id" |
        tr '|' ' ' >"$marks.tmp"
    t0=$(head -1 "$data" | cut -d' ' -f1)
    t1=$(tail -1 "$data" | cut -d' ' -f1)
    place_labels "$(date -u -d "$t0" +%s)" "$(date -u -d "$t1" +%s)" <"$marks.tmp" >"$marks"
    rm -f "$marks.tmp"
    gnuplot <<EOF
set terminal pngcairo size 1000,500 font "DejaVu Sans,10"
set output "$out/credit-burn-down.png"
set title "$acct: trial credit left (billing rate --at over its stored events), and billingd's alerts"
set xdata time
set timefmt "%Y-%m-%dT%H:%M:%SZ"
set format x "%m-%d\n%H:%M"
set ylabel "CNY left"
set xrange ["$t0":"$t1"]
set yrange [-0.5:11]
set grid
set key top right
plot "$data" using 1:2 with steps lw 2 title "credit remaining", \
     "$marks" using 1:2 with points pt 7 ps 1.5 title "alert (its threshold, at crossed_at)", \
     "$marks" using 1:4:3 with labels notitle
EOF
    printf '   %s (%s, %s balance points, %s alerts)\n' "$out/credit-burn-down.png" "$acct" \
        "$(wc -l <"$data")" "$(wc -l <"$marks")"
}

report_look() {
    printf '\nLook at it yourself:\n'
    printf '   psql %s\n' "$(billing_shquote "$db_conninfo")"
    printf '     e.g. SELECT * FROM billing.invoices ORDER BY total DESC LIMIT 5;\n'
    printf '   curl -s http://127.0.0.1:%s/metrics   (while billingd runs: scripts/demo.sh --serve;\n' \
        "$http_port"
    printf '     the copy taken when it caught up: %s)\n' "$out/metrics.txt"
    printf '   %s/billing/billing rejected list --db %s\n' "$build" "$(billing_shquote "$db_conninfo")"
    if [ -n "${api_curl:-}" ]; then
        printf '   %s\n' "$api_curl"
        printf '     (the HTTP API while billingd runs: scripts/demo.sh --serve; doc/http-api.md;\n'
        printf '     its answer when billingd caught up: %s, credit_remaining %s)\n' \
            "$out/balance.json" "$(sed -n 's/.*"credit_remaining": *"\([^"]*\)".*/\1/p' "$out/balance.json")"
    fi
}

report_all() {
    report_summary
    report_exports
    printf '\nPictures:\n'
    plot_daily
    plot_credit
    report_look
}
