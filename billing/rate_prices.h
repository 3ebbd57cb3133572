/*
 * rate_prices.h - unit prices and plan fees as a price book writes them
 * ("0.60", "2599.00", "0.0125"), for the table form: libbilling keeps
 * each price as an exact value and gives it back canonical ("0.6").
 * The file has been checked by billing_config_pricebook_load first.
 */
#ifndef BILLING_RATE_PRICES_H
#define BILLING_RATE_PRICES_H

#include <stddef.h>

typedef struct rate_prices rate_prices;

/* rate_prices_load - index @path's rates and fees; NULL with a message in @err. */
rate_prices *rate_prices_load(const char *path, char *err, size_t errsize);

/* rate_prices_destroy - free @p; NULL is a no-op. */
void rate_prices_destroy(rate_prices *p);

/*
 * rate_prices_rate - the price of @meter for (@model, @region) in version
 * @version as written ("*" keys as in the file), or NULL.
 */
const char *rate_prices_rate(const rate_prices *p, const char *version, const char *meter,
                             const char *model, const char *region);

/* rate_prices_fee - the fee of @plan in version @version as written, or NULL. */
const char *rate_prices_fee(const rate_prices *p, const char *version, const char *plan);

#endif /* BILLING_RATE_PRICES_H */
