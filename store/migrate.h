/*
 * migrate.h - versioned schema migrations of the store (sql/migrations),
 * embedded in the program at build time (store/gen-migrations.sh).
 *
 * Rules (doc/database.md, "Migrations"):
 *  - one transaction per migration, recorded in billing.schema_version
 *    with the md5 of its text; an advisory lock serialises migrators;
 *  - applied versions are skipped, so migrating twice changes nothing;
 *  - an applied migration whose text differs from ours is an error, and
 *    so is a database at a version this program does not know (newer),
 *    or with a version missing below its highest (a gap): nothing is
 *    applied then, and bs_schema_require refuses it.
 */
#ifndef BILLING_STORE_MIGRATE_H
#define BILLING_STORE_MIGRATE_H

#include <stddef.h>

#include "store.h"

/* One embedded migration. */
typedef struct bs_migration {
    int version;      /* 1, 2, 3... */
    const char *name; /* file name without number and extension: "initial" */
    const char *sql;  /* the file's text */
    size_t len;       /* its length in bytes */
} bs_migration;

/* The embedded migrations, by ascending version (generated). */
extern const bs_migration bs_migrations[];
extern const size_t bs_migration_count;

/* bs_migrate_cb - told after each migration has been committed. */
typedef void (*bs_migrate_cb)(const bs_migration *m, void *arg);

/*
 * bs_migrate - bring the database to version @target (0: the latest
 * known), applying each missing migration in its own transaction, then
 * calling @cb (may be NULL). *@applied (may be NULL) gets how many were
 * applied (0 when up to date). Returns BS_OK, BS_ERR_SCHEMA (database
 * newer than @target's program, gaps, checksum mismatch; nothing done),
 * BS_ERR_INVALID (@target unknown), or the error of a failed migration
 * (earlier ones stay applied; that one was rolled back entirely).
 * Needs the rights listed in doc/database.md ("Roles").
 */
bs_status bs_migrate(bs_conn *c, int target, bs_migrate_cb cb, void *arg, int *applied,
                     bs_error *err);

/* One line of bs_schema_inspect: a known or an applied migration, or both. */
typedef struct bs_schema_entry {
    int version;
    char name[129];
    int known;           /* embedded in this program */
    int applied;         /* recorded in billing.schema_version */
    int checksum_ok;     /* applied and known with identical text */
    char applied_at[64]; /* timestamptz as text when applied, "" otherwise */
} bs_schema_entry;

/* Where a database stands. */
typedef struct bs_schema_status {
    int current;    /* highest applied version, 0 for an empty database */
    int latest;     /* highest version this program knows */
    int newer;      /* non-zero: versions beyond `latest` are applied */
    int mismatches; /* applied migrations whose checksum differs */
    int gaps;       /* versions below `current` that are not applied */
    size_t count;
    bs_schema_entry *entries; /* by version */
} bs_schema_status;

/*
 * bs_schema_inspect - read where the database stands, changing nothing.
 * Returns BS_OK and a new status in *@out (free with
 * bs_schema_status_free), or an error.
 */
bs_status bs_schema_inspect(bs_conn *c, bs_schema_status **out, bs_error *err);

/* bs_schema_status_free - NULL is a no-op. */
void bs_schema_status_free(bs_schema_status *st);

/*
 * bs_schema_require - BS_OK if the database is exactly at the latest known
 * version with every migration applied (no gap) and matching checksums,
 * BS_ERR_SCHEMA with a message saying what to do otherwise. For billingd
 * and the tool before they use the store.
 */
bs_status bs_schema_require(bs_conn *c, bs_error *err);

/*
 * bs_time_zones_refresh - add the server's zone names (pg_timezone_names,
 * without host-dependent ones) that billing.time_zone_names lacks, such
 * as those of a tzdata update, so that accounts may use them. *@added
 * (may be NULL) gets how many. Needs the rights of a migrator (`billing db
 * migrate` calls it at every run). Returns BS_OK or an error.
 */
bs_status bs_time_zones_refresh(bs_conn *c, int *added, bs_error *err);

#endif /* BILLING_STORE_MIGRATE_H */
