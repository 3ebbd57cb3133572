/*
 * billing_config.h - public API of libbilling-config: catalogs from the
 * price book and accounts JSON files, and time zones by IANA name from the
 * system's zoneinfo. Installed as <billing/billing_config.h>; pkg-config
 * module libbilling-config (which brings libbilling and jansson).
 *
 * libbilling itself does no I/O; this companion library reads the same
 * files as the `billing` tool, with the same code and the same messages
 * (the tool links it), so that an embedder never writes a loader of its
 * own. Schemas: doc/formats.md. Guide: doc/embedding.md.
 *
 * Conventions are those of billing.h: every fallible function returns a
 * billing_status and, given a buffer @errbuf of @errsize bytes (NULL/0
 * allowed), writes a message there that names the file, the JSON path and
 * the field ("accounts.json: grants[0].amount: must be a string"). Every
 * name is prefixed billing_config_. No global state: functions are
 * thread-safe on distinct objects (the zone set is not thread-safe while
 * it loads; the catalogs are those of billing.h).
 *
 * Statuses: BILLING_ERR_IO (a file cannot be opened or read, is not a
 * regular file, or exceeds its size bound), BILLING_ERR_PARSE (malformed
 * JSON, with line and column), BILLING_ERR_INVALID (a field missing, of
 * the wrong type or unknown), BILLING_ERR_ZONE (a time zone name refused
 * or its file unusable), BILLING_ERR_NOMEM, or the status the catalog
 * setter of billing.h returned for the value (its message follows the
 * path).
 */
#ifndef BILLING_CONFIG_H
#define BILLING_CONFIG_H

#include <stddef.h>

#include <billing/billing.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(BILLING_CONFIG_BUILDING) && defined(__GNUC__)
#define BILLING_CONFIG_API __attribute__((visibility("default")))
#else
#define BILLING_CONFIG_API
#endif

/**
 * Largest configuration file read, in bytes (512 MiB): a million accounts
 * with a grant each is about 250 MB. The accounts file is parsed one array
 * element at a time, so memory is the text plus the catalog.
 */
#define BILLING_CONFIG_FILE_MAX (512u * 1024u * 1024u)
/** Longest zone name accepted (the longest IANA name is about 30 bytes). */
#define BILLING_CONFIG_ZONE_NAME_MAX 64
/** Largest TZif file read (libbilling's own bound). */
#define BILLING_CONFIG_ZONE_FILE_MAX (1024 * 1024)
/** Distinct zones one zone set may hold: bounds memory on hostile files. */
#define BILLING_CONFIG_ZONES_MAX 1024

/* ===================================================================== */
/* Time zones by IANA name                                                */
/* ===================================================================== */

/**
 * billing_config_zone_name_valid - non-zero if @name can be looked up:
 * 1..64 bytes of letters, digits and "/_-+.", not starting with '/' or
 * '.', with no empty, "." or ".." component (lookups stay inside the
 * zoneinfo tree), and not host-dependent: "localtime", "posixrules",
 * "Factory" and names under "posix/" or "right/" are refused, so that an
 * account bills the same on every machine. Thread-safe.
 */
BILLING_CONFIG_API int billing_config_zone_name_valid(const char *name);

/**
 * billing_config_zone_load - load zone @name from $TZDIR, or from
 * /usr/share/zoneinfo when TZDIR is unset or empty. "UTC" needs no file.
 * Returns BILLING_OK and a new zone in *@out (caller frees with
 * billing_zone_destroy), or BILLING_ERR_ZONE (name refused, file missing
 * or malformed: the message names the zone, the file and the cause),
 * BILLING_ERR_INVALID (NULL @out) or BILLING_ERR_NOMEM; *@out is NULL on
 * error. Reads the environment and one file; thread-safe as long as no
 * thread changes TZDIR.
 */
BILLING_CONFIG_API billing_status billing_config_zone_load(const char *name, billing_zone **out,
                                                           char *errbuf, size_t errsize);

/**
 * billing_config_zones: a set of loaded zones, each loaded once and owned
 * by the set, so that catalogs can borrow them (the set must outlive every
 * catalog that uses its zones). Not thread-safe while loading; the zones
 * it hands out are immutable and may be shared.
 */
typedef struct billing_config_zones billing_config_zones;

/** billing_config_zones_new - an empty set, or NULL when out of memory. */
BILLING_CONFIG_API billing_config_zones *billing_config_zones_new(void);

/** billing_config_zones_destroy - free the set and its zones; NULL is a no-op. */
BILLING_CONFIG_API void billing_config_zones_destroy(billing_config_zones *set);

/**
 * billing_config_zones_get - zone @name, loaded on first use as
 * billing_config_zone_load does. Returns BILLING_OK and the zone in *@out
 * (owned by the set, valid until billing_config_zones_destroy), or an
 * error as billing_config_zone_load, or BILLING_ERR_TOO_LARGE past
 * BILLING_CONFIG_ZONES_MAX zones; *@out is NULL on error.
 */
BILLING_CONFIG_API billing_status billing_config_zones_get(billing_config_zones *set,
                                                           const char *name,
                                                           const billing_zone **out, char *errbuf,
                                                           size_t errsize);

/* ===================================================================== */
/* Price book and accounts files                                          */
/* ===================================================================== */

/**
 * billing_config_pricebook_parse - apply the price book in JSON @text
 * (@len bytes, not NUL-terminated necessarily) to @cat: currency and
 * rounding, plans, then price versions with their rates and plan fees.
 * @name (a file name or any label) starts every message. The parser is
 * strict: an unknown key, a missing required key, a value of the wrong
 * type, a duplicate key, or a number where an exact decimal string is
 * expected is an error. So is an instant finer than a microsecond (here
 * effective_from; in accounts files subscription start and cancelled_at,
 * grant granted_at and expires_at): catalog instants are whole
 * microseconds, as the store keeps them (doc/formats.md). Returns
 * BILLING_OK or an error (see the top of this file); @cat may then hold
 * part of the file and should be destroyed. Allocates nothing that
 * outlives the call besides what @cat holds.
 */
BILLING_CONFIG_API billing_status billing_config_pricebook_parse(billing_catalog *cat,
                                                                 const char *text, size_t len,
                                                                 const char *name, char *errbuf,
                                                                 size_t errsize);

/**
 * billing_config_pricebook_load - billing_config_pricebook_parse on the
 * regular file @path (at most BILLING_CONFIG_FILE_MAX bytes), named @path
 * in messages.
 */
BILLING_CONFIG_API billing_status billing_config_pricebook_load(billing_catalog *cat,
                                                                const char *path, char *errbuf,
                                                                size_t errsize);

/**
 * billing_config_accounts_parse - apply the accounts file in JSON @text to
 * @cat: accounts (their time zones loaded through @zones, which must
 * outlive @cat), subscriptions and credit grants. Apply the price book
 * first: accounts need its currency and subscriptions its plans. Returns
 * as billing_config_pricebook_parse.
 */
BILLING_CONFIG_API billing_status billing_config_accounts_parse(billing_catalog *cat,
                                                                billing_config_zones *zones,
                                                                const char *text, size_t len,
                                                                const char *name, char *errbuf,
                                                                size_t errsize);

/** billing_config_accounts_load - billing_config_accounts_parse on the file @path. */
BILLING_CONFIG_API billing_status billing_config_accounts_load(billing_catalog *cat,
                                                               billing_config_zones *zones,
                                                               const char *path, char *errbuf,
                                                               size_t errsize);

/**
 * billing_config_reject_fn - told about one subscription that libbilling
 * refused (a term without a fee, a cancellation after its end...):
 * @message is "FILE: subscriptions[N]: subscription 'ID' (account 'A',
 * plan 'P'): field 'F' ...", valid during the call only.
 */
typedef void (*billing_config_reject_fn)(void *arg, const char *message);

/**
 * billing_config_accounts_load_rejecting - billing_config_accounts_load,
 * except that a well-formed subscription the library refuses is passed to
 * @reject (with @arg) and left out instead of failing the file, so that
 * one bad subscription does not stop the rating of every other account
 * (what `billing rate` does). Malformed rows and every other error still
 * fail.
 */
BILLING_CONFIG_API billing_status billing_config_accounts_load_rejecting(
    billing_catalog *cat, billing_config_zones *zones, const char *path,
    billing_config_reject_fn reject, void *arg, char *errbuf, size_t errsize);

/**
 * billing_config_accounts_load_book - billing_config_accounts_load_rejecting,
 * keeping only the accounts whose "book" key is @book (all of them when
 * @book is NULL) and the subscriptions and grants of those accounts; the
 * others are checked as well-formed but not added to @cat. Loads one price
 * book's catalog when several books share an accounts file (what `billing
 * rate --pricebook ID=FILE` does). Returns as billing_config_accounts_load;
 * allocates nothing the caller frees. Safe from several threads on
 * different catalogs.
 */
BILLING_CONFIG_API billing_status billing_config_accounts_load_book(
    billing_catalog *cat, billing_config_zones *zones, const char *path, const char *book,
    billing_config_reject_fn reject, void *arg, char *errbuf, size_t errsize);

/**
 * billing_config_element_fn - told about element @index (from 0) of array
 * @array ("accounts", "subscriptions" or "grants") of an accounts file:
 * its JSON text, @len bytes (not NUL-terminated, valid during the call
 * only). Returns 0 to go on; anything else stops the split, which then
 * returns BILLING_ERR_INVALID and leaves the message to the callback.
 */
typedef int (*billing_config_element_fn)(void *arg, const char *array, size_t index,
                                         const char *text, size_t len);

/**
 * billing_config_accounts_split - call @fn (with @arg) on each element of
 * the arrays of the accounts file in JSON @text (@len bytes): "accounts",
 * then "subscriptions", then "grants", each in file order, without
 * building a tree of the file: each element's text is found in place, as
 * billing_config_accounts_parse reads the file (for an unusual top level,
 * such as an escaped key, the whole tree is parsed and each element handed
 * over as compact JSON). Elements are not checked: parse the file first.
 * For loaders that write the file's rows elsewhere with memory that does
 * not grow with the file (`billing load`). @name starts every message.
 * Returns BILLING_OK, BILLING_ERR_PARSE (malformed JSON),
 * BILLING_ERR_INVALID (a NULL argument, or @fn stopped), or
 * BILLING_ERR_NOMEM.
 */
BILLING_CONFIG_API billing_status billing_config_accounts_split(const char *text, size_t len,
                                                                const char *name,
                                                                billing_config_element_fn fn,
                                                                void *arg, char *errbuf,
                                                                size_t errsize);

/**
 * billing_config_element - one element of an accounts file's arrays, as
 * billing_config_accounts_parse_each hands it over, already checked and
 * applied: read its members with the getters below, during that call
 * only. Opaque; the getters only read it (safe from several threads).
 */
typedef struct billing_config_element billing_config_element;

/**
 * billing_config_element_string - member @key of @e when it is a string,
 * else NULL (absent, null or another type). The string belongs to @e.
 */
BILLING_CONFIG_API const char *billing_config_element_string(const billing_config_element *e,
                                                             const char *key);

/**
 * billing_config_element_integer - member @key of @e when it is an
 * integer, else 0 (as jansson's json_integer_value).
 */
BILLING_CONFIG_API long long billing_config_element_integer(const billing_config_element *e,
                                                            const char *key);

/**
 * billing_config_element_item - string @i (from 0) of array member @key
 * of @e; NULL past its end, or when that is not an array of strings. The
 * string belongs to @e.
 */
BILLING_CONFIG_API const char *billing_config_element_item(const billing_config_element *e,
                                                           const char *key, size_t i);

/**
 * billing_config_element_size - bytes of @e's JSON text: in the file, or,
 * for an unusual top level read as a whole tree, of its compact JSON (the
 * text billing_config_accounts_split hands over); 0 for NULL.
 */
BILLING_CONFIG_API size_t billing_config_element_size(const billing_config_element *e);

/**
 * billing_config_each_fn - told about element @index (from 0) of array
 * @array ("accounts", "subscriptions" or "grants") once it is applied.
 * Returns 0 to go on; anything else stops the parse, which then returns
 * BILLING_ERR_INVALID and leaves the message to the callback.
 */
typedef int (*billing_config_each_fn)(void *arg, const char *array, size_t index,
                                      const billing_config_element *e);

/**
 * billing_config_accounts_parse_each - billing_config_accounts_parse, and
 * @fn (with @arg) called on each element of the file's arrays after it is
 * applied to @cat: "accounts", then "subscriptions", then "grants", each
 * in file order, the elements billing_config_accounts_split gives. A
 * loader that writes the file's rows elsewhere and checks them as
 * `billing rate` does reads the file once (`billing load`). When the
 * parse fails, @fn may have been told about the elements before the
 * failing one: the caller discards what it did with them. @fn NULL: as
 * billing_config_accounts_parse. Returns as
 * billing_config_accounts_parse, or BILLING_ERR_INVALID when @fn stopped
 * it. Allocates nothing the caller frees; thread-safe as
 * billing_config_accounts_parse.
 */
BILLING_CONFIG_API billing_status billing_config_accounts_parse_each(
    billing_catalog *cat, billing_config_zones *zones, const char *text, size_t len,
    const char *name, billing_config_each_fn fn, void *arg, char *errbuf, size_t errsize);

/**
 * billing_config_catalog_load - a new catalog from the price book file
 * @pricebook_path and, unless NULL, the accounts file @accounts_path, with
 * zones from @zones (which must outlive the catalog). Returns BILLING_OK
 * and the catalog in *@out (caller frees with billing_catalog_destroy; not
 * yet frozen), or an error as the functions above, with *@out NULL.
 */
BILLING_CONFIG_API billing_status billing_config_catalog_load(const char *pricebook_path,
                                                              const char *accounts_path,
                                                              billing_config_zones *zones,
                                                              billing_catalog **out, char *errbuf,
                                                              size_t errsize);

#ifdef __cplusplus
}
#endif

#endif /* BILLING_CONFIG_H */
