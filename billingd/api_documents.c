/*
 * api_documents.c - the HTTP API's invoices, usage and quotes
 * (api_documents.h). Invoices are written by the very writers of `billing
 * invoice export` (documents/export.h) into memory; usage and quotes are
 * rated by libbilling on a rater of the account's stored state
 * (bs_balance_rater), never by arithmetic of their own on money.
 */
#include "config.h"

#include <errno.h>
#include <gmp.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_documents.h"
#include "balance.h"
#include "billing.h"
#include "document.h"
#include "export.h"
#include "invoices.h"
#include "md5.h"
#include "numfmt.h"

/* Longest query parameter taken. */
#define PARAM_MAX 128

/* Make @a the problem @status @slug about @field. Returns 0. */
static int fail(bd_answer *a, unsigned status, const char *slug, const char *field, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));
static int fail(bd_answer *a, unsigned status, const char *slug, const char *field, const char *fmt,
                ...)
{
    va_list ap;

    a->status = status;
    a->slug = slug;
    a->field = field;
    va_start(ap, fmt);
    vsnprintf(a->detail, sizeof(a->detail), fmt, ap);
    va_end(ap);
    return 0;
}

/* A database error (or BS_ERR_INVALID from the store: a 400 about nothing in particular). */
static int db_fail(bd_answer *a, const bs_error *err)
{
    if (err->status == BS_ERR_INVALID)
        return fail(a, 400, "invalid", NULL, "%s", err->message);
    a->db = 1;
    a->err = *err;
    return 0;
}

/* Answer @text (taken) as JSON. Returns 0. */
static int ok_text(bd_answer *a, char *text, const char *type)
{
    if (text == NULL)
        return fail(a, 500, "internal", NULL, "out of memory");
    a->status = 200;
    a->type = type;
    a->body = text;
    a->len = strlen(text);
    a->cache = "no-store";
    return 0;
}

static int ok_json(bd_answer *a, json_t *o)
{
    char *text = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;

    json_decref(o);
    return ok_text(a, text, "application/json");
}

/*
 * Query parameter @name of @conn: NULL when absent, else its value; a
 * value over PARAM_MAX bytes sets *@bad.
 */
static const char *param(struct MHD_Connection *conn, const char *name, int *bad)
{
    const char *v = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);

    if (v != NULL && strlen(v) > PARAM_MAX)
        *bad = 1;
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* "YYYY-MM" into @year, @month; 0 or -1. */
static int parse_month(const char *v, int *year, int *month)
{
    if (strlen(v) != 7 || v[4] != '-' || strspn(v, "0123456789-") != 7)
        return -1;
    *year = atoi(v);
    *month = atoi(v + 5);
    return *year >= 1 && *month >= 1 && *month <= 12 ? 0 : -1;
}

/* "YYYY-MM-DD" into @year, @month, @day; 0 or -1. */
static int parse_day(const char *v, int *year, int *month, int *day)
{
    char ym[8];
    int64_t days;

    if (strlen(v) != 10 || v[7] != '-' || strspn(v + 8, "0123456789") != 2)
        return -1;
    memcpy(ym, v, 7);
    ym[7] = '\0';
    if (parse_month(ym, year, month) != 0)
        return -1;
    *day = atoi(v + 8);
    return billing_civil_days(*year, *month, *day, &days) == BILLING_OK ? 0 : -1;
}

/* ---------------------------------------------------------------------- */
/* Invoices                                                                */
/* ---------------------------------------------------------------------- */

int bd_doc_invoices(bs_conn *c, struct MHD_Connection *conn, const char *bound, bd_answer *a)
{
    static const char *const statuses[] = {"draft", "finalized", "void"};
    static const char *const kinds[] = {"invoice", "credit_note"};
    bs_invoice_filter f;
    bs_invoice_summary *rows = NULL;
    char month[16];
    char *end;
    const char *v;
    char *text = NULL;
    size_t size = 0;
    FILE *out;
    json_t *data;
    json_t *o;
    size_t n = 0;
    size_t i;
    int bad = 0;
    int year;
    int mon;
    int rc;

    memset(&f, 0, sizeof(f));
    f.account = param(conn, "account", &bad);
    f.status = param(conn, "status", &bad);
    f.kind = param(conn, "kind", &bad);
    f.number = param(conn, "number", &bad);
    if (bad)
        return fail(a, 400, "invalid", NULL, "a query parameter is over %d bytes", PARAM_MAX);
    if (bound != NULL) {
        if (f.account != NULL && strcmp(f.account, bound) != 0)
            return fail(a, 404, "not-found", "account", "no account '%s'", f.account);
        f.account = bound;
    }
    if (f.status != NULL) {
        for (i = 0; i < 3 && strcmp(f.status, statuses[i]) != 0; i++)
            ;
        if (i == 3)
            return fail(a, 400, "invalid", "status",
                        "status '%s': expected draft, finalized or void", f.status);
    }
    if (f.kind != NULL) {
        for (i = 0; i < 2 && strcmp(f.kind, kinds[i]) != 0; i++)
            ;
        if (i == 2)
            return fail(a, 400, "invalid", "kind", "kind '%s': expected invoice or credit_note",
                        f.kind);
    }
    v = param(conn, "period", &bad);
    if (v != NULL) {
        if (parse_month(v, &year, &mon) != 0)
            return fail(a, 400, "invalid", "period", "period '%s': expected YYYY-MM", v);
        snprintf(month, sizeof(month), "%04d-%02d-01", year % 10000, mon);
        f.month = month;
    }
    f.limit = BD_INVOICES_PAGE;
    v = param(conn, "limit", &bad);
    if (v != NULL) {
        errno = 0;
        f.limit = strtol(v, &end, 10);
        if (errno != 0 || *end != '\0' || f.limit < 1 || f.limit > BD_INVOICES_PAGE_MAX)
            return fail(a, 400, "invalid", "limit", "limit '%s': expected 1 to %d", v,
                        BD_INVOICES_PAGE_MAX);
    }
    v = param(conn, "after", &bad);
    if (v != NULL) {
        errno = 0;
        f.after = strtoll(v, &end, 10);
        if (errno != 0 || *end != '\0' || f.after < 0)
            return fail(a, 400, "invalid", "after", "after '%s': expected an invoice id", v);
    }
    f.limit++; /* one more: is there a next page? */
    if (bs_invoice_search(c, &f, &rows, &n, &a->err) != BS_OK)
        return db_fail(a, &a->err);
    f.limit--;
    out = open_memstream(&text, &size);
    if (out == NULL) {
        free(rows);
        return fail(a, 500, "internal", NULL, "out of memory");
    }
    rc = export_rows_json(out, rows, sizeof(*rows), n > (size_t)f.limit ? (size_t)f.limit : n,
                          export_summary_columns, export_n_summary_columns);
    if (fclose(out) != 0)
        rc = -1;
    data = rc == 0 ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (data == NULL) {
        free(rows);
        return fail(a, 500, "internal", NULL, "out of memory");
    }
    o = json_pack("{s:o}", "data", data);
    if (o != NULL)
        json_object_set_new(o, "next_after",
                            n > (size_t)f.limit ? json_string(rows[f.limit - 1].id) : json_null());
    free(rows);
    return ok_json(a, o);
}

/* The forms of one invoice. */
typedef enum doc_form { FORM_JSON, FORM_PDF, FORM_CSV } doc_form;

/* Cut a ".json", ".pdf" or ".csv" off @ref into @form; else the Accept header says. */
static void form_of(struct MHD_Connection *conn, char *ref, doc_form *form)
{
    size_t n = strlen(ref);
    const char *accept;

    *form = FORM_JSON;
    if (n > 4 && strcmp(ref + n - 4, ".pdf") == 0) {
        *form = FORM_PDF;
        ref[n - 4] = '\0';
    } else if (n > 4 && strcmp(ref + n - 4, ".csv") == 0) {
        *form = FORM_CSV;
        ref[n - 4] = '\0';
    } else if (n > 5 && strcmp(ref + n - 5, ".json") == 0) {
        ref[n - 5] = '\0';
    } else {
        accept = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept");
        if (accept != NULL && strstr(accept, "application/pdf") != NULL)
            *form = FORM_PDF;
        else if (accept != NULL && strstr(accept, "text/csv") != NULL)
            *form = FORM_CSV;
    }
}

/*
 * The creation date of a finalized document's PDF: its finalization
 * ("2026-02-01T00:00:05+08:00", fraction of a second dropped), so that
 * its bytes, and so its ETag, do not change from one request to the next.
 */
static const char *pdf_created(const doc_invoice *d, char *buf, size_t size)
{
    const char *at = doc_field(d, "finalized_at");
    const char *zone;

    if (strlen(at) < 19)
        return NULL;
    zone = at + 19;
    if (*zone == '.')
        zone += strspn(zone + 1, "0123456789") + 1;
    snprintf(buf, size, "%.19s%s", at, zone);
    return buf;
}

/* Does If-None-Match of @conn name @etag (or "*")? */
static int not_modified(struct MHD_Connection *conn, const char *etag)
{
    const char *inm = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "If-None-Match");

    if (inm == NULL)
        return 0;
    inm += strspn(inm, " \t");
    return strstr(inm, etag) != NULL || strcmp(inm, "*") == 0;
}

int bd_doc_invoice(bs_conn *c, struct MHD_Connection *conn, const char *ref, const char *bound,
                   bd_answer *a)
{
    char name[PARAM_MAX + 8];
    char created[48];
    unsigned char digest[BS_MD5_LEN];
    doc_invoice d;
    doc_form form;
    int draft;
    FILE *out;
    char *bytes = NULL;
    size_t len = 0;
    int64_t id;
    size_t i;
    int rc;

    snprintf(name, sizeof(name), "%s", ref);
    form_of(conn, name, &form);
    if (bs_invoice_find(c, name, &id, &a->err) != BS_OK) {
        if (a->err.status == BS_ERR_INVALID)
            return fail(a, 404, "not-found", "number", "no invoice '%s'", name);
        return db_fail(a, &a->err);
    }
    if (doc_load(c, id, &d, &a->err) != BS_OK) {
        if (a->err.status == BS_ERR_INVALID)
            return fail(a, 404, "not-found", "number", "no invoice '%s'", name);
        return db_fail(a, &a->err);
    }
    if (bound != NULL && strcmp(DOC_HEAD(&d)->account, bound) != 0) {
        doc_free(&d);
        return fail(a, 404, "not-found", "number", "no invoice '%s'", name);
    }
    draft = strcmp(DOC_HEAD(&d)->status, "draft") == 0;
    if (form == FORM_PDF) {
        rc = export_invoice_pdf_mem(&d, draft ? NULL : pdf_created(&d, created, sizeof(created)),
                                    &bytes, &len);
        a->type = "application/pdf";
    } else {
        out = open_memstream(&bytes, &len);
        if (out == NULL) {
            rc = -1;
        } else {
            rc = form == FORM_CSV ? export_invoice_csv(out, &d) : export_invoice_json(out, &d);
            if (fclose(out) != 0)
                rc = -1;
        }
        a->type = form == FORM_CSV ? "text/csv; charset=utf-8" : "application/json";
    }
    doc_free(&d);
    if (rc != 0) {
        free(bytes);
        return fail(a, 500, "internal", NULL, "invoice '%s': the document could not be written",
                    name);
    }
    a->status = 200;
    a->body = bytes;
    a->len = len;
    a->cache = "no-store";
    if (!draft) {
        /* Finalized and void: the bytes change only when the document does (voided). */
        bs_md5(bytes, len, digest);
        a->etag[0] = '"';
        for (i = 0; i < BS_MD5_LEN; i++)
            snprintf(a->etag + 1 + 2 * i, 3, "%02x", digest[i]);
        a->etag[1 + 2 * BS_MD5_LEN] = '"';
        a->etag[2 + 2 * BS_MD5_LEN] = '\0';
        a->cache = "private, no-cache";
        if (not_modified(conn, a->etag)) {
            free(a->body);
            a->body = NULL;
            a->len = 0;
            a->status = 304;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Exact sums                                                              */
/* ---------------------------------------------------------------------- */

/* Fraction digits of the decimal @v ("12.50": 2). */
static int scale_of(const char *v)
{
    const char *dot = strchr(v, '.');

    return dot != NULL ? (int)strlen(dot + 1) : 0;
}

/*
 * @q as a JSON string: a decimal when its denominator divides a power of
 * ten up to 10^60 (trailing zeros trimmed down to @min_scale fraction
 * digits: an amount keeps its currency's digits), else "p/q".
 */
static json_t *exact_json(const mpq_t q, int min_scale)
{
    char *text = NULL;
    char *digits = NULL;
    json_t *v;
    mpz_t scaled;
    mpz_t pow;
    size_t len;
    unsigned k;

    mpz_init(scaled);
    mpz_init(pow);
    for (k = 0; k <= 60; k++) {
        mpz_ui_pow_ui(pow, 10, k);
        if (mpz_divisible_p(pow, mpq_denref(q)))
            break;
    }
    if (k > 60) {
        text = mpq_get_str(NULL, 10, q);
    } else {
        mpz_divexact(pow, pow, mpq_denref(q));
        mpz_mul(scaled, mpq_numref(q), pow);
        if ((int)k < min_scale) {
            mpz_ui_pow_ui(pow, 10, (unsigned long)min_scale - k);
            mpz_mul(scaled, scaled, pow);
            k = (unsigned)min_scale;
        }
        mpz_abs(pow, scaled);
        digits = mpz_get_str(NULL, 10, pow);
        text = digits != NULL ? malloc(strlen(digits) + k + 3) : NULL;
        if (text != NULL) {
            size_t nd = strlen(digits);
            size_t pad = nd <= k ? k + 1 - nd : 0;

            len = 0;
            if (mpz_sgn(scaled) < 0)
                text[len++] = '-';
            memset(text + len, '0', pad);
            len += pad;
            memcpy(text + len, digits, nd);
            len += nd;
            text[len] = '\0';
            if (k > 0) {
                /* the point k digits from the end, then trailing zeros trimmed */
                memmove(text + len - k + 1, text + len - k, k + 1);
                text[len - k] = '.';
                len++;
                while (text[len - 1] == '0' && text[len - 1 - min_scale] != '.')
                    text[--len] = '\0';
                if (text[len - 1] == '.')
                    text[--len] = '\0';
            }
        }
        free(digits);
    }
    v = text != NULL ? json_string(text) : NULL;
    free(text);
    mpz_clear(scaled);
    mpz_clear(pow);
    return v;
}

/* ---------------------------------------------------------------------- */
/* Usage                                                                   */
/* ---------------------------------------------------------------------- */

/* Groups of one usage answer at most. */
#define GROUPS_MAX 4096
/* Months one usage answer covers at most. */
#define USAGE_MONTHS_MAX 36
/* Resources of one group_by=resource answer at most (a rater each). */
#define RESOURCES_MAX 256

/* One group: its key (meter, model, region, month or resource) and unit, exact sums. */
typedef struct usage_group {
    char key[160];
    char meter[32];
    char unit[32];
    mpq_t quantity;
    mpq_t amount;
    int scale; /* the currency's fraction digits, as the lines' amounts have them */
    int64_t lines;
} usage_group;

typedef enum group_by { BY_METER, BY_MODEL, BY_REGION, BY_MONTH, BY_RESOURCE, BY_DAY } group_by;
static const char *const group_names[] = {"meter", "model", "region", "month", "resource", "day"};
#define N_GROUP_BY (sizeof(group_names) / sizeof(group_names[0]))

/* What one usage answer gathers. */
typedef struct usage {
    usage_group *groups; /* cap, or GROUPS_MAX when cap is 0 */
    size_t n;
    size_t cap;
    group_by by;
    char currency[16];
    char msg[512];
} usage;

/*
 * The usage and included lines of @r's invoices of @account for months
 * @ym0..@ym1 (year*12 + month-1) into @u's groups, keyed per u->by (or
 * @key when not NULL). Returns 0, or -1 with a message in u->msg.
 */
static int usage_lines(usage *u, billing_rater *r, const char *account, int ym0, int ym1,
                       const char *key)
{
    billing_invoice *inv;
    char month[16];
    char k[160];
    mpq_t v;
    size_t i;
    size_t g;
    int ym;
    int rc = 0;

    mpq_init(v);
    for (ym = ym0; ym <= ym1 && rc == 0; ym++) {
        if (billing_rater_invoice(r, account, ym / 12, ym % 12 + 1, &inv, u->msg, sizeof(u->msg)) !=
            BILLING_OK) {
            rc = -1;
            break;
        }
        snprintf(u->currency, sizeof(u->currency), "%s", billing_invoice_currency(inv));
        snprintf(month, sizeof(month), "%04d-%02d", (ym / 12) % 10000, ym % 12 + 1);
        for (i = 0; i < billing_invoice_line_count(inv) && rc == 0; i++) {
            billing_line_kind kind = billing_invoice_line_kind(inv, i);
            const char *meter = billing_invoice_line_meter(inv, i);
            const char *unit = billing_invoice_line_unit(inv, i);
            const char *amount = billing_invoice_line_amount_rounded(inv, i);

            if (kind != BILLING_LINE_USAGE && kind != BILLING_LINE_INCLUDED)
                continue;
            snprintf(k, sizeof(k), "%s",
                     key != NULL          ? key
                     : u->by == BY_METER  ? meter
                     : u->by == BY_MODEL  ? billing_invoice_line_model(inv, i)
                     : u->by == BY_REGION ? billing_invoice_line_region(inv, i)
                                          : month);
            for (g = 0; g < u->n; g++)
                if (strcmp(u->groups[g].key, k) == 0 && strcmp(u->groups[g].meter, meter) == 0 &&
                    strcmp(u->groups[g].unit, unit) == 0)
                    break;
            if (g == u->n) {
                if (u->n == (u->cap != 0 ? u->cap : GROUPS_MAX)) {
                    snprintf(u->msg, sizeof(u->msg), "more than %zu groups",
                             u->cap != 0 ? u->cap : (size_t)GROUPS_MAX);
                    rc = -1;
                    break;
                }
                snprintf(u->groups[g].key, sizeof(u->groups[g].key), "%s", k);
                snprintf(u->groups[g].meter, sizeof(u->groups[g].meter), "%s", meter);
                snprintf(u->groups[g].unit, sizeof(u->groups[g].unit), "%s", unit);
                mpq_init(u->groups[g].quantity);
                mpq_init(u->groups[g].amount);
                u->n++;
            }
            if (scale_of(amount) > u->groups[g].scale)
                u->groups[g].scale = scale_of(amount);
            if (numfmt_parse(v, billing_invoice_line_quantity(inv, i)) != 0) {
                snprintf(u->msg, sizeof(u->msg), "a quantity of '%s' is not a number", account);
                rc = -1;
                break;
            }
            mpq_add(u->groups[g].quantity, u->groups[g].quantity, v);
            if (numfmt_parse(v, amount) != 0) {
                snprintf(u->msg, sizeof(u->msg), "an amount of '%s' is not a number", account);
                rc = -1;
                break;
            }
            mpq_add(u->groups[g].amount, u->groups[g].amount, v);
            u->groups[g].lines++;
        }
        billing_invoice_destroy(inv);
    }
    mpq_clear(v);
    return rc;
}

/* One resource's rater (group_by=resource). */
typedef struct by_resource {
    char resource[129];
    billing_rater *r;
} by_resource;

/* What resource_event receives. */
typedef struct resource_walk {
    bs_catalog *cat;
    billing_event *ev;
    by_resource *res; /* RESOURCES_MAX */
    size_t n;
    billing_time_t from; /* the first month's start: earlier events are left out */
    char msg[512];
} resource_walk;

/* A bs_event_fn: the stored raw event into its resource's rater. */
static int resource_event(void *arg, const char *account, const char *id, const char *resource,
                          const char *meter, billing_time_t start, billing_time_t end,
                          const char *quantity, const char *model, const char *region)
{
    resource_walk *w = arg;
    size_t i;

    if (end <= w->from)
        return 0;
    for (i = 0; i < w->n && strcmp(w->res[i].resource, resource) != 0; i++)
        ;
    if (i == w->n) {
        if (w->n == RESOURCES_MAX) {
            snprintf(w->msg, sizeof(w->msg), "more than %d resources: ask for fewer months",
                     RESOURCES_MAX);
            return 1;
        }
        snprintf(w->res[i].resource, sizeof(w->res[i].resource), "%s", resource);
        if (billing_rater_new(bs_catalog_lib(w->cat), &w->res[i].r, w->msg, sizeof(w->msg)) !=
            BILLING_OK)
            return 1;
        billing_rater_set_dedupe(w->res[i].r, 0);
        w->n++;
    }
    if (bs_event_set(w->ev, account, id, resource, meter, start, end, quantity, model, region,
                     w->msg, sizeof(w->msg)) != BILLING_OK ||
        billing_rater_add(w->res[i].r, w->ev, w->msg, sizeof(w->msg)) != BILLING_OK) {
        if (w->msg[0] == '\0')
            snprintf(w->msg, sizeof(w->msg), "stored event '%.128s' cannot be rated", id);
        return 1;
    }
    return 0;
}

/*
 * group_by=resource: the stored raw events of @account (the aggregates
 * keep no resource) before the end of month @ym1, each resource on a
 * rater of its own, their lines of months @ym0..@ym1 into @u.
 */
static int usage_by_resource(bs_conn *c, bs_catalog *cat, const char *account,
                             const billing_zone *zone, int ym0, int ym1, usage *u, bd_answer *a)
{
    billing_time_t before;
    resource_walk w;
    json_t *ids = json_pack("[s]", account);
    char *list = ids != NULL ? json_dumps(ids, JSON_COMPACT) : NULL;
    bs_status st;
    size_t i;
    int rc = 0;

    memset(&w, 0, sizeof(w));
    w.cat = cat;
    w.ev = billing_event_new();
    w.res = calloc(RESOURCES_MAX, sizeof(*w.res));
    if (list == NULL || w.ev == NULL || w.res == NULL ||
        billing_zone_month_start(zone, ym0 / 12, ym0 % 12 + 1, &w.from) != BILLING_OK ||
        billing_zone_month_start(zone, (ym1 + 1) / 12, (ym1 + 1) % 12 + 1, &before) != BILLING_OK) {
        rc = fail(a, 500, "internal", NULL, "usage of '%s': out of memory", account);
        goto out;
    }
    st = bs_events_fetch(c, list, before, resource_event, &w, &a->err);
    if (st == BS_ERR_INVALID) {
        rc = fail(a, 400, "invalid", "group_by", "usage of '%s' by resource: %s", account, w.msg);
        goto out;
    }
    if (st != BS_OK) {
        rc = db_fail(a, &a->err);
        goto out;
    }
    for (i = 0; i < w.n; i++)
        if (usage_lines(u, w.res[i].r, account, ym0, ym1, w.res[i].resource) != 0) {
            rc = fail(a, 400, "invalid", "group_by", "usage of '%s': %s", account, u->msg);
            goto out;
        }
out:
    for (i = 0; w.res != NULL && i < w.n; i++)
        billing_rater_destroy(w.res[i].r);
    free(w.res);
    billing_event_destroy(w.ev);
    free(list);
    json_decref(ids);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Usage by day                                                            */
/* ---------------------------------------------------------------------- */

/* Months one group_by=day answer covers at most (a rater per day). */
#define USAGE_DAY_MONTHS_MAX 3
/* Days of those months at most. */
#define DAYS_MAX (USAGE_DAY_MONTHS_MAX * 31)
/* (meter, unit) groups of one month's usage lines at most. */
#define METER_GROUPS_MAX 64

/* Days since 1970-01-01 of the valid date @y-@m-@d (billing_civil_days). */
static int64_t days_from_civil(int y, int m, int d)
{
    int64_t days = 0;

    billing_civil_days(y, m, d, &days);
    return days;
}

/* Days of month @m of year @y. */
static int month_days(int y, int m)
{
    return (int)(days_from_civil(m == 12 ? y + 1 : y, m == 12 ? 1 : m + 1, 1) -
                 days_from_civil(y, m, 1));
}

/* @zone's UTC offset at second @s, in seconds. */
static int64_t offset_at(const billing_zone *zone, int64_t s)
{
    return billing_zone_offset(zone, s * BILLING_NS_PER_SEC);
}

/*
 * The instant local day @y-@m-@d begins in @zone: the 1st as
 * billing_zone_month_start says; another day at local midnight, the
 * earlier one when midnight occurs twice, the end of the gap when a DST
 * gap skips it. Returns 0 or -1 (out of range).
 */
static int day_start(const billing_zone *zone, int y, int m, int d, billing_time_t *out)
{
    int64_t local = days_from_civil(y, m, d) * 86400;
    int64_t before = offset_at(zone, local - 2 * 86400);
    int64_t after = offset_at(zone, local + 2 * 86400);
    int64_t ca = local - before;
    int64_t cb = local - after;
    int va = offset_at(zone, ca) == before;
    int vb = offset_at(zone, cb) == after;
    int64_t lo;
    int64_t hi;

    if (d == 1)
        return billing_zone_month_start(zone, y, m, out) == BILLING_OK ? 0 : -1;
    if (va && vb)
        lo = ca < cb ? ca : cb;
    else if (va || vb)
        lo = va ? ca : cb;
    else {
        /* midnight is in a gap: the first second with the offset after it */
        lo = ca < cb ? ca : cb;
        hi = ca < cb ? cb : ca;
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;

            if (offset_at(zone, mid) == after)
                hi = mid;
            else
                lo = mid;
        }
        lo = hi;
    }
    *out = lo * BILLING_NS_PER_SEC;
    return 0;
}

/* What day_event receives: the days' bounds and a rater per day. */
typedef struct day_walk {
    bs_catalog *cat;
    billing_event *ev;
    billing_time_t start[DAYS_MAX + 1]; /* start[n]: the end of the last day */
    billing_rater *day[DAYS_MAX];
    size_t n;
    char msg[512];
} day_walk;

/*
 * Traffic piece [@ps, @pe) of an event of @quantity bytes over [@start,
 * @end) into @dst: the whole quantity rated over the piece on a rater of
 * its own, its aggregates scaled by the piece's share of the event's
 * duration (pricing.md: traffic is spread evenly over its interval) and
 * added to @dst exactly.
 */
static int traffic_piece(day_walk *w, billing_rater *dst, const char *account, const char *id,
                         const char *resource, billing_time_t start, billing_time_t end,
                         billing_time_t ps, billing_time_t pe, const char *quantity,
                         const char *model, const char *region)
{
    billing_rater *t = NULL;
    char sum[BILLING_AGG_SUM_MAX];
    const char *acc;
    const char *version;
    const char *rmodel;
    const char *rregion;
    const char *sub;
    billing_meter meter;
    uint64_t pieces;
    unsigned epoch;
    int ym;
    char *text;
    mpq_t v;
    mpq_t share;
    size_t i;
    int rc = -1;

    mpq_init(v);
    mpq_init(share);
    mpz_set_si(mpq_numref(share), (long)(pe - ps));
    mpz_set_si(mpq_denref(share), (long)(end - start));
    mpq_canonicalize(share);
    if (billing_rater_new(bs_catalog_lib(w->cat), &t, w->msg, sizeof(w->msg)) != BILLING_OK ||
        billing_rater_set_dedupe(t, 0) != BILLING_OK ||
        bs_event_set(w->ev, account, id, resource, "traffic", ps, pe, quantity, model, region,
                     w->msg, sizeof(w->msg)) != BILLING_OK ||
        billing_rater_add(t, w->ev, w->msg, sizeof(w->msg)) != BILLING_OK)
        goto out;
    for (i = 0; i < billing_rater_aggregate_count(t); i++) {
        if (billing_rater_aggregate(t, i, &acc, &ym, &meter, &version, &rmodel, &rregion, &sub,
                                    &epoch, &pieces, sum, sizeof(sum)) != BILLING_OK ||
            mpq_set_str(v, sum, 10) != 0) {
            snprintf(w->msg, sizeof(w->msg), "event '%.128s': its traffic cannot be split", id);
            goto out;
        }
        mpq_canonicalize(v);
        mpq_mul(v, v, share);
        text = mpq_get_str(NULL, 10, v);
        if (text == NULL || strlen(text) >= BILLING_AGG_SUM_MAX ||
            billing_rater_add_aggregate(dst, acc, ym / 100, ym % 100, meter, version, rmodel,
                                        rregion, sub, epoch, pieces, text, w->msg,
                                        sizeof(w->msg)) != BILLING_OK) {
            free(text);
            goto out;
        }
        free(text);
    }
    rc = 0;
out:
    billing_rater_destroy(t);
    mpq_clear(v);
    mpq_clear(share);
    return rc;
}

/*
 * A bs_event_fn: the stored raw event cut at the local midnights of the
 * walk's days, each piece into its day's rater: a time-based meter's
 * piece keeps the event's quantity (its charge is quantity x duration),
 * a traffic piece gets its share of the bytes (traffic_piece).
 */
static int day_event(void *arg, const char *account, const char *id, const char *resource,
                     const char *meter, billing_time_t start, billing_time_t end,
                     const char *quantity, const char *model, const char *region)
{
    day_walk *w = arg;
    size_t lo = 0;
    size_t hi = w->n;
    size_t i;

    if (end <= w->start[0] || start >= w->start[w->n])
        return 0;
    /* the first day whose end is after start */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (w->start[mid + 1] <= start)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (i = lo; i < w->n && w->start[i] < end; i++) {
        billing_time_t ps = start > w->start[i] ? start : w->start[i];
        billing_time_t pe = end < w->start[i + 1] ? end : w->start[i + 1];

        if (w->day[i] == NULL) {
            if (billing_rater_new(bs_catalog_lib(w->cat), &w->day[i], w->msg, sizeof(w->msg)) !=
                BILLING_OK)
                return 1;
            billing_rater_set_dedupe(w->day[i], 0);
        }
        if ((ps != start || pe != end) && strcmp(meter, "traffic") == 0) {
            if (traffic_piece(w, w->day[i], account, id, resource, start, end, ps, pe, quantity,
                              model, region) != 0)
                goto fail;
            continue;
        }
        if (bs_event_set(w->ev, account, id, resource, meter, ps, pe, quantity, model, region,
                         w->msg, sizeof(w->msg)) != BILLING_OK ||
            billing_rater_add(w->day[i], w->ev, w->msg, sizeof(w->msg)) != BILLING_OK)
            goto fail;
    }
    return 0;
fail:
    if (w->msg[0] == '\0')
        snprintf(w->msg, sizeof(w->msg), "stored event '%.128s' cannot be rated", id);
    return 1;
}

/* Free the sums of @u's groups and empty it. */
static void usage_clear(usage *u)
{
    size_t g;

    for (g = 0; g < u->n; g++) {
        mpq_clear(u->groups[g].quantity);
        mpq_clear(u->groups[g].amount);
    }
    u->n = 0;
}

/* The group of @u with @meter and @unit, or NULL. */
static const usage_group *group_of(const usage *u, const char *meter, const char *unit)
{
    size_t g;

    for (g = 0; g < u->n; g++)
        if (strcmp(u->groups[g].meter, meter) == 0 && strcmp(u->groups[g].unit, unit) == 0)
            return &u->groups[g];
    return NULL;
}

/*
 * group_by=day: the stored raw events of @account cut at local midnight
 * into a rater per day of months @ym0..@ym1 (year*12 + month-1); then,
 * month by month, the days merged in order into one rater, whose usage
 * lines after day d less those after day d-1 are day d's usage: the
 * quantities exact, the amounts the change of the lines' rounded amounts
 * (so a month's days add up to its lines exactly). Days @d0..@d1 (indexes
 * into the months' days) into @u, keyed "YYYY-MM-DD"; days without usage
 * are left out.
 */
static int usage_by_day(bs_conn *c, bs_catalog *cat, const char *account, const billing_zone *zone,
                        int ym0, int ym1, size_t d0, size_t d1, usage *u, bd_answer *a)
{
    day_walk *w = calloc(1, sizeof(*w));
    json_t *ids = json_pack("[s]", account);
    char *list = ids != NULL ? json_dumps(ids, JSON_COMPACT) : NULL;
    billing_rater *month = NULL;
    usage sums[3]; /* after the previous day, after this day, this day's own lines */
    usage *prev = &sums[0];
    usage *cur = &sums[1];
    usage *tmp;
    char key[16];
    size_t first;
    size_t i;
    size_t g;
    bs_status st;
    mpq_t dq;
    mpq_t da;
    int ym;
    int d;
    int rc = 0;

    memset(sums, 0, sizeof(sums));
    mpq_init(dq);
    mpq_init(da);
    for (i = 0; i < 3; i++) {
        sums[i].by = BY_METER;
        sums[i].cap = METER_GROUPS_MAX;
        sums[i].groups = calloc(METER_GROUPS_MAX, sizeof(*sums[i].groups));
    }
    if (w == NULL || list == NULL || sums[0].groups == NULL || sums[1].groups == NULL ||
        sums[2].groups == NULL || (w->ev = billing_event_new()) == NULL) {
        rc = fail(a, 500, "internal", NULL, "usage of '%s': out of memory", account);
        goto out;
    }
    w->cat = cat;
    for (ym = ym0; ym <= ym1; ym++)
        for (d = 1; d <= month_days(ym / 12, ym % 12 + 1); d++)
            if (day_start(zone, ym / 12, ym % 12 + 1, d, &w->start[w->n++]) != 0) {
                rc = fail(a, 400, "invalid", "from", "usage of '%s': a day out of range", account);
                goto out;
            }
    if (billing_zone_month_start(zone, (ym1 + 1) / 12, (ym1 + 1) % 12 + 1, &w->start[w->n]) !=
        BILLING_OK) {
        rc = fail(a, 400, "invalid", "to", "usage of '%s': a day out of range", account);
        goto out;
    }
    st = bs_events_fetch(c, list, w->start[w->n], day_event, w, &a->err);
    if (st == BS_ERR_INVALID) {
        rc = fail(a, 500, "internal", "group_by", "usage of '%s' by day: %s", account, w->msg);
        goto out;
    }
    if (st != BS_OK) {
        rc = db_fail(a, &a->err);
        goto out;
    }
    first = 0;
    for (ym = ym0; ym <= ym1; ym++) {
        size_t nd = (size_t)month_days(ym / 12, ym % 12 + 1);

        billing_rater_destroy(month);
        month = NULL;
        usage_clear(prev);
        if (billing_rater_new(bs_catalog_lib(cat), &month, u->msg, sizeof(u->msg)) != BILLING_OK ||
            billing_rater_set_dedupe(month, 0) != BILLING_OK)
            goto rating;
        for (i = first; i < first + nd; i++) {
            if (w->day[i] == NULL)
                continue;
            usage_clear(cur);
            usage_clear(&sums[2]);
            if (billing_rater_merge(month, w->day[i], u->msg, sizeof(u->msg)) != BILLING_OK ||
                usage_lines(cur, month, account, ym, ym, NULL) != 0 ||
                usage_lines(&sums[2], w->day[i], account, ym, ym, NULL) != 0) {
                if (cur->msg[0] != '\0' || sums[2].msg[0] != '\0')
                    memcpy(u->msg, cur->msg[0] != '\0' ? cur->msg : sums[2].msg, sizeof(u->msg));
                goto rating;
            }
            snprintf(u->currency, sizeof(u->currency), "%s", cur->currency);
            snprintf(key, sizeof(key), "%04d-%02d-%02d", (ym / 12) % 10000, ym % 12 + 1,
                     (int)(i - first + 1));
            for (g = 0; g < cur->n && i >= d0 && i <= d1; g++) {
                const usage_group *was = group_of(prev, cur->groups[g].meter, cur->groups[g].unit);
                const usage_group *own =
                    group_of(&sums[2], cur->groups[g].meter, cur->groups[g].unit);
                usage_group *row;

                mpq_set(dq, cur->groups[g].quantity);
                mpq_set(da, cur->groups[g].amount);
                if (was != NULL) {
                    mpq_sub(dq, dq, was->quantity);
                    mpq_sub(da, da, was->amount);
                }
                if (own == NULL && mpq_sgn(dq) == 0 && mpq_sgn(da) == 0)
                    continue;
                if (u->n == GROUPS_MAX) {
                    snprintf(u->msg, sizeof(u->msg), "more than %d groups", GROUPS_MAX);
                    goto rating;
                }
                row = &u->groups[u->n++];
                snprintf(row->key, sizeof(row->key), "%s", key);
                snprintf(row->meter, sizeof(row->meter), "%s", cur->groups[g].meter);
                snprintf(row->unit, sizeof(row->unit), "%s", cur->groups[g].unit);
                mpq_init(row->quantity);
                mpq_init(row->amount);
                mpq_set(row->quantity, dq);
                mpq_set(row->amount, da);
                row->scale = cur->groups[g].scale;
                row->lines = own != NULL ? own->lines : 0;
            }
            tmp = prev;
            prev = cur;
            cur = tmp;
        }
        first += nd;
    }
    goto out;
rating:
    rc = fail(a, 500, "internal", "group_by", "usage of '%s' by day: %s", account, u->msg);
out:
    for (i = 0; i < 3; i++) {
        usage_clear(&sums[i]);
        free(sums[i].groups);
    }
    for (i = 0; w != NULL && i < w->n; i++)
        billing_rater_destroy(w->day[i]);
    if (w != NULL)
        billing_event_destroy(w->ev);
    free(w);
    billing_rater_destroy(month);
    mpq_clear(dq);
    mpq_clear(da);
    free(list);
    json_decref(ids);
    return rc;
}

int bd_doc_usage(bs_conn *c, bs_catalog *cat, struct MHD_Connection *conn, const char *account,
                 bd_answer *a)
{
    billing_time_t now = (billing_time_t)time(NULL) * BILLING_NS_PER_SEC;
    const billing_zone *zone = bs_catalog_zone(cat, account);
    const char *from = NULL;
    const char *to = NULL;
    const char *by_text;
    billing_rater *r = NULL;
    usage u;
    char first[16];
    char last[16];
    json_t *rows = NULL;
    json_t *o;
    size_t i;
    size_t g;
    int bad = 0;
    int y0;
    int m0;
    int y1;
    int m1;
    int d0 = 1;
    int d1 = 0;
    int days;
    int months;
    int rc = 0;

    memset(&u, 0, sizeof(u));
    if (zone == NULL)
        return fail(a, 404, "not-found", "account", "no account '%s'", account);
    billing_zone_year_month(zone, now, &y0, &m0);
    y1 = y0;
    m1 = m0;
    from = param(conn, "from", &bad);
    to = param(conn, "to", &bad);
    by_text = param(conn, "group_by", &bad);
    if (bad)
        return fail(a, 400, "invalid", NULL, "a query parameter is over %d bytes", PARAM_MAX);
    if (by_text != NULL) {
        for (i = 0; i < N_GROUP_BY && strcmp(by_text, group_names[i]) != 0; i++)
            ;
        if (i == N_GROUP_BY)
            return fail(a, 400, "invalid", "group_by",
                        "group_by '%s': expected meter, model, region, month, resource or day",
                        by_text);
        u.by = (group_by)i;
    }
    days = u.by == BY_DAY;
    if (from != NULL && (days && strlen(from) == 10 ? parse_day(from, &y0, &m0, &d0)
                                                    : parse_month(from, &y0, &m0)) != 0)
        return fail(a, 400, "invalid", "from", "from '%s': expected YYYY-MM%s", from,
                    days ? " or YYYY-MM-DD" : "");
    if (to != NULL &&
        (days && strlen(to) == 10 ? parse_day(to, &y1, &m1, &d1) : parse_month(to, &y1, &m1)) != 0)
        return fail(a, 400, "invalid", "to", "to '%s': expected YYYY-MM%s", to,
                    days ? " or YYYY-MM-DD" : "");
    if (from != NULL && to == NULL) {
        y1 = y0;
        m1 = m0;
        d1 = strlen(from) == 10 ? d0 : 0;
    }
    if (d1 == 0)
        d1 = month_days(y1, m1);
    months = days ? USAGE_DAY_MONTHS_MAX : USAGE_MONTHS_MAX;
    if (y1 * 12 + m1 < y0 * 12 + m0 || y1 * 12 + m1 - (y0 * 12 + m0) >= months ||
        (y1 * 12 + m1 == y0 * 12 + m0 && d1 < d0))
        return fail(a, 400, "invalid", "to", "from %s to %s: expected 1 to %d months%s",
                    from != NULL ? from : "this month", to != NULL ? to : "from", months,
                    days ? " (group_by=day), from not after to" : "");
    u.groups = calloc(GROUPS_MAX, sizeof(*u.groups));
    if (u.groups == NULL)
        return fail(a, 500, "internal", NULL, "out of memory");
    if (days) {
        /* d0, d1: indexes into the days of the months from y0-m0 */
        usage_by_day(c, cat, account, zone, y0 * 12 + m0 - 1, y1 * 12 + m1 - 1, (size_t)d0 - 1,
                     (size_t)(days_from_civil(y1, m1, d1) - days_from_civil(y0, m0, 1)), &u, a);
        if (a->slug != NULL || a->db)
            goto out;
    } else if (u.by == BY_RESOURCE) {
        usage_by_resource(c, cat, account, zone, y0 * 12 + m0 - 1, y1 * 12 + m1 - 1, &u, a);
        if (a->slug != NULL || a->db)
            goto out;
    } else {
        if (bs_balance_rater(c, cat, account, NULL, now, &r, &a->err) != BS_OK) {
            rc = db_fail(a, &a->err);
            goto out;
        }
        if (usage_lines(&u, r, account, y0 * 12 + m0 - 1, y1 * 12 + m1 - 1, NULL) != 0) {
            rc = fail(a, 500, "internal", NULL, "usage of '%s': %s", account, u.msg);
            goto out;
        }
    }
    rows = json_array();
    for (g = 0; rows != NULL && g < u.n; g++) {
        json_t *row = json_pack("{s:s, s:s, s:o, s:s, s:o, s:I}", "meter", u.groups[g].meter,
                                group_names[u.by], u.groups[g].key, "quantity",
                                exact_json(u.groups[g].quantity, 0), "unit", u.groups[g].unit,
                                "amount", exact_json(u.groups[g].amount, u.groups[g].scale),
                                "lines", (json_int_t)u.groups[g].lines);

        if (row == NULL || json_array_append_new(rows, row) != 0) {
            rc = fail(a, 500, "internal", NULL, "out of memory");
            goto out;
        }
    }
    snprintf(first, sizeof(first), "%04d-%02d", y0 % 10000, m0);
    snprintf(last, sizeof(last), "%04d-%02d", y1 % 10000, m1);
    if (days) {
        snprintf(first + 7, sizeof(first) - 7, "-%02d", d0);
        snprintf(last + 7, sizeof(last) - 7, "-%02d", d1);
    }
    o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:O}", "account", account, "from", first, "to", last,
                  "group_by", group_names[u.by], "currency", u.currency, "data",
                  rows != NULL ? rows : json_null());
    rc = ok_json(a, o);
out:
    for (g = 0; g < u.n; g++) {
        mpq_clear(u.groups[g].quantity);
        mpq_clear(u.groups[g].amount);
    }
    free(u.groups);
    json_decref(rows);
    billing_rater_destroy(r);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Quotes                                                                  */
/* ---------------------------------------------------------------------- */

/* Longest quote: a year of usage. */
#define QUOTE_SECONDS_MAX (366 * 86400LL)
/* Most terms of a quoted plan. */
#define QUOTE_TERMS_MAX 366

/* The figures of a quote summed over its months. */
typedef struct quote_sums {
    mpq_t subtotal, credits, tax, total;
    int scale; /* the currency's fraction digits */
} quote_sums;

/* The invoices of @account's months @ym0..@ym1 (year*12 + month-1) summed into @s. */
static int quote_sum(billing_rater *r, const char *account, int ym0, int ym1, quote_sums *s,
                     char *msg, size_t size)
{
    mpq_ptr sum[4] = {s->subtotal, s->credits, s->tax, s->total};
    const char *fig[4];
    billing_invoice *inv;
    mpq_t v;
    size_t k;
    int ym;
    int rc = 0;

    mpq_init(v);
    for (ym = ym0; ym <= ym1 && rc == 0; ym++) {
        if (billing_rater_invoice(r, account, ym / 12, ym % 12 + 1, &inv, msg, size) !=
            BILLING_OK) {
            rc = -1;
            break;
        }
        fig[0] = billing_invoice_subtotal(inv);
        fig[1] = billing_invoice_credits(inv);
        fig[2] = billing_invoice_tax(inv);
        fig[3] = billing_invoice_total(inv);
        for (k = 0; k < 4 && rc == 0; k++) {
            if (numfmt_parse(v, fig[k]) != 0) {
                snprintf(msg, size, "a figure of the invoice is not a number: '%s'", fig[k]);
                rc = -1;
            } else {
                mpq_add(sum[k], sum[k], v);
            }
        }
        if (scale_of(fig[3]) > s->scale)
            s->scale = scale_of(fig[3]);
        billing_invoice_destroy(inv);
    }
    mpq_clear(v);
    return rc;
}

/* A string member @key of @o, or @dflt; a member that is not a string sets *@bad. */
static const char *member(json_t *o, const char *key, const char *dflt, int *bad)
{
    json_t *v = json_object_get(o, key);

    if (v == NULL || json_is_null(v))
        return dflt;
    if (!json_is_string(v) || strlen(json_string_value(v)) > PARAM_MAX) {
        *bad = 1;
        return dflt;
    }
    return json_string_value(v);
}

int bd_doc_quote(bs_conn *c, bs_catalog *cat, const char *body, size_t len, const char *bound,
                 bd_answer *a)
{
    billing_time_t now = (billing_time_t)time(NULL) * BILLING_NS_PER_SEC;
    const billing_zone *zone;
    const char *account;
    const char *meter;
    const char *model;
    const char *region;
    const char *quantity;
    const char *text;
    billing_time_t start = now;
    billing_time_t end;
    const char *plan;
    billing_rater *r = NULL;
    billing_event *ev = NULL;
    bs_catalog *with_plan = NULL;
    json_t *terms;
    quote_sums before;
    quote_sums after;
    json_error_t jerr;
    json_t *in;
    json_t *seconds;
    json_t *o;
    char msg[512];
    char when[40];
    char until[40];
    int bad = 0;
    int y;
    int m;
    int ym0;
    int ym1;
    int rc = 0;

    in = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (in == NULL || !json_is_object(in)) {
        json_decref(in);
        return fail(a, 400, "invalid", "body", "the body is not a JSON object%s%s",
                    in == NULL ? ": " : "", in == NULL ? jerr.text : "");
    }
    account = member(in, "account", NULL, &bad);
    meter = member(in, "meter", "gpu", &bad);
    model = member(in, "model", "", &bad);
    region = member(in, "region", "", &bad);
    quantity = member(in, "quantity", "1", &bad);
    plan = member(in, "plan", NULL, &bad);
    if (bad) {
        rc = fail(a, 400, "invalid", "body",
                  "account, meter, model, region, quantity, plan, start and end are strings of at "
                  "most %d bytes",
                  PARAM_MAX);
        goto done;
    }
    if (account == NULL) {
        rc = fail(a, 400, "invalid", "account", "account: missing");
        goto done;
    }
    zone = bs_catalog_zone(cat, account);
    if (zone == NULL || (bound != NULL && strcmp(account, bound) != 0)) {
        rc = fail(a, 404, "not-found", "account", "no account '%s'", account);
        goto done;
    }
    text = member(in, "start", NULL, &bad);
    if (text != NULL && billing_time_parse(text, &start, msg, sizeof(msg)) != BILLING_OK) {
        rc = fail(a, 400, "invalid", "start", "start '%s': %s", text, msg);
        goto done;
    }
    seconds = json_object_get(in, "seconds");
    text = member(in, "end", NULL, &bad);
    if (text != NULL) {
        if (billing_time_parse(text, &end, msg, sizeof(msg)) != BILLING_OK) {
            rc = fail(a, 400, "invalid", "end", "end '%s': %s", text, msg);
            goto done;
        }
    } else if (seconds != NULL && json_is_integer(seconds) && json_integer_value(seconds) > 0 &&
               json_integer_value(seconds) <= QUOTE_SECONDS_MAX) {
        end = start + (billing_time_t)json_integer_value(seconds) * BILLING_NS_PER_SEC;
    } else {
        rc = fail(a, 400, "invalid", "seconds", "give end (RFC 3339) or seconds (1 to %lld)",
                  QUOTE_SECONDS_MAX);
        goto done;
    }
    if (end <= start || end - start > QUOTE_SECONDS_MAX * BILLING_NS_PER_SEC) {
        rc = fail(a, 400, "invalid", "end", "end must be after start, by at most %lld seconds",
                  QUOTE_SECONDS_MAX);
        goto done;
    }
    ev = billing_event_new();
    if (ev == NULL) {
        rc = fail(a, 500, "internal", NULL, "out of memory");
        goto done;
    }
    if (bs_event_set(ev, account, "quote", "quote", meter, start, end, quantity, model, region, msg,
                     sizeof(msg)) != BILLING_OK) {
        rc = fail(a, 400, "invalid", "body", "quote: %s",
                  msg[0] != '\0' ? msg : "an unknown meter (gpu, gpuless, storage, traffic)");
        goto done;
    }
    billing_zone_year_month(zone, start, &y, &m);
    ym0 = y * 12 + m - 1;
    billing_zone_year_month(zone, end - 1, &y, &m);
    ym1 = y * 12 + m - 1;
    if (plan != NULL) {
        /*
         * A hypothetical subscription of the usage's resource to @plan from
         * its start: on a catalog of its own, read for this quote (the
         * shared one is frozen), for "terms" terms (default 1).
         */
        terms = json_object_get(in, "terms");
        if (terms != NULL && (!json_is_integer(terms) || json_integer_value(terms) < 1 ||
                              json_integer_value(terms) > QUOTE_TERMS_MAX)) {
            rc = fail(a, 400, "invalid", "terms", "terms: expected 1 to %d", QUOTE_TERMS_MAX);
            goto done;
        }
        with_plan = bs_catalog_read(c, bs_catalog_book(cat), &a->err);
        if (with_plan == NULL) {
            rc = db_fail(a, &a->err);
            goto done;
        }
        if (billing_catalog_add_subscription(bs_catalog_lib(with_plan), "quote", account, "quote",
                                             plan, start,
                                             terms != NULL ? (int)json_integer_value(terms) : 1,
                                             NULL, msg, sizeof(msg)) != BILLING_OK) {
            rc = fail(a, 400, "invalid", "plan", "plan '%s': %s", plan, msg);
            goto done;
        }
    }
    /* A copy of the account's state: its stored usage and issued credit, then the quote. */
    if (bs_balance_rater(c, cat, account, NULL, now, &r, &a->err) != BS_OK) {
        rc = db_fail(a, &a->err);
        goto done;
    }
    before.scale = 0;
    after.scale = 0;
    mpq_inits(before.subtotal, before.credits, before.tax, before.total, after.subtotal,
              after.credits, after.tax, after.total, NULL);
    if (quote_sum(r, account, ym0, ym1, &before, msg, sizeof(msg)) != 0) {
        rc = fail(a, 500, "internal", NULL, "quote: %s", msg);
        goto out;
    }
    if (with_plan != NULL) {
        /* The same state with the subscription: its fees and what it includes count. */
        billing_rater_destroy(r);
        r = NULL;
        if (bs_balance_rater(c, with_plan, account, NULL, now, &r, &a->err) != BS_OK) {
            rc = a->err.status == BS_ERR_INVALID
                     ? fail(a, 400, "invalid", "plan", "plan '%s': %s", plan, a->err.message)
                     : db_fail(a, &a->err);
            goto out;
        }
    }
    if (billing_rater_add(r, ev, msg, sizeof(msg)) != BILLING_OK) {
        rc = fail(a, 400, "invalid", "body", "quote: %s", msg);
        goto out;
    }
    if (quote_sum(r, account, ym0, ym1, &after, msg, sizeof(msg)) != 0) {
        rc = fail(a, 500, "internal", NULL, "quote: %s", msg);
        goto out;
    }
    mpq_sub(after.subtotal, after.subtotal, before.subtotal);
    mpq_sub(after.credits, after.credits, before.credits);
    mpq_sub(after.tax, after.tax, before.tax);
    mpq_sub(after.total, after.total, before.total);
    billing_time_format(start, when, sizeof(when));
    billing_time_format(end, until, sizeof(until));
    o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:s, s:o, s:o, s:o, s:o}", "account",
                  account, "meter", meter, "model", model, "region", region, "quantity", quantity,
                  "plan", plan != NULL ? json_string(plan) : json_null(), "start", when, "end",
                  until, "charge", exact_json(after.subtotal, after.scale), "credit",
                  exact_json(after.credits, after.scale), "tax", exact_json(after.tax, after.scale),
                  "amount_due", exact_json(after.total, after.scale));
    rc = ok_json(a, o);
out:
    mpq_clears(before.subtotal, before.credits, before.tax, before.total, after.subtotal,
               after.credits, after.tax, after.total, NULL);
done:
    billing_event_destroy(ev);
    billing_rater_destroy(r);
    bs_catalog_free(with_plan);
    json_decref(in);
    return rc;
}
