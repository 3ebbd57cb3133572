/*
 * fuzz_accounts.c - fuzz target for the accounts file reader
 * (billing_config_accounts_parse, formats/configfile.c): its flat reader,
 * which reads the usual accounts and grants in place, against jansson's
 * whole tree.
 *
 * The input is an accounts file, applied after a fixed price book. The
 * same text with its first "accounts" spelled "acc\u006funts" (the same
 * string to JSON, wherever it is) makes the reader hand the whole file to
 * jansson. Whatever the bytes:
 *  - no crash, leak or out-of-bounds access, and a message with a refusal;
 *  - both readings give the same status, and the same message unless it
 *    is a syntax error (whose column the escape moves);
 *  - when both accept, the catalogs freeze alike (same status) and hold
 *    the same accounts, and each of the first accounts has the same
 *    January invoice after one 8-GPU hour (tax rate, total, every credit).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing_config.h"
#include "fuzzcommon.h"

/* Accounts whose invoices are compared, at most, per input. */
#define ACCOUNTS_COMPARED 8
#define DESC_MAX 8192
#define ERR_MAX 1024

static const char pricebook[] =
    "{\"currency\":\"CNY\",\"plans\":["
    "{\"id\":\"rtx4090x8-daily\",\"period\":\"day\",\"model\":\"RTX4090\",\"region\":\"cn-east-1\"}"
    ","
    "{\"id\":\"rtx4090x8-monthly\",\"period\":\"month\",\"model\":\"RTX4090\","
    "\"region\":\"cn-east-1\",\"refundable\":true}],"
    "\"versions\":[{\"id\":\"2026-01\",\"effective_from\":\"2026-01-01T00:00:00+08:00\","
    "\"rates\":[{\"meter\":\"gpu\",\"model\":\"RTX4090\",\"region\":\"cn-east-1\","
    "\"price\":\"0.60\"}],\"plan_fees\":[{\"plan\":\"rtx4090x8-daily\",\"fee\":\"99.00\"},"
    "{\"plan\":\"rtx4090x8-monthly\",\"fee\":\"2599.00\"}]}]}";

static billing_config_zones *zones;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    zones = fz_config_zones();
    return 0;
}

static void describe(char *out, const char *fmt, ...) FZ_PRINTF(2, 3);

/* Append to @out (DESC_MAX bytes). */
static void describe(char *out, const char *fmt, ...)
{
    size_t used = strlen(out);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(out + used, DESC_MAX - used, fmt, ap);
    va_end(ap);
}

/* @account's January invoice after one 8-GPU hour on the 5th, into @out. */
static void describe_account(billing_rater *r, billing_event *ev, const char *account, char *out)
{
    billing_time_t start = INT64_C(1767571200) * BILLING_NS_PER_SEC; /* 2026-01-05T00:00Z */
    billing_invoice *inv = NULL;
    char err[ERR_MAX] = "";
    billing_status st;
    size_t i;

    billing_event_reset(ev);
    st = billing_event_set_id(ev, account);
    if (st == BILLING_OK)
        st = billing_event_set_account(ev, account);
    if (st == BILLING_OK)
        st = billing_event_set_resource(ev, "fuzz-i");
    if (st == BILLING_OK)
        st = billing_event_set_meter(ev, BILLING_METER_GPU);
    billing_event_set_interval(ev, start, start + 3600 * BILLING_NS_PER_SEC);
    if (st == BILLING_OK)
        st = billing_event_set_quantity(ev, "8", err, sizeof(err));
    if (st == BILLING_OK)
        st = billing_event_set_model(ev, "RTX4090");
    if (st == BILLING_OK)
        st = billing_event_set_region(ev, "cn-east-1");
    FZ_CHECK(st == BILLING_OK, "building the event of '%s': %s", account, err);
    st = billing_rater_add(r, ev, err, sizeof(err));
    describe(out, "%s add %s", account, billing_strerror(st));
    st = billing_rater_invoice(r, account, 2026, 1, &inv, err, sizeof(err));
    describe(out, " invoice %s", billing_strerror(st));
    if (st == BILLING_OK) {
        describe(out, " tax %s total %s", billing_invoice_tax_rate(inv),
                 billing_invoice_total(inv));
        for (i = 0; i < billing_invoice_credit_count(inv); i++)
            describe(out, " %s=%s/%s", billing_invoice_credit_grant(inv, i),
                     billing_invoice_credit_amount(inv, i),
                     billing_invoice_credit_remaining(inv, i));
    }
    describe(out, "\n");
    billing_invoice_destroy(inv);
}

/* The rater's accounts and the first ones' invoices into @out; status of the freeze. */
static billing_status describe_catalog(billing_catalog *cat, char *out)
{
    billing_rater *r = NULL;
    billing_event *ev = billing_event_new();
    char err[ERR_MAX] = "";
    billing_status st;
    size_t i;

    FZ_CHECK(ev != NULL, "out of memory");
    out[0] = '\0';
    st = billing_rater_new(cat, &r, err, sizeof(err));
    if (st != BILLING_OK) {
        fz_check_message("billing_rater_new", err, sizeof(err));
        describe(out, "%s", err);
    } else {
        FZ_CHECK(billing_rater_set_dedupe(r, 0) == BILLING_OK, "dedupe off");
        for (i = 0; i < billing_rater_account_count(r); i++)
            describe(out, "%s\n", billing_rater_account_id(r, i));
        for (i = 0; i < billing_rater_account_count(r) && i < ACCOUNTS_COMPARED; i++)
            describe_account(r, ev, billing_rater_account_id(r, i), out);
    }
    billing_rater_destroy(r);
    billing_event_destroy(ev);
    return st;
}

/* Parse @text (@len bytes) after the price book into a new catalog, *@cat. */
static billing_status load(const char *text, size_t len, billing_catalog **cat, char *err)
{
    billing_status st;

    *cat = billing_catalog_new();
    FZ_CHECK(*cat != NULL, "out of memory");
    st = billing_config_pricebook_parse(*cat, pricebook, strlen(pricebook), "pricebook.json", err,
                                        ERR_MAX);
    FZ_CHECK(st == BILLING_OK, "the fixed price book: %s", err);
    st = billing_config_accounts_parse(*cat, zones, text, len, "accounts.json", err, ERR_MAX);
    FZ_CHECK(st <= 0 && st != BILLING_ERR_IO, "billing_config_accounts_parse returned %d", st);
    if (st != BILLING_OK)
        fz_check_message("billing_config_accounts_parse", err, ERR_MAX);
    return st;
}

/* The first "accounts" of @data spelled with an escape; NULL when there is none. */
static char *escaped_copy(const char *data, size_t size, size_t *len)
{
    static const char key[] = "\"accounts\"";
    static const char esc[] = "\"acc\\u006funts\"";
    const char *at = NULL;
    char *out;
    size_t i;

    for (i = 0; i + sizeof(key) - 1 <= size && at == NULL; i++) {
        if (memcmp(data + i, key, sizeof(key) - 1) == 0)
            at = data + i;
    }
    if (at == NULL)
        return NULL;
    *len = size + (sizeof(esc) - sizeof(key));
    out = malloc(*len);
    FZ_CHECK(out != NULL, "out of memory");
    memcpy(out, data, (size_t)(at - data));
    memcpy(out + (at - data), esc, sizeof(esc) - 1);
    memcpy(out + (at - data) + sizeof(esc) - 1, at + sizeof(key) - 1,
           size - (size_t)(at - data) - (sizeof(key) - 1));
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char desc_flat[DESC_MAX];
    static char desc_tree[DESC_MAX];
    char err_flat[ERR_MAX] = "";
    char err_tree[ERR_MAX] = "";
    billing_catalog *flat = NULL;
    billing_catalog *tree = NULL;
    billing_status st_flat;
    billing_status st_tree;
    size_t tree_len = 0;
    char *tree_text = escaped_copy((const char *)data, size, &tree_len);

    st_flat = load((const char *)data, size, &flat, err_flat);
    if (tree_text == NULL)
        goto out; /* no "accounts": the reader hands it to jansson already */
    st_tree = load(tree_text, tree_len, &tree, err_tree);
    FZ_CHECK(st_flat == st_tree, "flat %d (%s), tree %d (%s)", st_flat, err_flat, st_tree,
             err_tree);
    if (st_flat != BILLING_OK) {
        FZ_CHECK(st_flat == BILLING_ERR_PARSE || strcmp(err_flat, err_tree) == 0,
                 "flat '%s', tree '%s'", err_flat, err_tree);
        goto out;
    }
    st_flat = describe_catalog(flat, desc_flat);
    st_tree = describe_catalog(tree, desc_tree);
    FZ_CHECK(st_flat == st_tree, "freeze: flat %d, tree %d", st_flat, st_tree);
    FZ_CHECK(strcmp(desc_flat, desc_tree) == 0, "flat:\n%s\ntree:\n%s", desc_flat, desc_tree);
out:
    free(tree_text);
    billing_catalog_destroy(flat);
    billing_catalog_destroy(tree);
    return 0;
}
