/*
 * itestdb.h - a private database per integration test, on the server of
 * scripts/pg.sh (BILLING_PG_CONNINFO): created, migrated, dropped. Used
 * by the ingest and billingd suites. Without BILLING_PG_CONNINFO every
 * test FAILS, never skips.
 */
#ifndef BILLING_ITESTDB_H
#define BILLING_ITESTDB_H

#include <stddef.h>

#include "store.h"

/* itdb_conninfo - the connection string of database @dbname into @out; asserts it fits. */
void itdb_conninfo(const char *dbname, char *out, size_t size);

/* itdb_connect - connect to @dbname (few, short retries); asserts success. */
bs_conn *itdb_connect(const char *dbname);

/*
 * itdb_fresh - drop and create billing_it_<pid>_<tag>, migrate it to the
 * latest schema, and return a connection to it; its name goes to @name
 * (at least 64 bytes).
 */
bs_conn *itdb_fresh(const char *tag, char *name, size_t size);

/* itdb_drop - close @c and drop database @name. */
void itdb_drop(bs_conn *c, const char *name);

/* itdb_exec - run @sql (no parameters); asserts success. */
void itdb_exec(bs_conn *c, const char *sql);

/* itdb_long - the single integer value of @sql. */
long itdb_long(bs_conn *c, const char *sql);

/* itdb_text - the rows of @sql as one string, columns '|'-separated, rows '\n' (caller frees). */
char *itdb_text(bs_conn *c, const char *sql);

#endif
