/*
 * billing.h - public API of libbilling, the exact rating library.
 *
 * libbilling turns usage events into exact charges and monthly invoices.
 * It does no I/O, keeps no global state, never exits or aborts on bad
 * input, and never uses floating point: every quantity, rate and amount is
 * an exact rational (GMP) internally and a decimal string at the API.
 *
 * Conventions (see doc/api.md):
 *  - Every handle is opaque; `*_new` creates one, `*_destroy` frees it and
 *    accepts NULL.
 *  - Functions that can fail return a billing_status and, when given a
 *    buffer `errbuf` of `errsize` bytes (NULL/0 allowed), write a message
 *    there that names the event, the field and the reason.
 *  - A failed call leaves its handle valid and unchanged.
 *  - Strings returned as `const char *` are owned by the handle they came
 *    from and stay valid until that handle is destroyed, unless stated.
 *  - Thread safety is stated on each handle.
 *
 * Times are instants in nanoseconds since 1970-01-01T00:00:00Z
 * (billing_time_t); supported range 1900..2200.
 */
#ifndef BILLING_H
#define BILLING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(BILLING_BUILDING) && defined(__GNUC__)
#define BILLING_API __attribute__((visibility("default")))
#else
#define BILLING_API
#endif

/** Instant: nanoseconds since the Unix epoch, UTC. */
typedef int64_t billing_time_t;

/** Nanoseconds per second, for building billing_time_t values. */
#define BILLING_NS_PER_SEC INT64_C(1000000000)

/** Status codes returned by every fallible libbilling function. */
typedef enum billing_status {
    BILLING_OK = 0, /**< success */
    BILLING_DUPLICATE =
        1, /**< event id already rated with identical content; ignored (not an error) */
    BILLING_ERR_NOMEM = -1,           /**< an allocation failed; retriable, nothing was changed */
    BILLING_ERR_INVALID = -2,         /**< an argument or field is invalid (message names it) */
    BILLING_ERR_PARSE = -3,           /**< malformed decimal, timestamp, zone data or payload */
    BILLING_ERR_CONFLICT = -4,        /**< same event id seen before with different content */
    BILLING_ERR_UNKNOWN_ACCOUNT = -5, /**< the event's account is not in the catalog */
    BILLING_ERR_NO_PRICE = -6, /**< no price for the event's meter, model and region at that time */
    BILLING_ERR_ZONE = -7,     /**< unknown or unusable time zone */
    BILLING_ERR_RANGE = -8,    /**< a value is outside the supported range */
    BILLING_ERR_EXISTS = -9,   /**< a catalog object with that id already exists */
    BILLING_ERR_NOT_FOUND = -10, /**< the referenced catalog object does not exist */
    BILLING_ERR_STATE = -11,     /**< the call is not valid in the handle's current state */
    BILLING_ERR_TOO_LARGE = -12, /**< an input exceeds a documented size bound */
    BILLING_ERR_IO =
        -13 /**< a file could not be read (libbilling-config only: the core does no I/O) */
} billing_status;

/**
 * billing_strerror - a static English description of a status code.
 * Returns a string that must not be freed. Thread-safe.
 */
BILLING_API const char *billing_strerror(billing_status status);

/**
 * Compile-time version of this header, for embedders that must build
 * against several releases (`#if BILLING_VERSION_NUMBER >= 0x000200`).
 * The one place the version is written: configure reads it from here, so
 * PACKAGE_VERSION, billing_version() and pkg-config's version agree.
 * BILLING_VERSION_NUMBER is 0xMMmmpp (major, minor, patch, each 0..255),
 * so versions compare as integers. billing_version() gives the version of
 * the library loaded at run time, which may be newer than the header
 * (same soname).
 */
#define BILLING_VERSION_MAJOR 0
#define BILLING_VERSION_MINOR 1
#define BILLING_VERSION_PATCH 0
#define BILLING_VERSION_NUMBER \
    ((BILLING_VERSION_MAJOR << 16) | (BILLING_VERSION_MINOR << 8) | BILLING_VERSION_PATCH)

/**
 * billing_version - the library version as "MAJOR.MINOR.PATCH", that of
 * the library loaded at run time (BILLING_VERSION_* are the header's).
 * Returns a static string. Thread-safe.
 */
BILLING_API const char *billing_version(void);

/* ===================================================================== */
/* Time zones                                                             */
/* ===================================================================== */

/**
 * billing_zone: an IANA time zone, built from the bytes of its compiled
 * TZif file (RFC 8536, versions 1 to 4, including the POSIX TZ footer used
 * for instants past the last transition). Immutable once built: safe to
 * share between threads.
 */
typedef struct billing_zone billing_zone;

/**
 * billing_zone_new - parse a zone from TZif bytes.
 * @name: the IANA name to report (for example "Asia/Shanghai"): 1..128
 *        printable ASCII characters without spaces; copied.
 * @tzif: the file's bytes, @len bytes long (at most 1 MiB); not retained.
 * Every count and index in the data is checked before use. Files with
 * leap-second records (the "right/" zones) are rejected: instants here are
 * POSIX time, without leap seconds.
 * @out: receives the new zone, which the caller frees with
 *        billing_zone_destroy; set to NULL on failure.
 * Returns BILLING_OK, or with a message in errbuf: BILLING_ERR_INVALID (a
 * NULL or invalid argument), BILLING_ERR_TOO_LARGE (over 1 MiB),
 * BILLING_ERR_PARSE (malformed or unsupported data), BILLING_ERR_NOMEM.
 * Thread-safe.
 */
BILLING_API billing_status billing_zone_new(const char *name, const unsigned char *tzif, size_t len,
                                            billing_zone **out, char *errbuf, size_t errsize);

/**
 * billing_zone_new_utc - the UTC zone (no file needed).
 * Returns a new zone the caller frees, or NULL if out of memory.
 */
BILLING_API billing_zone *billing_zone_new_utc(void);

/** billing_zone_destroy - free a zone; NULL is a no-op. */
BILLING_API void billing_zone_destroy(billing_zone *zone);

/** billing_zone_name - the zone's IANA name, owned by the zone; NULL for a NULL zone. */
BILLING_API const char *billing_zone_name(const billing_zone *zone);

/**
 * billing_zone_offset - the UTC offset in seconds in force at instant @t
 * (for example 28800 for Asia/Shanghai): before the file's first
 * transition its first local time type, after the last one the footer's
 * POSIX TZ rule. 0 for a NULL zone. Thread-safe.
 */
BILLING_API int32_t billing_zone_offset(const billing_zone *zone, billing_time_t t);

/**
 * billing_zone_month_start - the instant at which local month @month
 * (1..12) of @year begins in @zone (local midnight on the 1st; if midnight
 * does not exist because of a DST gap, the first instant after the gap).
 * Stores it in *@out and returns BILLING_OK, BILLING_ERR_RANGE (month not
 * 1..12, or the instant outside 1900..2200) or BILLING_ERR_INVALID (NULL
 * argument). Thread-safe.
 */
BILLING_API billing_status billing_zone_month_start(const billing_zone *zone, int year, int month,
                                                    billing_time_t *out);

/**
 * billing_zone_year_month - the local year and month (1..12) containing
 * instant @t in @zone: the month whose [billing_zone_month_start, start of
 * the next month) holds @t, so that months tile the time line even where a
 * backward transition repeats the last hour of a month. A NULL zone means
 * UTC; NULL @year or @month are skipped. Thread-safe.
 */
BILLING_API void billing_zone_year_month(const billing_zone *zone, billing_time_t t, int *year,
                                         int *month);

/* ===================================================================== */
/* Times as text                                                          */
/* ===================================================================== */

/**
 * billing_time_parse - parse an RFC 3339 timestamp with an explicit offset
 * or "Z" ("2026-01-31T16:00:00Z", "2026-02-01T00:00:00.5+08:00"), up to
 * nanosecond precision. Also accepted: 't' and 'z' in lower case, a space
 * instead of 'T', and "-00:00" (same as "Z"). Fields are range-checked
 * (month 1..12, day valid for the month, hour 0..23, minute 0..59, second
 * 0..59: a leap second ":60" is rejected), fractions have 1..9 digits.
 * Returns BILLING_OK and stores the instant in *@out, or BILLING_ERR_PARSE /
 * BILLING_ERR_RANGE (outside 1900-01-01..2200-01-01) with a message naming
 * the field ("timestamp '...': month 13 out of range (1..12)"), or
 * BILLING_ERR_INVALID for NULL @text or @out; *@out is unchanged on error.
 * Thread-safe.
 */
BILLING_API billing_status billing_time_parse(const char *text, billing_time_t *out, char *errbuf,
                                              size_t errsize);

/**
 * billing_time_parse_n - billing_time_parse of the @len bytes at @text,
 * which need no terminating NUL (for decoders that find a timestamp in
 * their input). Same results and messages; a NUL byte among the @len
 * bytes is BILLING_ERR_PARSE. Allocates nothing; thread-safe.
 */
BILLING_API billing_status billing_time_parse_n(const char *text, size_t len, billing_time_t *out,
                                                char *errbuf, size_t errsize);

/**
 * billing_time_format - write @t as RFC 3339 in UTC ("...Z"), with only
 * as many fractional digits as needed, into @buf of @size bytes (at least
 * 36; the longest output is 30 characters). Every int64 instant can be
 * written, negative ones included ("1969-12-31T23:59:59.999999999Z").
 * Returns the length written (excluding NUL), or -1 if @buf is NULL or
 * too small. Thread-safe.
 */
BILLING_API int billing_time_format(billing_time_t t, char *buf, size_t size);

/**
 * billing_civil_days - days from 1970-01-01 to @year-@month-@day of the
 * proleptic Gregorian calendar (negative before 1970), the calendar every
 * billing_time_t is read in; for callers that build instants from a date
 * they parsed themselves (a database's timestamp text). Any int year
 * works. Returns BILLING_OK and stores the count in *@days;
 * BILLING_ERR_RANGE if @month is not 1..12 or @day is not a day of that
 * month; BILLING_ERR_INVALID if @days is NULL. *@days is unchanged on
 * error. Allocates nothing; thread-safe. (Since libbilling 4:0:2.)
 */
BILLING_API billing_status billing_civil_days(int year, int month, int day, int64_t *days);

/* ===================================================================== */
/* Meters, currencies, rounding                                           */
/* ===================================================================== */

/** What an event measures; decides its unit and how it is priced. */
typedef enum billing_meter {
    /** quantity = GPUs attached; priced per GPU-hour by (model, region) */
    BILLING_METER_GPU = 0,
    /** quantity = instances (usually 1) running without GPUs; priced per instance-hour */
    BILLING_METER_GPULESS = 1,
    /** quantity = provisioned GB (10^9 bytes); priced per GB-month (calendar month) */
    BILLING_METER_STORAGE = 2,
    /** quantity = bytes transferred; priced per GB (10^9 bytes), zero-rated by default */
    BILLING_METER_TRAFFIC = 3
} billing_meter;

/** Number of meters. */
#define BILLING_METER_COUNT 4

/**
 * billing_meter_name - "gpu", "gpuless", "storage" or "traffic"; NULL for
 * an unknown value. Static string.
 */
BILLING_API const char *billing_meter_name(billing_meter meter);

/**
 * billing_meter_parse - the meter named @name (as billing_meter_name
 * spells it). Returns BILLING_OK or BILLING_ERR_INVALID.
 */
BILLING_API billing_status billing_meter_parse(const char *name, billing_meter *out);

/**
 * Rounding modes, used at the documented rounding points only (invoice
 * lines, credits, tax). HALF_UP rounds ties away from zero.
 */
typedef enum billing_rounding {
    BILLING_ROUND_HALF_UP = 0, /**< ties away from zero: 0.125 -> 0.13, -0.125 -> -0.13 (default) */
    BILLING_ROUND_HALF_EVEN = 1, /**< ties to even digit ("banker's"): 0.125 -> 0.12 */
    BILLING_ROUND_DOWN = 2,      /**< toward zero (truncate) */
    BILLING_ROUND_UP = 3,        /**< away from zero */
    BILLING_ROUND_FLOOR = 4,     /**< toward negative infinity */
    BILLING_ROUND_CEILING = 5    /**< toward positive infinity */
} billing_rounding;

/**
 * billing_rounding_parse - "half-up", "half-even", "down", "up", "floor" or
 * "ceiling". Returns BILLING_OK or BILLING_ERR_INVALID.
 */
BILLING_API billing_status billing_rounding_parse(const char *name, billing_rounding *out);

/** billing_rounding_name - the name billing_rounding_parse accepts; static. */
BILLING_API const char *billing_rounding_name(billing_rounding mode);

/**
 * billing_currency_digits - the ISO 4217 minor-unit digits of currency
 * @code ("CNY" -> 2, "JPY" -> 0, "KWD" -> 3). Returns the digits, or -1 if
 * the code is not a known ISO 4217 currency. Thread-safe.
 */
BILLING_API int billing_currency_digits(const char *code);

/* ===================================================================== */
/* Exact decimals (GMP)                                                   */
/* ===================================================================== */

/*
 * Declared only when <gmp.h> was included before this header (as gmp.h
 * itself declares its FILE functions only after <stdio.h>), so that an
 * embedder who does not use them needs no GMP headers. For programs that
 * do their own exact arithmetic on amounts and quantities libbilling
 * gives as text, with libbilling's syntax and rounding rather than a copy.
 */
#if defined(__GNU_MP__)

/** Longest text billing_decimal_parse reads, in bytes (a bound on outside input). */
#define BILLING_DECIMAL_TEXT_MAX 1024

/**
 * billing_decimal_parse - the exact value of @text into @out (initialised
 * by the caller, who clears it): a decimal "[+-]digits[.digits]" ("12",
 * "-0.5", "+3.25"; not ".5", "1.", "1e3" or spaces), or a rational
 * "[-]digits/digits" with a non-zero denominator ("7/3"), as libbilling
 * writes amounts that are not finite decimals. Any number of digits up to
 * BILLING_DECIMAL_TEXT_MAX bytes of text. Returns BILLING_OK;
 * BILLING_ERR_PARSE (not one of these forms; the message quotes it);
 * BILLING_ERR_TOO_LARGE (longer than BILLING_DECIMAL_TEXT_MAX);
 * BILLING_ERR_INVALID (@text NULL). @out is unspecified on error.
 * Thread-safe. (Since libbilling 4:0:2.)
 */
BILLING_API billing_status billing_decimal_parse(mpq_t out, const char *text, char *errbuf,
                                                 size_t errsize);

/**
 * billing_decimal_round - round @q to a whole number of 10^-@digits units
 * with @mode, the rounding libbilling applies at its rounding points, and
 * store the count of those units in @out (initialised by the caller; may
 * be @q's numerator): q = 12.345, digits 2, BILLING_ROUND_HALF_UP -> 1235;
 * digits 0 rounds an amount already in minor units. Give @digits as
 * billing_currency_digits says for the currency. Returns BILLING_OK;
 * BILLING_ERR_RANGE (@digits not 0..9) or BILLING_ERR_INVALID (an unknown
 * @mode), @out unchanged. Thread-safe. (Since libbilling 4:0:2.)
 */
BILLING_API billing_status billing_decimal_round(mpz_t out, const mpq_t q, int digits,
                                                 billing_rounding mode);

#endif /* __GNU_MP__ */

/* ===================================================================== */
/* Catalog: accounts, price book, plans, subscriptions, credit grants     */
/* ===================================================================== */

/**
 * billing_catalog: everything rating needs to know besides the events.
 * Build it with the billing_catalog_add_* functions, then hand it to
 * billing_rater_new. Not thread-safe while being built; once a rater has
 * been created from it the catalog is frozen (further adds return
 * BILLING_ERR_STATE) and may be read from several threads.
 *
 * Identifiers (account, resource, plan, grant, model, region ids) are
 * 1..128 bytes of printable ASCII without spaces.
 * All decimal arguments are strings such as "12.5", "0.0001", "-3"
 * (no exponent, at most 40 digits); amounts are in the account currency.
 */
typedef struct billing_catalog billing_catalog;

/**
 * billing_catalog_new - an empty catalog. Returns it (caller frees with
 * billing_catalog_destroy) or NULL when out of memory.
 */
BILLING_API billing_catalog *billing_catalog_new(void);

/** billing_catalog_destroy - free a catalog; NULL is a no-op. Must outlive every rater made from it. */
BILLING_API void billing_catalog_destroy(billing_catalog *cat);

/**
 * billing_catalog_set_currency - the price book's currency (ISO 4217, for
 * example "CNY") and its rounding mode. Every account must use it.
 * Default: none; a catalog without a currency cannot make a rater.
 */
BILLING_API billing_status billing_catalog_set_currency(billing_catalog *cat, const char *currency,
                                                        billing_rounding rounding, char *errbuf,
                                                        size_t errsize);

/**
 * billing_catalog_add_account - register account @id, invoiced in
 * @currency (must equal the catalog currency), in @zone (borrowed: must
 * outlive the catalog), with tax rate @tax_rate (a decimal fraction,
 * "0.06" for 6%, in [0, 1]). Returns BILLING_OK, BILLING_ERR_EXISTS,
 * BILLING_ERR_INVALID or BILLING_ERR_NOMEM.
 */
BILLING_API billing_status billing_catalog_add_account(billing_catalog *cat, const char *id,
                                                       const char *currency,
                                                       const billing_zone *zone,
                                                       const char *tax_rate, char *errbuf,
                                                       size_t errsize);

/**
 * billing_catalog_add_price_version - open price-book version @version_id
 * effective from instant @effective_from (inclusive) until the next
 * version's start. Versions may be added in any order; their starts must
 * differ. Returns BILLING_OK, BILLING_ERR_EXISTS, BILLING_ERR_INVALID or
 * BILLING_ERR_NOMEM.
 */
BILLING_API billing_status billing_catalog_add_price_version(billing_catalog *cat,
                                                             const char *version_id,
                                                             billing_time_t effective_from,
                                                             char *errbuf, size_t errsize);

/**
 * billing_catalog_set_rate - in version @version_id, the unit price of
 * @meter for GPU model @model in @region: per GPU-hour (gpu), per
 * instance-hour (gpuless), per GB-month (storage) or per GB (traffic).
 * @model may be "*" to match any model (storage and traffic usually), and
 * @region "*" any region; an exact (model, region) match wins over a
 * wildcard, and model over region. @price is a non-negative decimal.
 * Traffic without a rate is priced at zero (zero-rated but shown); the
 * other meters without a rate are rejected with BILLING_ERR_NO_PRICE at
 * rating time. Returns BILLING_OK, BILLING_ERR_NOT_FOUND (version),
 * BILLING_ERR_EXISTS, BILLING_ERR_INVALID or BILLING_ERR_NOMEM.
 */
BILLING_API billing_status billing_catalog_set_rate(billing_catalog *cat, const char *version_id,
                                                    billing_meter meter, const char *model,
                                                    const char *region, const char *price,
                                                    char *errbuf, size_t errsize);

/** How long one term of a subscription plan lasts. */
typedef enum billing_period {
    /** 24 hours (86400 s) from the term start, whatever DST does */
    BILLING_PERIOD_DAY = 1,
    /** to the same local wall-clock time on the anchor day of the next month, clamped */
    BILLING_PERIOD_MONTH = 2
} billing_period;

/**
 * billing_catalog_add_plan - define subscription plan @plan_id: terms of
 * @period covering the gpu and gpuless usage of one instance of GPU model
 * @model in @region. @refundable: non-zero if cancelling mid-term refunds
 * the unused part pro rata to the nanosecond. The fee comes from the price
 * book (billing_catalog_set_plan_fee). Returns BILLING_OK,
 * BILLING_ERR_EXISTS, BILLING_ERR_INVALID or BILLING_ERR_NOMEM.
 */
BILLING_API billing_status billing_catalog_add_plan(billing_catalog *cat, const char *plan_id,
                                                    billing_period period, const char *model,
                                                    const char *region, int refundable,
                                                    char *errbuf, size_t errsize);

/**
 * billing_catalog_set_plan_fee - in price version @version_id, the fee of
 * one term of @plan_id (non-negative decimal). A term is charged at the
 * version in force at the term's start. Returns BILLING_OK,
 * BILLING_ERR_NOT_FOUND, BILLING_ERR_EXISTS, BILLING_ERR_INVALID or
 * BILLING_ERR_NOMEM.
 */
BILLING_API billing_status billing_catalog_set_plan_fee(billing_catalog *cat,
                                                        const char *version_id, const char *plan_id,
                                                        const char *fee, char *errbuf,
                                                        size_t errsize);

/**
 * billing_catalog_add_subscription - subscribe resource @resource of
 * account @account to plan @plan_id for @terms consecutive terms (1 to
 * 1200) starting at @start.
 *
 * @cancelled_at: NULL if not cancelled, else the cancellation instant
 * (read, not kept). A pointer rather than a reserved instant, so that every
 * instant of the supported range, 1970-01-01T00:00:00Z included, can be a
 * cancellation. A cancellation at or before @start means no term at all
 * (nothing charged, usage billed as without a subscription); inside a
 * term it ends the subscription there (the unused part refunded if the
 * plan is refundable); at or after the end of the last term it is refused.
 *
 * Every term that starts before the cancellation must have a fee: the
 * price version in force at the term's start must set one for the plan
 * (billing_catalog_set_plan_fee). When the catalog already has price
 * versions, this is checked here against the versions and fees added so
 * far (so add the price book first to have each subscription accepted or
 * refused on its own); in any case it is checked again when a rater is
 * made (billing_rater_new fails naming the subscription). A term is never
 * silently free.
 *
 * Terms of one resource must not overlap: a subscription whose terms
 * overlap those of one already added for the same resource of the account
 * is refused (BILLING_ERR_INVALID, naming both); one without a term
 * overlaps nothing.
 * Messages name the subscription, its account and plan, and the field.
 * Returns BILLING_OK, BILLING_ERR_EXISTS, BILLING_ERR_NOT_FOUND (account
 * or plan), BILLING_ERR_NO_PRICE (a term without a fee),
 * BILLING_ERR_INVALID, BILLING_ERR_RANGE or BILLING_ERR_NOMEM; nothing is
 * added on error.
 */
BILLING_API billing_status billing_catalog_add_subscription(
    billing_catalog *cat, const char *subscription_id, const char *account, const char *resource,
    const char *plan_id, billing_time_t start, int terms, const billing_time_t *cancelled_at,
    char *errbuf, size_t errsize);

/** What a charge is for; credit grants say which kinds they may pay. */
typedef enum billing_charge_kind {
    BILLING_CHARGE_USAGE = 1,       /**< metered usage (gpu, gpuless, storage, traffic) */
    BILLING_CHARGE_SUBSCRIPTION = 2 /**< daily or monthly plan fees (net of refunds) */
} billing_charge_kind;

/**
 * billing_catalog_add_grant - give account @account credit @grant_id of
 * @amount (a positive decimal with at most the currency's minor digits)
 * valid for charges of usage inside [@granted_at, @expires_at), and for
 * fees of terms starting inside it. @kinds is a bitwise OR of
 * billing_charge_kind values it may pay. Lower @priority is spent first;
 * ties go to the earliest expiry, then the earliest grant, then the id.
 * Returns BILLING_OK, BILLING_ERR_EXISTS, BILLING_ERR_NOT_FOUND,
 * BILLING_ERR_INVALID or BILLING_ERR_NOMEM.
 */
BILLING_API billing_status billing_catalog_add_grant(billing_catalog *cat, const char *grant_id,
                                                     const char *account, const char *amount,
                                                     billing_time_t granted_at,
                                                     billing_time_t expires_at, unsigned kinds,
                                                     int priority, char *errbuf, size_t errsize);

/* ===================================================================== */
/* Events                                                                 */
/* ===================================================================== */

/**
 * billing_event: one usage record. A reusable buffer: fill it with the
 * setters (which copy their arguments and never allocate), hand it to
 * billing_rater_add, billing_event_reset it, fill it again. Not
 * thread-safe; use one per thread.
 *
 * A setter that refuses its value (its status is not BILLING_OK) marks
 * that field refused instead of leaving the previous value in place, so
 * that a refilled event is never rated with a stale field:
 * billing_rater_add then refuses the event (BILLING_ERR_INVALID, naming
 * the field) until the field is set successfully or the event is reset.
 *
 * Field bounds: id 1..128 bytes, account/resource 1..128, model/region
 * 0..64; the setters return BILLING_ERR_TOO_LARGE past them.
 * Field names used in messages: "id", "account", "resource", "meter",
 * "start", "end", "quantity", "model", "region".
 */
typedef struct billing_event billing_event;

/** billing_event_new - an empty event, or NULL if out of memory. Free with billing_event_destroy. */
BILLING_API billing_event *billing_event_new(void);

/** billing_event_destroy - free an event; NULL is a no-op. */
BILLING_API void billing_event_destroy(billing_event *ev);

/** billing_event_reset - clear every field so the event can be refilled. */
BILLING_API void billing_event_reset(billing_event *ev);

/** billing_event_set_id - the idempotency key: counted once, ever. */
BILLING_API billing_status billing_event_set_id(billing_event *ev, const char *id);

/** billing_event_set_account - the account the usage is billed to. */
BILLING_API billing_status billing_event_set_account(billing_event *ev, const char *account);

/** billing_event_set_resource - the instance or disk that was used. */
BILLING_API billing_status billing_event_set_resource(billing_event *ev, const char *resource);

/** billing_event_set_meter - what was measured. */
BILLING_API billing_status billing_event_set_meter(billing_event *ev, billing_meter meter);

/**
 * billing_event_set_interval - usage interval [@start, @end). Checked by
 * billing_rater_add (end must be after start) so that the message can name
 * the event.
 */
BILLING_API void billing_event_set_interval(billing_event *ev, billing_time_t start,
                                            billing_time_t end);

/**
 * billing_event_set_quantity - the quantity as a non-negative decimal with
 * at most 9 fractional digits and at most 1e18 in value: GPUs (gpu),
 * instances (gpuless), GB (storage) or bytes (traffic). Returns BILLING_OK,
 * BILLING_ERR_PARSE or BILLING_ERR_RANGE.
 */
BILLING_API billing_status billing_event_set_quantity(billing_event *ev, const char *quantity,
                                                      char *errbuf, size_t errsize);

/** billing_event_set_model - the GPU model attribute ("RTX4090", "A100-80G"); may be empty. */
BILLING_API billing_status billing_event_set_model(billing_event *ev, const char *model);

/** billing_event_set_region - the region attribute; may be empty. */
BILLING_API billing_status billing_event_set_region(billing_event *ev, const char *region);

/** The text fields billing_event_set_text sets, named as in messages. */
typedef enum billing_event_text {
    BILLING_TEXT_ID,       /**< "id": as billing_event_set_id */
    BILLING_TEXT_ACCOUNT,  /**< "account": as billing_event_set_account */
    BILLING_TEXT_RESOURCE, /**< "resource": as billing_event_set_resource */
    BILLING_TEXT_MODEL,    /**< "model": as billing_event_set_model */
    BILLING_TEXT_REGION    /**< "region": as billing_event_set_region */
} billing_event_text;

/**
 * billing_event_set_text - set text field @field from the @len bytes at
 * @text, which need no terminating NUL (decoders pass a slice of their
 * input instead of copying it out first). Same bounds and outcome as the
 * field's own setter given those bytes as a string; in addition
 * BILLING_ERR_INVALID if @text is NULL, if the bytes hold a NUL or if
 * @field is not a billing_event_text (the field, if any, is then marked
 * refused). Copies the bytes; allocates nothing. Thread-safe for
 * distinct @ev.
 */
BILLING_API billing_status billing_event_set_text(billing_event *ev, billing_event_text field,
                                                  const char *text, size_t len);

/** billing_event_id - the event's id as set (empty string if unset). */
BILLING_API const char *billing_event_id(const billing_event *ev);

/*
 * Field accessors, for storing a decoded event: the value as set, owned
 * by @ev and valid until it is reset or destroyed ("" for an unset
 * string, 0 for an unset meter or time). Thread-safe for distinct @ev.
 */
BILLING_API const char *billing_event_account(const billing_event *ev);
BILLING_API const char *billing_event_resource(const billing_event *ev);
BILLING_API billing_meter billing_event_meter(const billing_event *ev);
BILLING_API billing_time_t billing_event_start(const billing_event *ev);
BILLING_API billing_time_t billing_event_end(const billing_event *ev);
BILLING_API const char *billing_event_model(const billing_event *ev);
BILLING_API const char *billing_event_region(const billing_event *ev);

/** Room for any quantity billing_event_quantity writes ("1000000000000000000.000000001"). */
#define BILLING_QUANTITY_TEXT_MAX 48

/**
 * billing_event_quantity - the quantity as a canonical decimal ("1.5",
 * "0") into @buf of @size bytes. Returns its length, or -1 if @buf is
 * NULL or too small (BILLING_QUANTITY_TEXT_MAX always suffices).
 */
BILLING_API int billing_event_quantity(const billing_event *ev, char *buf, size_t size);

/* ===================================================================== */
/* Wire format: protobuf billing.v1.UsageEvent (proto/billing/v1)         */
/* ===================================================================== */

/** Largest encoded UsageEvent accepted by billing_event_decode, in bytes. */
#define BILLING_EVENT_WIRE_MAX 4096

/**
 * billing_event_decode - turn the bytes of one billing.v1.UsageEvent
 * message (@len bytes at @buf, no length prefix) into @ev.
 *
 * @ev is reset first, then filled through the setters. Besides the wire
 * format itself (truncation, wrong wire types, bytes other than printable
 * ASCII in strings, which protobuf-c would cut at a NUL), it
 * checks what needs no catalog: id, account and resource present and at
 * most 128 bytes of printable ASCII without spaces, meter not
 * METER_UNSPECIFIED, timestamps present with nanos in 0..999999999 and
 * inside 1900..2200, end after start, quantity a valid decimal, model and
 * region at most 64 printable bytes. Fields unknown to this version are
 * skipped (proto3 compatibility: new fields default to old behaviour).
 *
 * Messages name the field with the names of billing_event ("id",
 * "account", "resource", "meter", "start", "end", "quantity", "model",
 * "region") and, once known, the event id: "event 'e1': field 'quantity':
 * 'x' is not a decimal number".
 *
 * Returns BILLING_OK; BILLING_ERR_TOO_LARGE if @len exceeds
 * BILLING_EVENT_WIRE_MAX; BILLING_ERR_PARSE for malformed bytes;
 * BILLING_ERR_INVALID or BILLING_ERR_RANGE for a bad field;
 * BILLING_ERR_NOMEM (never returned since the decoder reads the wire bytes
 * itself; kept for compatibility). On error @ev holds a partial event that
 * must not be rated. Safe on any input. It accepts what protobuf-c's unpack
 * accepts, except strings that are not printable ASCII and field numbers
 * outside 1..2^29-1: a key or length prefix padded past 5 bytes is refused
 * (BILLING_ERR_PARSE, "malformed message"), and a Timestamp given twice
 * replaces the first whole. Allocates nothing. Thread-safe for distinct
 * @ev.
 */
BILLING_API billing_status billing_event_decode(billing_event *ev, const unsigned char *buf,
                                                size_t len, char *errbuf, size_t errsize);

/**
 * billing_event_encode - write @ev as a billing.v1.UsageEvent message
 * into @buf of @size bytes, storing the encoded length in *@len. Fields
 * never set are omitted (so decoding reports them missing). Returns
 * BILLING_OK; BILLING_ERR_TOO_LARGE if @size is too small (*@len then
 * holds the size needed, at most BILLING_EVENT_WIRE_MAX);
 * BILLING_ERR_INVALID for NULL arguments. Allocates nothing; thread-safe.
 */
BILLING_API billing_status billing_event_encode(const billing_event *ev, unsigned char *buf,
                                                size_t size, size_t *len);

/* ===================================================================== */
/* Rating                                                                 */
/* ===================================================================== */

/**
 * billing_rater: rates events against a frozen catalog into per-invoice
 * aggregates, remembering every event id it has accepted (permanent
 * dedupe). Memory grows with distinct aggregates and, for dedupe, by
 * about 40 bytes plus the id's length per distinct event id (measured in
 * doc/performance.md). Not thread-safe: use one rater
 * per thread, or serialise calls; several raters may share one catalog.
 */
typedef struct billing_rater billing_rater;

/**
 * billing_rater_new - a rater for @cat, which it freezes and borrows (the
 * catalog must outlive the rater).
 * @out: receives the rater, which the caller frees with
 *       billing_rater_destroy; set to NULL on failure.
 * Returns BILLING_OK, or with a message in errbuf: BILLING_ERR_INVALID (a
 * NULL argument, or overlapping subscriptions), BILLING_ERR_NO_PRICE (a
 * subscription term without a fee in force), BILLING_ERR_STATE (no
 * currency set) or BILLING_ERR_NOMEM. Not thread-safe for a catalog that is not frozen yet
 * (the first rater freezes it); once frozen, safe from several threads.
 */
BILLING_API billing_status billing_rater_new(billing_catalog *cat, billing_rater **out,
                                             char *errbuf, size_t errsize);

/** billing_rater_destroy - free a rater; NULL is a no-op. */
BILLING_API void billing_rater_destroy(billing_rater *r);

/**
 * billing_rater_add - validate and rate one event.
 * Returns BILLING_OK (rated), BILLING_DUPLICATE (same id and content seen
 * before: nothing changes), or an error, in which case nothing changes and
 * errbuf names the event id, the field and the reason:
 * BILLING_ERR_INVALID (missing field, end not after start...),
 * BILLING_ERR_CONFLICT (same id, different content),
 * BILLING_ERR_UNKNOWN_ACCOUNT, BILLING_ERR_NO_PRICE, BILLING_ERR_RANGE,
 * BILLING_ERR_TOO_LARGE (usage inside subscriptions naming more than 4096
 * distinct (model, region) pairs in one rater: included lines show each
 * pair, so the rater keeps them), BILLING_ERR_NOMEM.
 */
BILLING_API billing_status billing_rater_add(billing_rater *r, const billing_event *ev,
                                             char *errbuf, size_t errsize);

/**
 * billing_rater_set_dedupe - turn the rater's own permanent event-id
 * dedupe on (default) or off. Turn it off only when every event is known
 * to be unique already (for example deduplicated by the store), to keep
 * memory independent of the event count. Only before the first event;
 * returns BILLING_OK or BILLING_ERR_STATE.
 */
BILLING_API billing_status billing_rater_set_dedupe(billing_rater *r, int on);

/**
 * billing_rater_remove - take back an event that billing_rater_add rated
 * (returned BILLING_OK for), exactly: aggregates are sums, so the state
 * afterwards is as if the event had never been added, whatever came in
 * between (a usage record withdrawn by its producer, a correction). The
 * rater checks that this very event was added, through its dedupe set, so
 * misuse is refused rather than corrupting totals: the dedupe must be on
 * (the default). Afterwards the id is free: adding the event again rates
 * it again.
 * Returns BILLING_OK; BILLING_ERR_STATE (dedupe off: the rater keeps no
 * ids and cannot check); BILLING_ERR_NOT_FOUND (no event with this id is
 * rated: never added, or removed already); BILLING_ERR_CONFLICT (an event
 * with this id is rated but its content differs); or the error that
 * billing_rater_add would give for this event. Nothing changes on error.
 * Not thread-safe (as every call on a rater).
 */
BILLING_API billing_status billing_rater_remove(billing_rater *r, const billing_event *ev,
                                                char *errbuf, size_t errsize);

/**
 * billing_rater_take_back - take back @ev, which billing_rater_add rated
 * (returned BILLING_OK for) on @r with the dedupe off, exactly: the state
 * afterwards is as if it had never been added. For a caller that keeps no
 * ids in the rater (billing_rater_set_dedupe off, to bound memory) and
 * finds repeated or withdrawn events itself, as `billing rate`, the store
 * and billingd do. What is checked: the arguments, the dedupe being off,
 * and everything billing_rater_add checks of @ev. What is NOT checked,
 * since the rater keeps no ids: that @ev was added. Taking back an event
 * that was not added is refused only when one of its aggregates is empty
 * (BILLING_ERR_INVALID); otherwise it silently corrupts the totals, so
 * call it only for events the caller knows it added. With the dedupe on,
 * use billing_rater_remove, which checks.
 * Returns BILLING_OK; BILLING_ERR_INVALID (@r or @ev NULL);
 * BILLING_ERR_STATE (dedupe on); or the error billing_rater_add would
 * give for @ev. Nothing changes on error. Allocates nothing that the
 * caller frees. Not thread-safe (as every call on a rater).
 * (Since libbilling 4:0:2.)
 */
BILLING_API billing_status billing_rater_take_back(billing_rater *r, const billing_event *ev,
                                                   char *errbuf, size_t errsize);

/**
 * billing_rater_merge - add every aggregate of @src (its sums, and its
 * pieces, so that events can still be taken back from @dst) and its event
 * count to @dst. Aggregates are exact sums, so the merged rater holds
 * exactly what one rater given every event of both would hold, and gives
 * the same invoices: rate the parts of an input on several threads, one
 * rater each against one shared catalog, and merge at the end. What is
 * checked: both raters were made from the same catalog, both have their
 * dedupe off (an id set cannot be merged exactly this way). What is not:
 * that no event was added to both (it would be counted twice).
 * @src is left unchanged. Returns BILLING_OK; BILLING_ERR_INVALID (a NULL
 * rater, or another catalog); BILLING_ERR_STATE (a dedupe on);
 * BILLING_ERR_TOO_LARGE (more than 4096 model and region pairs together,
 * as billing_rater_add) or BILLING_ERR_NOMEM; on an error after the
 * checks @dst holds part of @src and must be destroyed. Not thread-safe
 * for @dst: nothing else may use it meanwhile; @src may be read by other
 * merges at the same time. (Since libbilling 4:0:2.)
 */
BILLING_API billing_status billing_rater_merge(billing_rater *dst, const billing_rater *src,
                                               char *errbuf, size_t errsize);

/** billing_rater_event_count - events accepted so far (duplicates excluded). */
BILLING_API uint64_t billing_rater_event_count(const billing_rater *r);

/** billing_rater_aggregate_count - distinct aggregates held. */
BILLING_API size_t billing_rater_aggregate_count(const billing_rater *r);

/* ===================================================================== */
/* Aggregates: what a store keeps instead of re-rating every event        */
/* ===================================================================== */

/*
 * An aggregate is the exact sum of quantity x duration of the event
 * pieces with one key: account, local month, meter, rate (price version,
 * model and region of the price key as the catalog spells them, "*"
 * included) or covering subscription (included usage) or neither
 * (zero-rated traffic), and credit epoch (how many of the account's grant
 * window bounds lie at or before the pieces' start). Invoices are
 * computed from aggregates only, so a rater given another rater's
 * aggregates (billing_rater_add_aggregate) gives the same invoices.
 *
 * Sums are exact rationals in unit-nanoseconds (GPU-nanoseconds, GB-ns...;
 * traffic: units), written "N" or "N/D" in lowest terms, non-negative.
 */

/** Room for any sum billing_rater_aggregate writes: 2 x 128-bit-scale numbers and more. */
#define BILLING_AGG_SUM_MAX 512

/**
 * billing_rater_aggregate - describe aggregate @index (0 <= @index <
 * billing_rater_aggregate_count; the order is arrival of the first
 * piece). Every output pointer may be NULL. *@year_month gets
 * year*100+month; *@price_version the rate's version or NULL (included or
 * zero-rated); *@model, *@region the rate's key, for included usage the
 * events' own model and region (which its invoice line shows), NULL for
 * zero-rated traffic; *@subscription the covering subscription
 * id or NULL; *@pieces the event pieces summed (0: every one was removed).
 * Strings are owned by the catalog. The sum is written into @sum of
 * @sumsize bytes when @sum is non-NULL. Returns BILLING_OK,
 * BILLING_ERR_INVALID (NULL rater, index out of range) or
 * BILLING_ERR_TOO_LARGE (@sumsize too small; BILLING_AGG_SUM_MAX always
 * suffices for sums of events within the documented bounds). Not
 * thread-safe with calls changing @r.
 */
BILLING_API billing_status billing_rater_aggregate(const billing_rater *r, size_t index,
                                                   const char **account, int *year_month,
                                                   billing_meter *meter, const char **price_version,
                                                   const char **model, const char **region,
                                                   const char **subscription, unsigned *epoch,
                                                   uint64_t *pieces, char *sum, size_t sumsize);

/**
 * billing_rater_add_aggregate - add a stored aggregate to @r, whose
 * dedupe must be off (the store deduped the events). The key is resolved
 * against @r's catalog: @account; local month @month of @year; @meter;
 * @price_version with @model and @region (the rate's key as the catalog
 * spells it), or NULL and @subscription (included usage, with @model and
 * @region the events' own pair, NULL meaning ""), or both NULL
 * (zero-rated traffic); credit @epoch. @pieces (>= 1) and the exact @sum
 * ("N" or "N/D", unit-nanoseconds, at most 512 characters) are added to
 * the aggregate of that key, created if new. Returns BILLING_OK, or
 * BILLING_ERR_UNKNOWN_ACCOUNT, BILLING_ERR_NO_PRICE (no such rate),
 * BILLING_ERR_NOT_FOUND (subscription), BILLING_ERR_RANGE (month, meter,
 * epoch past the account's grant bounds), BILLING_ERR_PARSE (sum),
 * BILLING_ERR_STATE (dedupe on), BILLING_ERR_TOO_LARGE (more than 4096
 * distinct model and region pairs of included usage, or one longer than
 * an event's field may be), BILLING_ERR_INVALID or BILLING_ERR_NOMEM, with
 * a message; nothing changes on error.
 */
BILLING_API billing_status billing_rater_add_aggregate(
    billing_rater *r, const char *account, int year, int month, billing_meter meter,
    const char *price_version, const char *model, const char *region, const char *subscription,
    unsigned epoch, uint64_t pieces, const char *sum, char *errbuf, size_t errsize);

/* ===================================================================== */
/* Invoices                                                               */
/* ===================================================================== */

/**
 * billing_invoice: the invoice of one account for one calendar month of
 * its time zone, as computed from a rater's state. Immutable; safe to read
 * from several threads. Every string it returns is owned by it.
 *
 * Amounts: "exact" strings are exact rationals, written as a decimal when
 * the value has a finite decimal expansion and as "p/q" otherwise;
 * rounded strings have exactly the currency's minor digits.
 * Reconciliation: subtotal = sum of rounded lines; total = subtotal +
 * returned - credits - account_credit + carried + tax (see the totals
 * below); each
 * credit and the tax are in minor units.
 */
typedef struct billing_invoice billing_invoice;

/**
 * billing_rater_invoice - compute the invoice of @account for local month
 * @month (1..12) of @year. Credits are applied month by month from the
 * earliest month with charges, so what earlier months used is not
 * available again. Returns BILLING_OK and a new invoice in *@out (caller
 * frees with billing_invoice_destroy), or BILLING_ERR_UNKNOWN_ACCOUNT,
 * BILLING_ERR_RANGE, BILLING_ERR_NOMEM. An account-month without charges
 * gives an invoice with no lines.
 */
BILLING_API billing_status billing_rater_invoice(billing_rater *r, const char *account, int year,
                                                 int month, billing_invoice **out, char *errbuf,
                                                 size_t errsize);

/**
 * billing_months: a list of (year, month) pairs, for example the months of
 * an account that have charges. Immutable; safe to read from several
 * threads.
 */
typedef struct billing_months billing_months;

/**
 * billing_rater_months - the local months of @account (in its time zone)
 * that have charges (usage, fees or refunds), in ascending order: the
 * months for which billing_rater_invoice gives lines. Returns BILLING_OK
 * and a new list in *@out (caller frees with billing_months_destroy;
 * possibly empty), or BILLING_ERR_UNKNOWN_ACCOUNT, BILLING_ERR_INVALID
 * (NULL argument) or BILLING_ERR_NOMEM with a message; *@out is NULL on
 * error. Not thread-safe (it fills the rater's caches).
 */
BILLING_API billing_status billing_rater_months(billing_rater *r, const char *account,
                                                billing_months **out, char *errbuf, size_t errsize);

/** billing_months_count - number of months in @months (0 for NULL). */
BILLING_API size_t billing_months_count(const billing_months *months);

/**
 * billing_months_year / billing_months_month - the year and the month
 * (1..12) of entry @i, for 0 <= i < billing_months_count; 0 out of range.
 */
BILLING_API int billing_months_year(const billing_months *months, size_t i);
BILLING_API int billing_months_month(const billing_months *months, size_t i);

/** billing_months_destroy - free a list; NULL is a no-op. */
BILLING_API void billing_months_destroy(billing_months *months);

/**
 * billing_rater_account_count / billing_rater_account_id - enumerate the
 * catalog's accounts in id order. The id is owned by the catalog.
 */
BILLING_API size_t billing_rater_account_count(const billing_rater *r);
BILLING_API const char *billing_rater_account_id(const billing_rater *r, size_t index);

/** billing_invoice_destroy - free an invoice; NULL is a no-op. */
BILLING_API void billing_invoice_destroy(billing_invoice *inv);

/** Header accessors; strings owned by the invoice. */
BILLING_API const char *billing_invoice_account(const billing_invoice *inv);
BILLING_API const char *billing_invoice_currency(const billing_invoice *inv);
BILLING_API int billing_invoice_year(const billing_invoice *inv);
BILLING_API int billing_invoice_month(const billing_invoice *inv);
/** billing_invoice_period - [start, end) of the month in the account zone. */
BILLING_API void billing_invoice_period(const billing_invoice *inv, billing_time_t *start,
                                        billing_time_t *end);

/** Kinds of invoice line. */
typedef enum billing_line_kind {
    BILLING_LINE_USAGE = 1,    /**< metered usage priced at a unit price */
    BILLING_LINE_INCLUDED = 2, /**< usage inside a subscription term: shown, zero charge */
    BILLING_LINE_FEE = 3,      /**< the fee of plan terms starting this month */
    BILLING_LINE_REFUND = 4    /**< pro-rata refund of a cancelled refundable term (negative) */
} billing_line_kind;

/**
 * billing_line_kind_name - "usage", "included", "fee" or "refund" (the
 * names the billing tool prints); NULL for an unknown value. Static
 * string; thread-safe.
 */
BILLING_API const char *billing_line_kind_name(billing_line_kind kind);

/** billing_invoice_line_count - number of lines. */
BILLING_API size_t billing_invoice_line_count(const billing_invoice *inv);

/*
 * Line accessors, for 0 <= i < line_count (out of range: NULL / 0):
 *  kind        - billing_line_kind
 *  meter       - meter name ("gpu", ...) of usage and included lines; "" for
 *                fee and refund lines, which are for a plan's term
 *  model       - usage lines: GPU model of the price key ("*" when the rate
 *                is a wildcard); included lines: the events' own model (""
 *                if they gave none), whatever the plan names; fee and refund
 *                lines: the plan's model
 *  region      - the same for the region
 *  plan        - plan id for included/fee/refund lines, "" for usage lines
 *  price_version - price book version the unit price (or the fee) comes from
 *  subscription - refund lines: the cancelled subscription's id (each
 *                refund is its own line); "" for the other kinds
 *  quantity    - exact quantity in the line's unit; for a refund line the
 *                unused span of the term in seconds (exact decimal)
 *  unit        - "GPU-hour", "instance-hour", "GB-month", "GB", "term" (fee)
 *                or "second" (refund)
 *  unit_price  - decimal unit price ("0" for included usage; "" for refund
 *                lines, whose amount is the term's fee times the unused
 *                share of the term)
 *  amount      - exact amount
 *  amount_rounded - amount rounded to the currency's minor unit
 */
BILLING_API billing_line_kind billing_invoice_line_kind(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_line_meter(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_line_model(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_line_region(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_line_plan(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_line_price_version(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_line_subscription(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_line_quantity(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_line_unit(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_line_unit_price(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_line_amount(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_line_amount_rounded(const billing_invoice *inv, size_t i);

/**
 * billing_invoice_line_span - for a refund line, the unused span of the
 * cancelled term: [*@start, *@end) = [cancellation, end of that term).
 * Returns 1 and stores the instants for a refund line; 0 (nothing stored)
 * for any other line or an index out of range. Thread-safe.
 */
BILLING_API int billing_invoice_line_span(const billing_invoice *inv, size_t i,
                                          billing_time_t *start, billing_time_t *end);

/** billing_invoice_credit_count - credit grants applied on this invoice. */
BILLING_API size_t billing_invoice_credit_count(const billing_invoice *inv);
/** Credit accessors: grant id, amount applied (minor units), grant remainder after this invoice. */
BILLING_API const char *billing_invoice_credit_grant(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_credit_amount(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_credit_remaining(const billing_invoice *inv, size_t i);

/**
 * billing_invoice_expired_count - grants whose validity ended inside this
 * invoice's month with an unused remainder; accessors give the grant id
 * and the amount that expired.
 */
BILLING_API size_t billing_invoice_expired_count(const billing_invoice *inv);
BILLING_API const char *billing_invoice_expired_grant(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_expired_amount(const billing_invoice *inv, size_t i);

/**
 * billing_invoice_returned_count - grants that refunds on this invoice
 * gave credit back to: a refund of a fee that credit paid in an earlier
 * month goes back to the grants that paid it (each its share, pro rata),
 * only the rest as money. Accessors give the grant id, the amount given
 * back and the grant's remainder after this invoice (strings owned by
 * @inv; NULL out of range). A grant that has already expired lists what it
 * got back under expired too: it can pay nothing more.
 */
BILLING_API size_t billing_invoice_returned_count(const billing_invoice *inv);
BILLING_API const char *billing_invoice_returned_grant(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_returned_amount(const billing_invoice *inv, size_t i);
BILLING_API const char *billing_invoice_returned_remaining(const billing_invoice *inv, size_t i);

/**
 * Totals, all with exactly the currency's minor digits. An invoice is
 * never below zero: when what it asks for (subtotal + returned) is, no
 * credit applies and the excess is carried to the account credit, which
 * later invoices spend after every grant.
 *
 * - subtotal: the sum of the rounded lines;
 * - returned: the credit given back to grants, listed above (it is not
 *   paid out: it offsets the refund lines' credit part);
 * - credits: the sum of the grant credits listed above;
 * - account_credit: account credit spent on this invoice;
 * - carried: the excess below zero, added to the account credit;
 * - account_credit_left: the account credit after this invoice;
 * - tax: tax_rate x (subtotal + returned - credits - account_credit +
 *   carried), rounded once;
 * - total: subtotal + returned - credits - account_credit + carried + tax,
 *   never < 0.
 *
 * The strings belong to @inv.
 */
BILLING_API const char *billing_invoice_subtotal(const billing_invoice *inv);
BILLING_API const char *billing_invoice_returned(const billing_invoice *inv);
BILLING_API const char *billing_invoice_credits(const billing_invoice *inv);
BILLING_API const char *billing_invoice_account_credit(const billing_invoice *inv);
BILLING_API const char *billing_invoice_carried(const billing_invoice *inv);
BILLING_API const char *billing_invoice_account_credit_left(const billing_invoice *inv);
BILLING_API const char *billing_invoice_tax_rate(const billing_invoice *inv);
BILLING_API const char *billing_invoice_tax(const billing_invoice *inv);
BILLING_API const char *billing_invoice_total(const billing_invoice *inv);

/* ===================================================================== */
/* Live credit balance                                                    */
/* ===================================================================== */

/**
 * billing_rater_credit_balance - the credit left for @account at instant
 * @now: the account credit plus, over grants valid at @now, what the
 * invoices of the charges rated so far (every month up to the one of
 * @now, as billing_rater_invoice computes them) leave of them. Writes a
 * decimal string without trailing zeros (e.g. "10" or "5.2") into @buf of
 * @size bytes. Returns BILLING_OK,
 * BILLING_ERR_UNKNOWN_ACCOUNT, BILLING_ERR_TOO_LARGE (buffer), or
 * BILLING_ERR_NOMEM.
 */
BILLING_API billing_status billing_rater_credit_balance(billing_rater *r, const char *account,
                                                        billing_time_t now, char *buf, size_t size);

/**
 * billing_grant_fn - receives one grant of billing_rater_credit_grants:
 * its id, what it has left (a decimal with the currency's minor digits,
 * e.g. "864.67"; valid during the call only) and its expiry. Non-zero
 * stops the walk.
 */
typedef int (*billing_grant_fn)(void *arg, const char *grant, const char *remaining,
                                billing_time_t expires_at);

/**
 * billing_rater_credit_grants - each grant of @account valid at @now (in
 * the catalog's order) with what it has left, handed to @fn: the terms
 * billing_rater_credit_balance adds up with the account credit (what the
 * invoices up to the month of @now leave of it, less what later issued
 * months took, as billing_rater_credit_issued gave them). Returns
 * BILLING_OK (also when @fn stopped), BILLING_ERR_INVALID (a NULL @r or
 * @fn), BILLING_ERR_UNKNOWN_ACCOUNT or BILLING_ERR_NOMEM. Not
 * thread-safe (as every call on a rater). (Since libbilling 4:0:2.)
 */
BILLING_API billing_status billing_rater_credit_grants(billing_rater *r, const char *account,
                                                       billing_time_t now, billing_grant_fn fn,
                                                       void *arg);

/**
 * billing_rater_credit_exhaustion - given that @account has usage running
 * since @now at the combined price given by the resources in @events
 * (events whose interval is ignored: only meter, quantity, model, region
 * count, priced at the version in force at @now, hourly rates), store in
 * *@out the first instant at which its usage credit reaches zero (or a
 * grant expiry leaves none), rounded down to the nanosecond. The burn
 * is spent from the usage grant valid at that moment that expires first,
 * then from the account credit, so that as little as possible expires
 * unused; a grant that starts later adds to the credit from its start.
 * If it never
 * does (no burn or no credit), *@out is @now when there is no credit left
 * and INT64_MAX when nothing is burning. Returns BILLING_OK or an error
 * with a message.
 */
BILLING_API billing_status billing_rater_credit_exhaustion(billing_rater *r, const char *account,
                                                           billing_time_t now,
                                                           const billing_event *const *events,
                                                           size_t n_events, billing_time_t *out,
                                                           char *errbuf, size_t errsize);

#if defined(__GNU_MP__)
/**
 * billing_rater_credit_crossing - when @account's credit balance crossed
 * @level (exact, usually a percent of a credit's total), over a span of
 * its usage: the first instant t >= @from at which the @n @events, each
 * cut to end at t (those starting at or after t left out), rated on top
 * of what @r holds, leave the live balance (billing_rater_credit_balance,
 * read at t's last nanosecond before, at @from for t == @from) at or
 * below @level; into *@at, to the nanosecond. Into *@index the event that
 * took it there: of the events running at *@at (start before it, end at
 * or after it) the one that started last (ties: the smallest id), or when
 * none is (the balance was already that low at @from) the span's first
 * event (ties: the smallest id); SIZE_MAX when @n is 0.
 * Meant for a credit alert: @r holds the account's usage before the span
 * (the span's own events taken back or never added), @events are its
 * events from @from on (each starting at or after @from, ending after its
 * start, of @account), whole. The caller knows the balance is at or below
 * @level once the span's events are all rated (it read it, for example
 * with billing_rater_credit_balance); otherwise *@at is the span's latest
 * event end. Cost: when nothing in the span can raise the balance (no
 * grant starts after @from in it, no cancellation refunds a fee, no
 * traffic event spans a price version's start, a local month start or a
 * grant bound before the span's last end: cut later, its bytes move past
 * that bound, doc/pricing.md), a few
 * balance reads among the events' ends (each where the balance would
 * reach @level if it fell evenly), the instant between two ends solved
 * from the invoice lines (their exact amounts grow linearly while the
 * same events run; rounded as invoices round them) and checked with two
 * reads, a binary search only when that check fails; about n adds and
 * take-backs of the events in all. Otherwise a binary search among the
 * ends, then to the nanosecond. Either way the same instant and event.
 * Nothing is parsed or written as text.
 * @r must have its dedupe off (billing_rater_set_dedupe): the events are
 * added and taken back, and @r is left as it was, error or not. @events
 * and @level are only read during the call; nothing is allocated that the
 * caller frees. Returns BILLING_OK; BILLING_ERR_INVALID (a NULL argument,
 * or an event outside the span or of another account, its position
 * named); BILLING_ERR_UNKNOWN_ACCOUNT; BILLING_ERR_STATE (dedupe on);
 * BILLING_ERR_NOMEM; or the error billing_rater_add gives for an event
 * (named in @errbuf). *@at and *@index are set on BILLING_OK only. Not
 * thread-safe (as every call on a rater). Declared when <gmp.h> was
 * included first, as billing_decimal_parse. (Since libbilling 4:0:2.)
 */
BILLING_API billing_status billing_rater_credit_crossing(billing_rater *r, const char *account,
                                                         const billing_event *const *events,
                                                         size_t n, billing_time_t from,
                                                         const mpq_t level, size_t *index,
                                                         billing_time_t *at, char *errbuf,
                                                         size_t errsize);

/**
 * billing_rater_credit_balance_q - billing_rater_credit_balance's balance
 * as an exact rational into @out (initialised by the caller), without
 * writing or parsing text: the same value, for a caller that compares it
 * (a credit alert's check against its thresholds, once per balance read).
 * Returns BILLING_OK, BILLING_ERR_INVALID (a NULL argument),
 * BILLING_ERR_UNKNOWN_ACCOUNT or BILLING_ERR_NOMEM; @out is set on
 * BILLING_OK only. Not thread-safe (as every call on a rater). Declared
 * when <gmp.h> was included first. (Since libbilling 4:0:2.)
 */
BILLING_API billing_status billing_rater_credit_balance_q(billing_rater *r, const char *account,
                                                          billing_time_t now, mpq_t out);
#endif /* __GNU_MP__ */

/**
 * billing_issued_row - one figure of an account's month whose invoice was
 * issued, input to billing_rater_credit_issued. Filled by the caller in an
 * array it owns; the rater copies what it needs. Its layout is part of
 * the ABI and will not change: a new figure would come with a new
 * function, not a new member.
 */
typedef struct billing_issued_row {
    int year;
    int month;          /**< local month of the account, 1..12 */
    const char *grant;  /**< a grant of the account; NULL: @amount is the account credit left */
    const char *amount; /**< minor units, a decimal integer (a grant's may be negative) */
} billing_issued_row;

/**
 * billing_rater_credit_issued - pin the credit history of @account: the
 * months whose invoices were issued, what each took from the account's
 * grants (apply and expire, less what its refunds gave back: the net of
 * its ledger entries) and left of the account credit, as @n @rows in any
 * order. Invoices replay credit from an account's first month with
 * charges; a month issued already is history (held by the caller's
 * ledger), and a late event of such a month must not change what credit
 * later months may use. So when invoices replay credit, each such month
 * takes from the grants what is given here (a grant not named took
 * nothing; a remainder never goes below zero) instead of what re-rating
 * it now would, and the account credit after it is the given one when a
 * row names it; months not named are replayed as always (refunds still
 * find what credit paid of a fee). The invoice of a month before an
 * issued one (a month issued again after later months were) may spend
 * only what the later issued months left. Replaces what an earlier call
 * gave for the account (@n 0: none). What is checked: the account, each
 * grant belongs to it, each month is in 1900..2199, each amount is an
 * integer. What is not: that the figures agree with the rater's events.
 * Returns BILLING_OK; BILLING_ERR_UNKNOWN_ACCOUNT, BILLING_ERR_INVALID (an
 * unknown grant or a malformed amount, named in @errbuf),
 * BILLING_ERR_RANGE (a month) or BILLING_ERR_NOMEM, with nothing given.
 * @rows is only read during the call. Not thread-safe (as every call on
 * a rater). (Since libbilling 4:0:2.)
 */
BILLING_API billing_status billing_rater_credit_issued(billing_rater *r, const char *account,
                                                       size_t n, const billing_issued_row *rows,
                                                       char *errbuf, size_t errsize);

#ifdef __cplusplus
}
#endif

#endif /* BILLING_H */
