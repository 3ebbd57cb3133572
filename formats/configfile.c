/*
 * configfile.c - price book and accounts JSON files -> billing_catalog.
 *
 * jansson does the JSON; this file checks the shape (every key known,
 * every type right) and hands the values to the catalog setters, which
 * check their meaning. Messages carry the file and the JSON path.
 */
#include "config.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing_config.h"
#include "util.h"

/* Room for a JSON path such as "versions[12].plan_fees[3]". */
#define PATH_MAX_LEN 96
#define LIBERR_MAX 512

typedef struct cfg {
    const char *name;
    char *errbuf;
    size_t errsize;
    billing_catalog *cat;
    billing_config_zones *zones;
    billing_status status;           /* why the last failure failed; BILLING_OK until one */
    billing_config_reject_fn reject; /* NULL: a refused subscription fails the whole file */
    void *reject_arg;
    const char *book;            /* load only the accounts of this price book; NULL: every one */
    json_t *taken;               /* with @book: ids of the accounts loaded (a set) */
    billing_config_each_fn each; /* told about each element applied; NULL: none */
    void *each_arg;
    const char *array; /* the array of the element being applied ... */
    size_t index;      /* ... and its index: what @each is told */
    char liberr[LIBERR_MAX];
} cfg;

/* ---------------------------------------------------------------------- */
/* Shape checks                                                            */
/* ---------------------------------------------------------------------- */

static int cfg_fail(cfg *c, const char *path, const char *key, const char *fmt, ...)
    BC_PRINTF(4, 5);

/* "NAME: PATH.KEY: message"; PATH and KEY may be empty or NULL. */
static int cfg_fail(cfg *c, const char *path, const char *key, const char *fmt, ...)
{
    char msg[LIBERR_MAX];
    va_list ap;
    int has_path = path != NULL && path[0] != '\0';
    int has_key = key != NULL && key[0] != '\0';

    if (c->status == BILLING_OK)
        c->status = BILLING_ERR_INVALID;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return bc_seterr(c->errbuf, c->errsize, "%s: %s%s%s%s%s", c->name, has_path ? path : "",
                     has_path && has_key ? "." : "", has_key ? key : "",
                     has_path || has_key ? ": " : "", msg);
}

/* Keep the status of a library call that failed, for the caller. */
static billing_status lib(cfg *c, billing_status st)
{
    if (st != BILLING_OK && st != BILLING_DUPLICATE)
        c->status = st;
    return st;
}

/* A library call failed at @path: its message follows the location. */
static int lib_fail(cfg *c, const char *path)
{
    return cfg_fail(c, path, NULL, "%s", c->liberr);
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

static int key_allowed(const char *key, const char *const *allowed)
{
    for (; *allowed != NULL; allowed++) {
        if (strcmp(key, *allowed) == 0)
            return 1;
    }
    return 0;
}

/* @v must be an object whose keys are all in the NULL-terminated @allowed. */
static int check_object(cfg *c, const json_t *v, const char *path, const char *const *allowed)
{
    const char *key;
    json_t *value;

    if (!json_is_object(v))
        return cfg_fail(c, path, NULL, "must be an object, not %s", type_name(v));
    json_object_foreach((json_t *)v, key, value)
    {
        if (!key_allowed(key, allowed))
            return cfg_fail(c, path, NULL, "unknown field '%.64s'", key);
    }
    return 0;
}

/* Required string @key of @obj (optional when @out_null_ok: absent or null gives NULL). */
static int get_string(cfg *c, const json_t *obj, const char *path, const char *key, int optional,
                      const char **out)
{
    const json_t *v = json_object_get(obj, key);

    *out = NULL;
    if (v == NULL || json_is_null(v)) {
        if (optional)
            return 0;
        return cfg_fail(c, path, key, "missing");
    }
    if (json_is_number(v))
        return cfg_fail(c, path, key,
                        "must be a string, not a number: write exact values "
                        "as strings, for example \"0.60\"");
    if (!json_is_string(v))
        return cfg_fail(c, path, key, "must be a string, not %s", type_name(v));
    *out = json_string_value(v);
    return 0;
}

/*
 * Catalog instants (version starts, subscription starts and cancellations,
 * grant validity) are whole microseconds: the store keeps them in
 * timestamptz, which stops at the microsecond, and `billing rate` must
 * bill only what `billing load` can store (doc/formats.md, "Instants").
 * Events keep their nanoseconds; they are not read here.
 */
#define CATALOG_TICK 1000 /* nanoseconds in the finest catalog unit */

static int get_time(cfg *c, const json_t *obj, const char *path, const char *key, int optional,
                    billing_time_t *out)
{
    const char *s;

    *out = 0;
    if (get_string(c, obj, path, key, optional, &s) != 0)
        return -1;
    if (s == NULL)
        return 0;
    if (lib(c, billing_time_parse(s, out, c->liberr, sizeof(c->liberr))) != BILLING_OK)
        return cfg_fail(c, path, key, "%s", c->liberr);
    if (*out % CATALOG_TICK != 0)
        return cfg_fail(c, path, key,
                        "'%.64s' is finer than a microsecond: catalog instants are whole "
                        "microseconds, as the store keeps them",
                        s);
    return 0;
}

/* Integer @key in [@min, @max], @dflt when absent and @optional. */
static int get_int(cfg *c, const json_t *obj, const char *path, const char *key, int optional,
                   long long min, long long max, long long dflt, long long *out)
{
    const json_t *v = json_object_get(obj, key);

    *out = dflt;
    if (v == NULL && optional)
        return 0;
    if (v == NULL)
        return cfg_fail(c, path, key, "missing");
    if (!json_is_integer(v))
        return cfg_fail(c, path, key, "must be an integer, not %s", type_name(v));
    if (json_integer_value(v) < min || json_integer_value(v) > max)
        return cfg_fail(c, path, key, "%lld is outside %lld..%lld",
                        (long long)json_integer_value(v), min, max);
    *out = json_integer_value(v);
    return 0;
}

static int get_bool(cfg *c, const json_t *obj, const char *path, const char *key, int dflt,
                    int *out)
{
    const json_t *v = json_object_get(obj, key);

    *out = dflt;
    if (v == NULL)
        return 0;
    if (!json_is_boolean(v))
        return cfg_fail(c, path, key, "must be true or false, not %s", type_name(v));
    *out = json_is_true(v);
    return 0;
}

/* Array @key of @obj into *@out; absent gives NULL when @optional. */
static int get_array(cfg *c, const json_t *obj, const char *path, const char *key, int optional,
                     const json_t **out)
{
    const json_t *v = json_object_get(obj, key);

    *out = NULL;
    if (v == NULL && optional)
        return 0;
    if (v == NULL)
        return cfg_fail(c, path, key, "missing");
    if (!json_is_array(v))
        return cfg_fail(c, path, key, "must be an array, not %s", type_name(v));
    *out = v;
    return 0;
}

typedef int (*item_fn)(cfg *c, const json_t *item, const char *path, void *arg);

/* Call @fn on each element of array @key of @obj, with path "KEY[i]". */
static int for_each(cfg *c, const json_t *obj, const char *path, const char *key, int optional,
                    item_fn fn, void *arg)
{
    const json_t *arr;
    char item_path[PATH_MAX_LEN];
    size_t i;

    if (get_array(c, obj, path, key, optional, &arr) != 0)
        return -1;
    for (i = 0; arr != NULL && i < json_array_size(arr); i++) {
        snprintf(item_path, sizeof(item_path), "%s%s%s[%zu]", path, path[0] ? "." : "", key, i);
        if (fn(c, json_array_get(arr, i), item_path, arg) != 0)
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Parties                                                                 */
/* ---------------------------------------------------------------------- */

/*
 * Parties (issue 27): texts printed on invoices, bounded as the database
 * bounds them (migrations 0005 and 0014). Lengths are in characters
 * (UTF-8 code points; jansson has checked the encoding) except the
 * account's name, which 0005 bounds in bytes.
 */
#define ACCOUNT_NAME_BYTES_MAX 256
#define EMAIL_CHARS_MAX 254
#define ADDRESS_CHARS_MAX 1000
#define TAX_ID_CHARS_MAX 64
#define LEGAL_NAME_CHARS_MAX 200
/* A display name of a model, region or plan, and how many a book may give (migration 0018). */
#define DISPLAY_NAME_CHARS_MAX 100
#define DISPLAY_NAMES_MAX 10000
#define CONTACT_CHARS_MAX 500
#define PAYMENT_CHARS_MAX 2000
#define FOOTER_CHARS_MAX 1000
#define PAYMENT_TERMS_DAYS_MAX 365

/* Code points of the UTF-8 string @s. */
static size_t utf8_chars(const char *s)
{
    size_t n = 0;

    for (; *s != '\0'; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* Optional text @s of field @key: NULL, or 1..@max characters. */
static int check_text(cfg *c, const char *path, const char *key, const char *s, size_t max)
{
    size_t n;

    if (s == NULL)
        return 0;
    n = utf8_chars(s);
    if (n == 0)
        return cfg_fail(c, path, key, "must not be empty (leave it out instead)");
    if (n > max)
        return cfg_fail(c, path, key, "%zu characters, more than the %zu allowed", n, max);
    return 0;
}

static int space_char(char ch)
{
    return ch == ' ' || (ch >= '\t' && ch <= '\r');
}

/* "local@domain": no space, exactly one '@', something on each side (as 0014). */
static int check_email(cfg *c, const char *path, const char *s)
{
    const char *at;
    const char *p;

    if (s == NULL)
        return 0;
    if (utf8_chars(s) > EMAIL_CHARS_MAX)
        return cfg_fail(c, path, "email", "more than %d characters", EMAIL_CHARS_MAX);
    at = strchr(s, '@');
    for (p = s; *p != '\0' && !space_char(*p); p++)
        ;
    if (at == NULL || at == s || at[1] == '\0' || strchr(at + 1, '@') != NULL || *p != '\0')
        return cfg_fail(c, path, "email",
                        "'%.64s' is not an address of the form local@domain (one '@', no "
                        "spaces)",
                        s);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Price book                                                              */
/* ---------------------------------------------------------------------- */

static const char *const pricebook_keys[] = {"description", "currency", "rounding", "plans",
                                             "versions",    "issuer",   "names",    NULL};
/* "names": display names per kind (migration 0018), each a text or one per language. */
static const char *const names_keys[] = {"description", "models", "regions", "plans", NULL};
static const char *const name_languages[] = {"en", "zh-Hans", NULL};
static const char *const issuer_keys[] = {"description", "legal_name", "address",
                                          "tax_id",      "contact",    "payment_instructions",
                                          "footer",      "logo",       "payment_terms_days",
                                          NULL};
static const char *const plan_keys[] = {"description", "id",         "period", "model",
                                        "region",      "refundable", NULL};
static const char *const version_keys[] = {"description", "id",        "effective_from",
                                           "rates",       "plan_fees", NULL};
static const char *const rate_keys[] = {"description", "meter", "model", "region", "price", NULL};
static const char *const fee_keys[] = {"description", "plan", "fee", NULL};

static int parse_period(cfg *c, const char *path, const char *s, billing_period *out)
{
    if (strcmp(s, "day") == 0)
        *out = BILLING_PERIOD_DAY;
    else if (strcmp(s, "month") == 0)
        *out = BILLING_PERIOD_MONTH;
    else
        return cfg_fail(c, path, "period", "'%.32s' is not \"day\" or \"month\"", s);
    return 0;
}

static int add_plan(cfg *c, const json_t *item, const char *path, void *arg)
{
    const char *id;
    const char *period;
    const char *model;
    const char *region;
    billing_period p = BILLING_PERIOD_DAY;
    int refundable;

    (void)arg;
    if (check_object(c, item, path, plan_keys) != 0 ||
        get_string(c, item, path, "id", 0, &id) != 0 ||
        get_string(c, item, path, "period", 0, &period) != 0 ||
        get_string(c, item, path, "model", 0, &model) != 0 ||
        get_string(c, item, path, "region", 0, &region) != 0 ||
        get_bool(c, item, path, "refundable", 0, &refundable) != 0 ||
        parse_period(c, path, period, &p) != 0)
        return -1;
    if (lib(c, billing_catalog_add_plan(c->cat, id, p, model, region, refundable, c->liberr,
                                        sizeof(c->liberr))) != BILLING_OK)
        return lib_fail(c, path);
    return 0;
}

static int add_rate(cfg *c, const json_t *item, const char *path, void *arg)
{
    const char *version = arg;
    const char *meter_name;
    const char *model;
    const char *region;
    const char *price;
    billing_meter meter;

    if (check_object(c, item, path, rate_keys) != 0 ||
        get_string(c, item, path, "meter", 0, &meter_name) != 0 ||
        get_string(c, item, path, "model", 0, &model) != 0 ||
        get_string(c, item, path, "region", 0, &region) != 0 ||
        get_string(c, item, path, "price", 0, &price) != 0)
        return -1;
    if (billing_meter_parse(meter_name, &meter) != BILLING_OK)
        return cfg_fail(c, path, "meter",
                        "'%.32s' is not \"gpu\", \"gpuless\", \"storage\" or \"traffic\"",
                        meter_name);
    if (lib(c, billing_catalog_set_rate(c->cat, version, meter, model, region, price, c->liberr,
                                        sizeof(c->liberr))) != BILLING_OK)
        return lib_fail(c, path);
    return 0;
}

static int add_fee(cfg *c, const json_t *item, const char *path, void *arg)
{
    const char *version = arg;
    const char *plan;
    const char *fee;

    if (check_object(c, item, path, fee_keys) != 0 ||
        get_string(c, item, path, "plan", 0, &plan) != 0 ||
        get_string(c, item, path, "fee", 0, &fee) != 0)
        return -1;
    if (lib(c, billing_catalog_set_plan_fee(c->cat, version, plan, fee, c->liberr,
                                            sizeof(c->liberr))) != BILLING_OK)
        return lib_fail(c, path);
    return 0;
}

static int add_version(cfg *c, const json_t *item, const char *path, void *arg)
{
    const char *id;
    billing_time_t from;

    (void)arg;
    if (check_object(c, item, path, version_keys) != 0 ||
        get_string(c, item, path, "id", 0, &id) != 0 ||
        get_time(c, item, path, "effective_from", 0, &from) != 0)
        return -1;
    if (lib(c, billing_catalog_add_price_version(c->cat, id, from, c->liberr, sizeof(c->liberr))) !=
        BILLING_OK)
        return lib_fail(c, path);
    /* The setters copy the version id, so borrowing jansson's string is safe. */
    if (for_each(c, item, path, "rates", 0, add_rate, (void *)id) != 0)
        return -1;
    return for_each(c, item, path, "plan_fees", 1, add_fee, (void *)id);
}

static int apply_currency(cfg *c, const json_t *root)
{
    const char *currency;
    const char *rounding_name;
    billing_rounding rounding = BILLING_ROUND_HALF_UP;

    if (get_string(c, root, "", "currency", 0, &currency) != 0 ||
        get_string(c, root, "", "rounding", 1, &rounding_name) != 0)
        return -1;
    if (rounding_name != NULL && billing_rounding_parse(rounding_name, &rounding) != BILLING_OK)
        return cfg_fail(c, "", "rounding",
                        "'%.32s' is not half-up, half-even, down, up, floor or ceiling",
                        rounding_name);
    if (lib(c, billing_catalog_set_currency(c->cat, currency, rounding, c->liberr,
                                            sizeof(c->liberr))) != BILLING_OK)
        return cfg_fail(c, "", "currency", "%s", c->liberr);
    return 0;
}

/* The logo file, read and checked (signature, size) where the price book says. */
static int check_logo(cfg *c, const char *logo)
{
    char resolved[4096];
    char *bytes;
    size_t len;

    if (bc_read_logo(c->name, logo, resolved, sizeof(resolved), &bytes, &len, c->liberr,
                     sizeof(c->liberr)) != 0)
        return cfg_fail(c, "issuer", "logo", "%s", c->liberr);
    free(bytes);
    return 0;
}

/* The seller of the book's invoices: optional; none of it rates. */
static int check_issuer(cfg *c, const json_t *root)
{
    const json_t *v = json_object_get(root, "issuer");
    const char *t[7];
    long long days;

    if (v == NULL)
        return 0;
    if (check_object(c, v, "issuer", issuer_keys) != 0 ||
        get_string(c, v, "issuer", "legal_name", 0, &t[0]) != 0 ||
        get_string(c, v, "issuer", "address", 1, &t[1]) != 0 ||
        get_string(c, v, "issuer", "tax_id", 1, &t[2]) != 0 ||
        get_string(c, v, "issuer", "contact", 1, &t[3]) != 0 ||
        get_string(c, v, "issuer", "payment_instructions", 1, &t[4]) != 0 ||
        get_string(c, v, "issuer", "footer", 1, &t[5]) != 0 ||
        get_string(c, v, "issuer", "logo", 1, &t[6]) != 0 ||
        get_int(c, v, "issuer", "payment_terms_days", 1, 0, PAYMENT_TERMS_DAYS_MAX, 30, &days) != 0)
        return -1;
    if (check_text(c, "issuer", "legal_name", t[0], LEGAL_NAME_CHARS_MAX) != 0 ||
        check_text(c, "issuer", "address", t[1], ADDRESS_CHARS_MAX) != 0 ||
        check_text(c, "issuer", "tax_id", t[2], TAX_ID_CHARS_MAX) != 0 ||
        check_text(c, "issuer", "contact", t[3], CONTACT_CHARS_MAX) != 0 ||
        check_text(c, "issuer", "payment_instructions", t[4], PAYMENT_CHARS_MAX) != 0 ||
        check_text(c, "issuer", "footer", t[5], FOOTER_CHARS_MAX) != 0)
        return -1;
    if (t[6] != NULL && t[6][0] == '\0')
        return cfg_fail(c, "issuer", "logo", "must not be empty (leave it out instead)");
    return t[6] != NULL ? check_logo(c, t[6]) : 0;
}

/* One display name: 1..DISPLAY_NAME_CHARS_MAX characters of text. */
static int check_name(cfg *c, const char *path, const char *key, const json_t *v)
{
    if (!json_is_string(v))
        return cfg_fail(c, path, key, "must be a text, not %s", type_name(v));
    return check_text(c, path, key, json_string_value(v), DISPLAY_NAME_CHARS_MAX);
}

/*
 * The display names of one kind ("names.models"...): an object from a
 * catalog key to a name, or to {"en": name, "zh-Hans": name}.
 */
static int check_names_of(cfg *c, const json_t *names, const char *kind, size_t *count)
{
    const json_t *v = json_object_get(names, kind);
    char path[64];
    const char *key;
    json_t *name;

    if (v == NULL)
        return 0;
    snprintf(path, sizeof(path), "names.%s", kind);
    if (!json_is_object(v))
        return cfg_fail(c, "names", kind, "must be an object, not %s", type_name(v));
    json_object_foreach((json_t *)v, key, name)
    {
        char sub[64 + 160];
        const char *lang;
        json_t *text;

        if (key[0] == '\0' || strlen(key) > 128)
            return cfg_fail(c, path, NULL, "'%.64s': a key is 1 to 128 bytes", key);
        if (++*count > DISPLAY_NAMES_MAX)
            return cfg_fail(c, "names", NULL, "more than %d names", DISPLAY_NAMES_MAX);
        if (!json_is_object(name)) {
            if (check_name(c, path, key, name) != 0)
                return -1;
            continue;
        }
        snprintf(sub, sizeof(sub), "%s.%.128s", path, key);
        if (check_object(c, name, sub, name_languages) != 0)
            return -1;
        if (json_object_get(name, "en") == NULL)
            return cfg_fail(c, sub, "en", "missing (the name every language falls back to)");
        json_object_foreach(name, lang, text)
        {
            if (check_name(c, sub, lang, text) != 0)
                return -1;
        }
    }
    return 0;
}

/* The book's display names: optional; none of it rates. */
static int check_names(cfg *c, const json_t *root)
{
    const json_t *v = json_object_get(root, "names");
    size_t count = 0;

    if (v == NULL)
        return 0;
    if (check_object(c, v, "names", names_keys) != 0 ||
        check_names_of(c, v, "models", &count) != 0 ||
        check_names_of(c, v, "regions", &count) != 0 || check_names_of(c, v, "plans", &count) != 0)
        return -1;
    return 0;
}

static int apply_pricebook(cfg *c, const json_t *root)
{
    const json_t *versions;

    if (check_object(c, root, "", pricebook_keys) != 0 || check_issuer(c, root) != 0 ||
        check_names(c, root) != 0 || apply_currency(c, root) != 0 ||
        for_each(c, root, "", "plans", 1, add_plan, NULL) != 0 ||
        get_array(c, root, "", "versions", 0, &versions) != 0)
        return -1;
    if (json_array_size(versions) == 0)
        return cfg_fail(c, "", "versions", "at least one price version is needed");
    return for_each(c, root, "", "versions", 0, add_version, NULL);
}

/* ---------------------------------------------------------------------- */
/* Accounts, subscriptions, grants                                         */
/* ---------------------------------------------------------------------- */

static const char *const accounts_keys[] = {"description", "accounts", "subscriptions", "grants",
                                            NULL};
static const char *const account_keys[] = {"description",     "id",     "currency", "time_zone",
                                           "tax_rate",        "book",   "name",     "email",
                                           "billing_address", "tax_id", "language", NULL};
static const char *const sub_keys[] = {"description", "id",    "account",      "resource", "plan",
                                       "start",       "terms", "cancelled_at", NULL};
static const char *const grant_keys[] = {"description", "id",         "account",
                                         "amount",      "granted_at", "expires_at",
                                         "applies_to",  "priority",   NULL};

/* An account's fields, from a jansson object or from the flat scanner below. */
typedef struct account_fields {
    const char *id;
    const char *currency;
    const char *zone_name;
    const char *tax;
    const char *book; /* NULL when absent */
    /* The customer on its invoices (none rates): NULL when absent. */
    const char *name;
    const char *email;
    const char *billing_address;
    const char *tax_id;
    const char *language;
} account_fields;

static int check_account_parties(cfg *c, const account_fields *f, const char *path)
{
    if (f->name != NULL && (f->name[0] == '\0' || strlen(f->name) > ACCOUNT_NAME_BYTES_MAX))
        return cfg_fail(c, path, "name", "must be 1 to %d bytes of UTF-8 (%zu given)",
                        ACCOUNT_NAME_BYTES_MAX, strlen(f->name));
    if (check_email(c, path, f->email) != 0 ||
        check_text(c, path, "billing_address", f->billing_address, ADDRESS_CHARS_MAX) != 0 ||
        check_text(c, path, "tax_id", f->tax_id, TAX_ID_CHARS_MAX) != 0)
        return -1;
    if (f->language != NULL && strcmp(f->language, "en") != 0 &&
        strcmp(f->language, "zh-Hans") != 0)
        return cfg_fail(c, path, "language", "'%.32s' is not \"en\" or \"zh-Hans\"", f->language);
    return 0;
}

static int apply_account(cfg *c, const account_fields *f, const char *path)
{
    const billing_zone *zone;

    if (check_account_parties(c, f, path) != 0)
        return -1;
    if (c->book != NULL) {
        if (f->book == NULL || strcmp(f->book, c->book) != 0)
            return 0;
        if (json_object_set_new(c->taken, f->id, json_true()) != 0) {
            c->status = BILLING_ERR_NOMEM;
            return bc_seterr(c->errbuf, c->errsize, "%s: out of memory", c->name);
        }
    }
    if (lib(c, billing_config_zones_get(c->zones, f->zone_name, &zone, c->liberr,
                                        sizeof(c->liberr))) != BILLING_OK)
        return cfg_fail(c, path, "time_zone", "%s", c->liberr);
    if (lib(c, billing_catalog_add_account(c->cat, f->id, f->currency, zone, f->tax, c->liberr,
                                           sizeof(c->liberr))) != BILLING_OK)
        return lib_fail(c, path);
    return 0;
}

static int add_account(cfg *c, const json_t *item, const char *path, void *arg)
{
    account_fields f;

    (void)arg;
    if (check_object(c, item, path, account_keys) != 0 ||
        get_string(c, item, path, "id", 0, &f.id) != 0 ||
        get_string(c, item, path, "currency", 0, &f.currency) != 0 ||
        get_string(c, item, path, "time_zone", 0, &f.zone_name) != 0 ||
        get_string(c, item, path, "tax_rate", 0, &f.tax) != 0 ||
        get_string(c, item, path, "book", 1, &f.book) != 0 ||
        get_string(c, item, path, "name", 1, &f.name) != 0 ||
        get_string(c, item, path, "email", 1, &f.email) != 0 ||
        get_string(c, item, path, "billing_address", 1, &f.billing_address) != 0 ||
        get_string(c, item, path, "tax_id", 1, &f.tax_id) != 0 ||
        get_string(c, item, path, "language", 1, &f.language) != 0)
        return -1;
    return apply_account(c, &f, path);
}

/*
 * Whether the rows of @account go into this catalog: every account's do,
 * unless one price book's accounts are being loaded. A row naming an
 * account of no book is left to the library to refuse (unknown account)
 * in the catalog that loads every unbooked row: none when books are named,
 * so the caller checks accounts first (as `billing rate` does).
 */
static int taken(const cfg *c, const char *account)
{
    return c->book == NULL || json_object_get(c->taken, account) != NULL;
}

static int add_subscription(cfg *c, const json_t *item, const char *path, void *arg)
{
    const char *id;
    const char *account;
    const char *resource;
    const char *plan;
    billing_time_t start;
    billing_time_t cancelled;
    const char *cancelled_text;
    long long terms;
    billing_status st;
    char msg[PATH_MAX_LEN + LIBERR_MAX + 64];

    (void)arg;
    if (check_object(c, item, path, sub_keys) != 0 ||
        get_string(c, item, path, "id", 0, &id) != 0 ||
        get_string(c, item, path, "account", 0, &account) != 0 ||
        get_string(c, item, path, "resource", 0, &resource) != 0 ||
        get_string(c, item, path, "plan", 0, &plan) != 0 ||
        get_time(c, item, path, "start", 0, &start) != 0 ||
        get_int(c, item, path, "terms", 0, 1, 1200, 1, &terms) != 0 ||
        get_string(c, item, path, "cancelled_at", 1, &cancelled_text) != 0 ||
        get_time(c, item, path, "cancelled_at", 1, &cancelled) != 0)
        return -1;
    if (!taken(c, account))
        return 0;
    st = billing_catalog_add_subscription(c->cat, id, account, resource, plan, start, (int)terms,
                                          cancelled_text != NULL ? &cancelled : NULL, c->liberr,
                                          sizeof(c->liberr));
    if (st == BILLING_OK)
        return 0;
    if (c->reject == NULL || st == BILLING_ERR_NOMEM) {
        lib(c, st);
        return lib_fail(c, path);
    }
    /* One refused subscription must not stop the rating of every other account. */
    snprintf(msg, sizeof(msg), "%s: %s: %s", c->name, path, c->liberr);
    c->reject(c->reject_arg, msg);
    return 0;
}

/* "applies_to": a non-empty array of "usage" and "subscription". */
static int get_kinds(cfg *c, const json_t *item, const char *path, unsigned *kinds)
{
    const json_t *arr;
    const json_t *v;
    const char *s;
    size_t i;

    *kinds = 0;
    if (get_array(c, item, path, "applies_to", 0, &arr) != 0)
        return -1;
    json_array_foreach((json_t *)arr, i, v)
    {
        s = json_string_value(v);
        if (s != NULL && strcmp(s, "usage") == 0)
            *kinds |= BILLING_CHARGE_USAGE;
        else if (s != NULL && strcmp(s, "subscription") == 0)
            *kinds |= BILLING_CHARGE_SUBSCRIPTION;
        else
            return cfg_fail(c, path, "applies_to",
                            "element %zu is not \"usage\" or \"subscription\"", i);
    }
    if (*kinds == 0)
        return cfg_fail(c, path, "applies_to", "must name at least one charge kind");
    return 0;
}

/* A grant's fields, from a jansson object or from the flat scanner below. */
typedef struct grant_fields {
    const char *id;
    const char *account;
    const char *amount;
    billing_time_t granted;
    billing_time_t expires;
    unsigned kinds;
    long long priority;
} grant_fields;

static int apply_grant(cfg *c, const grant_fields *f, const char *path)
{
    if (!taken(c, f->account))
        return 0;
    if (lib(c, billing_catalog_add_grant(c->cat, f->id, f->account, f->amount, f->granted,
                                         f->expires, f->kinds, (int)f->priority, c->liberr,
                                         sizeof(c->liberr))) != BILLING_OK)
        return lib_fail(c, path);
    return 0;
}

static int add_grant(cfg *c, const json_t *item, const char *path, void *arg)
{
    grant_fields f;

    (void)arg;
    if (check_object(c, item, path, grant_keys) != 0 ||
        get_string(c, item, path, "id", 0, &f.id) != 0 ||
        get_string(c, item, path, "account", 0, &f.account) != 0 ||
        get_string(c, item, path, "amount", 0, &f.amount) != 0 ||
        get_time(c, item, path, "granted_at", 0, &f.granted) != 0 ||
        get_time(c, item, path, "expires_at", 0, &f.expires) != 0 ||
        get_kinds(c, item, path, &f.kinds) != 0 ||
        get_int(c, item, path, "priority", 1, -1000000, 1000000, 0, &f.priority) != 0)
        return -1;
    return apply_grant(c, &f, path);
}

static int each_tree(cfg *c, const json_t *root);

static int apply_accounts(cfg *c, const json_t *root)
{
    if (check_object(c, root, "", accounts_keys) != 0 ||
        for_each(c, root, "", "accounts", 0, add_account, NULL) != 0 ||
        for_each(c, root, "", "subscriptions", 1, add_subscription, NULL) != 0 ||
        for_each(c, root, "", "grants", 1, add_grant, NULL) != 0)
        return -1;
    return each_tree(c, root);
}

/* ---------------------------------------------------------------------- */
/* The accounts file, one element at a time                                */
/* ---------------------------------------------------------------------- */

/*
 * A catalog of a million accounts comes from an accounts file of some
 * 250 MB, whose jansson tree would take about 2 KB an account (2.7 GiB
 * for 1 M, doc/performance.md "Catalog scale"). So the top-level object
 * is scanned here without a tree, and each element of its arrays is
 * parsed by jansson and applied on its own. Anything unusual at the top
 * level (not an object, an unknown, repeated or escaped key, a value of
 * the wrong type, a missing "accounts") goes to the whole-tree parser,
 * before anything is applied, so that every message stays the one it
 * gives. A syntax error inside an array is reported, as before, by
 * jansson over the whole text.
 */

#define SCAN_BAD ((size_t)-1)
#define SCAN_DEPTH_MAX 2048 /* jansson's own nesting limit */

static size_t scan_ws(const char *t, size_t len, size_t i)
{
    while (i < len && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r'))
        i++;
    return i;
}

/* @i at a '"': the offset after the closing quote, or SCAN_BAD. */
static size_t scan_string(const char *t, size_t len, size_t i)
{
    for (i++; i < len; i++) {
        if (t[i] == '"')
            return i + 1;
        if ((unsigned char)t[i] < 0x20)
            return SCAN_BAD;
        if (t[i] == '\\')
            i++;
    }
    return SCAN_BAD;
}

static int scalar_char(char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || ch == '-' || ch == '+' ||
           ch == '.' || ch == 'E';
}

/*
 * @i at the first byte of a value: the offset after it, or SCAN_BAD. Only
 * finds where the value ends (brackets balanced outside strings); jansson
 * checks the value itself.
 */
static size_t scan_value(const char *t, size_t len, size_t i)
{
    size_t depth = 0;

    do {
        i = scan_ws(t, len, i);
        if (i >= len)
            return SCAN_BAD;
        if (t[i] == '"') {
            i = scan_string(t, len, i);
            if (i == SCAN_BAD)
                return SCAN_BAD;
        } else if (t[i] == '{' || t[i] == '[') {
            if (++depth > SCAN_DEPTH_MAX)
                return SCAN_BAD;
            i++;
        } else if (t[i] == '}' || t[i] == ']' || t[i] == ',' || t[i] == ':') {
            if (depth == 0)
                return SCAN_BAD;
            depth -= t[i] == '}' || t[i] == ']';
            i++;
        } else if (scalar_char(t[i])) {
            while (i < len && scalar_char(t[i]))
                i++;
        } else {
            return SCAN_BAD;
        }
    } while (depth > 0);
    return i;
}

/* Flat elements: the usual accounts and grants without a jansson tree. */

/*
 * A million accounts and their trial grants are two million small objects
 * of plain strings, and a jansson tree of each costs a dozen allocations
 * (doc/performance.md "Catalog scale"). The scanner below reads an element
 * of that usual shape in place: an object whose values are strings of
 * printable ASCII without escapes, integers without fraction or exponent,
 * or arrays of such strings, with no key twice, whose fields are the ones
 * its kind takes, with the types it takes. Anything else (an escape, a
 * byte outside printable ASCII, a fraction, true/false/null, a nested
 * object, a missing, unknown or repeated field, a value the field refuses,
 * a syntax error) makes it answer FLAT_SLOW before anything is applied,
 * and the element goes to jansson and the shape checks above, which give
 * every message. So the scanner never words an error itself: only the
 * library calls fail on its path, with the messages they give on jansson's.
 */
#define FLAT_SLOW 1
#define FLAT_MEMBERS_MAX 10 /* more members than any kind has fields: jansson's */
#define FLAT_TEXT_MAX 1024  /* the element's strings, copied; longer: jansson's */
#define FLAT_DIGITS_MAX 15  /* an integer with more digits is jansson's */

typedef struct flat_value {
    const char *key; /* in the text, not NUL-terminated */
    size_t key_len;
    char kind;     /* 's' string, 'i' integer, 'a' array of strings */
    char *text;    /* 's': the string; 'a': its first string, each NUL-terminated */
    size_t count;  /* 'a': number of strings */
    long long num; /* 'i' */
} flat_value;

typedef struct flat {
    flat_value v[FLAT_MEMBERS_MAX];
    size_t n;
    size_t used;
    char buf[FLAT_TEXT_MAX];
} flat;

/* Printable ASCII but '"' and '\\': a string byte that means itself. */
static int plain_char(unsigned char ch)
{
    return ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\';
}

/* The plain string at @*i (its '"'): its length and the offset after it, or SCAN_BAD. */
static size_t flat_span(const char *t, size_t end, size_t *i)
{
    size_t s = *i + 1;
    size_t j = s;

    while (j < end && plain_char((unsigned char)t[j]))
        j++;
    if (j >= end || t[j] != '"')
        return SCAN_BAD;
    *i = j + 1;
    return j - s;
}

/* Copy the plain string at @*i into @f's buffer; NULL when not plain or no room. */
static char *flat_string(flat *f, const char *t, size_t end, size_t *i)
{
    size_t start = *i + 1;
    size_t n = flat_span(t, end, i);
    char *out;

    if (n == SCAN_BAD || n + 1 > sizeof(f->buf) - f->used)
        return NULL;
    out = f->buf + f->used;
    memcpy(out, t + start, n);
    out[n] = '\0';
    f->used += n + 1;
    return out;
}

/* An integer as JSON writes it (no leading zero), followed by a delimiter. */
static int flat_integer(flat_value *v, const char *t, size_t end, size_t *i)
{
    size_t j = *i + (t[*i] == '-');
    size_t start = j;
    long long num = 0;

    while (j < end && t[j] >= '0' && t[j] <= '9' && j - start < FLAT_DIGITS_MAX) {
        num = num * 10 + (t[j] - '0');
        j++;
    }
    if (j == start || j >= end || (t[start] == '0' && j - start > 1))
        return -1;
    if (t[j] != ',' && t[j] != '}' && t[j] != ' ' && t[j] != '\t' && t[j] != '\n' && t[j] != '\r')
        return -1;
    v->kind = 'i';
    v->num = t[*i] == '-' ? -num : num;
    *i = j;
    return 0;
}

/* An array of plain strings, copied one after the other. */
static int flat_array(flat *f, flat_value *v, const char *t, size_t end, size_t *i)
{
    size_t j = scan_ws(t, end, *i + 1);

    v->kind = 'a';
    v->text = f->buf + f->used;
    v->count = 0;
    if (j < end && t[j] == ']') {
        *i = j + 1;
        return 0;
    }
    for (;;) {
        if (j >= end || t[j] != '"' || flat_string(f, t, end, &j) == NULL)
            return -1;
        v->count++;
        j = scan_ws(t, end, j);
        if (j < end && t[j] == ']')
            break;
        if (j >= end || t[j] != ',')
            return -1;
        j = scan_ws(t, end, j + 1);
    }
    *i = j + 1;
    return 0;
}

static int flat_value_at(flat *f, flat_value *v, const char *t, size_t end, size_t *i)
{
    if (t[*i] == '"') {
        v->kind = 's';
        v->text = flat_string(f, t, end, i);
        return v->text != NULL ? 0 : -1;
    }
    if (t[*i] == '[')
        return flat_array(f, v, t, end, i);
    return flat_integer(v, t, end, i);
}

/* The member "key": value at @*i (its '"'); -1 when not flat. */
static int flat_member(flat *f, const char *t, size_t end, size_t *i)
{
    flat_value *v = &f->v[f->n];
    size_t k;

    if (f->n == FLAT_MEMBERS_MAX)
        return -1;
    v->key = t + *i + 1;
    v->key_len = flat_span(t, end, i);
    if (v->key_len == SCAN_BAD)
        return -1;
    for (k = 0; k < f->n; k++) {
        if (f->v[k].key_len == v->key_len && memcmp(f->v[k].key, v->key, v->key_len) == 0)
            return -1; /* jansson words the duplicate */
    }
    *i = scan_ws(t, end, *i);
    if (*i >= end || t[*i] != ':')
        return -1;
    *i = scan_ws(t, end, *i + 1);
    if (*i >= end || flat_value_at(f, v, t, end, i) != 0)
        return -1;
    f->n++;
    return 0;
}

/* The object at @*i: 0 with @*i past its '}', or -1 when not flat. */
static int flat_object(flat *f, const char *t, size_t end, size_t *i)
{
    size_t j = *i;

    f->n = 0;
    f->used = 0;
    if (t[j] != '{')
        return -1;
    for (j = scan_ws(t, end, j + 1); j < end && t[j] == '"'; j = scan_ws(t, end, j + 1)) {
        if (flat_member(f, t, end, &j) != 0)
            return -1;
        j = scan_ws(t, end, j);
        if (j < end && t[j] == '}')
            break;
        if (j >= end || t[j] != ',')
            return -1;
    }
    if (j >= end || t[j] != '}')
        return -1;
    *i = j + 1;
    return 0;
}

static const flat_value *flat_get(const flat *f, const char *key)
{
    size_t n = strlen(key);
    size_t k;

    for (k = 0; k < f->n; k++) {
        if (f->v[k].key_len == n && memcmp(f->v[k].key, key, n) == 0)
            return &f->v[k];
    }
    return NULL;
}

/* Whether every member of @f is in the NULL-terminated @allowed. */
static int flat_keys_allowed(const flat *f, const char *const *allowed)
{
    const char *const *a;
    size_t k;

    for (k = 0; k < f->n; k++) {
        for (a = allowed; *a != NULL; a++) {
            if (strlen(*a) == f->v[k].key_len && memcmp(*a, f->v[k].key, f->v[k].key_len) == 0)
                break;
        }
        if (*a == NULL)
            return 0;
    }
    return 1;
}

/* String field @key: 0 with it (NULL when absent and @optional), -1 otherwise. */
static int flat_str(const flat *f, const char *key, int optional, const char **out)
{
    const flat_value *v = flat_get(f, key);

    *out = NULL;
    if (v == NULL)
        return optional ? 0 : -1;
    if (v->kind != 's')
        return -1;
    *out = v->text;
    return 0;
}

static int flat_time(const flat *f, const char *key, billing_time_t *out)
{
    const char *s;

    if (flat_str(f, key, 0, &s) != 0)
        return -1;
    /* A refusal (sub-microsecond digits too) is worded by get_time. */
    if (billing_time_parse(s, out, NULL, 0) != BILLING_OK || *out % CATALOG_TICK != 0)
        return -1;
    return 0;
}

/* "applies_to" as get_kinds reads it, when every element is a kind. */
static int flat_kinds(const flat *f, unsigned *kinds)
{
    const flat_value *v = flat_get(f, "applies_to");
    const char *s;
    size_t k;

    *kinds = 0;
    if (v == NULL || v->kind != 'a' || v->count == 0)
        return -1;
    for (k = 0, s = v->text; k < v->count; k++, s += strlen(s) + 1) {
        if (strcmp(s, "usage") == 0)
            *kinds |= BILLING_CHARGE_USAGE;
        else if (strcmp(s, "subscription") == 0)
            *kinds |= BILLING_CHARGE_SUBSCRIPTION;
        else
            return -1;
    }
    return 0;
}

/* Optional integer "priority" as get_int reads it. */
static int flat_priority(const flat *f, long long *out)
{
    const flat_value *v = flat_get(f, "priority");

    *out = 0;
    if (v == NULL)
        return 0;
    if (v->kind != 'i' || v->num < -1000000 || v->num > 1000000)
        return -1;
    *out = v->num;
    return 0;
}

static int flat_account(cfg *c, const flat *f, const char *path)
{
    account_fields a;

    if (!flat_keys_allowed(f, account_keys) || flat_str(f, "id", 0, &a.id) != 0 ||
        flat_str(f, "currency", 0, &a.currency) != 0 ||
        flat_str(f, "time_zone", 0, &a.zone_name) != 0 || flat_str(f, "tax_rate", 0, &a.tax) != 0 ||
        flat_str(f, "book", 1, &a.book) != 0 || flat_str(f, "name", 1, &a.name) != 0 ||
        flat_str(f, "email", 1, &a.email) != 0 ||
        flat_str(f, "billing_address", 1, &a.billing_address) != 0 ||
        flat_str(f, "tax_id", 1, &a.tax_id) != 0 || flat_str(f, "language", 1, &a.language) != 0)
        return FLAT_SLOW;
    return apply_account(c, &a, path);
}

static int flat_grant(cfg *c, const flat *f, const char *path)
{
    grant_fields g;

    if (!flat_keys_allowed(f, grant_keys) || flat_str(f, "id", 0, &g.id) != 0 ||
        flat_str(f, "account", 0, &g.account) != 0 || flat_str(f, "amount", 0, &g.amount) != 0 ||
        flat_time(f, "granted_at", &g.granted) != 0 ||
        flat_time(f, "expires_at", &g.expires) != 0 || flat_kinds(f, &g.kinds) != 0 ||
        flat_priority(f, &g.priority) != 0)
        return FLAT_SLOW;
    return apply_grant(c, &g, path);
}

typedef int (*flat_fn)(cfg *c, const flat *f, const char *path);

/* ---------------------------------------------------------------------- */
/* Elements handed to billing_config_accounts_parse_each's callback        */
/* ---------------------------------------------------------------------- */

/* One of the two is set: the flat scan of the element, or its jansson tree. */
struct billing_config_element {
    const flat *f;
    const json_t *item;
    size_t len; /* bytes of its text */
};

size_t billing_config_element_size(const billing_config_element *e)
{
    return e != NULL ? e->len : 0;
}

const char *billing_config_element_string(const billing_config_element *e, const char *key)
{
    const flat_value *v;

    if (e == NULL || key == NULL)
        return NULL;
    if (e->f == NULL)
        return json_string_value(json_object_get(e->item, key));
    v = flat_get(e->f, key);
    return v != NULL && v->kind == 's' ? v->text : NULL;
}

long long billing_config_element_integer(const billing_config_element *e, const char *key)
{
    const flat_value *v;

    if (e == NULL || key == NULL)
        return 0;
    if (e->f == NULL)
        return (long long)json_integer_value(json_object_get(e->item, key));
    v = flat_get(e->f, key);
    return v != NULL && v->kind == 'i' ? v->num : 0;
}

const char *billing_config_element_item(const billing_config_element *e, const char *key, size_t i)
{
    const flat_value *v;
    const char *s;
    size_t k;

    if (e == NULL || key == NULL)
        return NULL;
    if (e->f == NULL)
        return json_string_value(json_array_get(json_object_get(e->item, key), i));
    v = flat_get(e->f, key);
    if (v == NULL || v->kind != 'a' || i >= v->count)
        return NULL;
    for (k = 0, s = v->text; k < i; k++)
        s += strlen(s) + 1;
    return s;
}

/* Tell the caller's callback about the element just applied (c->array, c->index), @len bytes. */
static int each_element(cfg *c, const flat *f, const json_t *item, size_t len)
{
    billing_config_element e;

    if (c->each == NULL)
        return 0;
    e.f = f;
    e.item = item;
    e.len = len;
    /* c->status stays BILLING_OK: the parse returns BILLING_ERR_INVALID, the message the callback's. */
    return c->each(c->each_arg, c->array, c->index, &e) != 0 ? -1 : 0;
}

/*
 * The syntax of a whole top-level value, checked without a tree before
 * anything is applied: the whole-tree parser reports a syntax error (or a
 * key twice) before any refusal of a value, so the element-by-element
 * reader must know first that none will come. The check is stricter than
 * jansson, never laxer: what it accepts jansson reads without error, and
 * what it refuses (a syntax error, but also an escaped key, a \u0000 or a
 * surrogate escape, an exponent, a number of more than 18 characters,
 * more than 16 keys in an object, nesting deeper than 64) goes to the
 * whole-tree parser, which gives its own message or reads it correctly.
 */
#define CHECK_DEPTH_MAX 64
#define CHECK_KEYS_MAX 16
#define CHECK_NUMBER_MAX 18

static size_t check_value(const char *t, size_t len, size_t i, int depth);

/* Length of the well-formed UTF-8 sequence at @u (@left bytes), or 0 (RFC 3629 table). */
static size_t utf8_length(const unsigned char *u, size_t left)
{
    size_t n;
    size_t k;
    unsigned char lo = 0x80;
    unsigned char hi = 0xbf;

    if (u[0] >= 0xc2 && u[0] <= 0xdf)
        n = 2;
    else if (u[0] >= 0xe0 && u[0] <= 0xef)
        n = 3;
    else if (u[0] >= 0xf0 && u[0] <= 0xf4)
        n = 4;
    else
        return 0;
    if (u[0] == 0xe0)
        lo = 0xa0; /* overlong */
    else if (u[0] == 0xed)
        hi = 0x9f; /* surrogates */
    else if (u[0] == 0xf0)
        lo = 0x90; /* overlong */
    else if (u[0] == 0xf4)
        hi = 0x8f; /* past U+10FFFF */
    if (left < n || u[1] < lo || u[1] > hi)
        return 0;
    for (k = 2; k < n; k++) {
        if (u[k] < 0x80 || u[k] > 0xbf)
            return 0;
    }
    return n;
}

static int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* The escape at @i (its '\\'): the offset after it, or SCAN_BAD. */
static size_t check_escape(const char *t, size_t len, size_t i)
{
    unsigned v = 0;
    size_t k;
    int h;

    if (i + 1 >= len)
        return SCAN_BAD;
    if (strchr("\"\\/bfnrt", t[i + 1]) != NULL && t[i + 1] != '\0')
        return i + 2;
    if (t[i + 1] != 'u' || i + 6 > len)
        return SCAN_BAD;
    for (k = 2; k < 6; k++) {
        h = hex_value(t[i + k]);
        if (h < 0)
            return SCAN_BAD;
        v = v * 16 + (unsigned)h;
    }
    /* jansson refuses \u0000 and lone surrogates: leave pairs to it too. */
    if (v == 0 || (v >= 0xd800 && v <= 0xdfff))
        return SCAN_BAD;
    return i + 6;
}

/* The string at @i (its '"'): the offset after it, or SCAN_BAD; *@escaped if it has one. */
static size_t check_string(const char *t, size_t len, size_t i, int *escaped)
{
    const unsigned char *u = (const unsigned char *)t;
    size_t n;

    for (i++; i < len;) {
        if (u[i] == '"')
            return i + 1;
        if (u[i] >= 0x20 && u[i] < 0x80 && u[i] != '\\') {
            i++;
            continue;
        }
        if (u[i] < 0x20)
            return SCAN_BAD;
        if (u[i] == '\\') {
            *escaped = 1;
            i = check_escape(t, len, i);
            if (i == SCAN_BAD)
                return SCAN_BAD;
            continue;
        }
        n = utf8_length(u + i, len - i);
        if (n == 0)
            return SCAN_BAD;
        i += n;
    }
    return SCAN_BAD;
}

static int is_digit(const char *t, size_t len, size_t i)
{
    return i < len && t[i] >= '0' && t[i] <= '9';
}

/* A number as JSON writes it, without exponent, at most CHECK_NUMBER_MAX characters. */
static size_t check_number(const char *t, size_t len, size_t i)
{
    size_t start = i;

    if (t[i] == '-')
        i++;
    if (!is_digit(t, len, i))
        return SCAN_BAD;
    if (t[i] == '0')
        i++; /* no digit may follow a leading zero */
    else
        while (is_digit(t, len, i))
            i++;
    if (i < len && t[i] == '.') {
        if (!is_digit(t, len, ++i))
            return SCAN_BAD;
        while (is_digit(t, len, i))
            i++;
    }
    if (i - start > CHECK_NUMBER_MAX || (i < len && (t[i] == 'e' || t[i] == 'E')))
        return SCAN_BAD;
    return i;
}

static size_t check_literal(const char *t, size_t len, size_t i)
{
    static const char *const words[] = {"true", "false", "null"};
    size_t k;
    size_t n;

    for (k = 0; k < 3; k++) {
        n = strlen(words[k]);
        if (len - i >= n && memcmp(t + i, words[k], n) == 0)
            return i + n;
    }
    return SCAN_BAD;
}

/* One "key": value of an object; @keys holds the offsets of the keys before it. */
static size_t check_member(const char *t, size_t len, size_t i, size_t *keys, size_t n, int depth)
{
    size_t end;
    size_t k;
    int escaped = 0;

    if (i >= len || t[i] != '"' || n == CHECK_KEYS_MAX)
        return SCAN_BAD;
    end = check_string(t, len, i, &escaped);
    if (end == SCAN_BAD || escaped)
        return SCAN_BAD; /* jansson compares keys decoded */
    for (k = 0; k < n; k++) {
        if (scan_string(t, len, keys[k]) - keys[k] == end - i &&
            memcmp(t + keys[k], t + i, end - i) == 0)
            return SCAN_BAD; /* a key twice: jansson words it */
    }
    keys[n] = i;
    i = scan_ws(t, len, end);
    if (i >= len || t[i] != ':')
        return SCAN_BAD;
    return check_value(t, len, scan_ws(t, len, i + 1), depth);
}

/* The object (@close '}') or array (']') at @i: the offset after it, or SCAN_BAD. */
static size_t check_container(const char *t, size_t len, size_t i, char close, int depth)
{
    size_t keys[CHECK_KEYS_MAX];
    size_t n = 0;

    if (depth >= CHECK_DEPTH_MAX)
        return SCAN_BAD;
    i = scan_ws(t, len, i + 1);
    if (i < len && t[i] == close)
        return i + 1;
    for (;;) {
        if (close == '}')
            i = check_member(t, len, i, keys, n++, depth + 1);
        else
            i = check_value(t, len, i, depth + 1);
        if (i == SCAN_BAD)
            return SCAN_BAD;
        i = scan_ws(t, len, i);
        if (i < len && t[i] == close)
            return i + 1;
        if (i >= len || t[i] != ',')
            return SCAN_BAD;
        i = scan_ws(t, len, i + 1);
    }
}

/* The value at @i (its first byte): the offset after it, or SCAN_BAD. */
static size_t check_value(const char *t, size_t len, size_t i, int depth)
{
    int escaped = 0;

    if (i >= len)
        return SCAN_BAD;
    switch (t[i]) {
    case '{':
        return check_container(t, len, i, '}', depth);
    case '[':
        return check_container(t, len, i, ']', depth);
    case '"':
        return check_string(t, len, i, &escaped);
    case 't':
    case 'f':
    case 'n':
        return check_literal(t, len, i);
    default:
        return check_number(t, len, i);
    }
}

/* Where the arrays of the accounts file are: offsets of their '[' and past their ']'. */
typedef struct top_spans {
    size_t begin[3];
    size_t end[3];
    int description; /* seen once already */
} top_spans;

static const char *const top_arrays[3] = {"accounts", "subscriptions", "grants"};

/* One "key": value pair at @*i; 0, or -1 when the whole-tree parser must take over. */
static int scan_member(const char *t, size_t len, size_t *i, top_spans *sp)
{
    size_t key = *i + 1;
    size_t key_end = scan_string(t, len, *i);
    size_t v;
    size_t k;

    if (key_end == SCAN_BAD || memchr(t + key, '\\', key_end - 1 - key) != NULL)
        return -1;
    v = scan_ws(t, len, key_end);
    if (v >= len || t[v] != ':')
        return -1;
    v = scan_ws(t, len, v + 1);
    *i = check_value(t, len, v, 0);
    if (*i == SCAN_BAD)
        return -1;
    if (key_end - 1 - key == strlen("description") &&
        memcmp(t + key, "description", key_end - 1 - key) == 0)
        return sp->description++ == 0 ? 0 : -1;
    for (k = 0; k < 3; k++) {
        if (key_end - 1 - key == strlen(top_arrays[k]) &&
            memcmp(t + key, top_arrays[k], key_end - 1 - key) == 0)
            break;
    }
    if (k == 3 || sp->end[k] != 0 || t[v] != '[')
        return -1;
    sp->begin[k] = v;
    sp->end[k] = *i;
    return 0;
}

/* The top-level object: 0 with the arrays' spans, or -1 for the whole-tree parser. */
static int scan_top(const char *t, size_t len, top_spans *sp)
{
    size_t i = scan_ws(t, len, 0);

    memset(sp, 0, sizeof(*sp));
    if (i >= len || t[i] != '{')
        return -1;
    for (i = scan_ws(t, len, i + 1); i < len && t[i] == '"'; i = scan_ws(t, len, i + 1)) {
        if (scan_member(t, len, &i, sp) != 0)
            return -1;
        i = scan_ws(t, len, i);
        if (i < len && t[i] == '}')
            break;
        /* A comma must be followed by a member: "{...,}" is jansson's syntax error. */
        if (i >= len || t[i] != ',' || scan_ws(t, len, i + 1) >= len ||
            t[scan_ws(t, len, i + 1)] != '"')
            return -1;
    }
    if (i >= len || t[i] != '}' || scan_ws(t, len, i + 1) != len || sp->end[0] == 0)
        return -1;
    return 0;
}

/*
 * jansson's syntax error as "NAME:LINE:COLUMN: TEXT" in c->errbuf; a comma
 * before a closing ']' or '}' (which JSON forbids and people write) is
 * named as such, at the comma's line and column.
 */
static void json_syntax_message(cfg *c, const char *text, size_t len, const json_error_t *jerr)
{
    size_t at = (size_t)jerr->position;
    size_t i;
    size_t comma;
    int line = 1;
    int col = 1;

    if (at > 0 && at <= len && (text[at - 1] == ']' || text[at - 1] == '}')) {
        i = at - 1;
        while (i > 0 && (text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\n' ||
                         text[i - 1] == '\r'))
            i--;
        if (i > 0 && text[i - 1] == ',') {
            comma = i - 1;
            for (i = 0; i < comma; i++) {
                if (text[i] == '\n') {
                    line++;
                    col = 1;
                } else if (((unsigned char)text[i] & 0xC0) != 0x80) {
                    col++;
                }
            }
            bc_seterr(c->errbuf, c->errsize,
                      "%s:%d:%d: trailing comma before '%c' (JSON allows "
                      "none: remove the comma)",
                      c->name, line, col, text[at - 1]);
            return;
        }
    }
    bc_seterr(c->errbuf, c->errsize, "%s:%d:%d: %s", c->name, jerr->line, jerr->column, jerr->text);
}

/* A syntax error inside an array: jansson's message over the whole text, as before. */
static int syntax_error(cfg *c, const char *text, size_t len, const char *path)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);

    c->status = BILLING_ERR_PARSE;
    if (root == NULL) {
        json_syntax_message(c, text, len, &jerr);
        return -1;
    }
    json_decref(root);
    return bc_seterr(c->errbuf, c->errsize, "%s: %s: malformed JSON", c->name, path);
}

/* "KEY[N]" into @path (PATH_MAX_LEN bytes): once per element, so without printf. */
static void element_path(char *path, const char *key, size_t n)
{
    char digits[24];
    size_t k = strlen(key);
    size_t d = 0;

    do {
        digits[d++] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    memcpy(path, key, k); /* keys are the three top_arrays names */
    path[k++] = '[';
    while (d > 0)
        path[k++] = digits[--d];
    path[k++] = ']';
    path[k] = '\0';
}

/* The element at @i with jansson: 0 with *@item_end past it, -1 on failure. */
static int tree_element(cfg *c, const char *text, size_t len, size_t end, size_t i,
                        const char *path, item_fn fn, size_t *item_end)
{
    json_error_t jerr;
    json_t *item;
    int rc;

    /* Bounded by the array's end: "[{...},]" finds its ']' here and is malformed. */
    *item_end = scan_value(text, end, i);
    if (*item_end == SCAN_BAD)
        return syntax_error(c, text, len, path);
    item = json_loadb(text + i, *item_end - i, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (item == NULL)
        return syntax_error(c, text, len, path);
    rc = fn(c, item, path, NULL);
    if (rc == 0)
        rc = each_element(c, NULL, item, *item_end - i);
    json_decref(item);
    return rc != 0 ? -1 : 0;
}

/* The element at @i: flat when it can be (@ffn non-NULL), else with jansson. */
static int apply_element(cfg *c, const char *text, size_t len, size_t end, size_t i,
                         const char *path, item_fn fn, flat_fn ffn, flat *f, size_t *item_end)
{
    int rc;

    *item_end = i;
    if (ffn != NULL && flat_object(f, text, end, item_end) == 0) {
        rc = ffn(c, f, path);
        if (rc == 0)
            return each_element(c, f, NULL, *item_end - i);
        if (rc != FLAT_SLOW)
            return -1;
    }
    return tree_element(c, text, len, end, i, path, fn, item_end);
}

/*
 * Apply each element of the array [@begin, @end) of @text with @ffn when
 * flat, else @fn, named @key[i]. @f is the flat scanner's room.
 */
static int apply_elements(cfg *c, const char *text, size_t len, size_t begin, size_t end,
                          const char *key, item_fn fn, flat_fn ffn, flat *f)
{
    char path[PATH_MAX_LEN];
    size_t i = scan_ws(text, end, begin + 1);
    size_t item_end;
    size_t n;

    if (i == end - 1)
        return 0; /* "[]": scan_value ended the array at this ']' */
    c->array = key;
    for (n = 0;; n++) {
        c->index = n;
        element_path(path, key, n);
        if (apply_element(c, text, len, end, i, path, fn, ffn, f, &item_end) != 0)
            return -1;
        i = scan_ws(text, end, item_end);
        if (i == end - 1 && text[i] == ']')
            return 0;
        if (i >= end - 1 || text[i] != ',')
            return syntax_error(c, text, len, path);
        i = scan_ws(text, end, i + 1);
    }
}

static const item_fn top_fns[3] = {add_account, add_subscription, add_grant};

/* The whole-tree parser's elements, all applied, to the callback. */
static int each_tree(cfg *c, const json_t *root)
{
    const json_t *items;
    const json_t *item;
    size_t k;
    size_t i;

    for (k = 0; k < 3 && c->each != NULL; k++) {
        items = json_object_get(root, top_arrays[k]);
        c->array = top_arrays[k];
        for (i = 0; i < json_array_size(items); i++) {
            c->index = i;
            item = json_array_get(items, i);
            /* Its size as billing_config_accounts_split's text of it: compact JSON. */
            if (each_element(c, NULL, item,
                             json_dumpb(item, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY)) != 0)
                return -1;
        }
    }
    return 0;
}
/* Subscriptions are few beside accounts and grants: jansson reads each. */
static const flat_fn top_flat_fns[3] = {flat_account, NULL, flat_grant};

/*
 * The accounts file element by element: BILLING_OK or an error as the
 * whole-tree parser gives; 1 when the top level needs the whole-tree
 * parser (nothing applied yet).
 */
static int stream_accounts(cfg *c, const char *text, size_t len)
{
    top_spans sp;
    flat *f;
    size_t k;
    int rc = 0;

    if (scan_top(text, len, &sp) != 0)
        return 1;
    f = malloc(sizeof(*f));
    if (f == NULL) {
        c->status = BILLING_ERR_NOMEM;
        return bc_seterr(c->errbuf, c->errsize, "%s: out of memory", c->name);
    }
    for (k = 0; k < 3 && rc == 0; k++) {
        if (sp.end[k] != 0 && apply_elements(c, text, len, sp.begin[k], sp.end[k], top_arrays[k],
                                             top_fns[k], top_flat_fns[k], f) != 0)
            rc = -1;
    }
    free(f);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Splitting the accounts file into its elements                           */
/* ---------------------------------------------------------------------- */

static void cfg_init(cfg *c, billing_catalog *cat, billing_config_zones *zones, const char *name,
                     char *errbuf, size_t errsize);

/* The elements of array @key of the whole tree @root, each as compact JSON text. */
static int split_tree(cfg *c, const json_t *root, const char *key, billing_config_element_fn fn,
                      void *arg)
{
    const json_t *items = json_object_get(root, key);
    size_t i;
    char *text;
    int rc;

    for (i = 0; i < json_array_size(items); i++) {
        text = json_dumps(json_array_get(items, i), JSON_COMPACT | JSON_ENCODE_ANY);
        if (text == NULL) {
            c->status = BILLING_ERR_NOMEM;
            return bc_seterr(c->errbuf, c->errsize, "%s: out of memory", c->name);
        }
        rc = fn(arg, key, i, text, strlen(text));
        free(text);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* The elements of the array [@begin, @end) of @text, in place. */
static int split_span(cfg *c, const char *text, size_t len, size_t begin, size_t end,
                      const char *key, billing_config_element_fn fn, void *arg)
{
    char path[PATH_MAX_LEN];
    size_t i = scan_ws(text, end, begin + 1);
    size_t item_end;
    size_t n;

    if (i == end - 1)
        return 0; /* "[]" */
    for (n = 0;; n++) {
        item_end = scan_value(text, end, i);
        if (item_end == SCAN_BAD) {
            element_path(path, key, n);
            return syntax_error(c, text, len, path);
        }
        if (fn(arg, key, n, text + i, item_end - i) != 0)
            return -1;
        i = scan_ws(text, end, item_end);
        if (i == end - 1 && text[i] == ']')
            return 0;
        if (i >= end - 1 || text[i] != ',') {
            element_path(path, key, n);
            return syntax_error(c, text, len, path);
        }
        i = scan_ws(text, end, i + 1);
    }
}

billing_status billing_config_accounts_split(const char *text, size_t len, const char *name,
                                             billing_config_element_fn fn, void *arg, char *errbuf,
                                             size_t errsize)
{
    json_error_t jerr;
    top_spans sp;
    json_t *root;
    cfg c;
    size_t k;
    int rc = 0;

    cfg_init(&c, NULL, NULL, name != NULL ? name : "accounts", errbuf, errsize);
    if (text == NULL || fn == NULL) {
        bc_seterr(errbuf, errsize, "%s: NULL argument", c.name);
        return BILLING_ERR_INVALID;
    }
    if (scan_top(text, len, &sp) == 0) {
        for (k = 0; k < 3 && rc == 0; k++) {
            if (sp.end[k] != 0)
                rc = split_span(&c, text, len, sp.begin[k], sp.end[k], top_arrays[k], fn, arg);
        }
    } else {
        /* An unusual top level (an escaped key...): the whole tree, as the parser does. */
        root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (root == NULL) {
            json_syntax_message(&c, text, len, &jerr);
            return BILLING_ERR_PARSE;
        }
        for (k = 0; k < 3 && rc == 0; k++)
            rc = split_tree(&c, root, top_arrays[k], fn, arg);
        json_decref(root);
    }
    if (rc == 0)
        return BILLING_OK;
    return c.status != BILLING_OK ? c.status : BILLING_ERR_INVALID;
}

/* ---------------------------------------------------------------------- */
/* Entry points                                                            */
/* ---------------------------------------------------------------------- */

typedef int (*apply_fn)(cfg *c, const json_t *root);

static billing_status parse_with(cfg *c, const char *text, size_t len, apply_fn apply)
{
    json_error_t jerr;
    json_t *root;
    int rc;

    if (c->cat == NULL || text == NULL || c->name == NULL) {
        bc_seterr(c->errbuf, c->errsize, "%s: NULL argument", c->name ? c->name : "configuration");
        return BILLING_ERR_INVALID;
    }
    /* Duplicate keys would make one of two values silently win. */
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        json_syntax_message(c, text, len, &jerr);
        return BILLING_ERR_PARSE;
    }
    rc = apply(c, root);
    json_decref(root);
    if (rc == 0)
        return BILLING_OK;
    return c->status != BILLING_OK ? c->status : BILLING_ERR_INVALID;
}

static void cfg_init(cfg *c, billing_catalog *cat, billing_config_zones *zones, const char *name,
                     char *errbuf, size_t errsize)
{
    c->name = name;
    c->errbuf = errbuf;
    c->errsize = errsize;
    c->cat = cat;
    c->zones = zones;
    c->status = BILLING_OK;
    c->reject = NULL;
    c->reject_arg = NULL;
    c->book = NULL;
    c->taken = NULL;
    c->each = NULL;
    c->each_arg = NULL;
    c->array = NULL;
    c->index = 0;
    c->liberr[0] = '\0';
}

billing_status billing_config_pricebook_parse(billing_catalog *cat, const char *text, size_t len,
                                              const char *name, char *errbuf, size_t errsize)
{
    cfg c;

    cfg_init(&c, cat, NULL, name, errbuf, errsize);
    return parse_with(&c, text, len, apply_pricebook);
}

/* The accounts file element by element, or as a whole tree when the top level needs it. */
static billing_status accounts_stream_or_tree(cfg *c, const char *text, size_t len)
{
    if (c->cat == NULL || text == NULL || c->name == NULL)
        return parse_with(c, text, len, apply_accounts);
    switch (stream_accounts(c, text, len)) {
    case 0:
        return BILLING_OK;
    case 1:
        return parse_with(c, text, len, apply_accounts);
    default:
        return c->status != BILLING_OK ? c->status : BILLING_ERR_INVALID;
    }
}

static billing_status accounts_parse(billing_catalog *cat, billing_config_zones *zones,
                                     const char *text, size_t len, const char *name,
                                     const char *book, billing_config_reject_fn reject, void *arg,
                                     billing_config_each_fn each, void *each_arg, char *errbuf,
                                     size_t errsize)
{
    cfg c;
    billing_status st;

    cfg_init(&c, cat, zones, name, errbuf, errsize);
    c.each = each;
    c.each_arg = each_arg;
    if (zones == NULL) {
        bc_seterr(errbuf, errsize, "%s: no zone set to load time zones with",
                  name ? name : "accounts");
        return BILLING_ERR_INVALID;
    }
    c.reject = reject;
    c.reject_arg = arg;
    c.book = book;
    if (book != NULL) {
        c.taken = json_object();
        if (c.taken == NULL) {
            bc_seterr(errbuf, errsize, "%s: out of memory", name ? name : "accounts");
            return BILLING_ERR_NOMEM;
        }
    }
    st = accounts_stream_or_tree(&c, text, len);
    json_decref(c.taken);
    return st;
}

billing_status billing_config_accounts_parse(billing_catalog *cat, billing_config_zones *zones,
                                             const char *text, size_t len, const char *name,
                                             char *errbuf, size_t errsize)
{
    return accounts_parse(cat, zones, text, len, name, NULL, NULL, NULL, NULL, NULL, errbuf,
                          errsize);
}

billing_status billing_config_accounts_parse_each(billing_catalog *cat, billing_config_zones *zones,
                                                  const char *text, size_t len, const char *name,
                                                  billing_config_each_fn fn, void *arg,
                                                  char *errbuf, size_t errsize)
{
    return accounts_parse(cat, zones, text, len, name, NULL, NULL, NULL, fn, arg, errbuf, errsize);
}

static billing_status read_config(const char *path, char **text, size_t *len, char *errbuf,
                                  size_t errsize)
{
    if (path == NULL) {
        bc_seterr(errbuf, errsize, "configuration file: NULL path");
        return BILLING_ERR_INVALID;
    }
    if (bc_read_file(path, BILLING_CONFIG_FILE_MAX, text, len, errbuf, errsize) != 0)
        return BILLING_ERR_IO;
    return BILLING_OK;
}

billing_status billing_config_pricebook_load(billing_catalog *cat, const char *path, char *errbuf,
                                             size_t errsize)
{
    char *text = NULL;
    size_t len = 0;
    billing_status st;

    st = read_config(path, &text, &len, errbuf, errsize);
    if (st == BILLING_OK)
        st = billing_config_pricebook_parse(cat, text, len, path, errbuf, errsize);
    free(text);
    return st;
}

billing_status billing_config_accounts_load_book(billing_catalog *cat, billing_config_zones *zones,
                                                 const char *path, const char *book,
                                                 billing_config_reject_fn reject, void *arg,
                                                 char *errbuf, size_t errsize)
{
    char *text = NULL;
    size_t len = 0;
    billing_status st;

    st = read_config(path, &text, &len, errbuf, errsize);
    if (st == BILLING_OK)
        st = accounts_parse(cat, zones, text, len, path, book, reject, arg, NULL, NULL, errbuf,
                            errsize);
    free(text);
    return st;
}

billing_status billing_config_accounts_load_rejecting(billing_catalog *cat,
                                                      billing_config_zones *zones, const char *path,
                                                      billing_config_reject_fn reject, void *arg,
                                                      char *errbuf, size_t errsize)
{
    return billing_config_accounts_load_book(cat, zones, path, NULL, reject, arg, errbuf, errsize);
}

billing_status billing_config_accounts_load(billing_catalog *cat, billing_config_zones *zones,
                                            const char *path, char *errbuf, size_t errsize)
{
    return billing_config_accounts_load_rejecting(cat, zones, path, NULL, NULL, errbuf, errsize);
}

billing_status billing_config_catalog_load(const char *pricebook_path, const char *accounts_path,
                                           billing_config_zones *zones, billing_catalog **out,
                                           char *errbuf, size_t errsize)
{
    billing_catalog *cat;
    billing_status st;

    if (out == NULL) {
        bc_seterr(errbuf, errsize, "catalog: NULL output pointer");
        return BILLING_ERR_INVALID;
    }
    *out = NULL;
    cat = billing_catalog_new();
    if (cat == NULL) {
        bc_seterr(errbuf, errsize, "catalog: out of memory");
        return BILLING_ERR_NOMEM;
    }
    st = billing_config_pricebook_load(cat, pricebook_path, errbuf, errsize);
    if (st == BILLING_OK && accounts_path != NULL)
        st = billing_config_accounts_load(cat, zones, accounts_path, errbuf, errsize);
    if (st != BILLING_OK) {
        billing_catalog_destroy(cat);
        return st;
    }
    *out = cat;
    return BILLING_OK;
}
