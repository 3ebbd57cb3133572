/*
 * rate_prices.c - prices as written: see rate_prices.h.
 */
#include "config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "rate_prices.h"

/* Longest key: a version id, a meter or "fee", and two 64-byte attributes or a plan id. */
#define KEY_MAX 400

struct rate_prices {
    json_t *map; /* "version|meter|model|region" or "version|fee|plan" -> price as written */
};

static int key_of(char *key, const char *a, const char *b, const char *c, const char *d)
{
    int n = snprintf(key, KEY_MAX, "%s|%s|%s|%s", a, b, c, d != NULL ? d : "");

    return n > 0 && n < KEY_MAX ? 0 : -1;
}

static int index_version(rate_prices *p, json_t *v)
{
    const char *id = json_string_value(json_object_get(v, "id"));
    char key[KEY_MAX];
    json_t *item;
    size_t i;

    if (id == NULL)
        return 0;
    json_array_foreach(json_object_get(v, "rates"), i, item)
    {
        if (key_of(key, id, json_string_value(json_object_get(item, "meter")),
                   json_string_value(json_object_get(item, "model")),
                   json_string_value(json_object_get(item, "region"))) == 0 &&
            json_object_set(p->map, key, json_object_get(item, "price")) != 0)
            return -1;
    }
    json_array_foreach(json_object_get(v, "plan_fees"), i, item)
    {
        if (key_of(key, id, "fee", json_string_value(json_object_get(item, "plan")), NULL) == 0 &&
            json_object_set(p->map, key, json_object_get(item, "fee")) != 0)
            return -1;
    }
    return 0;
}

rate_prices *rate_prices_load(const char *path, char *err, size_t errsize)
{
    rate_prices *p = calloc(1, sizeof(*p));
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    json_t *v;
    size_t i;

    if (root == NULL) {
        snprintf(err, errsize, "%s:%d:%d: %s", path, je.line, je.column, je.text);
        goto error;
    }
    if (p == NULL || (p->map = json_object()) == NULL)
        goto nomem;
    json_array_foreach(json_object_get(root, "versions"), i, v)
    {
        if (index_version(p, v) != 0)
            goto nomem;
    }
    json_decref(root);
    return p;
nomem:
    snprintf(err, errsize, "%s: out of memory", path);
error:
    json_decref(root);
    rate_prices_destroy(p);
    return NULL;
}

void rate_prices_destroy(rate_prices *p)
{
    if (p == NULL)
        return;
    json_decref(p->map);
    free(p);
}

static const char *lookup(const rate_prices *p, const char *a, const char *b, const char *c,
                          const char *d)
{
    char key[KEY_MAX];

    if (p == NULL || a == NULL || b == NULL || c == NULL || key_of(key, a, b, c, d) != 0)
        return NULL;
    return json_string_value(json_object_get(p->map, key));
}

const char *rate_prices_rate(const rate_prices *p, const char *version, const char *meter,
                             const char *model, const char *region)
{
    return lookup(p, version, meter, model, region);
}

const char *rate_prices_fee(const rate_prices *p, const char *version, const char *plan)
{
    return lookup(p, version, "fee", plan, NULL);
}
