/*
 * itestdb.h - a private database per integration test, on the server of
 * scripts/pg.sh (BILLING_PG_CONNINFO): created, migrated, dropped. Used
 * by the ingest, billingd and close suites. Without BILLING_PG_CONNINFO every
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

/* A test's database and scratch directory, as itdb_work_fresh makes them. */
typedef struct itdb_work {
    char db[64];         /* the database's name */
    char conninfo[2048]; /* its connection string (itdb_conninfo) */
    char dir[1024];      /* the scratch directory: /tmp/itest_<suite>_<pid>_<tag> */
} itdb_work;

/*
 * itdb_work_fresh - a fresh migrated database (itdb_fresh of
 * "<suite>_<tag>") and an empty scratch directory, named in @w; returns a
 * connection to the database. Asserts every step.
 */
bs_conn *itdb_work_fresh(itdb_work *w, const char *suite, const char *tag);

/* itdb_work_drop - close @c, drop @w's database and remove its directory. */
void itdb_work_drop(bs_conn *c, const itdb_work *w);

/* itdb_work_path - "<@w's directory>/@name" into @out; asserts it fits. */
void itdb_work_path(const itdb_work *w, char *out, size_t size, const char *name);

/* itdb_work_write - write @text to the file @name of @w's directory; asserts success. */
void itdb_work_write(const itdb_work *w, const char *name, const char *text);

/* itdb_exec - run @sql (no parameters); asserts success. */
void itdb_exec(bs_conn *c, const char *sql);

/* itdb_long - the single integer value of @sql. */
long itdb_long(bs_conn *c, const char *sql);

/* itdb_text - the rows of @sql as one string, columns '|'-separated, rows '\n' (caller frees). */
char *itdb_text(bs_conn *c, const char *sql);

#endif
