/*
 * fuzz_rater.c - fuzz target for the rater itself: the input's bytes
 * choose a catalog (currency and rounding mode, price versions and rates,
 * plans and fees, two accounts in UTC and US Eastern time, subscriptions
 * with or without a cancellation, credit grants) and a stream of events
 * (any meter, model, region, time in 2025-2026 to the nanosecond,
 * quantities from 0 to 10^18), rated with the rater's dedupe off.
 *
 * Whatever the bytes:
 *  - no crash, leak or undefined behaviour; every refusal has a message;
 *  - on every invoice of every listed month: no negative line except a
 *    refund, no positive refund; the rounded lines sum to the subtotal;
 *    the credits listed sum to the credit total, each positive and never
 *    more than the subtotal (nor anything when the subtotal is not
 *    positive); subtotal - credits + tax = total;
 *  - add-then-remove restores the totals: after every event is rated,
 *    one more is added and taken back, and every invoice is as before;
 *    then every event is taken back, last first, and every invoice is
 *    as that of a rater that never saw one.
 */
#include "config.h"

#include <gmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzzcommon.h"

#define MAX_EVENTS 24
#define MONTHS_CAP 256
#define TEXT_MAX (1 << 20)
#define DAY (INT64_C(86400) * BILLING_NS_PER_SEC)

/* 2025-01-01T00:00:00Z: every instant the input picks is within two years of it. */
#define EPOCH (INT64_C(1735689600) * BILLING_NS_PER_SEC)

static billing_zone *zones[2];
static const char *const accounts[2] = {"a-utc", "a-ny"};

/* The input as a stream of choices; past its end every choice is 0. */
typedef struct bytes {
    const uint8_t *p;
    size_t n;
} bytes;

static unsigned take(bytes *b, unsigned range)
{
    unsigned v;

    if (b->n == 0 || range == 0)
        return 0;
    v = *b->p;
    b->p++;
    b->n--;
    return v % range;
}

static uint64_t take64(bytes *b, uint64_t range)
{
    uint64_t v = 0;
    int i;

    for (i = 0; i < 8; i++)
        v = v << 8 | take(b, 256);
    return range ? v % range : 0;
}

/* An instant in [EPOCH, EPOCH + 2 years), often on a whole hour. */
static billing_time_t take_time(bytes *b)
{
    uint64_t ns = take64(b, (uint64_t)(730 * DAY));

    if (take(b, 2))
        ns -= ns % (uint64_t)(3600 * BILLING_NS_PER_SEC);
    return EPOCH + (billing_time_t)ns;
}

/* A non-negative decimal: small, with up to @frac_max decimals, or an edge case. */
static void take_decimal(bytes *b, char *out, size_t size, unsigned frac_max)
{
    static const char *const edges[] = {
        "0", "1000000000000000000", "999999999999999999.999999999", "0.000000001", "0.5", "0.125"};
    static const uint64_t pow10[10] = {1,      10,      100,      1000,      10000,
                                       100000, 1000000, 10000000, 100000000, 1000000000};
    unsigned whole;
    unsigned frac;

    if (take(b, 8) == 0) {
        snprintf(out, size, "%s", edges[take(b, 6)]);
        return;
    }
    whole = take(b, 200);
    frac = take(b, frac_max + 1);
    if (frac == 0)
        snprintf(out, size, "%u", whole);
    else
        snprintf(out, size, "%u.%0*llu", whole, (int)frac,
                 (unsigned long long)take64(b, pow10[frac]));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    zones[0] = billing_zone_new_utc();
    zones[1] = fz_eastern_zone();
    FZ_CHECK(zones[0] != NULL, "out of memory");
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The catalog                                                             */
/* ---------------------------------------------------------------------- */

static int prices(billing_catalog *cat, bytes *b, int *n_plans)
{
    static const char *const models[] = {"*", "RTX4090", "A100-80G"};
    static const char *const regions[] = {"*", "cn-east-1"};
    char err[512];
    char id[16];
    char price[48];
    billing_period period;
    int versions = 1 + (int)take(b, 3);
    int v;
    int i;

    *n_plans = (int)take(b, 3);
    for (i = 0; i < *n_plans; i++) {
        snprintf(id, sizeof(id), "p%d", i);
        period = take(b, 2) ? BILLING_PERIOD_MONTH : BILLING_PERIOD_DAY;
        if (billing_catalog_add_plan(cat, id, period, "RTX4090", "cn-east-1", (int)take(b, 2), err,
                                     sizeof(err)) != BILLING_OK)
            return -1;
    }
    for (v = 0; v < versions; v++) {
        snprintf(id, sizeof(id), "v%d", v);
        /* v0 before everything; the others anywhere, maybe refused as a duplicate start. */
        if (billing_catalog_add_price_version(cat, id, v == 0 ? 0 : take_time(b), err,
                                              sizeof(err)) != BILLING_OK)
            return -1;
        for (i = 0; i < 4; i++) {
            take_decimal(b, price, sizeof(price), 4);
            billing_catalog_set_rate(cat, id, (billing_meter)take(b, BILLING_METER_COUNT),
                                     models[take(b, 3)], regions[take(b, 2)], price, err,
                                     sizeof(err));
        }
        for (i = 0; i < *n_plans; i++) {
            snprintf(price, sizeof(price), "%u.%02u", take(b, 250) * 10, take(b, 100));
            snprintf(err, sizeof(err), "p%d", i);
            billing_catalog_set_plan_fee(cat, id, err, price, NULL, 0);
        }
    }
    return 0;
}

/* Mostly inside the subscription, which is refused when it is not. */
static billing_time_t cancel_after(bytes *b, int terms)
{
    return (billing_time_t)take64(b, (uint64_t)terms * 28 * (uint64_t)DAY);
}

/* One subscription, its choices read in a defined order (not as arguments,
 * whose evaluation order C leaves open). */
static void one_subscription(billing_catalog *cat, bytes *b, int i, int n_plans)
{
    char err[512];
    char id[16];
    char plan[16];
    const char *account;
    const char *resource;
    billing_time_t start;
    billing_time_t cancelled;
    int terms;
    int is_cancelled;

    snprintf(id, sizeof(id), "s%d", i);
    snprintf(plan, sizeof(plan), "p%d", (int)take(b, (unsigned)n_plans));
    start = take_time(b);
    terms = 1 + (int)take(b, 6);
    /* A cancellation from a day before the start on: at or before the
     * start it leaves no term, past the last term it is refused. */
    cancelled = start - DAY + cancel_after(b, terms);
    account = accounts[take(b, 2)];
    resource = take(b, 2) ? "r0" : "r1";
    is_cancelled = take(b, 2) == 0;
    billing_catalog_add_subscription(cat, id, account, resource, plan, start, terms,
                                     is_cancelled ? &cancelled : NULL, err, sizeof(err));
}

static void subscriptions_and_grants(billing_catalog *cat, bytes *b, int n_plans, int digits)
{
    char err[512];
    char id[16];
    char amount[64];
    char minor_part[16];
    billing_time_t from;
    int n = (int)take(b, 3);
    int i;

    for (i = 0; i < n && n_plans > 0; i++)
        one_subscription(cat, b, i, n_plans);
    n = (int)take(b, 4);
    for (i = 0; i < n; i++) {
        snprintf(id, sizeof(id), "g%d", i);
        /* Exactly the currency's minor digits (0, 2 or 3). */
        snprintf(minor_part, sizeof(minor_part), ".%03u", take(b, 1000));
        minor_part[digits > 0 ? digits + 1 : 0] = '\0';
        snprintf(amount, sizeof(amount), "%u%s", 1 + take(b, 200), minor_part);
        from = take_time(b);
        billing_catalog_add_grant(cat, id, accounts[take(b, 2)], amount, from,
                                  from + 1 + (billing_time_t)take64(b, 120 * (uint64_t)DAY),
                                  1 + take(b, 3), (int)take(b, 3), err, sizeof(err));
    }
}

static billing_catalog *catalog(bytes *b)
{
    static const char *const currencies[] = {"CNY", "JPY", "KWD"};
    static const int digits[] = {2, 0, 3};
    billing_catalog *cat = billing_catalog_new();
    char err[512];
    unsigned c = take(b, 3);
    int n_plans;
    int i;

    FZ_CHECK(cat != NULL, "out of memory");
    if (billing_catalog_set_currency(cat, currencies[c], (billing_rounding)take(b, 6), err,
                                     sizeof(err)) != BILLING_OK)
        goto refused;
    for (i = 0; i < 2; i++) {
        if (billing_catalog_add_account(cat, accounts[i], currencies[c], zones[i],
                                        take(b, 2) ? "0.06" : "0", err, sizeof(err)) != BILLING_OK)
            goto refused;
    }
    if (prices(cat, b, &n_plans) != 0)
        goto refused;
    subscriptions_and_grants(cat, b, n_plans, digits[c]);
    return cat;
refused:
    billing_catalog_destroy(cat);
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Events                                                                  */
/* ---------------------------------------------------------------------- */

static void event(bytes *b, billing_event *ev, int i)
{
    static const char *const models[] = {"RTX4090", "A100-80G", "H100", ""};
    static const char *const regions[] = {"cn-east-1", "us-west", ""};
    static const billing_time_t spans[] = {1, 1000, 3600 * BILLING_NS_PER_SEC, 40 * DAY};
    char id[16];
    char qty[48];
    billing_time_t start = take_time(b);

    snprintf(id, sizeof(id), "e%d", i);
    billing_event_reset(ev);
    billing_event_set_id(ev, id);
    billing_event_set_account(ev, accounts[take(b, 2)]);
    billing_event_set_resource(ev, take(b, 2) ? "r0" : "r1");
    billing_event_set_meter(ev, (billing_meter)take(b, BILLING_METER_COUNT));
    billing_event_set_interval(ev, start,
                               start + 1 + (billing_time_t)take64(b, (uint64_t)spans[take(b, 4)]));
    take_decimal(b, qty, sizeof(qty), 9);
    FZ_CHECK(billing_event_set_quantity(ev, qty, NULL, 0) == BILLING_OK, "quantity '%s'", qty);
    billing_event_set_model(ev, models[take(b, 4)]);
    billing_event_set_region(ev, regions[take(b, 3)]);
}

/* ---------------------------------------------------------------------- */
/* Invariants                                                              */
/* ---------------------------------------------------------------------- */

/* A rounded amount ("-12.34", "7") as an integer of minor units. */
static void minor(mpz_t out, const char *text)
{
    char digits[128];
    size_t n = 0;

    for (; *text != '\0' && n + 1 < sizeof(digits); text++) {
        if (*text != '.')
            digits[n++] = *text;
    }
    digits[n] = '\0';
    FZ_CHECK(mpz_set_str(out, digits, 10) == 0, "'%s' is not an amount", digits);
}

/* No negative line but a refund, no positive refund; the rounded lines' sum into @sum. */
static void check_lines(const billing_invoice *inv, mpz_t sum)
{
    mpz_t v;
    size_t i;
    billing_line_kind kind;
    const char *amount;

    mpz_init(v);
    mpz_set_ui(sum, 0);
    for (i = 0; i < billing_invoice_line_count(inv); i++) {
        kind = billing_invoice_line_kind(inv, i);
        amount = billing_invoice_line_amount(inv, i);
        FZ_CHECK(amount[0] != '-' || kind == BILLING_LINE_REFUND,
                 "line %zu of kind %d is negative: %s", i, (int)kind, amount);
        FZ_CHECK(kind != BILLING_LINE_REFUND || amount[0] == '-' || strcmp(amount, "0") == 0,
                 "refund line %zu is positive: %s", i, amount);
        minor(v, billing_invoice_line_amount_rounded(inv, i));
        mpz_add(sum, sum, v);
    }
    mpz_clear(v);
}

/* The sum of the listed amounts (credit: 0, returned: 1), each positive. */
static void listed_sum(const billing_invoice *inv, int returned, mpz_t sum)
{
    size_t n = returned ? billing_invoice_returned_count(inv) : billing_invoice_credit_count(inv);
    mpz_t v;
    size_t i;

    mpz_init(v);
    mpz_set_ui(sum, 0);
    for (i = 0; i < n; i++) {
        minor(v, returned ? billing_invoice_returned_amount(inv, i)
                          : billing_invoice_credit_amount(inv, i));
        FZ_CHECK(mpz_sgn(v) > 0, "%s %zu is not positive", returned ? "returned" : "credit", i);
        mpz_add(sum, sum, v);
    }
    mpz_clear(v);
}

/*
 * Credit bounds (pricing.md, "Invariants"): grants pay at most what the
 * invoice asks for, subtotal + returned, and nothing when that is below
 * zero, which is then carried whole; account credit only otherwise.
 */
static void check_credit_bounds(const billing_invoice *inv, const mpz_t asked, const mpz_t credits,
                                const mpz_t spent, const mpz_t carried)
{
    FZ_CHECK(mpz_sgn(spent) >= 0 && mpz_sgn(carried) >= 0, "account credit %s, carried %s",
             billing_invoice_account_credit(inv), billing_invoice_carried(inv));
    if (mpz_sgn(asked) < 0) {
        FZ_CHECK(mpz_sgn(credits) == 0 && mpz_sgn(spent) == 0 && mpz_cmpabs(carried, asked) == 0,
                 "an invoice below zero carries %s, with credit %s and account credit %s",
                 billing_invoice_carried(inv), billing_invoice_credits(inv),
                 billing_invoice_account_credit(inv));
        return;
    }
    FZ_CHECK(mpz_sgn(carried) == 0, "carried %s on an invoice not below zero",
             billing_invoice_carried(inv));
    FZ_CHECK(mpz_cmp(credits, asked) <= 0, "credit %s beyond what the invoice asks for",
             billing_invoice_credits(inv));
}

/*
 * The figures of one invoice reconcile to the minor unit: subtotal +
 * returned - credits - account credit + carried + tax = total, tax and
 * total never below zero.
 */
static void check_invoice(const billing_invoice *inv)
{
    mpz_t lines;
    mpz_t subtotal;
    mpz_t returned;
    mpz_t credits;
    mpz_t spent;
    mpz_t carried;
    mpz_t listed;
    mpz_t v;
    mpz_t tax;
    mpz_t total;

    mpz_inits(lines, subtotal, returned, credits, spent, carried, listed, v, tax, total, NULL);
    check_lines(inv, lines);
    minor(subtotal, billing_invoice_subtotal(inv));
    minor(returned, billing_invoice_returned(inv));
    minor(credits, billing_invoice_credits(inv));
    minor(spent, billing_invoice_account_credit(inv));
    minor(carried, billing_invoice_carried(inv));
    minor(tax, billing_invoice_tax(inv));
    minor(total, billing_invoice_total(inv));
    FZ_CHECK(mpz_cmp(lines, subtotal) == 0, "lines do not sum to the subtotal %s",
             billing_invoice_subtotal(inv));
    listed_sum(inv, 0, listed);
    FZ_CHECK(mpz_cmp(listed, credits) == 0, "credits listed do not sum to the credit total");
    listed_sum(inv, 1, listed);
    FZ_CHECK(mpz_cmp(listed, returned) == 0, "returned listed do not sum to the returned total");
    mpz_add(v, subtotal, returned);
    check_credit_bounds(inv, v, credits, spent, carried);
    mpz_sub(v, v, credits);
    mpz_sub(v, v, spent);
    mpz_add(v, v, carried);
    mpz_add(v, v, tax);
    FZ_CHECK(mpz_cmp(v, total) == 0,
             "subtotal + returned - credits - account credit + carried + tax != total %s",
             billing_invoice_total(inv));
    FZ_CHECK(mpz_sgn(tax) >= 0 && mpz_sgn(total) >= 0, "tax %s, total %s below zero",
             billing_invoice_tax(inv), billing_invoice_total(inv));
    mpz_clears(lines, subtotal, returned, credits, spent, carried, listed, v, tax, total, NULL);
}

/* Append the figures of @account's invoice of @ym (checked) to @text. */
static void invoice_figures(billing_rater *r, const char *account, int ym, char *text, size_t *len)
{
    billing_invoice *inv;
    char err[512];
    int year = ym / 100;
    int month = ym - year * 100;
    billing_status st = billing_rater_invoice(r, account, year, month, &inv, err, sizeof(err));

    FZ_CHECK(st == BILLING_OK, "invoice %d: %s", ym, err);
    check_invoice(inv);
    *len += (size_t)snprintf(text + *len, TEXT_MAX - *len, "%s %d %zu %s %s %s %s|", account, ym,
                             billing_invoice_line_count(inv), billing_invoice_subtotal(inv),
                             billing_invoice_credits(inv), billing_invoice_tax(inv),
                             billing_invoice_total(inv));
    FZ_CHECK(*len < TEXT_MAX, "invoice text too long");
    billing_invoice_destroy(inv);
}

/*
 * The figures of every invoice of the months listed for each account and
 * of the months @extra (@n_extra of them), each invoice checked.
 */
static char *invoices(billing_rater *r, const int *extra, int n_extra)
{
    static int months[MONTHS_CAP];
    char *text = malloc(TEXT_MAX);
    size_t len = 0;
    int a;
    int i;
    int n;

    FZ_CHECK(text != NULL, "out of memory");
    text[0] = '\0';
    for (a = 0; a < 2; a++) {
        n = fz_months(r, accounts[a], months, MONTHS_CAP);
        FZ_CHECK(n >= 0, "months of %s", accounts[a]);
        for (i = 0; i < n && i < MONTHS_CAP; i++)
            invoice_figures(r, accounts[a], months[i], text, &len);
        for (i = 0; i < n_extra; i++)
            invoice_figures(r, accounts[a], extra[i], text, &len);
    }
    return text;
}

/* The months with charges of both accounts in @r, to compare other raters on. */
static int months_of(billing_rater *r, int *out)
{
    int n = 0;
    int k;
    int a;

    for (a = 0; a < 2; a++) {
        k = fz_months(r, accounts[a], out + n, MONTHS_CAP / 2);
        n += k > MONTHS_CAP / 2 ? MONTHS_CAP / 2 : k;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bytes b = {data, size};
    billing_catalog *cat = catalog(&b);
    billing_rater *r;
    billing_rater *empty;
    billing_event *evs[MAX_EVENTS + 1];
    int ok[MAX_EVENTS + 1];
    int extra[MONTHS_CAP];
    int n_extra;
    char err[512];
    char *before;
    char *after;
    billing_status st;
    int n;
    int i;

    if (cat == NULL)
        return 0;
    billing_rater_new(cat, &r, err, sizeof(err));
    if (r == NULL) {
        fz_check_message("billing_rater_new", err, sizeof(err));
        billing_catalog_destroy(cat);
        return 0;
    }
    FZ_CHECK(billing_rater_set_dedupe(r, 0) == BILLING_OK, "dedupe off");
    n = 1 + (int)take(&b, MAX_EVENTS);
    for (i = 0; i <= n; i++) {
        evs[i] = billing_event_new();
        FZ_CHECK(evs[i] != NULL, "out of memory");
        event(&b, evs[i], i);
        err[0] = '\0';
        st = i < n ? billing_rater_add(r, evs[i], err, sizeof(err)) : BILLING_ERR_STATE;
        ok[i] = st == BILLING_OK;
        if (i < n && !ok[i])
            fz_check_message("billing_rater_add", err, sizeof(err));
    }
    n_extra = months_of(r, extra);
    before = invoices(r, extra, n_extra);
    /* One more, taken back: every invoice as before. */
    if (billing_rater_add(r, evs[n], err, sizeof(err)) == BILLING_OK) {
        FZ_CHECK(billing_rater_take_back(r, evs[n], err, sizeof(err)) == BILLING_OK, "remove: %s",
                 err);
        after = invoices(r, extra, n_extra);
        FZ_CHECK(strcmp(before, after) == 0, "add-then-remove changed an invoice:\n%s\n%s", before,
                 after);
        free(after);
    }
    /* All taken back: the invoices of a rater that never saw an event. */
    for (i = n - 1; i >= 0; i--) {
        if (ok[i])
            FZ_CHECK(billing_rater_take_back(r, evs[i], err, sizeof(err)) == BILLING_OK,
                     "remove e%d: %s", i, err);
    }
    billing_rater_new(cat, &empty, err, sizeof(err));
    FZ_CHECK(empty != NULL, "a second rater: %s", err);
    free(before);
    before = invoices(empty, extra, n_extra);
    after = invoices(r, extra, n_extra);
    FZ_CHECK(strcmp(before, after) == 0, "removing every event left:\n%s\ninstead of\n%s", after,
             before);
    free(before);
    free(after);
    for (i = 0; i <= n; i++)
        billing_event_destroy(evs[i]);
    billing_rater_destroy(empty);
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
    return 0;
}
