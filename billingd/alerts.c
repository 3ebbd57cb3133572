/*
 * alerts.c - live credit alerts: what alertcheck.c finds, published to
 * the alerts topic. See alerts.h.
 */
#include "config.h"

#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alertcheck.h"
#include "alerts.h"
#include "billing/v1/credit_alert.pb-c.h"
#include "log.h"
#include "producer.h"

#define MSG_MAX 512
#define FLUSH_MS 15000
#define THRESHOLDS_MAX 16

struct bd_alerts {
    rd_kafka_t *rk;
    const bd_config *cfg; /* to make the producer again after a fatal error */
    const char *topic;
    bs_catalog **cat;
    bd_alert_cache *cache; /* the accounts' credit states between batches */
    int thresholds[THRESHOLDS_MAX];
    size_t n_thresholds;
    int failed;
    int queued;
};

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
    a->cfg = cfg;
    a->cache = bd_alert_cache_new((size_t)cfg->alerts_cache_accounts);
    if (a->cache == NULL)
        goto error;
    bd_alert_cache_set_max_events(a->cache, (size_t)cfg->alerts_cache_events);
    a->rk = bd_producer_new(cfg, on_delivery, a, errstr, sizeof(errstr));
    if (a->rk == NULL)
        goto error;
    return a;
error:
    bd_log("error", "alerts_start_failed", "error=%s", bd_q(errstr));
    if (a != NULL)
        bd_alert_cache_free(a->cache);
    free(a);
    return NULL;
}

void bd_alerts_free(bd_alerts *a)
{
    if (a == NULL)
        return;
    rd_kafka_flush(a->rk, FLUSH_MS);
    rd_kafka_destroy(a->rk);
    if (a->cache != NULL) { /* what the kept states did (bench/billingd.sh prints it) */
        bd_alert_cache_stats st;

        bd_alert_cache_stats_get(a->cache, &st);
        bd_log("info", "alert_cache",
               "hits=%" PRIu64 " stale=%" PRIu64 " fast=%" PRIu64 " windows=%" PRIu64
               " kept=%" PRIu64 " unkept=%" PRIu64 " read=%" PRIu64 " warmed=%" PRIu64
               " evictions=%" PRIu64 " rollbacks=%" PRIu64,
               st.hits, st.stale, st.fast, st.windows, st.kept, st.unkept, st.read, st.warmed,
               st.evictions, st.rollbacks);
    }
    bd_alert_cache_free(a->cache);
    free(a);
}

void bd_alerts_done(bd_alerts *a, bs_conn *c, int committed)
{
    if (a != NULL)
        bd_alert_cache_done(a->cache, c, committed);
}

void bd_alerts_forget(bd_alerts *a)
{
    if (a != NULL)
        bd_alert_cache_forget(a->cache);
}

/* ---------------------------------------------------------------------- */
/* Publishing                                                              */
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

/* A bd_crossing_fn: one CreditAlert keyed by its alert_id; 0 or -1 (cannot queue). */
static int publish(void *arg, const bd_crossing *x)
{
    Billing__V1__CreditAlert m = BILLING__V1__CREDIT_ALERT__INIT;
    Billing__V1__Timestamp crossed;
    Billing__V1__Timestamp exhausted;
    bd_alerts *a = arg;
    const char *id = x->alert_id;
    uint8_t *buf;
    size_t len;
    rd_kafka_resp_err_t e;

    m.alert_id = (char *)id;
    m.account_id = (char *)x->account;
    m.kind = x->pct >= 100 ? BILLING__V1__ALERT_KIND__ALERT_KIND_EXHAUSTED
                           : BILLING__V1__ALERT_KIND__ALERT_KIND_LOW;
    m.balance = (char *)x->balance;
    m.threshold = (char *)x->threshold;
    m.currency = (char *)x->currency;
    stamp(&crossed, x->crossed_at);
    m.crossed_at = &crossed;
    if (x->exhausted != INT64_MAX) {
        stamp(&exhausted, x->exhausted);
        m.exhausted_at = &exhausted;
    }
    m.event_id = (char *)x->event_id;
    len = billing__v1__credit_alert__get_packed_size(&m);
    buf = malloc(len + 1);
    if (buf == NULL)
        return -1;
    billing__v1__credit_alert__pack(&m, buf);
    e = rd_kafka_producev(a->rk, RD_KAFKA_V_TOPIC(a->topic), RD_KAFKA_V_KEY(id, strlen(id)),
                          RD_KAFKA_V_VALUE(buf, len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE),
                          RD_KAFKA_V_END);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        free(buf);
        bd_log("error", "alert_failed", "account=%s error=%s", x->account,
               bd_q(rd_kafka_err2str(e)));
        return -1;
    }
    a->queued++;
    bd_log("info", "alert", "account=%s threshold_pct=%d balance=%s", x->account, x->pct,
           x->balance);
    return 0;
}

bs_status bd_alerts_hook(void *arg, bs_conn *c, const bs_record *recs,
                         const bs_record_result *results, size_t n, bs_error *err)
{
    bd_alerts *a = arg;
    bs_status st;
    rd_kafka_resp_err_t e;

    a->failed = 0;
    a->queued = 0;
    if (bd_producer_renew_if_fatal(&a->rk, a->cfg, on_delivery, a, "alerts_producer_fatal"))
        return bs_error_set(err, BS_ERR_RETRY,
                            "alerts topic %s: the producer had a fatal error;"
                            " made again",
                            a->topic);
    st = bd_alerts_check_cached(a->cache, c, *a->cat, a->thresholds, a->n_thresholds, recs, results,
                                n, publish, a, err);
    /* Even on error: what was queued is delivered, so a rolled-back batch (its rows in
     * billing.credit_alerts with it) repeats it, with the same id. */
    e = a->queued > 0 ? rd_kafka_flush(a->rk, FLUSH_MS) : RD_KAFKA_RESP_ERR_NO_ERROR;
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        bd_producer_renew_if_fatal(&a->rk, a->cfg, on_delivery, a, "alerts_producer_fatal");
    if (st == BS_OK && (e != RD_KAFKA_RESP_ERR_NO_ERROR || a->failed > 0))
        st =
            bs_error_set(err, BS_ERR_FATAL, "alerts topic %s: %s", a->topic,
                         e != RD_KAFKA_RESP_ERR_NO_ERROR ? rd_kafka_err2str(e) : "delivery failed");
    return st;
}

int bd_alerts_published(const bd_alerts *a)
{
    return a->queued - a->failed;
}
