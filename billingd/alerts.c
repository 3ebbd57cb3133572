/*
 * alerts.c - live credit alerts. See alerts.h.
 *
 * Amounts are compared exactly (GMP rationals from the library's exact
 * decimal or "p/q" text); nothing is rounded.
 */
#include "config.h"

#include <gmp.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alerts.h"
#include "billing/v1/credit_alert.pb-c.h"
#include "log.h"
#include "producer.h"
#include "takeback.h"

#define MSG_MAX 512
#define AMOUNT_MAX 256
#define FLUSH_MS 15000
/* Accounts with credit examined per batch; more are logged and skipped. */
#define ACCOUNTS_MAX 256
#define THRESHOLDS_MAX 16
#define RUNNING_MAX 64

#define SQL_CREDIT_ACCOUNTS "SELECT DISTINCT account_id FROM billing.credit_grants"
/* $2: microseconds since the epoch, turned into an instant exactly (no float to_timestamp). */
#define AT_US "(timestamptz 'epoch' + $2::bigint * interval '1 microsecond')"
#define SQL_GRANTED                                                                            \
    "SELECT coalesce(sum(g.amount), 0)::text, a.currency FROM billing.accounts a"              \
    " LEFT JOIN billing.credit_grants g ON g.account_id = a.id"                                \
    " AND g.granted_at <= " AT_US " AND g.expires_at > " AT_US                                 \
    " WHERE a.id = $1::text GROUP BY a.currency"

struct bd_alerts {
    rd_kafka_t *rk;
    const char *topic;
    bs_catalog **cat;
    int thresholds[THRESHOLDS_MAX];
    size_t n_thresholds;
    int failed;
};

/* One account of the batch that has credit. */
typedef struct touched {
    const char *account; /* owned by the credit-accounts result */
    billing_time_t last; /* latest end of its records in the batch */
    size_t last_rec;     /* the record that ends last */
} touched;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    bd_alerts *a = opaque;

    (void)rk;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        a->failed++;
        bd_log("error", "alert_failed", "error=%s", bd_q(rd_kafka_err2str(m->err)));
    }
}

static int parse_thresholds(bd_alerts *a, const char *list)
{
    char buf[256];
    char *save = NULL;
    char *t;
    char *end;
    long v;

    snprintf(buf, sizeof(buf), "%s", list);
    for (t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        v = strtol(t, &end, 10);
        if (*end != '\0' || v < 1 || v > 100 || a->n_thresholds == THRESHOLDS_MAX)
            return -1;
        a->thresholds[a->n_thresholds++] = (int)v;
    }
    return a->n_thresholds > 0 ? 0 : -1;
}

bd_alerts *bd_alerts_new(const bd_config *cfg, bs_catalog **cat)
{
    char errstr[MSG_MAX] = "out of memory";
    bd_alerts *a = calloc(1, sizeof(*a));

    if (a == NULL)
        goto error;
    a->topic = cfg->alerts_topic;
    a->cat = cat;
    if (parse_thresholds(a, cfg->alerts_thresholds ? cfg->alerts_thresholds : "50,80,100")) {
        snprintf(errstr, sizeof(errstr), "alerts.thresholds: need 1..16 percents in 1..100");
        goto error;
    }
    a->rk = bd_producer_new(cfg, on_delivery, a, errstr, sizeof(errstr));
    if (a->rk == NULL)
        goto error;
    return a;
error:
    bd_log("error", "alerts_start_failed", "error=%s", bd_q(errstr));
    free(a);
    return NULL;
}

void bd_alerts_free(bd_alerts *a)
{
    if (a == NULL)
        return;
    rd_kafka_flush(a->rk, FLUSH_MS);
    rd_kafka_destroy(a->rk);
    free(a);
}

/* ---------------------------------------------------------------------- */
/* Exact amounts                                                           */
/* ---------------------------------------------------------------------- */

/* "12.5", "-3", "7/3" into @q; 0 or -1. */
static int q_parse(mpq_t q, const char *text)
{
    char digits[AMOUNT_MAX];
    const char *dot = strchr(text, '.');
    size_t frac;
    size_t n;

    if (strchr(text, '/') != NULL || dot == NULL) {
        if (mpq_set_str(q, text, 10) != 0)
            return -1;
        mpq_canonicalize(q);
        return 0;
    }
    n = (size_t)(dot - text);
    frac = strlen(dot + 1);
    if (n + frac + 1 > sizeof(digits))
        return -1;
    memcpy(digits, text, n);
    memcpy(digits + n, dot + 1, frac + 1);
    if (mpz_set_str(mpq_numref(q), digits, 10) != 0)
        return -1;
    mpz_ui_pow_ui(mpq_denref(q), 10, frac);
    mpq_canonicalize(q);
    return 0;
}

/* @q (a finite decimal) as text, at most 12 fraction digits, into @buf. */
static void q_decimal(const mpq_t q, char *buf, size_t size)
{
    mpz_t scaled;
    mpz_t scale;
    char *s;
    size_t len;
    int k;

    mpz_init(scaled);
    mpz_init(scale);
    for (k = 0; k < 12; k++) {
        mpz_ui_pow_ui(scale, 10, (unsigned long)k);
        mpz_mul(scaled, mpq_numref(q), scale);
        if (mpz_divisible_p(scaled, mpq_denref(q)))
            break;
    }
    mpz_divexact(scaled, scaled, mpq_denref(q));
    s = mpz_get_str(NULL, 10, scaled);
    len = strlen(s);
    if (k == 0)
        snprintf(buf, size, "%s", s);
    else if (len > (size_t)k)
        snprintf(buf, size, "%.*s.%s", (int)(len - (size_t)k), s, s + len - (size_t)k);
    else
        snprintf(buf, size, "0.%0*d%s", k - (int)len, 0, s);
    free(s);
    mpz_clear(scaled);
    mpz_clear(scale);
}

/* ---------------------------------------------------------------------- */
/* One account                                                             */
/* ---------------------------------------------------------------------- */

static void stamp(Billing__V1__Timestamp *ts, billing_time_t t)
{
    billing__v1__timestamp__init(ts);
    ts->seconds = t / BILLING_NS_PER_SEC;
    ts->nanos = (int32_t)(t % BILLING_NS_PER_SEC);
    if (ts->nanos < 0) {
        ts->nanos += (int32_t)BILLING_NS_PER_SEC;
        ts->seconds--;
    }
}

typedef struct crossing {
    const char *account;
    const char *currency;
    const char *granted;
    const char *balance;
    const char *event_id;
    billing_time_t at;
    billing_time_t exhausted; /* INT64_MAX: nothing running */
} crossing;

static rd_kafka_resp_err_t publish(bd_alerts *a, const crossing *x, int pct, const mpq_t level)
{
    Billing__V1__CreditAlert m = BILLING__V1__CREDIT_ALERT__INIT;
    Billing__V1__Timestamp crossed;
    Billing__V1__Timestamp exhausted;
    char id[512];
    char threshold[AMOUNT_MAX];
    uint8_t *buf;
    size_t len;
    rd_kafka_resp_err_t e;

    q_decimal(level, threshold, sizeof(threshold));
    snprintf(id, sizeof(id), "%s/%dpct/%s", x->account, pct, x->granted);
    m.alert_id = id;
    m.account_id = (char *)x->account;
    m.kind = pct >= 100 ? BILLING__V1__ALERT_KIND__ALERT_KIND_EXHAUSTED
                        : BILLING__V1__ALERT_KIND__ALERT_KIND_LOW;
    m.balance = (char *)x->balance;
    m.threshold = threshold;
    m.currency = (char *)x->currency;
    stamp(&crossed, x->at);
    m.crossed_at = &crossed;
    if (x->exhausted != INT64_MAX) {
        stamp(&exhausted, x->exhausted);
        m.exhausted_at = &exhausted;
    }
    m.event_id = (char *)x->event_id;
    len = billing__v1__credit_alert__get_packed_size(&m);
    buf = malloc(len + 1);
    if (buf == NULL)
        return RD_KAFKA_RESP_ERR__NOENT;
    billing__v1__credit_alert__pack(&m, buf);
    e = rd_kafka_producev(a->rk, RD_KAFKA_V_TOPIC(a->topic), RD_KAFKA_V_KEY(id, strlen(id)),
                          RD_KAFKA_V_VALUE(buf, len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE),
                          RD_KAFKA_V_END);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        free(buf);
    bd_log("info", "alert", "account=%s threshold_pct=%d balance=%s", x->account, pct,
           x->balance);
    return e;
}

/* The granted total valid at @t and the currency of @account; 0 or -1 (err filled). */
static int granted_at(bs_conn *c, const char *account, billing_time_t t, char *granted,
                      char *currency, bs_error *err)
{
    char us[32];
    const char *params[2];
    PGresult *res;

    snprintf(us, sizeof(us), "%" PRId64, t / 1000);
    params[0] = account;
    params[1] = us;
    res = bs_query(c, SQL_GRANTED, 2, params, err);
    if (res == NULL)
        return -1;
    if (PQntuples(res) == 1) {
        snprintf(granted, AMOUNT_MAX, "%s", PQgetvalue(res, 0, 0));
        snprintf(currency, 4, "%s", PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    return 0;
}

/* The account's stored records of the batch that end at @last, decoded into @evs (room @cap). */
static size_t running_events(const bs_record *recs, const bs_record_result *res, size_t n,
                             const char *account, billing_event **evs, size_t cap,
                             billing_time_t last)
{
    size_t k = 0;
    size_t i;

    for (i = 0; i < n && k < cap; i++) {
        if (res[i].outcome != BS_RECORD_NEW || recs[i].format != BS_RECORD_PROTOBUF)
            continue;
        if (billing_event_decode(evs[k], recs[i].data, recs[i].len, NULL, 0) != BILLING_OK ||
            strcmp(billing_event_account(evs[k]), account) != 0)
            continue;
        if (billing_event_end(evs[k]) != last)
            continue;
        k++;
    }
    return k;
}

/* Take every event of @account that the batch stored back out of @r (the state before it). */
static void remove_batch_events(billing_rater *r, const bs_record *recs,
                                const bs_record_result *res, size_t n, const char *account,
                                billing_event *ev)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (res[i].outcome != BS_RECORD_NEW || recs[i].format != BS_RECORD_PROTOBUF ||
            billing_event_decode(ev, recs[i].data, recs[i].len, NULL, 0) != BILLING_OK ||
            strcmp(billing_event_account(ev), account) != 0)
            continue;
        /* Stored as new by this batch, so in @r's aggregates: unchecked take-back. */
        bl_rater_take_back(r, ev, NULL, 0);
    }
}

/* Balance of @r for @account at @t as a rational; 0 or -1. */
static int balance_q(billing_rater *r, const char *account, billing_time_t t, mpq_t q, char *text)
{
    if (billing_rater_credit_balance(r, account, t, text, AMOUNT_MAX) != BILLING_OK)
        return -1;
    return q_parse(q, text);
}

static bs_status check_account(bd_alerts *a, bs_conn *c, const touched *t, const bs_record *recs,
                               const bs_record_result *res, size_t n, billing_event **evs,
                               bs_error *err)
{
    char msg[MSG_MAX];
    char granted[AMOUNT_MAX] = "0";
    char currency[4] = "";
    char after_text[AMOUNT_MAX];
    char before_text[AMOUNT_MAX];
    billing_rater *r;
    crossing x;
    mpq_t before;
    mpq_t after;
    mpq_t total;
    mpq_t level;
    size_t k;
    size_t i;
    bs_status st = BS_OK;

    if (granted_at(c, t->account, t->last, granted, currency, err) != 0)
        return err != NULL ? err->status : BS_ERR_FATAL;
    billing_rater_new(bs_catalog_lib(*a->cat), &r, msg, sizeof(msg));
    if (r == NULL)
        return bs_error_set(err, BS_ERR_INVALID, "alerts: %s", msg);
    billing_rater_set_dedupe(r, 0);
    mpq_inits(before, after, total, level, NULL);
    memset(&x, 0, sizeof(x));
    x.account = t->account;
    x.currency = currency;
    x.granted = granted;
    x.at = t->last;
    x.event_id = res[t->last_rec].event_id ? res[t->last_rec].event_id : "";
    x.exhausted = INT64_MAX;
    st = bs_aggregates_rate(c, *a->cat, r, t->account, err);
    if (st != BS_OK || balance_q(r, t->account, t->last, after, after_text) != 0 ||
        q_parse(total, granted) != 0 || mpq_sgn(total) <= 0)
        goto out;
    /* Exhaustion: the resources whose records end last are taken as running now. */
    k = running_events(recs, res, n, t->account, evs, RUNNING_MAX, t->last);
    billing_rater_credit_exhaustion(r, t->account, t->last, (const billing_event *const *)evs, k,
                                    &x.exhausted, NULL, 0);
    /* Before the batch: the same aggregates without this batch's events. */
    remove_batch_events(r, recs, res, n, t->account, evs[0]);
    if (balance_q(r, t->account, t->last, before, before_text) != 0)
        goto out;
    x.balance = after_text;
    for (i = 0; i < a->n_thresholds && st == BS_OK; i++) {
        /* The balance level at which pct% of the credit is used: total * (100 - pct) / 100. */
        mpq_set_ui(level, (unsigned long)(100 - a->thresholds[i]), 100);
        mpq_mul(level, level, total);
        if (mpq_cmp(before, level) > 0 && mpq_cmp(after, level) <= 0 &&
            publish(a, &x, a->thresholds[i], level) != RD_KAFKA_RESP_ERR_NO_ERROR)
            st = bs_error_set(err, BS_ERR_FATAL, "alerts topic %s: cannot queue", a->topic);
    }
out:
    mpq_clears(before, after, total, level, NULL);
    billing_rater_destroy(r);
    return st;
}

/* The accounts with credit that the batch stored events for, with their latest end. */
static size_t touched_accounts(const PGresult *credit, const bs_record *recs,
                               const bs_record_result *res, size_t n, billing_event *ev,
                               touched *out)
{
    size_t k = 0;
    size_t i;
    size_t j;
    int row;

    for (i = 0; i < n; i++) {
        if (res[i].outcome != BS_RECORD_NEW || recs[i].format != BS_RECORD_PROTOBUF ||
            billing_event_decode(ev, recs[i].data, recs[i].len, NULL, 0) != BILLING_OK)
            continue;
        for (j = 0; j < k && strcmp(out[j].account, billing_event_account(ev)) != 0; j++)
            ;
        if (j == k) {
            for (row = 0; row < PQntuples(credit); row++) {
                if (strcmp(PQgetvalue(credit, row, 0), billing_event_account(ev)) == 0)
                    break;
            }
            if (row == PQntuples(credit) || k == ACCOUNTS_MAX)
                continue;
            out[k].account = PQgetvalue(credit, row, 0);
            out[k].last = billing_event_end(ev);
            out[k++].last_rec = i;
        }
        if (billing_event_end(ev) >= out[j].last) {
            out[j].last = billing_event_end(ev);
            out[j].last_rec = i;
        }
    }
    return k;
}

bs_status bd_alerts_hook(void *arg, bs_conn *c, const bs_record *recs,
                         const bs_record_result *results, size_t n, bs_error *err)
{
    static touched accounts[ACCOUNTS_MAX];
    billing_event *evs[RUNNING_MAX];
    bd_alerts *a = arg;
    PGresult *credit;
    size_t k;
    size_t i;
    bs_status st = BS_OK;
    rd_kafka_resp_err_t e;

    credit = bs_query(c, SQL_CREDIT_ACCOUNTS, 0, NULL, err);
    if (credit == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    for (i = 0; i < RUNNING_MAX; i++) {
        evs[i] = billing_event_new();
        if (evs[i] == NULL)
            st = bs_error_set(err, BS_ERR_NOMEM, "alerts: out of memory");
    }
    a->failed = 0;
    k = st == BS_OK ? touched_accounts(credit, recs, results, n, evs[0], accounts) : 0;
    for (i = 0; i < k && st == BS_OK; i++)
        st = check_account(a, c, &accounts[i], recs, results, n, evs, err);
    for (i = 0; i < RUNNING_MAX; i++)
        billing_event_destroy(evs[i]);
    PQclear(credit);
    if (st != BS_OK || k == 0)
        return st;
    e = rd_kafka_flush(a->rk, FLUSH_MS);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR || a->failed > 0)
        return bs_error_set(err, BS_ERR_FATAL, "alerts topic %s: %s", a->topic,
                            e != RD_KAFKA_RESP_ERR_NO_ERROR ? rd_kafka_err2str(e)
                                                            : "delivery failed");
    return BS_OK;
}
