/*
 * fuzz_config.c - fuzz target for the configuration files: the price book
 * (billing_config_pricebook_parse), then the accounts file (billing_config_accounts_parse), then
 * billing_rater_new, which validates and indexes (freezes) the catalog.
 *
 * The input is the price book, a NUL byte, and the accounts file; without
 * a NUL it is all price book and the accounts file is empty. Zones come
 * from $TZDIR or /usr/share/zoneinfo through one billing_config_zones set kept for the
 * whole run (zones are immutable, and the set only caches them).
 *
 * Whatever the bytes: no crash, leak or out-of-bounds access; each step
 * returns 0 or -1 (NULL for the rater) and a refusal comes with a
 * message. When all three accept:
 *  - a second rater can be made from the frozen catalog, and the catalog
 *    refuses additions (BILLING_ERR_STATE);
 *  - the rater lists the accounts in strictly ascending id order;
 *  - for each of the first accounts, the months with charges (the
 *    subscription terms) are listed in ascending order, and the invoices
 *    of the first and last of them, and the live credit at the start of
 *    the first, can be computed.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "billing_config.h"
#include "fuzzcommon.h"

/* Accounts whose invoices are computed, at most, per input. */
#define ACCOUNTS_CHECKED 4
#define MONTHS_CAP 4096

static billing_config_zones *zones;
static int months[MONTHS_CAP];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    zones = fz_config_zones();
    return 0;
}

static void check_invoice(billing_rater *r, const char *account, int ym)
{
    billing_invoice *inv = NULL;
    char err[512] = "";
    billing_status st =
        billing_rater_invoice(r, account, ym / 100, ym % 100, &inv, err, sizeof(err));

    FZ_CHECK(st == BILLING_OK || st == BILLING_ERR_NOMEM, "invoice of '%s' for %d: %s: %s", account,
             ym, billing_strerror(st), err);
    if (st == BILLING_OK) {
        FZ_CHECK(strcmp(billing_invoice_account(inv), account) == 0, "invoice account");
        FZ_CHECK(billing_invoice_year(inv) * 100 + billing_invoice_month(inv) == ym,
                 "invoice month");
    }
    billing_invoice_destroy(inv);
}

static void check_account(billing_rater *r, const char *account)
{
    char balance[4096];
    char when[64];
    billing_time_t start;
    billing_status st;
    int n = fz_months(r, account, months, MONTHS_CAP);
    int i;

    FZ_CHECK(n >= 0, "billing_rater_months('%s') = %d", account, n);
    for (i = 1; i < n && i < MONTHS_CAP; i++)
        FZ_CHECK(months[i - 1] < months[i], "months of '%s' not ascending at %d", account, i);
    if (n == 0 || n > MONTHS_CAP)
        return;
    check_invoice(r, account, months[0]);
    if (n > 1)
        check_invoice(r, account, months[n - 1]);
    /* The first listed month's start in UTC: within a day of the local one. */
    snprintf(when, sizeof(when), "%04d-%02d-01T00:00:00Z", months[0] / 100, months[0] % 100);
    if (billing_time_parse(when, &start, NULL, 0) != BILLING_OK)
        return;
    st = billing_rater_credit_balance(r, account, start, balance, sizeof(balance));
    FZ_CHECK(st == BILLING_OK || st == BILLING_ERR_TOO_LARGE || st == BILLING_ERR_NOMEM,
             "credit balance of '%s': %s", account, billing_strerror(st));
}

static void check_rater(billing_catalog *cat, billing_rater *r)
{
    char err[512] = "";
    billing_rater *r2 = NULL;
    size_t n = billing_rater_account_count(r);
    size_t i;

    FZ_CHECK(billing_rater_new(cat, &r2, err, sizeof(err)) == BILLING_OK,
             "a second rater from the frozen catalog: %s", err);
    FZ_CHECK(billing_rater_account_count(r2) == n, "the second rater has other accounts");
    billing_rater_destroy(r2);
    FZ_CHECK(billing_catalog_add_price_version(cat, "fuzz-late", 0, err, sizeof(err)) ==
                 BILLING_ERR_STATE,
             "a frozen catalog took a new price version");
    for (i = 0; i < n; i++) {
        FZ_CHECK(billing_rater_account_id(r, i) != NULL, "account %zu has no id", i);
        if (i > 0)
            FZ_CHECK(strcmp(billing_rater_account_id(r, i - 1), billing_rater_account_id(r, i)) < 0,
                     "accounts not in strictly ascending id order at %zu", i);
    }
    FZ_CHECK(billing_rater_account_id(r, n) == NULL, "an account past the count");
    for (i = 0; i < n && i < ACCOUNTS_CHECKED; i++)
        check_account(r, billing_rater_account_id(r, i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *nul = memchr(data, '\0', size);
    size_t book_len = nul != NULL ? (size_t)(nul - text) : size;
    const char *accounts = nul != NULL ? nul + 1 : text + size;
    size_t accounts_len = size - (size_t)(accounts - text);
    billing_catalog *cat = billing_catalog_new();
    billing_rater *r = NULL;
    char err[1024] = "";
    billing_status rc;

    FZ_CHECK(cat != NULL, "out of memory");
    rc = billing_config_pricebook_parse(cat, text, book_len, "pricebook.json", err, sizeof(err));
    FZ_CHECK(rc <= 0 && rc != BILLING_ERR_IO, "billing_config_pricebook_parse returned %d", rc);
    if (rc != 0) {
        fz_check_message("billing_config_pricebook_parse", err, sizeof(err));
        goto out;
    }
    rc = billing_config_accounts_parse(cat, zones, accounts, accounts_len, "accounts.json", err,
                                       sizeof(err));
    FZ_CHECK(rc <= 0 && rc != BILLING_ERR_IO, "billing_config_accounts_parse returned %d", rc);
    if (rc != 0) {
        fz_check_message("billing_config_accounts_parse", err, sizeof(err));
        goto out;
    }
    billing_rater_new(cat, &r, err, sizeof(err));
    if (r == NULL) {
        fz_check_message("billing_rater_new", err, sizeof(err));
        goto out;
    }
    check_rater(cat, r);
out:
    billing_rater_destroy(r);
    billing_catalog_destroy(cat);
    return 0;
}
