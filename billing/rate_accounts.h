/*
 * rate_accounts.h - what `billing rate` needs to know of the accounts
 * file beyond the catalog: each account's time zone (for invoices shown
 * on its calendar) and the months its grants expire in (an expiry is
 * shown on that month's invoice even when the month has no charges).
 * The file has been checked by billing_config_accounts_load first: this reader
 * trusts its shape and only skips what it does not understand.
 */
#ifndef BILLING_RATE_ACCOUNTS_H
#define BILLING_RATE_ACCOUNTS_H

#include <stddef.h>
#include <stdint.h>

#include "billing.h"
#include "billing_config.h"

typedef struct rate_accounts rate_accounts;

/*
 * rate_accounts_load - read @path (an accounts file billing_config_accounts_load
 * accepted). Returns a new handle (free with rate_accounts_destroy), or
 * NULL with a message in @err.
 */
rate_accounts *rate_accounts_load(const char *path, char *err, size_t errsize);

/* rate_accounts_destroy - free @a; NULL is a no-op. */
void rate_accounts_destroy(rate_accounts *a);

/*
 * rate_accounts_zone - the zone of @account from @zones (loaded once),
 * or NULL when the account is unknown or its zone cannot be loaded.
 */
const billing_zone *rate_accounts_zone(const rate_accounts *a, billing_config_zones *zones,
                                       const char *account);

/* rate_accounts_book - the price book @account names ("book"), or NULL. */
const char *rate_accounts_book(const rate_accounts *a, const char *account);

/*
 * rate_accounts_check_books - with several price books (@ids, @n of
 * them): every account names one of them in "book". Returns 0, or -1
 * with a message naming @path, the account and the field.
 */
int rate_accounts_check_books(const rate_accounts *a, const char *const *ids, int n,
                              const char *path, char *err, size_t errsize);

/* A credit grant as the accounts file gives it (strings owned by the handle). */
typedef struct rate_grant {
    const char *id;
    const char *amount;
    billing_time_t granted;
    billing_time_t expires;
} rate_grant;

/*
 * rate_accounts_grant - the @i-th grant of @account, in file order, into
 * *@out. Returns 1, or 0 past the last one.
 */
int rate_accounts_grant(const rate_accounts *a, const char *account, size_t i, rate_grant *out);

/* rate_accounts_currency - the currency of @account, or NULL when unknown. */
const char *rate_accounts_currency(const rate_accounts *a, const char *account);

/*
 * rate_accounts_expiry_months - the months (year * 12 + month - 1, local
 * to @zone) in which grants of @account may expire, two per grant (that of
 * its last valid instant and that of expires_at), into @out (room for
 * @cap). Returns how many there are (may exceed @cap).
 */
size_t rate_accounts_expiry_months(const rate_accounts *a, const billing_zone *zone,
                                   const char *account, int32_t *out, size_t cap);

#endif /* BILLING_RATE_ACCOUNTS_H */
