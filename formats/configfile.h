/*
 * configfile.h - the price book and the accounts files (JSON, schemas in
 * doc/formats.md) applied to a billing_catalog.
 *
 * Both parsers are strict: an unknown key, a missing required key, a
 * value of the wrong type or a number where an exact decimal string is
 * expected is an error naming the file and the JSON path
 * ("accounts.json: grants[0].amount: must be a string"). Decimals are
 * always JSON strings, so no value ever passes through a binary float.
 */
#ifndef BC_CONFIGFILE_H
#define BC_CONFIGFILE_H

#include <stddef.h>

#include "billing.h"
#include "zones.h"

/* Largest configuration file read. */
#define BC_CONFIG_FILE_MAX (64u * 1024u * 1024u)

/*
 * bc_pricebook_parse - apply the price book in JSON @text (@len bytes) to
 * @cat: currency and rounding, plans, then price versions with their rates
 * and plan fees. @name (a file name) prefixes messages. Returns 0, or -1
 * with a message; @cat may then hold part of the file and should be
 * destroyed.
 */
int bc_pricebook_parse(billing_catalog *cat, const char *text, size_t len, const char *name,
                       char *errbuf, size_t errsize);

/* bc_pricebook_load - bc_pricebook_parse on the file @path (at most BC_CONFIG_FILE_MAX). */
int bc_pricebook_load(billing_catalog *cat, const char *path, char *errbuf, size_t errsize);

/*
 * bc_accounts_parse - apply the accounts file in JSON @text to @cat:
 * accounts (with their time zones, loaded through @zones, which must
 * outlive @cat), subscriptions and credit grants. Apply the price book
 * first: accounts need its currency and subscriptions its plans. Returns
 * 0 or -1 with a message, as bc_pricebook_parse.
 */
int bc_accounts_parse(billing_catalog *cat, bc_zones *zones, const char *text, size_t len,
                      const char *name, char *errbuf, size_t errsize);

/* bc_accounts_load - bc_accounts_parse on the file @path. */
int bc_accounts_load(billing_catalog *cat, bc_zones *zones, const char *path, char *errbuf,
                     size_t errsize);

/*
 * bc_reject_fn - told about one subscription that the library refused
 * (a term without a fee, a cancellation after its end...): @message is
 * "FILE: subscriptions[N]: subscription 'ID' (account 'A', plan 'P'):
 * field 'F' ...". The row is left out and the file goes on.
 */
typedef void (*bc_reject_fn)(void *arg, const char *message);

/*
 * bc_accounts_load_rejecting - bc_accounts_load, except that a well-formed
 * subscription row the library refuses is passed to @reject (with @arg)
 * and left out instead of failing the file, so that one bad subscription
 * does not stop the rating of every other account. Malformed rows and
 * every other error still fail with -1.
 */
int bc_accounts_load_rejecting(billing_catalog *cat, bc_zones *zones, const char *path,
                               bc_reject_fn reject, void *arg, char *errbuf, size_t errsize);

/*
 * bc_accounts_load_book - bc_accounts_load_rejecting, keeping only the
 * accounts whose "book" is @book, and their subscriptions and grants
 * (@book NULL: every account, whatever its "book"). One run of
 * `billing rate` with several price books loads one catalog per book
 * this way. Rows of accounts outside @book are still checked for shape.
 */
int bc_accounts_load_book(billing_catalog *cat, bc_zones *zones, const char *path,
                          const char *book, bc_reject_fn reject, void *arg, char *errbuf,
                          size_t errsize);

#endif /* BC_CONFIGFILE_H */
