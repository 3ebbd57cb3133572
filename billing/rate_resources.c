/*
 * rate_resources.c - `billing rate --by resource`: which resource each
 * usage line came from. The events of an account are rated again, one
 * rater per resource (raters may share the catalog), and each resource's
 * invoice for the month gives its share of the lines. Each share is
 * rounded on its own, so the shares of a line may differ from its
 * rounded amount by a minor unit or so; the exact amounts add up.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rate_ctx.h"

static int cmp_resource(const void *a, const void *b)
{
    return strcmp(billing_event_resource(*(billing_event *const *)a),
                  billing_event_resource(*(billing_event *const *)b));
}

/* One more resource rater for @resource; -1 when out of memory or refused. */
static int add_rater(rate_ctx *c, rate_resources *rr, const char *resource)
{
    char err[ERR_MAX];
    size_t n = rr->n + 1;
    billing_rater **raters = realloc(rr->raters, n * sizeof(*raters));
    char **names;

    if (raters == NULL)
        return -1;
    rr->raters = raters;
    names = realloc(rr->names, n * sizeof(*names));
    if (names == NULL)
        return -1;
    rr->names = names;
    rr->names[rr->n] = strdup(resource);
    billing_rater_new(c->cat, &rr->raters[rr->n], err, sizeof(err));
    if (rr->names[rr->n] == NULL || rr->raters[rr->n] == NULL) {
        free(rr->names[rr->n]);
        billing_rater_destroy(rr->raters[rr->n]);
        return -1;
    }
    billing_rater_set_dedupe(rr->raters[rr->n], 0);
    rr->n = n;
    return 0;
}

int rate_resources_build(rate_ctx *c, const char *account, rate_resources *rr)
{
    char err[ERR_MAX];
    billing_event **evs = NULL;
    size_t n = 0;
    size_t i;

    memset(rr, 0, sizeof(*rr));
    if (running_events(c->kept, account, &evs, &n) != 0)
        goto nomem;
    qsort(evs, n, sizeof(*evs), cmp_resource);
    for (i = 0; i < n; i++) {
        if ((rr->n == 0 || strcmp(rr->names[rr->n - 1], billing_event_resource(evs[i])) != 0) &&
            add_rater(c, rr, billing_event_resource(evs[i])) != 0)
            goto nomem;
        if (billing_rater_add(rr->raters[rr->n - 1], evs[i], err, sizeof(err)) != BILLING_OK) {
            cli_error("--by resource: %s", err);
            goto error;
        }
    }
    running_free(evs, n);
    return CLI_EXIT_OK;
nomem:
    cli_error("--by resource: out of memory");
error:
    running_free(evs, n);
    rate_resources_free(rr);
    return CLI_EXIT_INTERNAL;
}

void rate_resources_free(rate_resources *rr)
{
    size_t i;

    for (i = 0; i < rr->n; i++) {
        free(rr->names[i]);
        billing_rater_destroy(rr->raters[i]);
    }
    free(rr->names);
    free(rr->raters);
    memset(rr, 0, sizeof(*rr));
}
