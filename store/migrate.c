/*
 * migrate.c - apply and inspect the embedded schema migrations. See
 * migrate.h and doc/database.md.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "migrate.h"

/* Advisory lock of migrators: 'billmigr' in ASCII, per database. */
#define SQL_LOCK "SELECT pg_advisory_xact_lock(7091318301219448690)"
#define SQL_HAS_TABLE "SELECT to_regclass('billing.schema_version') IS NOT NULL"
#define SQL_APPLIED                                                                   \
    "SELECT version, name, checksum, to_char(applied_at, 'YYYY-MM-DD HH24:MI:SSOF') " \
    "FROM billing.schema_version ORDER BY version"
#define SQL_MD5 "SELECT md5($1)"
#define SQL_RECORD \
    "INSERT INTO billing.schema_version (version, name, checksum) VALUES ($1, $2, md5($3))"

/* The applied migrations, or a result with no rows for an empty database. */
static PGresult *read_applied(bs_conn *c, bs_error *err)
{
    PGresult *res = bs_query(c, SQL_HAS_TABLE, 0, NULL, err);
    int exists;

    if (res == NULL)
        return NULL;
    exists = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    if (!exists)
        return bs_query(c, "SELECT 1 WHERE false", 0, NULL, err);
    return bs_query(c, SQL_APPLIED, 0, NULL, err);
}

/* Does the recorded @checksum match the md5 of our text of @m? -1 on error. */
static int checksum_matches(bs_conn *c, const bs_migration *m, const char *checksum, bs_error *err)
{
    const char *params[1];
    PGresult *res;
    int same;

    params[0] = m->sql;
    res = bs_query(c, SQL_MD5, 1, params, err);
    if (res == NULL)
        return -1;
    same = strcmp(PQgetvalue(res, 0, 0), checksum) == 0;
    PQclear(res);
    return same;
}

/*
 * check_row - applied row @i (version @v) must be the i-th known
 * migration with our text. Returns BS_OK or BS_ERR_SCHEMA.
 */
static bs_status check_row(bs_conn *c, int i, int v, const char *checksum, bs_error *err)
{
    const bs_migration *m;
    int same;

    if (v != i + 1)
        return bs_error_set(err, BS_ERR_SCHEMA,
                            "billing.schema_version is inconsistent: version %d recorded "
                            "where %d was expected",
                            v, i + 1);
    m = &bs_migrations[i];
    same = checksum_matches(c, m, checksum, err);
    if (same < 0)
        return err != NULL ? err->status : BS_ERR_FATAL;
    if (!same)
        return bs_error_set(err, BS_ERR_SCHEMA,
                            "migration %04d_%s was changed after it was applied to this "
                            "database (checksum %s differs): restore the released file and "
                            "put the change in a new migration",
                            v, m->name, checksum);
    return BS_OK;
}

/*
 * applied_version - validate the applied migrations and store the highest
 * in *@current. Refuses a database newer than this program before looking
 * at anything else, so that an old binary never touches it.
 */
static bs_status applied_version(bs_conn *c, int *current, bs_error *err)
{
    PGresult *res = read_applied(c, err);
    int rows;
    int i;
    int last;
    bs_status st = BS_OK;

    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    rows = PQntuples(res);
    last = rows > 0 ? atoi(PQgetvalue(res, rows - 1, 0)) : 0;
    if (last > (int)bs_migration_count) {
        PQclear(res);
        return bs_error_set(err, BS_ERR_SCHEMA,
                            "the database is at schema version %d, newer than this program "
                            "knows (%d): upgrade billing before using this database",
                            last, (int)bs_migration_count);
    }
    for (i = 0; i < rows && st == BS_OK; i++)
        st = check_row(c, i, atoi(PQgetvalue(res, i, 0)), PQgetvalue(res, i, 2), err);
    PQclear(res);
    *current = rows;
    return st;
}

/* State of one bs_migrate run, shared with the transaction function. */
typedef struct migrate_run {
    int target;
    const bs_migration *applied; /* what the last transaction applied, NULL if nothing */
} migrate_run;

static bs_status record(bs_conn *c, const bs_migration *m, bs_error *err)
{
    char version[16];
    const char *params[3];

    snprintf(version, sizeof(version), "%d", m->version);
    params[0] = version;
    params[1] = m->name;
    params[2] = m->sql;
    return bs_command(c, SQL_RECORD, 3, params, NULL, err);
}

/* One transaction: lock, check, apply the next missing migration if any. */
static bs_status migrate_step(bs_conn *c, void *arg, bs_error *err)
{
    migrate_run *run = arg;
    const bs_migration *m;
    char what[sizeof(err->message)];
    int current = 0;
    bs_status st;

    run->applied = NULL;
    st = bs_command(c, SQL_LOCK, 0, NULL, NULL, err);
    if (st == BS_OK)
        st = applied_version(c, &current, err);
    if (st != BS_OK)
        return st;
    if (current > run->target)
        return bs_error_set(err, BS_ERR_SCHEMA,
                            "the database is at schema version %d, past the requested %d: "
                            "migrations are never reversed",
                            current, run->target);
    if (current == run->target)
        return BS_OK;
    m = &bs_migrations[current];
    st = bs_exec_script(c, m->sql, err);
    if (st != BS_OK && err != NULL) {
        /* Name the migration in front of the server's message. */
        snprintf(what, sizeof(what), "%s", err->message);
        snprintf(err->message, sizeof(err->message), "migration %04d_%.64s: %.400s", m->version,
                 m->name, what);
    }
    if (st == BS_OK)
        st = record(c, m, err);
    if (st == BS_OK)
        run->applied = m;
    return st;
}

bs_status bs_migrate(bs_conn *c, int target, bs_migrate_cb cb, void *arg, int *applied,
                     bs_error *err)
{
    migrate_run run;
    bs_status st;
    int count = 0;

    if (applied != NULL)
        *applied = 0;
    if (target < 0 || target > (int)bs_migration_count)
        return bs_error_set(err, BS_ERR_INVALID, "no schema version %d (this program knows 1..%d)",
                            target, (int)bs_migration_count);
    run.target = target == 0 ? (int)bs_migration_count : target;
    do {
        st = bs_transaction(c, migrate_step, &run, err);
        if (st != BS_OK)
            return st;
        if (run.applied != NULL) {
            count++;
            if (applied != NULL)
                *applied = count;
            if (cb != NULL)
                cb(run.applied, arg);
        }
    } while (run.applied != NULL);
    return BS_OK;
}

/* ---------------------------------------------------------------------- */
/* Inspection                                                              */
/* ---------------------------------------------------------------------- */

void bs_schema_status_free(bs_schema_status *st)
{
    if (st == NULL)
        return;
    free(st->entries);
    free(st);
}

/* The entry for @version, appended if new (entries stay sorted: callers add in order). */
static bs_schema_entry *entry_for(bs_schema_status *st, int version)
{
    size_t i;
    bs_schema_entry *e;

    for (i = 0; i < st->count; i++) {
        if (st->entries[i].version == version)
            return &st->entries[i];
    }
    e = &st->entries[st->count++];
    memset(e, 0, sizeof(*e));
    e->version = version;
    return e;
}

static bs_status fill_applied(bs_conn *c, bs_schema_status *st, const PGresult *res, bs_error *err)
{
    int i;
    int v;
    int same;
    bs_schema_entry *e;

    for (i = 0; i < PQntuples(res); i++) {
        v = atoi(PQgetvalue(res, i, 0));
        e = entry_for(st, v);
        e->applied = 1;
        snprintf(e->name, sizeof(e->name), "%s", PQgetvalue(res, i, 1));
        snprintf(e->applied_at, sizeof(e->applied_at), "%s", PQgetvalue(res, i, 3));
        if (v > st->current)
            st->current = v;
        if (v > st->latest) {
            st->newer = 1;
            continue;
        }
        if (v < 1)
            continue;
        same = checksum_matches(c, &bs_migrations[v - 1], PQgetvalue(res, i, 2), err);
        if (same < 0)
            return err != NULL ? err->status : BS_ERR_FATAL;
        e->checksum_ok = same;
        st->mismatches += !same;
    }
    return BS_OK;
}

/*
 * A version missing below the highest applied one: a row deleted from
 * schema_version, or a database not built by bs_migrate. Either way the
 * schema is not what the versions say.
 */
static void count_gaps(bs_schema_status *st)
{
    size_t i;

    for (i = 0; i < st->count; i++) {
        if (!st->entries[i].applied && st->entries[i].version < st->current)
            st->gaps++;
    }
}

bs_status bs_schema_inspect(bs_conn *c, bs_schema_status **out, bs_error *err)
{
    bs_schema_status *st = calloc(1, sizeof(*st));
    PGresult *res = NULL;
    bs_status rc = BS_ERR_NOMEM;
    size_t i;

    *out = NULL;
    if (st == NULL)
        goto error;
    res = read_applied(c, err);
    if (res == NULL) {
        rc = err != NULL ? err->status : BS_ERR_FATAL;
        goto error;
    }
    st->latest = (int)bs_migration_count;
    st->entries = calloc(bs_migration_count + (size_t)PQntuples(res) + 1, sizeof(*st->entries));
    if (st->entries == NULL)
        goto error;
    for (i = 0; i < bs_migration_count; i++) {
        bs_schema_entry *e = entry_for(st, bs_migrations[i].version);

        e->known = 1;
        snprintf(e->name, sizeof(e->name), "%s", bs_migrations[i].name);
    }
    rc = fill_applied(c, st, res, err);
    if (rc != BS_OK)
        goto error;
    count_gaps(st);
    PQclear(res);
    *out = st;
    return BS_OK;

error:
    if (rc == BS_ERR_NOMEM)
        bs_error_set(err, rc, "inspecting the schema: out of memory");
    PQclear(res);
    bs_schema_status_free(st);
    return rc;
}

bs_status bs_time_zones_refresh(bs_conn *c, int *added, bs_error *err)
{
    PGresult *res = bs_query(c, "SELECT billing.refresh_time_zone_names()", 0, NULL, err);

    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    if (added != NULL)
        *added = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    return BS_OK;
}

bs_status bs_schema_require(bs_conn *c, bs_error *err)
{
    bs_schema_status *st;
    bs_status rc = bs_schema_inspect(c, &st, err);

    if (rc != BS_OK)
        return rc;
    if (st->newer)
        rc = bs_error_set(err, BS_ERR_SCHEMA,
                          "the database schema (version %d) is newer than this program "
                          "(%d): upgrade billing",
                          st->current, st->latest);
    else if (st->mismatches > 0)
        rc = bs_error_set(err, BS_ERR_SCHEMA,
                          "applied migrations differ from this program's: see `billing db status`");
    else if (st->gaps > 0)
        rc = bs_error_set(err, BS_ERR_SCHEMA,
                          "billing.schema_version has a gap (%d version(s) below %d not "
                          "recorded): the schema is not what its versions say, see `billing db "
                          "status`",
                          st->gaps, st->current);
    else if (st->current < st->latest)
        rc = bs_error_set(err, BS_ERR_SCHEMA,
                          "the database schema is at version %d, this program needs %d: run "
                          "`billing db migrate`",
                          st->current, st->latest);
    bs_schema_status_free(st);
    return rc;
}
