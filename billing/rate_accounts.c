/*
 * rate_accounts.c - account zones and grant expiries for `billing rate`:
 * see rate_accounts.h.
 */
#include "config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rate_accounts.h"

struct rate_accounts {
    json_t *zones;      /* account id -> zone name */
    json_t *currencies; /* account id -> ISO 4217 code */
    json_t *books;      /* account id -> price book id, for accounts that name one */
    json_t *expiries;   /* account id -> array of expires_at instants */
    json_t *grants;     /* account id -> array of its grant objects, as in the file */
};

/* Append @value to the array under @key of @map, made when missing. */
static int append_to(json_t *map, const char *key, json_t *value)
{
    json_t *list = json_object_get(map, key);

    if (list == NULL) {
        list = json_array();
        if (json_object_set_new(map, key, list) != 0)
            return -1;
    }
    return json_array_append(list, value);
}

/* Index the accounts' zones, currencies and books, and their grants, of the file's @root. */
static int index_file(rate_accounts *a, json_t *root)
{
    json_t *item;
    const char *id;
    size_t i;

    json_array_foreach(json_object_get(root, "accounts"), i, item)
    {
        id = json_string_value(json_object_get(item, "id"));
        if (id != NULL &&
            (json_object_set(a->zones, id, json_object_get(item, "time_zone")) != 0 ||
             json_object_set(a->currencies, id, json_object_get(item, "currency")) != 0 ||
             (json_is_string(json_object_get(item, "book")) &&
              json_object_set(a->books, id, json_object_get(item, "book")) != 0)))
            return -1;
    }
    json_array_foreach(json_object_get(root, "grants"), i, item)
    {
        id = json_string_value(json_object_get(item, "account"));
        if (id == NULL)
            continue;
        if (append_to(a->expiries, id, json_object_get(item, "expires_at")) != 0 ||
            append_to(a->grants, id, item) != 0)
            return -1;
    }
    return 0;
}

rate_accounts *rate_accounts_load(const char *path, char *err, size_t errsize)
{
    rate_accounts *a = calloc(1, sizeof(*a));
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);

    if (root == NULL) {
        snprintf(err, errsize, "%s:%d:%d: %s", path, je.line, je.column, je.text);
        goto error;
    }
    if (a == NULL)
        goto nomem;
    a->zones = json_object();
    a->expiries = json_object();
    a->currencies = json_object();
    a->books = json_object();
    a->grants = json_object();
    if (a->zones == NULL || a->expiries == NULL || a->currencies == NULL || a->books == NULL ||
        a->grants == NULL || index_file(a, root) != 0)
        goto nomem;
    json_decref(root);
    return a;
nomem:
    snprintf(err, errsize, "%s: out of memory", path);
error:
    json_decref(root);
    rate_accounts_destroy(a);
    return NULL;
}

void rate_accounts_destroy(rate_accounts *a)
{
    if (a == NULL)
        return;
    json_decref(a->zones);
    json_decref(a->expiries);
    json_decref(a->currencies);
    json_decref(a->books);
    json_decref(a->grants);
    free(a);
}

const billing_zone *rate_accounts_zone(const rate_accounts *a, billing_config_zones *zones,
                                       const char *account)
{
    const char *name = json_string_value(json_object_get(a->zones, account));
    const billing_zone *zone = NULL;
    char err[256];

    if (name == NULL ||
        billing_config_zones_get(zones, name, &zone, err, sizeof(err)) != BILLING_OK)
        return NULL;
    return zone;
}

const char *rate_accounts_book(const rate_accounts *a, const char *account)
{
    return json_string_value(json_object_get(a->books, account));
}

int rate_accounts_check_books(const rate_accounts *a, const char *const *ids, int n,
                              const char *path, char *err, size_t errsize)
{
    const char *account;
    const char *book;
    json_t *v;
    int i;

    json_object_foreach(a->zones, account, v)
    {
        book = rate_accounts_book(a, account);
        for (i = 0; book != NULL && i < n; i++) {
            if (strcmp(book, ids[i]) == 0)
                break;
        }
        if (book == NULL || i == n) {
            snprintf(err, errsize,
                     "%s: account '%s': field 'book': %s%s%s: with several --pricebook ID=FILE, "
                     "every account names the book it is rated against",
                     path, account, book == NULL ? "missing" : "'", book == NULL ? "" : book,
                     book == NULL ? "" : "' is not one of the --pricebook ids");
            return -1;
        }
    }
    return 0;
}

int rate_accounts_grant(const rate_accounts *a, const char *account, size_t i, rate_grant *out)
{
    json_t *g = json_array_get(json_object_get(a->grants, account), i);

    if (g == NULL)
        return 0;
    out->id = json_string_value(json_object_get(g, "id"));
    out->amount = json_string_value(json_object_get(g, "amount"));
    if (out->id == NULL || out->amount == NULL ||
        billing_time_parse(json_string_value(json_object_get(g, "granted_at")), &out->granted, NULL,
                           0) != BILLING_OK ||
        billing_time_parse(json_string_value(json_object_get(g, "expires_at")), &out->expires, NULL,
                           0) != BILLING_OK)
        return 0;
    return 1;
}

const char *rate_accounts_currency(const rate_accounts *a, const char *account)
{
    return json_string_value(json_object_get(a->currencies, account));
}

size_t rate_accounts_expiry_months(const rate_accounts *a, const billing_zone *zone,
                                   const char *account, int32_t *out, size_t cap)
{
    json_t *list = json_object_get(a->expiries, account);
    json_t *item;
    billing_time_t t;
    size_t n = 0;
    size_t i;
    int year;
    int month;

    json_array_foreach(list, i, item)
    {
        if (zone == NULL || json_string_value(item) == NULL ||
            billing_time_parse(json_string_value(item), &t, NULL, 0) != BILLING_OK)
            continue;
        /* The month of the last valid instant and that of expires_at (they differ when it
         * is a month's first instant): the caller prints those whose invoice lists it. */
        billing_zone_year_month(zone, t - 1, &year, &month);
        if (n < cap)
            out[n] = year * 12 + month - 1;
        n++;
        billing_zone_year_month(zone, t, &year, &month);
        if (n < cap)
            out[n] = year * 12 + month - 1;
        n++;
    }
    return n;
}
