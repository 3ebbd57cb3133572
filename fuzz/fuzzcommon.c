/*
 * fuzzcommon.c - see fuzzcommon.h: failure reports, the catalog and
 * background events of the event targets, and the properties checked on
 * every event a decoder accepts.
 *
 * The targets are single-threaded (libFuzzer runs one input at a time), so
 * the catalog and the large scratch buffers are file-scope statics.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing/v1/usage_event.pb-c.h"
#include "billing_config.h"
#include "fuzzcommon.h"

/* Room for the months billing_rater_months lists: 1900..2200 and the subscription terms. */
#define MONTHS_CAP 8192
/* Room for the text digest of one invoice. */
#define DIGEST_MAX 65536
/* Messages of the library; any longer one is cut, which is fine for a report. */
#define ERR_MAX 512

void fz_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "fuzz: %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}

void fz_check_message(const char *what, const char *errbuf, size_t size)
{
    FZ_CHECK(memchr(errbuf, '\0', size) != NULL, "%s: message not NUL-terminated", what);
    FZ_CHECK(errbuf[0] != '\0', "%s failed without a message", what);
}

/* ---------------------------------------------------------------------- */
/* The catalog                                                             */
/* ---------------------------------------------------------------------- */

/*
 * A version 2 TZif file with no transitions, only a footer: US Eastern
 * time by rule, "EST5EDT,M3.2.0,M11.1.0" (RFC 8536). Embedded so that the
 * targets need no zoneinfo files and every run sees the same zone.
 */
/* clang-format off */
static const unsigned char eastern_tzif[] = {
    /* version 1 header: magic, version, 15 unused, isut, isstd, leap, time, type, char counts */
    'T', 'Z', 'i', 'f', '2', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 4,
    /* one local time type: -18000 s, not DST, designation 0; then "EST\0" */
    0xff, 0xff, 0xb9, 0xb0, 0, 0, 'E', 'S', 'T', 0,
    /* version 2 header and block, the same */
    'T', 'Z', 'i', 'f', '2', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 4,
    0xff, 0xff, 0xb9, 0xb0, 0, 0, 'E', 'S', 'T', 0,
    /* footer */
    '\n', 'E', 'S', 'T', '5', 'E', 'D', 'T', ',', 'M', '3', '.', '2', '.', '0', ',', 'M', '1', '1',
    '.', '1', '.', '0', '\n'};
/* clang-format on */

billing_config_zones *fz_config_zones(void)
{
    billing_config_zones *zones = billing_config_zones_new();

    FZ_CHECK(zones != NULL, "out of memory");
    return zones;
}

billing_zone *fz_eastern_zone(void)
{
    char err[ERR_MAX];
    billing_zone *z = NULL;

    FZ_CHECK(billing_zone_new("US/Eastern-rule", eastern_tzif, sizeof(eastern_tzif), &z, err,
                              sizeof(err)) == BILLING_OK,
             "the embedded zone: %s", err);
    return z;
}

/* The accounts of the catalog and their zones. */
typedef struct fz_account {
    const char *id;
    billing_zone *zone;
} fz_account;

#define N_ACCOUNTS 3
#define N_BACKGROUND 3

static struct {
    int ready;
    billing_zone *utc;
    billing_zone *eastern;
    fz_account accounts[N_ACCOUNTS];
    billing_catalog *cat;
    billing_event *background[N_BACKGROUND];
} fz;

static char digest_before[DIGEST_MAX];
static char digest_during[DIGEST_MAX];
static char digest_after[DIGEST_MAX];
static int months_before[MONTHS_CAP];
static int months_after[MONTHS_CAP];

static billing_time_t at(const char *text)
{
    billing_time_t t;
    char err[ERR_MAX];

    if (billing_time_parse(text, &t, err, sizeof(err)) != BILLING_OK)
        fz_fail(__FILE__, __LINE__, "setup: %s", err);
    return t;
}

/* A setup step that must succeed. */
static void must(billing_status st, const char *what, const char *err)
{
    if (st != BILLING_OK)
        fz_fail(__FILE__, __LINE__, "setup: %s: %s (%s)", what, billing_strerror(st), err);
}

static void build_rates(billing_catalog *cat, char *err)
{
    /* v0, from the first supported instant: wildcards and exact keys; traffic has no rate, so
     * it is zero-rated; gpu only for RTX4090 (other models have no price). */
    must(billing_catalog_add_price_version(cat, "v0", at("1900-01-01T00:00:00Z"), err, ERR_MAX),
         "v0", err);
    must(billing_catalog_set_rate(cat, "v0", BILLING_METER_GPU, "RTX4090", "*", "0.60", err,
                                  ERR_MAX),
         "v0 gpu", err);
    must(billing_catalog_set_rate(cat, "v0", BILLING_METER_GPULESS, "*", "*", "0.48", err, ERR_MAX),
         "v0 gpuless", err);
    must(billing_catalog_set_rate(cat, "v0", BILLING_METER_STORAGE, "*", "*", "0.20", err, ERR_MAX),
         "v0 storage", err);
    /* v1: a price change at a month boundary, exact model and region keys, priced traffic. */
    must(billing_catalog_add_price_version(cat, "v1", at("2026-02-01T00:00:00Z"), err, ERR_MAX),
         "v1", err);
    must(billing_catalog_set_rate(cat, "v1", BILLING_METER_GPU, "RTX4090", "cn-east-1", "0.65", err,
                                  ERR_MAX),
         "v1 gpu", err);
    must(billing_catalog_set_rate(cat, "v1", BILLING_METER_GPU, "*", "*", "1.5", err, ERR_MAX),
         "v1 gpu *", err);
    must(billing_catalog_set_rate(cat, "v1", BILLING_METER_GPULESS, "RTX4090", "*", "0.5", err,
                                  ERR_MAX),
         "v1 gpuless", err);
    must(billing_catalog_set_rate(cat, "v1", BILLING_METER_STORAGE, "*", "cn-east-1", "0.0001", err,
                                  ERR_MAX),
         "v1 storage", err);
    must(billing_catalog_set_rate(cat, "v1", BILLING_METER_TRAFFIC, "*", "*", "0.8", err, ERR_MAX),
         "v1 traffic", err);
}

static void build_plans(billing_catalog *cat, char *err)
{
    must(billing_catalog_add_plan(cat, "rtx-daily", BILLING_PERIOD_DAY, "RTX4090", "cn-east-1", 0,
                                  err, ERR_MAX),
         "plan rtx-daily", err);
    must(billing_catalog_add_plan(cat, "rtx-monthly", BILLING_PERIOD_MONTH, "RTX4090", "cn-east-1",
                                  1, err, ERR_MAX),
         "plan rtx-monthly", err);
    must(billing_catalog_set_plan_fee(cat, "v0", "rtx-daily", "99.00", err, ERR_MAX), "fee", err);
    must(billing_catalog_set_plan_fee(cat, "v0", "rtx-monthly", "2599.00", err, ERR_MAX), "fee",
         err);
    must(billing_catalog_set_plan_fee(cat, "v1", "rtx-daily", "109.00", err, ERR_MAX), "fee", err);
    must(billing_catalog_set_plan_fee(cat, "v1", "rtx-monthly", "2799.00", err, ERR_MAX), "fee",
         err);
}

static void build_accounts(billing_catalog *cat, char *err)
{
    const unsigned kinds = BILLING_CHARGE_USAGE | BILLING_CHARGE_SUBSCRIPTION;
    size_t i;

    fz.accounts[0].id = "lab-a";
    fz.accounts[0].zone = fz.utc;
    fz.accounts[1].id = "lab-b";
    fz.accounts[1].zone = fz.utc;
    fz.accounts[2].id = "lab-ny";
    fz.accounts[2].zone = fz.eastern;
    for (i = 0; i < N_ACCOUNTS; i++)
        must(billing_catalog_add_account(cat, fz.accounts[i].id, "CNY", fz.accounts[i].zone,
                                         i == 0 ? "0.06" : "0", err, ERR_MAX),
             fz.accounts[i].id, err);
    /* A monthly term anchored on the 31st, cancelled mid-term; daily terms across a DST change. */
    must(billing_catalog_add_subscription(
             cat, "sub-a", "lab-a", "i-1", "rtx-monthly", at("2026-01-31T10:00:00Z"), 3,
             &(billing_time_t){at("2026-03-15T12:00:00Z")}, err, ERR_MAX),
         "sub-a", err);
    must(billing_catalog_add_subscription(cat, "sub-ny", "lab-ny", "i-1", "rtx-daily",
                                          at("2026-03-06T12:00:00-05:00"), 5, NULL, err, ERR_MAX),
         "sub-ny", err);
    must(billing_catalog_add_grant(cat, "trial-a", "lab-a", "10.00", at("2026-01-02T00:00:00Z"),
                                   at("2026-02-01T00:00:00Z"), BILLING_CHARGE_USAGE, 0, err,
                                   ERR_MAX),
         "grant trial-a", err);
    must(billing_catalog_add_grant(cat, "promo-ny", "lab-ny", "50.00", at("2026-03-01T00:00:00Z"),
                                   at("2026-04-01T00:00:00Z"), kinds, 1, err, ERR_MAX),
         "grant promo-ny", err);
}

/* A background event; they share aggregates with many fuzzed events. */
static billing_event *background(const char *id, const char *account, const char *resource,
                                 billing_meter meter, const char *start, const char *end,
                                 const char *qty, const char *model)
{
    billing_event *ev = billing_event_new();
    char err[ERR_MAX] = "";

    if (ev == NULL)
        fz_fail(__FILE__, __LINE__, "setup: out of memory");
    must(billing_event_set_id(ev, id), id, "");
    must(billing_event_set_account(ev, account), id, "");
    must(billing_event_set_resource(ev, resource), id, "");
    must(billing_event_set_meter(ev, meter), id, "");
    billing_event_set_interval(ev, at(start), at(end));
    must(billing_event_set_quantity(ev, qty, err, sizeof(err)), id, err);
    must(billing_event_set_model(ev, model), id, "");
    must(billing_event_set_region(ev, "cn-east-1"), id, "");
    return ev;
}

void fz_events_init(void)
{
    char err[ERR_MAX] = "";
    billing_rater *r;

    if (fz.ready)
        return;
    fz.utc = billing_zone_new_utc();
    fz.eastern = fz_eastern_zone();
    fz.cat = billing_catalog_new();
    if (fz.utc == NULL || fz.eastern == NULL || fz.cat == NULL)
        fz_fail(__FILE__, __LINE__, "setup: zones or catalog: %s", err);
    must(billing_catalog_set_currency(fz.cat, "CNY", BILLING_ROUND_HALF_UP, err, ERR_MAX), "CNY",
         err);
    build_rates(fz.cat, err);
    build_plans(fz.cat, err);
    build_accounts(fz.cat, err);
    fz.background[0] = background("bg-gpu", "lab-a", "i-2", BILLING_METER_GPU,
                                  "2026-01-05T10:00:00Z", "2026-01-05T13:00:00Z", "8", "RTX4090");
    fz.background[1] = background("bg-disk", "lab-a", "d-1", BILLING_METER_STORAGE,
                                  "2025-12-20T00:00:00Z", "2026-02-10T00:00:00Z", "1000.5", "");
    fz.background[2] =
        background("bg-ny", "lab-ny", "i-1", BILLING_METER_GPU, "2026-03-08T01:00:00-05:00",
                   "2026-03-08T05:00:00-04:00", "8", "RTX4090");
    /* Freezes the catalog and proves it consistent before any input is read. */
    billing_rater_new(fz.cat, &r, err, sizeof(err));
    if (r == NULL)
        fz_fail(__FILE__, __LINE__, "setup: rater: %s", err);
    billing_rater_destroy(r);
    fz.ready = 1;
}

/* ---------------------------------------------------------------------- */
/* Protobuf round trip                                                     */
/* ---------------------------------------------------------------------- */

billing_status fz_check_roundtrip(const billing_event *ev)
{
    unsigned char enc1[BILLING_EVENT_WIRE_MAX];
    unsigned char enc2[BILLING_EVENT_WIRE_MAX];
    size_t len1 = 0;
    size_t len2 = 0;
    char err[ERR_MAX] = "";
    billing_event *ev2 = billing_event_new();
    billing_status st;

    FZ_CHECK(ev2 != NULL, "out of memory");
    st = billing_event_encode(ev, enc1, sizeof(enc1), &len1);
    FZ_CHECK(st == BILLING_OK, "encoding an accepted event: %s (%zu bytes needed)",
             billing_strerror(st), len1);
    st = billing_event_decode(ev2, enc1, len1, err, sizeof(err));
    if (st == BILLING_OK) {
        st = billing_event_encode(ev2, enc2, sizeof(enc2), &len2);
        FZ_CHECK(st == BILLING_OK, "encoding the decoded event: %s", billing_strerror(st));
        FZ_CHECK(len1 == len2 && memcmp(enc1, enc2, len1) == 0,
                 "event '%s': encode(decode(encode(ev))) differs from encode(ev) (%zu and %zu "
                 "bytes)",
                 billing_event_id(ev), len1, len2);
    } else {
        fz_check_message("billing_event_decode", err, sizeof(err));
    }
    billing_event_destroy(ev2);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Rating and taking back                                                  */
/* ---------------------------------------------------------------------- */

int fz_rated_by_catalog_checks(billing_status st)
{
    return st == BILLING_OK || st == BILLING_ERR_UNKNOWN_ACCOUNT || st == BILLING_ERR_NO_PRICE ||
           st == BILLING_ERR_NOMEM;
}

/* Append formatted text to the digest at *@len (cut at the buffer's end). */
static void digest_add(char *buf, size_t *len, const char *fmt, ...) FZ_PRINTF(3, 4);

static void digest_add(char *buf, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (*len + 1 >= DIGEST_MAX)
        return;
    va_start(ap, fmt);
    n = vsnprintf(buf + *len, DIGEST_MAX - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n < DIGEST_MAX - *len ? (size_t)n : DIGEST_MAX - *len - 1;
}

/*
 * The invoice of @account for @year-@month as text, every line and total
 * included, into @buf; returns billing_rater_invoice's status.
 */
static billing_status invoice_digest(billing_rater *r, const char *account, int year, int month,
                                     char *buf)
{
    billing_invoice *inv = NULL;
    char err[ERR_MAX] = "";
    billing_status st = billing_rater_invoice(r, account, year, month, &inv, err, sizeof(err));
    size_t len = 0;
    size_t i;

    buf[0] = '\0';
    if (st != BILLING_OK) {
        fz_check_message("billing_rater_invoice", err, sizeof(err));
        return st;
    }
    for (i = 0; i < billing_invoice_line_count(inv); i++)
        digest_add(buf, &len, "line %d %s %s %s %s %s %s %s %s %s %s\n",
                   (int)billing_invoice_line_kind(inv, i), billing_invoice_line_meter(inv, i),
                   billing_invoice_line_model(inv, i), billing_invoice_line_region(inv, i),
                   billing_invoice_line_plan(inv, i), billing_invoice_line_price_version(inv, i),
                   billing_invoice_line_quantity(inv, i), billing_invoice_line_unit(inv, i),
                   billing_invoice_line_unit_price(inv, i), billing_invoice_line_amount(inv, i),
                   billing_invoice_line_amount_rounded(inv, i));
    for (i = 0; i < billing_invoice_credit_count(inv); i++)
        digest_add(buf, &len, "credit %s %s %s\n", billing_invoice_credit_grant(inv, i),
                   billing_invoice_credit_amount(inv, i), billing_invoice_credit_remaining(inv, i));
    for (i = 0; i < billing_invoice_expired_count(inv); i++)
        digest_add(buf, &len, "expired %s %s\n", billing_invoice_expired_grant(inv, i),
                   billing_invoice_expired_amount(inv, i));
    for (i = 0; i < billing_invoice_returned_count(inv); i++)
        digest_add(buf, &len, "returned %s %s %s\n", billing_invoice_returned_grant(inv, i),
                   billing_invoice_returned_amount(inv, i),
                   billing_invoice_returned_remaining(inv, i));
    digest_add(buf, &len, "account credit %s carried %s left %s returned %s\n",
               billing_invoice_account_credit(inv), billing_invoice_carried(inv),
               billing_invoice_account_credit_left(inv), billing_invoice_returned(inv));
    digest_add(buf, &len, "subtotal %s credits %s tax %s@%s total %s\n",
               billing_invoice_subtotal(inv), billing_invoice_credits(inv),
               billing_invoice_tax(inv), billing_invoice_tax_rate(inv), billing_invoice_total(inv));
    billing_invoice_destroy(inv);
    return BILLING_OK;
}

/* The catalog account with this id, or NULL. */
static const fz_account *find_account(const char *id)
{
    size_t i;

    for (i = 0; i < N_ACCOUNTS; i++) {
        if (strcmp(fz.accounts[i].id, id) == 0)
            return &fz.accounts[i];
    }
    return NULL;
}

/*
 * The account and start of @ev, read back from its encoding with
 * protobuf-c (billing_event has no getters for them). Returns 0, or -1 if
 * the event has no account or no start.
 */
static int account_and_start(const billing_event *ev, char *account, size_t size,
                             billing_time_t *start)
{
    unsigned char enc[BILLING_EVENT_WIRE_MAX];
    size_t len = 0;
    Billing__V1__UsageEvent *m;
    int rc = -1;

    FZ_CHECK(billing_event_encode(ev, enc, sizeof(enc), &len) == BILLING_OK, "encode");
    m = billing__v1__usage_event__unpack(NULL, len, enc);
    FZ_CHECK(m != NULL, "protobuf-c cannot unpack billing_event_encode's %zu bytes", len);
    FZ_CHECK(strcmp(m->event_id, billing_event_id(ev)) == 0,
             "protobuf-c reads id '%s' where the event has '%s'", m->event_id,
             billing_event_id(ev));
    if (m->account_id[0] != '\0' && strlen(m->account_id) < size && m->start != NULL) {
        snprintf(account, size, "%s", m->account_id);
        *start = (billing_time_t)m->start->seconds * BILLING_NS_PER_SEC + m->start->nanos;
        rc = 0;
    }
    billing__v1__usage_event__free_unpacked(m, NULL);
    return rc;
}

int fz_months(billing_rater *r, const char *account, int *out, int cap)
{
    char err[ERR_MAX] = "";
    billing_months *list = NULL;
    billing_status st = billing_rater_months(r, account, &list, err, sizeof(err));
    size_t n;
    size_t i;

    FZ_CHECK(st == BILLING_OK, "billing_rater_months('%s'): %s: %s", account, billing_strerror(st),
             err);
    n = billing_months_count(list);
    FZ_CHECK(n <= INT32_MAX, "billing_rater_months('%s'): %zu months", account, n);
    for (i = 0; i < n; i++) {
        FZ_CHECK(billing_months_month(list, i) >= 1 && billing_months_month(list, i) <= 12,
                 "billing_rater_months('%s'): month %d", account, billing_months_month(list, i));
        if (i < (size_t)cap)
            out[i] = billing_months_year(list, i) * 100 + billing_months_month(list, i);
    }
    billing_months_destroy(list);
    return (int)n;
}

static int list_months(billing_rater *r, const char *account, int *out)
{
    int n = fz_months(r, account, out, MONTHS_CAP);

    FZ_CHECK(n >= 0 && n <= MONTHS_CAP, "billing_rater_months('%s') = %d", account, n);
    return n;
}

static int month_listed(const int *months, int n, int year, int month)
{
    int i;

    for (i = 0; i < n; i++) {
        if (months[i] == year * 100 + month)
            return 1;
    }
    return 0;
}

/* A fresh rater, dedupe off, with the background events rated. */
static billing_rater *fresh_rater(void)
{
    char err[ERR_MAX] = "";
    billing_rater *r = NULL;
    size_t i;

    FZ_CHECK(billing_rater_new(fz.cat, &r, err, sizeof(err)) == BILLING_OK,
             "a second rater from a frozen catalog: %s", err);
    FZ_CHECK(billing_rater_set_dedupe(r, 0) == BILLING_OK, "dedupe off");
    for (i = 0; i < N_BACKGROUND; i++)
        FZ_CHECK(billing_rater_add(r, fz.background[i], err, sizeof(err)) == BILLING_OK,
                 "background event %zu: %s", i, err);
    return r;
}

/*
 * The checks once billing_rater_add has accepted @ev into @r: the state
 * with the event, then after billing_rater_take_back (what `billing rate` uses), compared with a rater
 * that never saw it, then with the event added again.
 */
static void check_taken_back(billing_rater *r, const billing_event *ev, const fz_account *a,
                             billing_time_t start, uint64_t count0)
{
    char err[ERR_MAX] = "";
    const char *id = billing_event_id(ev);
    billing_rater *pristine;
    int year;
    int month;
    int n0;
    int n1;
    billing_status inv0;
    billing_status inv1;
    billing_status st;

    billing_zone_year_month(a->zone, start, &year, &month);
    FZ_CHECK(billing_rater_event_count(r) == count0 + 1, "event count after add");
    n1 = list_months(r, a->id, months_after);
    FZ_CHECK(month_listed(months_after, n1, year, month),
             "event '%s': month %04d-%02d of its start not listed for '%s'", id, year, month,
             a->id);
    inv1 = invoice_digest(r, a->id, year, month, digest_during);

    st = billing_rater_take_back(r, ev, err, sizeof(err));
    FZ_CHECK(st == BILLING_OK, "event '%s': remove: %s: %s", id, billing_strerror(st), err);
    FZ_CHECK(billing_rater_event_count(r) == count0, "event count after remove");

    /* What a rater that never saw the event says. */
    pristine = fresh_rater();
    n0 = list_months(pristine, a->id, months_before);
    inv0 = invoice_digest(pristine, a->id, year, month, digest_before);
    billing_rater_destroy(pristine);
    FZ_CHECK(inv1 == inv0 || inv1 == BILLING_ERR_NOMEM,
             "event '%s': invoice %04d-%02d: %s with the event, %s without", id, year, month,
             billing_strerror(inv1), billing_strerror(inv0));

    n1 = list_months(r, a->id, months_after);
    FZ_CHECK(n1 == n0 && memcmp(months_before, months_after, (size_t)n0 * sizeof(int)) == 0,
             "event '%s': account '%s' lists %d months after add and remove, %d without it", id,
             a->id, n1, n0);
    if (inv0 == BILLING_OK && invoice_digest(r, a->id, year, month, digest_after) == BILLING_OK)
        FZ_CHECK(strcmp(digest_before, digest_after) == 0,
                 "event '%s': invoice %04d-%02d after add and remove differs from never "
                 "added:\n%s---\n%s",
                 id, year, month, digest_before, digest_after);

    /* Taking back leaves nothing behind that changes a later add. */
    st = billing_rater_add(r, ev, err, sizeof(err));
    FZ_CHECK(st == BILLING_OK, "event '%s': add after remove: %s: %s", id, billing_strerror(st),
             err);
    if (inv1 == BILLING_OK && invoice_digest(r, a->id, year, month, digest_after) == BILLING_OK)
        FZ_CHECK(strcmp(digest_during, digest_after) == 0,
                 "event '%s': invoice %04d-%02d after add, remove, add differs from after "
                 "add:\n%s---\n%s",
                 id, year, month, digest_during, digest_after);
}

billing_status fz_check_rating(const billing_event *ev)
{
    billing_rater *r = fresh_rater();
    uint64_t count0 = billing_rater_event_count(r);
    size_t aggs0 = billing_rater_aggregate_count(r);
    char err[ERR_MAX] = "";
    char account[BILLING_EVENT_WIRE_MAX];
    billing_time_t start = 0;
    const fz_account *a;
    billing_status st;

    st = billing_rater_add(r, ev, err, sizeof(err));
    if (st != BILLING_OK) {
        fz_check_message("billing_rater_add", err, sizeof(err));
        FZ_CHECK(billing_rater_event_count(r) == count0 &&
                     billing_rater_aggregate_count(r) == aggs0,
                 "a refused event changed the rater");
        billing_rater_destroy(r);
        return st;
    }
    FZ_CHECK(account_and_start(ev, account, sizeof(account), &start) == 0,
             "a rated event without account or start");
    a = find_account(account);
    FZ_CHECK(a != NULL, "rated for account '%s', which the catalog does not have", account);
    check_taken_back(r, ev, a, start, count0);
    billing_rater_destroy(r);
    return st;
}
