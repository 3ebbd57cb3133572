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
/* Price book                                                              */
/* ---------------------------------------------------------------------- */

static const char *const pricebook_keys[] = {"description", "currency", "rounding",
                                             "plans",       "versions", NULL};
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

static int apply_pricebook(cfg *c, const json_t *root)
{
    const json_t *versions;

    if (check_object(c, root, "", pricebook_keys) != 0 || apply_currency(c, root) != 0 ||
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
static const char *const account_keys[] = {"description", "id",       "currency",
                                           "time_zone",   "tax_rate", NULL};
static const char *const sub_keys[] = {"description", "id",    "account",      "resource", "plan",
                                       "start",       "terms", "cancelled_at", NULL};
static const char *const grant_keys[] = {"description", "id",         "account",
                                         "amount",      "granted_at", "expires_at",
                                         "applies_to",  "priority",   NULL};

static int add_account(cfg *c, const json_t *item, const char *path, void *arg)
{
    const char *id;
    const char *currency;
    const char *zone_name;
    const char *tax;
    const billing_zone *zone;

    (void)arg;
    if (check_object(c, item, path, account_keys) != 0 ||
        get_string(c, item, path, "id", 0, &id) != 0 ||
        get_string(c, item, path, "currency", 0, &currency) != 0 ||
        get_string(c, item, path, "time_zone", 0, &zone_name) != 0 ||
        get_string(c, item, path, "tax_rate", 0, &tax) != 0)
        return -1;
    if (lib(c, billing_config_zones_get(c->zones, zone_name, &zone, c->liberr,
                                        sizeof(c->liberr))) != BILLING_OK)
        return cfg_fail(c, path, "time_zone", "%s", c->liberr);
    if (lib(c, billing_catalog_add_account(c->cat, id, currency, zone, tax, c->liberr,
                                           sizeof(c->liberr))) != BILLING_OK)
        return lib_fail(c, path);
    return 0;
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

static int add_grant(cfg *c, const json_t *item, const char *path, void *arg)
{
    const char *id;
    const char *account;
    const char *amount;
    billing_time_t granted;
    billing_time_t expires;
    unsigned kinds;
    long long priority;

    (void)arg;
    if (check_object(c, item, path, grant_keys) != 0 ||
        get_string(c, item, path, "id", 0, &id) != 0 ||
        get_string(c, item, path, "account", 0, &account) != 0 ||
        get_string(c, item, path, "amount", 0, &amount) != 0 ||
        get_time(c, item, path, "granted_at", 0, &granted) != 0 ||
        get_time(c, item, path, "expires_at", 0, &expires) != 0 ||
        get_kinds(c, item, path, &kinds) != 0 ||
        get_int(c, item, path, "priority", 1, -1000000, 1000000, 0, &priority) != 0)
        return -1;
    if (lib(c, billing_catalog_add_grant(c->cat, id, account, amount, granted, expires, kinds,
                                         (int)priority, c->liberr, sizeof(c->liberr))) !=
        BILLING_OK)
        return lib_fail(c, path);
    return 0;
}

static int apply_accounts(cfg *c, const json_t *root)
{
    if (check_object(c, root, "", accounts_keys) != 0 ||
        for_each(c, root, "", "accounts", 0, add_account, NULL) != 0 ||
        for_each(c, root, "", "subscriptions", 1, add_subscription, NULL) != 0)
        return -1;
    return for_each(c, root, "", "grants", 1, add_grant, NULL);
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
        bc_seterr(c->errbuf, c->errsize, "%s:%d:%d: %s", c->name, jerr.line, jerr.column,
                  jerr.text);
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
    c->liberr[0] = '\0';
}

billing_status billing_config_pricebook_parse(billing_catalog *cat, const char *text, size_t len,
                                              const char *name, char *errbuf, size_t errsize)
{
    cfg c;

    cfg_init(&c, cat, NULL, name, errbuf, errsize);
    return parse_with(&c, text, len, apply_pricebook);
}

static billing_status accounts_parse(billing_catalog *cat, billing_config_zones *zones,
                                     const char *text, size_t len, const char *name,
                                     billing_config_reject_fn reject, void *arg, char *errbuf,
                                     size_t errsize)
{
    cfg c;

    cfg_init(&c, cat, zones, name, errbuf, errsize);
    if (zones == NULL) {
        bc_seterr(errbuf, errsize, "%s: no zone set to load time zones with",
                  name ? name : "accounts");
        return BILLING_ERR_INVALID;
    }
    c.reject = reject;
    c.reject_arg = arg;
    return parse_with(&c, text, len, apply_accounts);
}

billing_status billing_config_accounts_parse(billing_catalog *cat, billing_config_zones *zones,
                                             const char *text, size_t len, const char *name,
                                             char *errbuf, size_t errsize)
{
    return accounts_parse(cat, zones, text, len, name, NULL, NULL, errbuf, errsize);
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

billing_status billing_config_accounts_load_rejecting(billing_catalog *cat,
                                                      billing_config_zones *zones, const char *path,
                                                      billing_config_reject_fn reject, void *arg,
                                                      char *errbuf, size_t errsize)
{
    char *text = NULL;
    size_t len = 0;
    billing_status st;

    st = read_config(path, &text, &len, errbuf, errsize);
    if (st == BILLING_OK)
        st = accounts_parse(cat, zones, text, len, path, reject, arg, errbuf, errsize);
    free(text);
    return st;
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
