/*
 * itest_store.c - integration tests of the PostgreSQL store against the
 * private server of scripts/pg.sh: migrations (from empty, from each
 * earlier version, concurrent, refused when newer or changed), every
 * invariant the database enforces attempted and refused, the runtime
 * role's limits, gapless numbering under concurrent finalizers, event
 * ingestion with permanent dedupe, and idempotent catalog loading.
 *
 * Needs BILLING_PG_CONNINFO (`scripts/pg.sh start && . var/services.env`);
 * without it every test FAILS, never skips. The connecting role must be
 * able to create databases and roles (the private cluster's superuser).
 * Each test runs in its own database, billing_test_<pid>_<test>, dropped
 * at the end (and swept by main() if a failing test left it behind).
 */
#include "config.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "migrate.h"
#include "store.h"
#include "copy.h"
#include "events.h"
#include "load.h"
#include "md5.h"

#define CONNINFO_MAX 2048
#define DBNAME_MAX 64
#define SQL_MAX 1024

/* The test runner's pid: names every database this run creates. */
static pid_t run_pid;
/* This test's database, so that helpers can name it in messages. */
static char db_name[DBNAME_MAX];

/* ---------------------------------------------------------------------- */
/* Connections and databases                                               */
/* ---------------------------------------------------------------------- */

static const char *base_conninfo(void)
{
    const char *v = getenv("BILLING_PG_CONNINFO");

    ck_assert_msg(v != NULL && v[0] != '\0',
                  "BILLING_PG_CONNINFO is not set: start the private PostgreSQL and load its "
                  "environment (scripts/pg.sh start && . var/services.env), or run "
                  "scripts/test.sh");
    return v;
}

/* Append "key='value'" with libpq's quoting to @out; -1 if it does not fit. */
static int append_kv(char *out, size_t size, const char *key, const char *value)
{
    size_t n = strlen(out);
    const char *p;
    int w = snprintf(out + n, size - n, "%s%s='", n > 0 ? " " : "", key);

    if (w < 0 || (size_t)w >= size - n)
        return -1;
    n += (size_t)w;
    for (p = value; *p != '\0'; p++) {
        if (n + 4 >= size)
            return -1;
        if (*p == '\'' || *p == '\\')
            out[n++] = '\\';
        out[n++] = *p;
    }
    out[n++] = '\'';
    out[n] = '\0';
    return 0;
}

/*
 * build_conninfo - the base connection settings with dbname replaced by
 * @dbname. Returns 0, or -1 if they cannot be parsed or do not fit. No
 * Check assertions: children of a test call it too.
 */
static int build_conninfo(const char *base, const char *dbname, char *out, size_t size)
{
    PQconninfoOption *opts = PQconninfoParse(base, NULL);
    PQconninfoOption *o;
    int rc = 0;

    if (opts == NULL)
        return -1;
    out[0] = '\0';
    for (o = opts; o->keyword != NULL && rc == 0; o++) {
        if (o->val != NULL && o->val[0] != '\0' && strcmp(o->keyword, "dbname") != 0)
            rc = append_kv(out, size, o->keyword, o->val);
    }
    if (rc == 0)
        rc = append_kv(out, size, "dbname", dbname);
    PQconninfoFree(opts);
    return rc;
}

static void conninfo_for(const char *dbname, char *out, size_t size)
{
    const char *base = base_conninfo();

    ck_assert_msg(build_conninfo(base, dbname, out, size) == 0,
                  "BILLING_PG_CONNINFO '%s' cannot be parsed or is too long", base);
}

static bs_conn *connect_db(const char *dbname)
{
    char conninfo[CONNINFO_MAX];
    bs_retry retry = {3, 100, 500};
    bs_error err;
    bs_conn *c;

    conninfo_for(dbname, conninfo, sizeof(conninfo));
    c = bs_connect(conninfo, &retry, &err);
    ck_assert_msg(c != NULL, "connecting to %s: %s", dbname, err.message);
    return c;
}

static void exec_ok(bs_conn *c, const char *sql)
{
    bs_error err;
    bs_status st = bs_command(c, sql, 0, NULL, NULL, &err);

    ck_assert_msg(st == BS_OK, "%s: %s", sql, err.message);
}

static void exec_fmt(bs_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* For DDL on names made of our own prefix and numbers only (no input). */
static void exec_fmt(bs_conn *c, const char *fmt, ...)
{
    char sql[SQL_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(sql, sizeof(sql), fmt, ap);
    va_end(ap);
    exec_ok(c, sql);
}

/* A new empty database for test @tag; returns a connection to it. */
static bs_conn *fresh_db(const char *tag)
{
    bs_conn *admin = connect_db("postgres");

    snprintf(db_name, sizeof(db_name), "billing_test_%ld_%s", (long)run_pid, tag);
    exec_fmt(admin, "DROP DATABASE IF EXISTS %s WITH (FORCE)", db_name);
    exec_fmt(admin, "CREATE DATABASE %s", db_name);
    bs_close(admin);
    return connect_db(db_name);
}

static void drop_db(bs_conn *c)
{
    bs_conn *admin;

    bs_close(c);
    admin = connect_db("postgres");
    exec_fmt(admin, "DROP DATABASE IF EXISTS %s WITH (FORCE)", db_name);
    bs_close(admin);
}

static void migrate_to(bs_conn *c, int target, int expect_applied)
{
    bs_error err;
    int applied = -1;
    bs_status st = bs_migrate(c, target, NULL, NULL, &applied, &err);

    ck_assert_msg(st == BS_OK, "migrate to %d: %s", target, err.message);
    ck_assert_int_eq(applied, expect_applied);
}

static bs_conn *migrated_db(const char *tag)
{
    bs_conn *c = fresh_db(tag);

    migrate_to(c, 0, (int)bs_migration_count);
    return c;
}

/* The single value of a one-row, one-column query, copied into @out. */
static void query_value(bs_conn *c, const char *sql, char *out, size_t size)
{
    bs_error err;
    PGresult *res = bs_query(c, sql, 0, NULL, &err);

    ck_assert_msg(res != NULL, "%s: %s", sql, err.message);
    ck_assert_msg(PQntuples(res) == 1, "%s: %d rows", sql, PQntuples(res));
    snprintf(out, size, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
}

static long query_long(bs_conn *c, const char *sql)
{
    char v[64];

    query_value(c, sql, v, sizeof(v));
    return strtol(v, NULL, 10);
}

/*
 * expect_refused - @sql must fail with status @want and, if non-NULL,
 * constraint @constraint. Runs in autocommit: nothing of it remains.
 */
static void expect_refused(bs_conn *c, const char *sql, bs_status want, const char *constraint)
{
    bs_error err;
    bs_status st = bs_command(c, sql, 0, NULL, NULL, &err);

    ck_assert_msg(st == want, "%s: expected %s, got %s (%s)", sql, bs_strerror(want),
                  bs_strerror(st), st == BS_OK ? "accepted" : err.message);
    if (constraint != NULL)
        ck_assert_msg(strcmp(err.constraint, constraint) == 0,
                      "%s: refused by '%s' (%s), expected '%s'", sql, err.constraint, err.message,
                      constraint);
}

/* One statement the database must refuse, and the rule that refuses it. */
typedef struct refusal {
    const char *sql;
    bs_status status;
    const char *constraint; /* NULL: any (privilege errors name none) */
} refusal;

static void expect_all_refused(bs_conn *c, const refusal *cases, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        expect_refused(c, cases[i].sql, cases[i].status, cases[i].constraint);
}

#define N_CASES(a) (sizeof(a) / sizeof((a)[0]))

/* A little reference data most tests need: an account and a price version. */
static void seed(bs_conn *c)
{
    exec_ok(c, "INSERT INTO billing.accounts (id, currency, time_zone, tax_rate)"
               " VALUES ('acct-1', 'CNY', 'Asia/Shanghai', 0.06)");
    exec_ok(c, "INSERT INTO billing.price_books (id, currency) VALUES ('book', 'CNY')");
    exec_ok(c, "INSERT INTO billing.price_versions (book_id, label, effective_from, content_hash)"
               " VALUES ('book', 'v1', '2026-01-01Z', md5('v1'))");
}

/* A draft invoice of acct-1 for @month with one line of 10.00; returns its id. */
static long draft(bs_conn *c, const char *account, const char *month)
{
    char sql[SQL_MAX];
    long id;

    snprintf(sql, sizeof(sql),
             "INSERT INTO billing.invoices (account_id, currency, month, period_start,"
             " period_end, subtotal, tax, total) VALUES ('%s', 'CNY', '%s',"
             " '%s'::timestamptz, '%s'::timestamptz + interval '1 month', 10.00, 0.60, 10.60)"
             " RETURNING id",
             account, month, month, month);
    id = query_long(c, sql);
    snprintf(sql, sizeof(sql),
             "INSERT INTO billing.invoice_lines (invoice_id, line_no, kind, meter, quantity,"
             " unit, unit_price, amount) VALUES (%ld, 1, 'usage', 'gpu', 5, 'GPU-hour', 2, 10.00)",
             id);
    exec_ok(c, sql);
    return id;
}

static long finalize(bs_conn *c, long invoice)
{
    char sql[128];

    snprintf(sql, sizeof(sql), "SELECT billing.finalize_invoice(%ld)", invoice);
    return query_long(c, sql);
}

/* ---------------------------------------------------------------------- */
/* Migrations                                                              */
/* ---------------------------------------------------------------------- */

/*
 * A digest of the schema: columns, constraints, indexes, functions,
 * triggers and privileges of schema billing. Two databases with the same
 * digest have the same schema.
 */
#define SQL_SCHEMA_DIGEST                                                                       \
    "SELECT md5(string_agg(x, E'\\n' ORDER BY x)) FROM ("                                       \
    " SELECT format('col %s.%s %s %s %s', table_name, column_name, data_type, is_nullable,"     \
    "   column_default) x FROM information_schema.columns WHERE table_schema = 'billing'"       \
    " UNION ALL SELECT format('con %s %s', conname, pg_get_constraintdef(oid))"                 \
    "   FROM pg_constraint WHERE connamespace = 'billing'::regnamespace"                        \
    " UNION ALL SELECT format('idx %s', indexdef) FROM pg_indexes WHERE schemaname = 'billing'" \
    " UNION ALL SELECT format('fn %s', pg_get_functiondef(oid)) FROM pg_proc"                   \
    "   WHERE pronamespace = 'billing'::regnamespace"                                           \
    " UNION ALL SELECT format('trg %s %s', tgrelid::regclass, tgname) FROM pg_trigger"          \
    "   WHERE NOT tgisinternal AND tgrelid IN"                                                  \
    "   (SELECT oid FROM pg_class WHERE relnamespace = 'billing'::regnamespace)"                \
    " UNION ALL SELECT format('acl %s %s', relname, relacl) FROM pg_class"                      \
    "   WHERE relnamespace = 'billing'::regnamespace"                                           \
    " UNION ALL SELECT format('ver %s %s %s', version, name, checksum)"                         \
    "   FROM billing.schema_version) s"

START_TEST(test_migrate_from_empty)
{
    bs_conn *c = fresh_db("empty");
    bs_schema_status *st;
    bs_error err;
    char before[64];
    char after[64];

    ck_assert_int_eq(bs_schema_inspect(c, &st, &err), BS_OK);
    ck_assert_int_eq(st->current, 0);
    ck_assert_int_eq(st->latest, (int)bs_migration_count);
    bs_schema_status_free(st);
    ck_assert_int_eq(bs_schema_require(c, &err), BS_ERR_SCHEMA);

    migrate_to(c, 0, (int)bs_migration_count);
    ck_assert_int_eq(bs_schema_require(c, &err), BS_OK);
    query_value(c, SQL_SCHEMA_DIGEST, before, sizeof(before));
    /* Again: nothing applied, nothing changed. */
    migrate_to(c, 0, 0);
    query_value(c, SQL_SCHEMA_DIGEST, after, sizeof(after));
    ck_assert_str_eq(before, after);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.schema_version"),
                     (long)bs_migration_count);
    /* Owned by the owner role, not by the login that migrated. */
    ck_assert_int_eq(
        query_long(c, "SELECT count(*) FROM pg_class WHERE relnamespace ="
                      " 'billing'::regnamespace AND relowner <> 'billing_owner'::regrole"),
        0);
    drop_db(c);
}
END_TEST

START_TEST(test_migrate_from_each_version)
{
    bs_conn *c = migrated_db("reference");
    char reference[64];
    char digest[64];
    char tag[32];
    int v;

    query_value(c, SQL_SCHEMA_DIGEST, reference, sizeof(reference));
    drop_db(c);
    for (v = 1; v < (int)bs_migration_count; v++) {
        snprintf(tag, sizeof(tag), "from_%d", v);
        c = fresh_db(tag);
        migrate_to(c, v, v);
        ck_assert_int_eq(query_long(c, "SELECT max(version) FROM billing.schema_version"), v);
        migrate_to(c, 0, (int)bs_migration_count - v);
        query_value(c, SQL_SCHEMA_DIGEST, digest, sizeof(digest));
        ck_assert_msg(strcmp(digest, reference) == 0,
                      "migrating from version %d gives another schema than from empty", v);
        drop_db(c);
    }
}
END_TEST

START_TEST(test_migrate_refuses_newer_database)
{
    bs_conn *c = migrated_db("newer");
    bs_schema_status *st;
    bs_error err;

    exec_ok(c, "INSERT INTO billing.schema_version (version, name, checksum)"
               " VALUES (9999, 'from_the_future', md5('x'))");
    ck_assert_int_eq(bs_migrate(c, 0, NULL, NULL, NULL, &err), BS_ERR_SCHEMA);
    ck_assert_msg(strstr(err.message, "newer") != NULL, "%s", err.message);
    ck_assert_int_eq(bs_schema_require(c, &err), BS_ERR_SCHEMA);
    ck_assert_int_eq(bs_schema_inspect(c, &st, &err), BS_OK);
    ck_assert_int_eq(st->newer, 1);
    ck_assert_int_eq(st->current, 9999);
    bs_schema_status_free(st);
    drop_db(c);
}
END_TEST

START_TEST(test_migrate_refuses_changed_migration)
{
    bs_conn *c = fresh_db("changed");
    bs_schema_status *st;
    bs_error err;

    migrate_to(c, 1, 1);
    exec_ok(c, "UPDATE billing.schema_version SET checksum = md5('edited') WHERE version = 1");
    /* Nothing more is applied to a database whose history differs from ours. */
    ck_assert_int_eq(bs_migrate(c, 0, NULL, NULL, NULL, &err), BS_ERR_SCHEMA);
    ck_assert_msg(strstr(err.message, "changed") != NULL, "%s", err.message);
    ck_assert_int_eq(query_long(c, "SELECT max(version) FROM billing.schema_version"), 1);
    ck_assert_int_eq(bs_schema_inspect(c, &st, &err), BS_OK);
    ck_assert_int_eq(st->mismatches, 1);
    bs_schema_status_free(st);
    drop_db(c);
}
END_TEST

/* Run @n children at once, each calling @fn(i); all must exit 0. */
static void run_children(int n, int (*fn)(int))
{
    pid_t pids[16];
    int status;
    int i;

    ck_assert_int_le(n, 16);
    for (i = 0; i < n; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0)
            _exit(fn(i));
    }
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d failed (%d)", i,
                      status);
    }
}

/* A child's own connection; it reports failures on stderr and by exit code. */
static bs_conn *child_connect(void)
{
    char conninfo[CONNINFO_MAX];
    bs_error err;
    bs_conn *c;

    if (build_conninfo(getenv("BILLING_PG_CONNINFO"), db_name, conninfo, sizeof(conninfo)) != 0)
        return NULL;
    c = bs_connect(conninfo, NULL, &err);
    if (c == NULL)
        fprintf(stderr, "child: %s\n", err.message);
    return c;
}

static int migrate_child(int i)
{
    bs_conn *c = child_connect();
    bs_error err;
    int applied = 0;
    bs_status st;

    (void)i;
    if (c == NULL)
        return 1;
    st = bs_migrate(c, 0, NULL, NULL, &applied, &err);
    if (st != BS_OK)
        fprintf(stderr, "migrate child: %s\n", err.message);
    bs_close(c);
    return st == BS_OK ? 0 : 1;
}

START_TEST(test_concurrent_migrators)
{
    bs_conn *c = fresh_db("concurrent_migrate");

    run_children(4, migrate_child);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.schema_version"),
                     (long)bs_migration_count);
    migrate_to(c, 0, 0);
    drop_db(c);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Invariants                                                              */
/* ---------------------------------------------------------------------- */

#define EVENT_COLS "(event_id, account_id, resource_id, meter, start_time, end_time, quantity)"

START_TEST(test_invariants_catalog)
{
    static const refusal cases[] = {
        {"INSERT INTO billing.accounts (id, currency) VALUES ('x', 'XXX')", BS_ERR_CONSTRAINT,
         "accounts_currency_fkey"},
        {"INSERT INTO billing.accounts (id, currency, time_zone)"
         " VALUES ('x', 'CNY', 'Mars/Olympus')",
         BS_ERR_CONSTRAINT, "accounts_time_zone_known"},
        {"INSERT INTO billing.accounts (id, currency, tax_rate)"
         " VALUES ('x', 'CNY', 1.5)",
         BS_ERR_CONSTRAINT, "accounts_tax_rate_range"},
        {"INSERT INTO billing.accounts (id, currency) VALUES ('has space', 'CNY')",
         BS_ERR_CONSTRAINT, "ident_printable_1_128"},
        {"INSERT INTO billing.rates (version_id, meter, model, region, price)"
         " VALUES (1, 'gpu', 'A100', '*', -0.01)",
         BS_ERR_CONSTRAINT, "rates_price_nonnegative"},
        {"INSERT INTO billing.rates (version_id, meter, model, region, price)"
         " VALUES (1, 'gpu', 'A100', '*', 'NaN')",
         BS_ERR_CONSTRAINT, "finite_number"},
        {"INSERT INTO billing.rates (version_id, meter, model, region, price)"
         " VALUES (1, 'cpu', 'A100', '*', 1)",
         BS_ERR_CONSTRAINT, "rates_meter_known"},
        {"UPDATE billing.price_versions SET content_hash = md5('other')", BS_ERR_CONSTRAINT,
         "price_versions_append_only"},
        {"DELETE FROM billing.price_versions", BS_ERR_CONSTRAINT, "price_versions_append_only"},
        {"INSERT INTO billing.credit_grants (id, account_id, currency, amount,"
         " granted_at, expires_at) VALUES ('g', 'acct-1', 'CNY', 10,"
         " '2026-02-01Z', '2026-02-01Z')",
         BS_ERR_CONSTRAINT, "credit_grants_expiry_after_grant"},
        {"INSERT INTO billing.credit_grants (id, account_id, currency, amount,"
         " granted_at, expires_at) VALUES ('g', 'acct-1', 'CNY', 10.001,"
         " '2026-01-01Z', '2026-02-01Z')",
         BS_ERR_CONSTRAINT, "credit_grants_minor_digits"},
        {"INSERT INTO billing.credit_grants (id, account_id, currency, amount,"
         " granted_at, expires_at) VALUES ('g', 'acct-1', 'JPY', 10,"
         " '2026-01-01Z', '2026-02-01Z')",
         BS_ERR_CONSTRAINT, "credit_grants_account_currency"},
    };
    /* Subscription s1 of acct-1, cancelled at 2026-02-10. */
    static const refusal subscription[] = {
        {"INSERT INTO billing.subscriptions (id, account_id, resource_id, plan_id, start_at,"
         " terms) VALUES ('s2', 'acct-1', 'i-2', 'p1', '2026-01-05Z', 0)",
         BS_ERR_CONSTRAINT, "subscriptions_terms_range"},
        {"UPDATE billing.subscriptions SET terms = 5", BS_ERR_CONSTRAINT, "subscriptions_history"},
        {"UPDATE billing.subscriptions SET cancelled_at = NULL", BS_ERR_CONSTRAINT,
         "subscriptions_history"},
        {"UPDATE billing.subscriptions SET cancelled_at = '2026-02-11Z'", BS_ERR_CONSTRAINT,
         "subscriptions_history"},
        {"DELETE FROM billing.subscriptions", BS_ERR_CONSTRAINT, "subscriptions_history"},
        {"INSERT INTO billing.plan_fees (version_id, plan_id, fee) VALUES (1, 'p1', -1)",
         BS_ERR_CONSTRAINT, "plan_fees_fee_nonnegative"},
        {"UPDATE billing.plans SET refundable = true", BS_ERR_CONSTRAINT, "plans_append_only"},
    };
    bs_conn *c = migrated_db("inv_catalog");

    seed(c);
    expect_all_refused(c, cases, N_CASES(cases));
    exec_ok(c, "INSERT INTO billing.plans (id, period, model, region)"
               " VALUES ('p1', 'month', 'RTX4090', 'r1')");
    exec_ok(c, "INSERT INTO billing.subscriptions (id, account_id, resource_id, plan_id,"
               " start_at, terms) VALUES ('s1', 'acct-1', 'i-1', 'p1', '2026-01-05Z', 3)");
    /* A first cancellation is the one change allowed. */
    exec_ok(c, "UPDATE billing.subscriptions SET cancelled_at = '2026-02-10Z'");
    expect_all_refused(c, subscription, N_CASES(subscription));
    /*
     * Cancelled at (or before) its start: no term at all, which libbilling
     * rates as nothing charged (0004 dropped 0001's cancel-after-start
     * check, which refused what a customer may do).
     */
    exec_ok(c, "INSERT INTO billing.subscriptions (id, account_id, resource_id, plan_id,"
               " start_at, terms, cancelled_at) VALUES ('s3', 'acct-1', 'i-3', 'p1',"
               " '2026-01-05Z', 1, '2026-01-05Z')");
    drop_db(c);
}
END_TEST

#define INSERT_EVENT "INSERT INTO billing.usage_events " EVENT_COLS " VALUES "

START_TEST(test_invariants_events)
{
    /* Events the database must refuse whatever the writer. */
    static const refusal invalid[] = {
        {"INSERT INTO billing.event_ids (event_id, start_time, fingerprint)"
         " VALUES ('e4', '2026-01-05Z', 'short')",
         BS_ERR_CONSTRAINT, "event_ids_fingerprint_md5"},
        {INSERT_EVENT "('e2', 'acct-1', 'r', 'gpu', '2026-01-05Z', '2026-01-05 01:00Z', -1)",
         BS_ERR_CONSTRAINT, "usage_events_quantity_nonnegative"},
        {INSERT_EVENT "('e2', 'acct-1', 'r', 'gpu', '2026-01-05Z', '2026-01-05Z', 1)",
         BS_ERR_CONSTRAINT, "usage_events_end_after_start"},
        {INSERT_EVENT "('e2', 'acct-1', 'r', 'gpu', '2026-01-05Z', '2026-01-04Z', 1)",
         BS_ERR_CONSTRAINT, "usage_events_end_after_start"},
        {INSERT_EVENT "('e2', 'acct-1', 'r', 'cpu', '2026-01-05Z', '2026-01-06Z', 1)",
         BS_ERR_CONSTRAINT, "usage_events_meter_known"},
        {INSERT_EVENT "('e2', 'acct-1', 'r', 'gpu', '2026-01-05Z', '2026-01-06Z', 0.0000000001)",
         BS_ERR_CONSTRAINT, "usage_events_quantity_bounds"},
    };
    /*
     * Once e2 is stored: its id again, with the same start or another,
     * forever. (Since 0007 the account and the registration of a
     * usage_events row are checked per batch by the one writer,
     * bs_events_ingest: test_events_refused_batch.)
     */
    static const refusal stored[] = {
        {"INSERT INTO billing.event_ids (event_id, start_time, fingerprint)"
         " VALUES ('e2', '2026-03-05Z', decode(md5('e2'), 'hex'))",
         BS_ERR_CONSTRAINT, "event_ids_pkey"},
        {"INSERT INTO billing.event_ids (event_id, start_time, fingerprint, id_hash)"
         " VALUES ('e3', '2026-03-05Z', decode(md5('e3'), 'hex'), decode(md5('e2'), 'hex'))",
         BS_ERR_FATAL, NULL},
        {"INSERT INTO billing.event_id_collisions (event_id, start_time, fingerprint)"
         " VALUES ('e3', '2026-03-05Z', 'short')",
         BS_ERR_CONSTRAINT, "event_id_collisions_fingerprint_md5"},
        {"DELETE FROM billing.event_id_collisions", BS_ERR_CONSTRAINT,
         "event_id_collisions_append_only"},
        {"TRUNCATE billing.event_id_collisions", BS_ERR_CONSTRAINT,
         "event_id_collisions_no_truncate"},
        {"UPDATE billing.usage_events SET quantity = 2", BS_ERR_CONSTRAINT,
         "usage_events_immutable"},
        {"DELETE FROM billing.event_ids", BS_ERR_CONSTRAINT, "event_ids_append_only"},
        {"TRUNCATE billing.usage_events", BS_ERR_CONSTRAINT, "usage_events_no_truncate"},
    };
    bs_conn *c = migrated_db("inv_events");

    seed(c);
    exec_ok(c, "SELECT billing.ensure_event_partitions('2026-01-01', '2026-01-01')");
    exec_ok(c, "INSERT INTO billing.event_ids (event_id, start_time, fingerprint)"
               " VALUES ('e2', '2026-01-05Z', decode(md5('e2'), 'hex'))");
    expect_all_refused(c, invalid, N_CASES(invalid));
    exec_ok(c, INSERT_EVENT "('e2', 'acct-1', 'r', 'gpu', '2026-01-05Z', '2026-01-06Z', 1)");
    exec_ok(c, "INSERT INTO billing.event_id_collisions (event_id, start_time, fingerprint)"
               " VALUES ('e4', '2026-01-05Z', decode(md5('e4'), 'hex'))");
    expect_all_refused(c, stored, N_CASES(stored));
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.usage_events"), 1);
    drop_db(c);
}
END_TEST

START_TEST(test_invariants_invoices)
{
    bs_conn *c = migrated_db("inv_invoices");
    char sql[SQL_MAX];
    long id;
    long other;

    seed(c);
    exec_ok(c, "INSERT INTO billing.credit_grants (id, account_id, currency, amount, granted_at,"
               " expires_at) VALUES ('g1', 'acct-1', 'CNY', 10, '2026-01-01Z', '2026-03-01Z')");
    expect_refused(c,
                   "INSERT INTO billing.invoices (account_id, currency, month, period_start,"
                   " period_end, status, number) VALUES ('acct-1', 'CNY', '2026-01-01',"
                   " '2026-01-01Z', '2026-02-01Z', 'finalized', 1)",
                   BS_ERR_CONSTRAINT, "invoices_created_draft");
    /* Migration 0028: the rule in a WHEN condition, each half alone. */
    expect_refused(c,
                   "INSERT INTO billing.invoices (account_id, currency, month, period_start,"
                   " period_end, number) VALUES ('acct-1', 'CNY', '2026-01-01', '2026-01-01Z',"
                   " '2026-02-01Z', 7)",
                   BS_ERR_CONSTRAINT, "invoices_created_draft");
    expect_refused(c,
                   "INSERT INTO billing.invoices (account_id, currency, month, period_start,"
                   " period_end, status) VALUES ('acct-1', 'CNY', '2026-01-01', '2026-01-01Z',"
                   " '2026-02-01Z', 'void')",
                   BS_ERR_CONSTRAINT, "invoices_created_draft");
    expect_refused(c,
                   "INSERT INTO billing.invoices (account_id, currency, month, period_start,"
                   " period_end) VALUES ('acct-1', 'CNY', '2026-01-01', '2026-02-01Z',"
                   " '2026-01-01Z')",
                   BS_ERR_CONSTRAINT, "invoices_period_order");
    expect_refused(c,
                   "INSERT INTO billing.invoices (account_id, currency, month, period_start,"
                   " period_end, subtotal, total) VALUES ('acct-1', 'CNY', '2026-01-01',"
                   " '2026-01-01Z', '2026-02-01Z', 10, 9)",
                   BS_ERR_CONSTRAINT, "invoices_total_reconciles");
    id = draft(c, "acct-1", "2026-01-01");
    /* A draft whose totals do not match its lines cannot be finalized. */
    exec_ok(c, "UPDATE billing.invoices SET subtotal = 11, total = 11.60 WHERE status = 'draft'");
    snprintf(sql, sizeof(sql), "SELECT billing.finalize_invoice(%ld)", id);
    expect_refused(c, sql, BS_ERR_CONSTRAINT, "invoices_lines_reconcile");
    exec_ok(c, "UPDATE billing.invoices SET subtotal = 10, total = 10.60 WHERE status = 'draft'");
    ck_assert_int_eq(finalize(c, id), 1);

    expect_refused(c, sql, BS_ERR_CONSTRAINT, "invoices_finalized_immutable");
    expect_refused(c, "UPDATE billing.invoices SET total = 0, subtotal = 0, tax = 0",
                   BS_ERR_CONSTRAINT, "invoices_finalized_immutable");
    expect_refused(c,
                   "UPDATE billing.invoices SET status = 'void', number = NULL,"
                   " finalized_at = NULL",
                   BS_ERR_CONSTRAINT, "invoices_finalized_immutable");
    expect_refused(c, "DELETE FROM billing.invoices", BS_ERR_CONSTRAINT,
                   "invoices_finalized_immutable");
    expect_refused(c, "UPDATE billing.invoice_lines SET amount = 0", BS_ERR_CONSTRAINT,
                   "invoices_finalized_immutable");
    expect_refused(c, "DELETE FROM billing.invoice_lines", BS_ERR_CONSTRAINT,
                   "invoices_finalized_immutable");
    snprintf(sql, sizeof(sql),
             "INSERT INTO billing.invoice_lines (invoice_id, line_no, kind, meter, quantity,"
             " unit, unit_price, amount) VALUES (%ld, 2, 'usage', 'gpu', 1, 'GPU-hour', 1, 1)",
             id);
    expect_refused(c, sql, BS_ERR_CONSTRAINT, "invoices_finalized_immutable");
    snprintf(sql, sizeof(sql),
             "INSERT INTO billing.invoice_credits (invoice_id, grant_id, amount)"
             " VALUES (%ld, 'g1', 1)",
             id);
    expect_refused(c, sql, BS_ERR_CONSTRAINT, "invoices_finalized_immutable");
    expect_refused(c, "TRUNCATE billing.invoice_lines", BS_ERR_CONSTRAINT,
                   "invoice_lines_no_truncate");

    /* Numbers come from the series only, one at a time. */
    other = draft(c, "acct-1", "2026-02-01");
    snprintf(sql, sizeof(sql),
             "UPDATE billing.invoices SET status = 'finalized', number = 7, finalized_at = now()"
             " WHERE id = %ld",
             other);
    expect_refused(c, sql, BS_ERR_CONSTRAINT, "invoices_number_from_series");
    expect_refused(c, "UPDATE billing.invoice_series SET next_number = 1 WHERE series = 'INV'",
                   BS_ERR_CONSTRAINT, "invoice_series_gapless");
    expect_refused(c, "UPDATE billing.invoice_series SET next_number = 5 WHERE series = 'INV'",
                   BS_ERR_CONSTRAINT, "invoice_series_gapless");
    expect_refused(c, "DELETE FROM billing.invoice_series WHERE series = 'CN'", BS_ERR_CONSTRAINT,
                   "invoice_series_gapless");
    ck_assert_int_eq(finalize(c, other), 2);
    /* Drafts stay editable and deletable. */
    id = draft(c, "acct-1", "2026-03-01");
    /*
     * A line's plan and price version must exist: checked once per
     * statement since 0022, under the foreign keys' names, for a single
     * row, a bad row among good ones, and an UPDATE.
     */
    exec_ok(c, "INSERT INTO billing.plans (id, period, model, region)"
               " VALUES ('p1', 'month', 'RTX4090', 'r1')");
    snprintf(sql, sizeof(sql),
             "INSERT INTO billing.invoice_lines (invoice_id, line_no, kind, meter, plan_id,"
             " price_version_id, quantity, unit, unit_price, amount) SELECT %ld, 2, 'usage',"
             " 'gpu', 'p1', id, 0, 'GPU-hour', 1, 0 FROM billing.price_versions",
             id);
    exec_ok(c, sql);
    snprintf(sql, sizeof(sql),
             "INSERT INTO billing.invoice_lines (invoice_id, line_no, kind, meter, plan_id,"
             " quantity, unit, unit_price, amount) VALUES (%ld, 3, 'usage', 'gpu', 'p1', 0,"
             " 'GPU-hour', 1, 0), (%ld, 4, 'usage', 'gpu', 'no-such-plan', 0, 'GPU-hour', 1, 0)",
             id, id);
    expect_refused(c, sql, BS_ERR_CONSTRAINT, "invoice_lines_plan_id_fkey");
    snprintf(sql, sizeof(sql),
             "INSERT INTO billing.invoice_lines (invoice_id, line_no, kind, meter,"
             " price_version_id, quantity, unit, unit_price, amount) VALUES (%ld, 3, 'usage',"
             " 'gpu', 987654321, 0, 'GPU-hour', 1, 0)",
             id);
    expect_refused(c, sql, BS_ERR_CONSTRAINT, "invoice_lines_price_version_id_fkey");
    expect_refused(c, "UPDATE billing.invoice_lines SET plan_id = 'no-such-plan' WHERE line_no = 2",
                   BS_ERR_CONSTRAINT, "invoice_lines_plan_id_fkey");
    expect_refused(c,
                   "UPDATE billing.invoice_lines SET price_version_id = price_version_id + 1000"
                   " WHERE line_no = 2",
                   BS_ERR_CONSTRAINT, "invoice_lines_price_version_id_fkey");
    expect_refused(c, "DELETE FROM billing.plans", BS_ERR_CONSTRAINT, "plans_append_only");
    expect_refused(c, "UPDATE billing.plans SET id = 'p2'", BS_ERR_CONSTRAINT, "plans_append_only");
    expect_refused(c, "DELETE FROM billing.price_versions", BS_ERR_CONSTRAINT,
                   "price_versions_append_only");
    snprintf(sql, sizeof(sql),
             "DELETE FROM billing.invoice_lines WHERE line_no = 2"
             " AND invoice_id = %ld",
             id);
    exec_ok(c, sql);
    exec_ok(c, "UPDATE billing.invoice_lines SET amount = 10 WHERE line_no = 1"
               " AND invoice_id IN (SELECT id FROM billing.invoices WHERE status = 'draft')");
    snprintf(sql, sizeof(sql), "DELETE FROM billing.invoice_lines WHERE invoice_id = %ld", id);
    exec_ok(c, sql);
    snprintf(sql, sizeof(sql), "DELETE FROM billing.invoices WHERE id = %ld", id);
    exec_ok(c, sql);
    drop_db(c);
}
END_TEST

START_TEST(test_invariants_ledger)
{
    /* With the grant of 10.00 CNY (1000 fen) and its opening entry in place. */
    static const refusal with_grant[] = {
        {"INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, effective_at)"
         " VALUES ('g1', 'grant', 1000, '2026-01-01Z')",
         BS_ERR_CONSTRAINT, "credit_ledger_one_grant_entry"},
        {"INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, effective_at)"
         " VALUES ('g1', 'expire', -0.5, '2026-01-02Z')",
         BS_ERR_CONSTRAINT, "credit_ledger_integral"},
        {"INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, effective_at)"
         " VALUES ('g1', 'expire', 5, '2026-01-02Z')",
         BS_ERR_CONSTRAINT, "credit_ledger_sign"},
        {"INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, effective_at)"
         " VALUES ('g1', 'expire', -1001, '2026-01-02Z')",
         BS_ERR_CONSTRAINT, "credit_ledger_nonnegative_balance"},
        {"UPDATE billing.credit_ledger SET amount_minor = 2000", BS_ERR_CONSTRAINT,
         "credit_ledger_append_only"},
        {"DELETE FROM billing.credit_ledger", BS_ERR_CONSTRAINT, "credit_ledger_append_only"},
        {"TRUNCATE billing.credit_ledger", BS_ERR_CONSTRAINT, "credit_ledger_no_truncate"},
        {"UPDATE billing.credit_grants SET amount = 20", BS_ERR_CONSTRAINT,
         "credit_grants_append_only"},
        /* Migration 0024: the grant's key checked per statement, same name. */
        {"INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, effective_at)"
         " VALUES ('no-such-grant', 'grant', 1000, '2026-01-01Z')",
         BS_ERR_CONSTRAINT, "credit_ledger_grant_id_fkey"},
    };
    bs_conn *c = migrated_db("inv_ledger");

    seed(c);
    exec_ok(c, "INSERT INTO billing.credit_grants (id, account_id, currency, amount, granted_at,"
               " expires_at) VALUES ('g1', 'acct-1', 'CNY', 10, '2026-01-01Z', '2026-03-01Z')");
    /* Nothing may come before the grant's own entry, which must be its whole amount. */
    expect_refused(c,
                   "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor,"
                   " effective_at) VALUES ('g1', 'expire', -1, '2026-01-02Z')",
                   BS_ERR_CONSTRAINT, "credit_ledger_nonnegative_balance");
    expect_refused(c,
                   "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor,"
                   " effective_at) VALUES ('g1', 'grant', 999, '2026-01-01Z')",
                   BS_ERR_CONSTRAINT, "credit_ledger_grant_amount");
    exec_ok(c, "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, effective_at)"
               " VALUES ('g1', 'grant', 1000, '2026-01-01Z')");
    expect_all_refused(c, with_grant, N_CASES(with_grant));
    /*
     * The referenced side (0024): even with the append-only guard off, a
     * grant the ledger refers to can neither go nor change its id; one it
     * does not refer to can.
     */
    exec_ok(c, "INSERT INTO billing.credit_grants (id, account_id, currency, amount, granted_at,"
               " expires_at) VALUES ('g2', 'acct-1', 'CNY', 10, '2026-01-01Z', '2026-03-01Z')");
    exec_ok(c, "SET ROLE billing_owner");
    expect_refused(c,
                   "DO $$ BEGIN ALTER TABLE billing.credit_grants DISABLE TRIGGER"
                   " credit_grants_append_only; DELETE FROM billing.credit_grants; END $$",
                   BS_ERR_CONSTRAINT, "credit_ledger_grant_id_fkey");
    expect_refused(c,
                   "DO $$ BEGIN ALTER TABLE billing.credit_grants DISABLE TRIGGER"
                   " credit_grants_append_only; UPDATE billing.credit_grants SET id = 'g9'"
                   " WHERE id = 'g1'; END $$",
                   BS_ERR_CONSTRAINT, "credit_ledger_grant_id_fkey");
    exec_ok(c,
            "DO $$ BEGIN ALTER TABLE billing.credit_grants DISABLE TRIGGER"
            " credit_grants_append_only; DELETE FROM billing.credit_grants WHERE id = 'g2';"
            " ALTER TABLE billing.credit_grants ENABLE TRIGGER credit_grants_append_only; END $$");
    exec_ok(c, "RESET ROLE");
    exec_ok(c, "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, effective_at)"
               " VALUES ('g1', 'expire', -1000, '2026-03-01Z')");
    ck_assert_int_eq(query_long(c, "SELECT balance_minor FROM billing.credit_balances"), 0);
    expect_refused(c,
                   "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor,"
                   " effective_at) VALUES ('g1', 'expire', -1, '2026-03-01Z')",
                   BS_ERR_CONSTRAINT, "credit_ledger_nonnegative_balance");
    drop_db(c);
}
END_TEST

/*
 * expect_refused_state - @sql must fail with status @want, constraint
 * @constraint (NULL: any) and SQLSTATE @state. Runs in autocommit unless
 * the caller began a transaction.
 */
static void expect_refused_state(bs_conn *c, const char *sql, bs_status want,
                                 const char *constraint, const char *state)
{
    bs_error err;
    bs_status st = bs_command(c, sql, 0, NULL, NULL, &err);

    ck_assert_msg(st == want, "%s: expected %s, got %s (%s)", sql, bs_strerror(want),
                  bs_strerror(st), st == BS_OK ? "accepted" : err.message);
    if (constraint != NULL)
        ck_assert_msg(strcmp(err.constraint, constraint) == 0,
                      "%s: refused by '%s' (%s), expected '%s'", sql, err.constraint, err.message,
                      constraint);
    ck_assert_msg(strcmp(err.sqlstate, state) == 0, "%s: SQLSTATE %s (%s), expected %s", sql,
                  err.sqlstate, err.message, state);
}

/* @sql must wait for a lock another session holds, and give up (lock_timeout). */
static void expect_lock_wait(bs_conn *c, const char *sql)
{
    expect_refused_state(c, sql, BS_ERR_RETRY, NULL, "55P03");
}

#define GRANT_COLS                                                                      \
    "INSERT INTO billing.credit_grants (id, account_id, currency, amount, granted_at, " \
    "expires_at) VALUES "
#define GRANT_TIMES "10, '2026-01-01Z', '2026-03-01Z')"

/*
 * Migration 0025: an account's currency and zone, and a grant's account,
 * checked per statement instead of by foreign keys: the same names and
 * SQLSTATE 23503, a bad row alone or among good ones, from the referenced
 * side too (a DELETE or UPDATE that removes a key still referred to), and
 * the locks that keep a concurrent writer from breaking the rule.
 */
START_TEST(test_account_keys_once)
{
    static const refusal fk_cases[] = {
        {"INSERT INTO billing.accounts (id, currency) VALUES ('x', 'XXX')", BS_ERR_CONSTRAINT,
         "accounts_currency_fkey"},
        {"INSERT INTO billing.accounts (id, currency) VALUES ('x1', 'CNY'), ('x2', 'XXX'),"
         " ('x3', 'USD')",
         BS_ERR_CONSTRAINT, "accounts_currency_fkey"},
        {"INSERT INTO billing.accounts (id, currency, time_zone) VALUES ('x', 'CNY', 'Mars/Base')",
         BS_ERR_CONSTRAINT, "accounts_time_zone_known"},
        {"INSERT INTO billing.accounts (id, currency, time_zone) VALUES ('x1', 'CNY', 'UTC'),"
         " ('x2', 'CNY', 'Mars/Base'), ('x3', 'CNY', 'Asia/Shanghai')",
         BS_ERR_CONSTRAINT, "accounts_time_zone_known"},
        {"UPDATE billing.accounts SET currency = 'XXX' WHERE id = 'acct-2'", BS_ERR_CONSTRAINT,
         "accounts_currency_fkey"},
        {"UPDATE billing.accounts SET time_zone = 'Mars/Base'", BS_ERR_CONSTRAINT,
         "accounts_time_zone_known"},
        {GRANT_COLS "('gx', 'acct-1', 'JPY', " GRANT_TIMES, BS_ERR_CONSTRAINT,
         "credit_grants_account_currency"},
        {GRANT_COLS "('gx', 'no-such-account', 'CNY', " GRANT_TIMES, BS_ERR_CONSTRAINT,
         "credit_grants_account_currency"},
        {GRANT_COLS "('gx', 'acct-1', 'CNY', " GRANT_TIMES ", ('gy', 'acct-9', 'CNY', "
                    "10, '2026-01-01Z', '2026-03-01Z'), ('gz', 'acct-2', 'USD', " GRANT_TIMES,
         BS_ERR_CONSTRAINT, "credit_grants_account_currency"},
        /* The referenced side: keys still referred to cannot go. */
        {"DELETE FROM billing.currencies WHERE code = 'USD'", BS_ERR_CONSTRAINT,
         "accounts_currency_fkey"},
        {"UPDATE billing.currencies SET code = 'USX' WHERE code = 'USD'", BS_ERR_CONSTRAINT,
         "accounts_currency_fkey"},
        {"DELETE FROM billing.time_zone_names WHERE name = 'Europe/Paris'", BS_ERR_CONSTRAINT,
         "accounts_time_zone_known"},
        {"UPDATE billing.time_zone_names SET name = 'Europe/Pari' WHERE name = 'Europe/Paris'",
         BS_ERR_CONSTRAINT, "accounts_time_zone_known"},
        {"UPDATE billing.accounts SET currency = 'USD' WHERE id = 'acct-1'", BS_ERR_CONSTRAINT,
         "credit_grants_account_currency"},
        {"DO $$ BEGIN PERFORM set_config('billing.maintenance', 'on', true);"
         " DELETE FROM billing.accounts WHERE id = 'acct-1'; END $$",
         BS_ERR_CONSTRAINT, "credit_grants_account_currency"},
    };
    size_t i;
    bs_error err;
    bs_conn *c = migrated_db("account_keys");
    bs_conn *other;

    seed(c);
    exec_ok(c, "INSERT INTO billing.accounts (id, currency, time_zone)"
               " VALUES ('acct-2', 'USD', 'Europe/Paris'), ('acct-3', 'EUR', 'UTC')");
    exec_ok(c, GRANT_COLS "('g1', 'acct-1', 'CNY', " GRANT_TIMES);
    for (i = 0; i < N_CASES(fk_cases); i++)
        expect_refused_state(c, fk_cases[i].sql, fk_cases[i].status, fk_cases[i].constraint,
                             "23503");
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.accounts"), 3);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.credit_grants"), 1);
    /* The refusal names the account and the key, as the foreign key's detail did. */
    ck_assert_int_eq(bs_command(c, fk_cases[3].sql, 0, NULL, NULL, &err), BS_ERR_CONSTRAINT);
    ck_assert_msg(strstr(err.message, "account x2: time zone Mars/Base") != NULL, "%s",
                  err.message);
    /* Keys nothing refers to still go; an account without grants changes currency. */
    exec_ok(c, "DELETE FROM billing.currencies WHERE code = 'ZWG'");
    exec_ok(c, "DELETE FROM billing.time_zone_names WHERE name = 'Europe/Rome'");
    exec_ok(c, "UPDATE billing.accounts SET currency = 'GBP', time_zone = 'Europe/London'"
               " WHERE id = 'acct-3'");
    /* ... but not under REPEATABLE READ, whose snapshot would miss a concurrent row. */
    exec_ok(c, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    expect_refused_state(c, "DELETE FROM billing.currencies WHERE code = 'ZMW'", BS_ERR_RETRY,
                         "accounts_currency_fkey", "40001");
    exec_ok(c, "ROLLBACK");
    exec_ok(c, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    expect_refused_state(c, "UPDATE billing.accounts SET currency = 'EUR' WHERE id = 'acct-3'",
                         BS_ERR_RETRY, "credit_grants_account_currency", "40001");
    exec_ok(c, "ROLLBACK");
    /*
     * Concurrent writers (another session, which gives up after 300 ms):
     * an uncommitted account holds its currency and zone; an uncommitted
     * grant holds every account key, and a removed account key holds back
     * every grant.
     */
    other = connect_db(db_name);
    exec_ok(other, "SET lock_timeout = '300ms'");
    exec_ok(c, "BEGIN");
    exec_ok(c, "INSERT INTO billing.accounts (id, currency, time_zone)"
               " VALUES ('acct-4', 'ZMW', 'Asia/Tokyo')");
    expect_lock_wait(other, "DELETE FROM billing.currencies WHERE code = 'ZMW'");
    expect_lock_wait(other, "DELETE FROM billing.time_zone_names WHERE name = 'Asia/Tokyo'");
    exec_ok(c, GRANT_COLS "('g4', 'acct-4', 'ZMW', " GRANT_TIMES);
    expect_lock_wait(other, "UPDATE billing.accounts SET currency = 'EUR' WHERE id = 'acct-3'");
    exec_ok(c, "ROLLBACK");
    exec_ok(other, "BEGIN");
    exec_ok(other, "UPDATE billing.accounts SET currency = 'EUR' WHERE id = 'acct-3'");
    exec_ok(c, "SET lock_timeout = '300ms'");
    expect_lock_wait(c, GRANT_COLS "('g5', 'acct-2', 'USD', " GRANT_TIMES);
    exec_ok(other, "ROLLBACK");
    exec_ok(c, GRANT_COLS "('g5', 'acct-2', 'USD', " GRANT_TIMES);
    /*
     * Under REPEATABLE READ a grant locks its account row FOR KEY SHARE, as
     * the foreign key did (its snapshot would not see a key changed since);
     * under READ COMMITTED it does not.
     */
    exec_ok(other, "BEGIN");
    exec_ok(other, "SELECT 1 FROM billing.accounts WHERE id = 'acct-3' FOR UPDATE");
    exec_ok(c, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    expect_lock_wait(c, GRANT_COLS "('g6', 'acct-3', 'GBP', " GRANT_TIMES);
    exec_ok(c, "ROLLBACK");
    exec_ok(c, GRANT_COLS "('g6', 'acct-3', 'GBP', " GRANT_TIMES);
    exec_ok(other, "ROLLBACK");
    bs_close(other);
    drop_db(c);
}
END_TEST

START_TEST(test_runtime_role)
{
    bs_conn *c = migrated_db("runtime_role");
    long id;

    seed(c);
    exec_ok(c, "INSERT INTO billing.event_ids (event_id, start_time, fingerprint)"
               " VALUES ('e1', '2026-01-05Z', decode(md5('e1'), 'hex'))");
    exec_ok(c, "INSERT INTO billing.usage_events " EVENT_COLS
               " VALUES ('e1', 'acct-1', 'r', 'gpu', '2026-01-05Z', '2026-01-06Z', 1)");
    id = draft(c, "acct-1", "2026-01-01");
    exec_ok(c, "GRANT billing_app TO CURRENT_USER");
    exec_ok(c, "SET ROLE billing_app");
    /* What billingd and the batch tool do is allowed... */
    exec_ok(c, "INSERT INTO billing.event_ids (event_id, start_time, fingerprint)"
               " VALUES ('e2', '2026-01-05Z', decode(md5('e2'), 'hex'))");
    exec_ok(c, "INSERT INTO billing.usage_events " EVENT_COLS
               " VALUES ('e2', 'acct-1', 'r', 'gpu', '2026-01-05Z', '2026-01-06Z', 1)");
    exec_ok(c, "INSERT INTO billing.event_id_collisions (event_id, start_time, fingerprint)"
               " VALUES ('e3', '2026-01-05Z', decode(md5('e3'), 'hex'))");
    exec_ok(c, "UPDATE billing.invoices SET updated_at = now() WHERE status = 'draft'");
    ck_assert_int_eq(finalize(c, id), 1);
    exec_ok(c, "SELECT billing.ensure_event_partitions((now() + interval '6 months')::date,"
               " (now() + interval '7 months')::date)");
    /* ...deleting events, touching numbers or finalized invoices is not. */
    expect_refused(c, "DELETE FROM billing.usage_events", BS_ERR_FATAL, NULL);
    expect_refused(c, "DELETE FROM billing.event_id_collisions", BS_ERR_FATAL, NULL);
    expect_refused(c, "DELETE FROM billing.credit_ledger", BS_ERR_FATAL, NULL);
    expect_refused(c, "DELETE FROM billing.rejected_events", BS_ERR_FATAL, NULL);
    expect_refused(c, "UPDATE billing.invoices SET number = 5", BS_ERR_FATAL, NULL);
    expect_refused(c, "UPDATE billing.invoice_series SET next_number = next_number + 1",
                   BS_ERR_FATAL, NULL);
    expect_refused(c, "UPDATE billing.invoices SET total = 0, subtotal = 0, tax = 0",
                   BS_ERR_CONSTRAINT, "invoices_finalized_immutable");
    expect_refused(c, "DELETE FROM billing.invoices", BS_ERR_CONSTRAINT,
                   "invoices_finalized_immutable");
    expect_refused(c, "ALTER TABLE billing.invoices DISABLE TRIGGER ALL", BS_ERR_FATAL, NULL);
    expect_refused(c, "CREATE TABLE billing.sneaky (x int)", BS_ERR_FATAL, NULL);
    exec_ok(c, "RESET ROLE");
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.usage_events"), 2);
    drop_db(c);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Concurrent finalizers                                                   */
/* ---------------------------------------------------------------------- */

#define FINALIZERS 4
#define DRAFTS_EACH 50

typedef struct finalize_arg {
    long invoice;   /* with batch: gets how many drafts finalize_invoices picked */
    int rollback;   /* finalize, then roll back: the number must be reused */
    int batch;      /* > 0: billing.finalize_invoices of January, this many drafts */
    char after[32]; /* with batch: pick after this account ('' from the first) */
    char last[32];  /* with batch: gets the last account picked */
} finalize_arg;

static bs_status finalize_tx(bs_conn *c, void *arg, bs_error *err)
{
    finalize_arg *fa = arg;
    char id[32];
    const char *params[2];
    PGresult *res;

    snprintf(id, sizeof(id), "%ld", fa->batch > 0 ? (long)fa->batch : fa->invoice);
    params[0] = id;
    params[1] = fa->after;
    if (fa->batch > 0)
        res = bs_query_prepared(c, "finalize_set",
                                "SELECT picked, coalesce(last_account, '') FROM"
                                " billing.finalize_invoices('2026-01-01', 0, $1::integer,"
                                " $2::text)",
                                2, params, err);
    else
        res = bs_query_prepared(c, "finalize", "SELECT billing.finalize_invoice($1::bigint)", 1,
                                params, err);
    if (res == NULL)
        return err->status;
    if (fa->batch > 0) {
        fa->invoice = strtol(PQgetvalue(res, 0, 0), NULL, 10);
        snprintf(fa->last, sizeof(fa->last), "%s", PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    if (fa->rollback)
        return bs_error_set(err, BS_ERR_FATAL, "rolled back on purpose");
    return BS_OK;
}

/* Child @i finalizes the drafts of accounts fin-<i>-*, rolling some back first. */
static int finalize_child(int i)
{
    bs_conn *c = child_connect();
    finalize_arg fa = {0, 0, 0, "", ""};
    bs_error err;
    char sql[256];
    PGresult *res;
    int k;
    int rc = 0;

    if (c == NULL)
        return 1;
    snprintf(sql, sizeof(sql),
             "SELECT id FROM billing.invoices WHERE account_id LIKE 'fin-%d-%%' ORDER BY id", i);
    res = bs_query(c, sql, 0, NULL, &err);
    if (res == NULL || PQntuples(res) != DRAFTS_EACH) {
        fprintf(stderr, "child %d: drafts: %s\n", i, res == NULL ? err.message : "count");
        return 1;
    }
    for (k = 0; k < DRAFTS_EACH && rc == 0; k++) {
        fa.invoice = strtol(PQgetvalue(res, k, 0), NULL, 10);
        fa.rollback = k % 7 == 3;
        if (fa.rollback && bs_transaction(c, finalize_tx, &fa, &err) != BS_ERR_FATAL)
            rc = 1;
        fa.rollback = 0;
        if (rc == 0 && bs_transaction(c, finalize_tx, &fa, &err) != BS_OK) {
            fprintf(stderr, "child %d: finalize %ld: %s\n", i, fa.invoice, err.message);
            rc = 1;
        }
    }
    PQclear(res);
    bs_close(c);
    return rc;
}

START_TEST(test_concurrent_finalizers)
{
    bs_conn *c = migrated_db("finalizers");
    char sql[SQL_MAX];
    int i;
    int k;

    seed(c);
    for (i = 0; i < FINALIZERS; i++) {
        for (k = 0; k < DRAFTS_EACH; k++) {
            snprintf(sql, sizeof(sql),
                     "INSERT INTO billing.accounts (id, currency) VALUES ('fin-%d-%d', 'CNY')", i,
                     k);
            exec_ok(c, sql);
            snprintf(sql, sizeof(sql), "fin-%d-%d", i, k);
            draft(c, sql, "2026-01-01");
        }
    }
    run_children(FINALIZERS, finalize_child);
    /* Numbers 1..200, each once, in one series, none left over. */
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.invoices"
                                   " WHERE status = 'finalized'"),
                     FINALIZERS * DRAFTS_EACH);
    ck_assert_int_eq(query_long(c, "SELECT count(DISTINCT number) FROM billing.invoices"),
                     FINALIZERS * DRAFTS_EACH);
    ck_assert_int_eq(query_long(c, "SELECT min(number) FROM billing.invoices"), 1);
    ck_assert_int_eq(query_long(c, "SELECT max(number) FROM billing.invoices"),
                     FINALIZERS * DRAFTS_EACH);
    ck_assert_int_eq(query_long(c, "SELECT next_number FROM billing.invoice_series"
                                   " WHERE series = 'INV'"),
                     FINALIZERS * DRAFTS_EACH + 1);
    drop_db(c);
}
END_TEST

/*
 * Issue 28: billing.finalize_invoices (0013) numbers a batch of drafts at
 * once. Four children number the drafts of one month in batches of 7 (every
 * third batch rolled back first: its block must be taken again), while the
 * parent's drafts of another month in the same series are numbered one at
 * a time by finalize_invoice from a fifth child. Numbers stay 1..N, each
 * once, in a batch in account order, and every block is recorded.
 */
#define SET_ACCOUNTS 120
#define SET_SINGLES 30

/* Children 0-3 number January in batches; child 4 numbers February one by one. */
static int finalize_set_child(int i)
{
    bs_conn *c = child_connect();
    finalize_arg fa = {0, 0, 0, "", ""};
    bs_error err;
    PGresult *res;
    int k;
    int rc = 0;

    if (c == NULL)
        return 1;
    if (i == FINALIZERS) {
        res = bs_query(c,
                       "SELECT id FROM billing.invoices WHERE month = '2026-02-01'"
                       " ORDER BY id",
                       0, NULL, &err);
        if (res == NULL || PQntuples(res) != SET_SINGLES) {
            fprintf(stderr, "child %d: drafts: %s\n", i, res == NULL ? err.message : "count");
            return 1;
        }
        for (k = 0; k < SET_SINGLES && rc == 0; k++) {
            fa.invoice = strtol(PQgetvalue(res, k, 0), NULL, 10);
            fa.rollback = 0;
            if (bs_transaction(c, finalize_tx, &fa, &err) != BS_OK) {
                fprintf(stderr, "child %d: finalize %ld: %s\n", i, fa.invoice, err.message);
                rc = 1;
            }
        }
        PQclear(res);
        bs_close(c);
        return rc;
    }
    /* As bs_finalize_month: after the last account picked, then once from the first. */
    fa.batch = 7;
    for (k = 0; rc == 0; k++) {
        fa.rollback = k % 3 == 1;
        if (fa.rollback && bs_transaction(c, finalize_tx, &fa, &err) != BS_ERR_FATAL)
            rc = 1;
        fa.rollback = 0;
        if (rc == 0 && bs_transaction(c, finalize_tx, &fa, &err) != BS_OK) {
            fprintf(stderr, "child %d: finalize_invoices: %s\n", i, err.message);
            rc = 1;
        }
        if (fa.invoice == 0 && fa.after[0] == '\0')
            break;
        snprintf(fa.after, sizeof(fa.after), "%s", fa.invoice > 0 ? fa.last : "");
    }
    bs_close(c);
    return rc;
}

START_TEST(test_concurrent_set_finalizers)
{
    bs_conn *c = migrated_db("set_finalizers");
    char sql[SQL_MAX];
    int k;

    seed(c);
    /* Accounts inserted out of order: the numbers follow account_id, not id. */
    for (k = 0; k < SET_ACCOUNTS; k++) {
        snprintf(sql, sizeof(sql), "set-%03d", (k * 7) % SET_ACCOUNTS);
        exec_fmt(c, "INSERT INTO billing.accounts (id, currency) VALUES ('%s', 'CNY')", sql);
        draft(c, sql, "2026-01-01");
        if (k < SET_SINGLES)
            draft(c, sql, "2026-02-01");
    }
    run_children(FINALIZERS + 1, finalize_set_child);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.invoices"
                                   " WHERE status = 'finalized'"),
                     SET_ACCOUNTS + SET_SINGLES);
    ck_assert_int_eq(query_long(c, "SELECT count(DISTINCT number) FROM billing.invoices"),
                     SET_ACCOUNTS + SET_SINGLES);
    ck_assert_int_eq(query_long(c, "SELECT min(number) FROM billing.invoices"), 1);
    ck_assert_int_eq(query_long(c, "SELECT max(number) FROM billing.invoices"),
                     SET_ACCOUNTS + SET_SINGLES);
    ck_assert_int_eq(query_long(c, "SELECT next_number FROM billing.invoice_series"
                                   " WHERE series = 'INV'"),
                     SET_ACCOUNTS + SET_SINGLES + 1);
    /* Each committed block: its numbers are January's, in account order, and nothing else's. */
    ck_assert_int_eq(query_long(c, "SELECT coalesce(sum(last_number - first_number + 1), 0)"
                                   " FROM billing.invoice_number_blocks"),
                     SET_ACCOUNTS);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.invoice_number_blocks b"
                                   " WHERE (SELECT array_agg(i.number ORDER BY i.account_id)"
                                   " FROM billing.invoices i WHERE i.month = '2026-01-01'"
                                   " AND i.number BETWEEN b.first_number AND b.last_number)"
                                   " IS DISTINCT FROM ARRAY(SELECT generate_series(b.first_number,"
                                   " b.last_number))"),
                     0);
    expect_refused(c, "DELETE FROM billing.invoice_number_blocks", BS_ERR_CONSTRAINT,
                   "invoice_number_blocks_append_only");
    expect_refused(c, "UPDATE billing.invoice_series SET next_number = next_number + 2",
                   BS_ERR_CONSTRAINT, "invoice_series_gapless");
    drop_db(c);
}
END_TEST

/*
 * Issue 28 (0021): a batch picks the drafts of the accounts after the one
 * it is given, in account order, and says the last account it picked;
 * '' picks from the first. bs_finalize_month passes each batch's last
 * account to the next, then makes a pass from the first.
 */
START_TEST(test_finalize_after)
{
    bs_conn *c = migrated_db("finalize_after");
    char v[64];

#define SQL_AFTER(limit, after)                                                   \
    "SELECT picked || ' ' || numbered || ' ' || coalesce(last_account, '-') FROM" \
    " billing.finalize_invoices('2026-01-01', 0, " limit ", '" after "')"
    seed(c);
    exec_ok(c, "INSERT INTO billing.accounts (id, currency) VALUES ('b-3', 'CNY'),"
               " ('b-1', 'CNY'), ('b-2', 'CNY')");
    draft(c, "b-3", "2026-01-01");
    draft(c, "b-1", "2026-01-01");
    draft(c, "b-2", "2026-01-01");
    query_value(c, SQL_AFTER("1", "b-1"), v, sizeof(v));
    ck_assert_str_eq(v, "1 1 b-2");
    query_value(c, SQL_AFTER("5", "b-2"), v, sizeof(v));
    ck_assert_str_eq(v, "1 1 b-3");
    query_value(c, SQL_AFTER("5", "b-3"), v, sizeof(v));
    ck_assert_str_eq(v, "0 0 -");
    query_value(c, SQL_AFTER("5", ""), v, sizeof(v));
    ck_assert_str_eq(v, "1 1 b-1");
    query_value(c, SQL_AFTER("5", ""), v, sizeof(v));
    ck_assert_str_eq(v, "0 0 -");
#undef SQL_AFTER
    /* Numbered in the order the batches took them, gapless. */
    query_value(c,
                "SELECT string_agg(account_id || '=' || number, ',' ORDER BY number)"
                " FROM billing.invoices",
                v, sizeof(v));
    ck_assert_str_eq(v, "b-2=1,b-3=2,b-1=3");
    drop_db(c);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Events                                                                  */
/* ---------------------------------------------------------------------- */

static bs_event make_event(const char *id, const char *quantity, billing_time_t start)
{
    bs_event e;

    memset(&e, 0, sizeof(e));
    e.id = id;
    e.account = "acct-1";
    e.resource = "i-1";
    e.meter = "gpu";
    e.start = start;
    e.end = start + 3600 * BILLING_NS_PER_SEC + 7;
    e.quantity = quantity;
    e.model = "RTX4090";
    e.region = "cn-east-1";
    e.source = "test";
    return e;
}

typedef struct ingest_arg {
    const bs_event *ev;
    size_t n;
    bs_copy_format format;
    bs_event_outcome *out;
    size_t stored;
} ingest_arg;

static bs_status ingest_tx(bs_conn *c, void *arg, bs_error *err)
{
    ingest_arg *ia = arg;

    return bs_events_ingest(c, ia->ev, ia->n, ia->format, ia->out, &ia->stored, err);
}

static size_t ingest(bs_conn *c, const bs_event *ev, size_t n, bs_copy_format format,
                     bs_event_outcome *out)
{
    ingest_arg ia = {ev, n, format, out, 0};
    bs_error err;
    bs_status st = bs_transaction(c, ingest_tx, &ia, &err);

    ck_assert_msg(st == BS_OK, "ingest: %s", err.message);
    return ia.stored;
}

START_TEST(test_events_ingest)
{
    bs_conn *c = migrated_db("ingest");
    /* 2026-01-05T00:00:00.123456789Z: nanoseconds below the microsecond. */
    billing_time_t t = INT64_C(1767571200123456789);
    bs_event ev[5];
    bs_event_outcome out[5];
    char v[512];
    int format;

    seed(c);
    for (format = BS_COPY_BINARY; format <= BS_COPY_TEXT; format++) {
        ev[0] = make_event(format == BS_COPY_BINARY ? "b1" : "t1", "1.50", t);
        ev[1] = make_event(format == BS_COPY_BINARY ? "b2" : "t2", "0.000000001", t);
        ev[2] = make_event(format == BS_COPY_BINARY ? "b1" : "t1", "1.5", t); /* same content */
        ev[3] = make_event(format == BS_COPY_BINARY ? "b1" : "t1", "2", t);   /* conflict */
        ev[4] = make_event(format == BS_COPY_BINARY ? "b\t\\x" : "t\t\\x", "8", t - 1);
        ck_assert_uint_eq(ingest(c, ev, 5, (bs_copy_format)format, out), 3);
        ck_assert_int_eq(out[0], BS_EVENT_NEW);
        ck_assert_int_eq(out[1], BS_EVENT_NEW);
        ck_assert_int_eq(out[2], BS_EVENT_DUPLICATE);
        ck_assert_int_eq(out[3], BS_EVENT_CONFLICT);
        ck_assert_int_eq(out[4], BS_EVENT_NEW);
        /* A later batch: duplicates and conflicts against what is stored. */
        ck_assert_uint_eq(ingest(c, ev + 2, 2, (bs_copy_format)format, out), 0);
        ck_assert_int_eq(out[0], BS_EVENT_DUPLICATE);
        ck_assert_int_eq(out[1], BS_EVENT_CONFLICT);
    }
    /* Both formats stored the same values, to the nanosecond and the scale. */
    query_value(c,
                "SELECT string_agg(format('%s %s %s %s %s %s', quantity, start_time,"
                " start_nanos, end_time, end_nanos, length(event_id)), ';' ORDER BY event_id)"
                " FROM billing.usage_events WHERE event_id LIKE 'b%'",
                v, sizeof(v));
    ck_assert_str_eq(
        v, "8 2026-01-05 00:00:00.123456+00 788 2026-01-05 01:00:00.123456+00 795 4;"
           "1.50 2026-01-05 00:00:00.123456+00 789 2026-01-05 01:00:00.123456+00 796 2;"
           "0.000000001 2026-01-05 00:00:00.123456+00 789 2026-01-05 01:00:00.123456+00 796 2");
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM (SELECT quantity, start_time,"
                                   " start_nanos, end_time, end_nanos, substr(event_id, 2)"
                                   " FROM billing.usage_events WHERE event_id LIKE 'b%'"
                                   " EXCEPT SELECT quantity, start_time, start_nanos, end_time,"
                                   " end_nanos, substr(event_id, 2) FROM billing.usage_events"
                                   " WHERE event_id LIKE 't%') d"),
                     0);
    drop_db(c);
}
END_TEST

/*
 * A batch of new ids with repeats is stored by the optimistic claim, whose
 * sort (by id hash, then arrival) must put each id's repeats right after
 * its first occurrence: an id repeated 40 times (one long bucket of the
 * sort, sorted by qsort) and ids repeated twice (short buckets, sorted by
 * insertion) among 3 000 new ones. A repeat sorted apart would be COPYed
 * twice and send the batch to the staging path (its table would then
 * exist in the session); one sorted before its first occurrence would
 * store a later content.
 */
START_TEST(test_events_claim_sorted_batch)
{
    enum { DISTINCT = 3000, REPEATS = 40, TWICE = 20, N = DISTINCT + REPEATS + TWICE };
    bs_conn *c = migrated_db("claim_sorted");
    billing_time_t t = INT64_C(1767571200000000000);
    bs_event *ev = calloc(N, sizeof(*ev));
    bs_event_outcome *out = calloc(N, sizeof(*out));
    char(*ids)[16] = calloc(DISTINCT, sizeof(*ids));
    bs_event_outcome *want = calloc(N, sizeof(*want));
    char v[64];
    size_t n = 0;
    size_t i;

    ck_assert_ptr_nonnull(ev);
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(ids);
    ck_assert_ptr_nonnull(want);
    seed(c);
    for (i = 0; i < DISTINCT; i++) {
        snprintf(ids[i], sizeof(ids[i]), "s%zu", i);
        want[n] = BS_EVENT_NEW;
        ev[n++] = make_event(ids[i], "1", t);
        /* The repeats come after their first occurrence, spread out. */
        if (i % 75 == 7) {
            want[n] = i == 7 ? BS_EVENT_NEW : i % 150 == 7 ? BS_EVENT_DUPLICATE : BS_EVENT_CONFLICT;
            ev[n++] = make_event("rep", i % 150 == 7 ? "2" : "3", t);
        }
        if (i % 150 == 100) {
            want[n] = i % 300 == 100 ? BS_EVENT_DUPLICATE : BS_EVENT_CONFLICT;
            ev[n++] = make_event(ids[i - 50], i % 300 == 100 ? "1" : "4", t);
        }
    }
    ck_assert_uint_eq(n, N);
    ck_assert_uint_eq(ingest(c, ev, n, BS_COPY_BINARY, out), DISTINCT + 1);
    /* Stored by the claim: the staging path never ran in this session. */
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM pg_class"
                                   " WHERE oid = to_regclass('pg_temp.billing_event_stage')"),
                     0);
    for (i = 0; i < n; i++)
        ck_assert_msg(out[i] == want[i], "event %zu (%s): outcome %d, not %d", i, ev[i].id,
                      (int)out[i], (int)want[i]);
    query_value(c, "SELECT quantity FROM billing.usage_events WHERE event_id = 'rep'", v,
                sizeof(v));
    ck_assert_str_eq(v, "2");
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.usage_events"), DISTINCT + 1);
    free(want);
    free(ids);
    free(ev);
    free(out);
    drop_db(c);
}
END_TEST

/* 129 bytes: one over the bound of ids and resources. */
#define LONG_129                                                                                 \
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" \
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"

START_TEST(test_events_refused_batch)
{
    bs_conn *c = migrated_db("ingest_refused");
    bs_event ev[2];
    bs_event_outcome out[2];
    ingest_arg ia = {ev, 2, BS_COPY_BINARY, out, 0};
    bs_error err;

    seed(c);
    ev[0] = make_event("ok", "1", INT64_C(1767571200000000000));
    ev[1] = make_event("bad", "1", INT64_C(1767571200000000000));
    ev[1].end = ev[1].start;
    ck_assert_int_eq(bs_transaction(c, ingest_tx, &ia, &err), BS_ERR_CONSTRAINT);
    ck_assert_str_eq(err.constraint, "usage_events_end_after_start");
    ev[1].end = ev[1].start + 1;
    /* The rules checked once per batch since 0007, each named. */
    ev[1].account = "nobody";
    ck_assert_int_eq(bs_transaction(c, ingest_tx, &ia, &err), BS_ERR_CONSTRAINT);
    ck_assert_str_eq(err.constraint, "usage_events_account_known");
    ev[1].account = "acct-1";
    ev[1].resource = LONG_129;
    ck_assert_int_eq(bs_transaction(c, ingest_tx, &ia, &err), BS_ERR_CONSTRAINT);
    ck_assert_str_eq(err.constraint, "usage_events_resource_id_length");
    ev[1].resource = "i-1";
    ev[1].model = LONG_129;
    ck_assert_int_eq(bs_transaction(c, ingest_tx, &ia, &err), BS_ERR_CONSTRAINT);
    ck_assert_str_eq(err.constraint, "usage_events_attr_length");
    ev[1].model = NULL;
    ev[1].quantity = "1e3";
    ck_assert_int_eq(bs_transaction(c, ingest_tx, &ia, &err), BS_ERR_INVALID);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.event_ids"), 0);
    /* Outside a transaction: refused before anything is sent. */
    ck_assert_int_eq(bs_events_ingest(c, ev, 1, BS_COPY_BINARY, out, NULL, &err), BS_ERR_INVALID);
    drop_db(c);
}
END_TEST

/*
 * The fingerprint computed in C (since 0007) must be the md5 of the bytes
 * SQL's billing.event_fingerprint hashes, or events stored before 0007
 * would conflict with their own replays. Every stored row is compared
 * with the SQL function; the quantities, instants and texts are the cases
 * where a canonical form could differ.
 */
START_TEST(test_fingerprint_matches_sql)
{
    static const char *const quantities[] = {"1.50",        "007",          "0.000",
                                             "0",           "+2.000000001", "1000000000000000000",
                                             "0.000000001", "12.340"};
    /* 1969 (before the epoch), nanoseconds below the microsecond, and a round second. */
    static const billing_time_t starts[] = {INT64_C(-86400000000001), INT64_C(1767571200123456789),
                                            INT64_C(1767571200000000000)};
    bs_conn *c = migrated_db("fingerprint");
    bs_event ev[24];
    bs_event_outcome out[24];
    unsigned char fp[16];
    char ids[24][16];
    char sql[SQL_MAX];
    char hex[64];
    size_t n = 0;
    size_t q;
    size_t t;
    int i;
    int len;

    seed(c);
    for (q = 0; q < N_CASES(quantities); q++) {
        for (t = 0; t < N_CASES(starts); t++) {
            snprintf(ids[n], sizeof(ids[n]), "fp-%zu-%zu", q, t);
            ev[n] = make_event(ids[n], quantities[q], starts[t]);
            ev[n].resource = t == 0 ? "\xe8\xb5\x84\xe6\xba\x90 1|2" : "i-1";
            ev[n].model = t == 1 ? NULL : ev[n].model;
            n++;
        }
    }
    ck_assert_uint_eq(ingest(c, ev, n, BS_COPY_BINARY, out), n);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.event_ids e"
                                   " JOIN billing.usage_events u USING (event_id)"
                                   " WHERE e.fingerprint = billing.event_fingerprint(u.account_id,"
                                   " u.resource_id, u.meter, u.start_time, u.start_nanos,"
                                   " u.end_time, u.end_nanos, u.quantity, u.model, u.region)"),
                     (long)n);
    ck_assert_int_eq(bs_event_fingerprint(&ev[0], fp), 0);
    ev[0].quantity = "1,5";
    ck_assert_int_eq(bs_event_fingerprint(&ev[0], fp), -1);
    /* The MD5 itself, across the block boundaries (55, 56, 63, 64, 119, 120 bytes). */
    for (len = 0; len <= 130; len++) {
        memset(sql, 'a' + len % 26, (size_t)len);
        sql[len] = '\0';
        bs_md5(sql, (size_t)len, fp);
        for (i = 0; i < 16; i++)
            snprintf(hex + 2 * i, 3, "%02x", fp[i]);
        snprintf(sql, sizeof(sql), "SELECT md5(repeat(chr(%d), %d)) = '%s'", 'a' + len % 26, len,
                 hex);
        query_value(c, sql, hex, sizeof(hex));
        ck_assert_msg(strcmp(hex, "t") == 0, "md5 of %d bytes differs from PostgreSQL's", len);
    }
    drop_db(c);
}
END_TEST

/*
 * Two ids with one md5 (made on purpose, as MD5 allows): the second is a
 * new event, not a duplicate nor a conflict of the first, and its own
 * replays are told apart as for any id. The collision is forged by
 * storing 'forged' under the hash of 'victim'.
 */
START_TEST(test_id_hash_collision)
{
    bs_conn *c = migrated_db("collision");
    billing_time_t t = INT64_C(1767571200000000000);
    bs_event ev[4];
    bs_event_outcome out[4];

    seed(c);
    exec_ok(c, "SET ROLE billing_owner");
    exec_ok(c, "ALTER TABLE billing.event_ids ALTER COLUMN id_hash DROP EXPRESSION");
    exec_ok(c, "INSERT INTO billing.event_ids (event_id, start_time, fingerprint, id_hash)"
               " VALUES ('forged', '2026-01-05Z', decode(md5('x'), 'hex'),"
               " decode(md5('victim'), 'hex'))");
    /* Every other id keeps its hash as the generated column gave it. */
    exec_ok(c, "CREATE FUNCTION pg_temp.hash_id() RETURNS trigger LANGUAGE plpgsql AS"
               " $$BEGIN NEW.id_hash := decode(md5(NEW.event_id), 'hex'); RETURN NEW; END$$");
    exec_ok(c, "CREATE TRIGGER hash_id BEFORE INSERT ON billing.event_ids FOR EACH ROW"
               " EXECUTE FUNCTION pg_temp.hash_id()");
    exec_ok(c, "RESET ROLE");
    ev[0] = make_event("victim", "1", t);
    ev[1] = make_event("victim", "1.0", t); /* the same content */
    ev[2] = make_event("victim", "2", t);   /* other content */
    ev[3] = make_event("other", "1", t);
    ck_assert_uint_eq(ingest(c, ev, 4, BS_COPY_BINARY, out), 2);
    ck_assert_int_eq(out[0], BS_EVENT_NEW);
    ck_assert_int_eq(out[1], BS_EVENT_DUPLICATE);
    ck_assert_int_eq(out[2], BS_EVENT_CONFLICT);
    ck_assert_int_eq(out[3], BS_EVENT_NEW);
    /* A later batch, against what is stored. */
    ck_assert_uint_eq(ingest(c, ev, 3, BS_COPY_BINARY, out), 0);
    ck_assert_int_eq(out[0], BS_EVENT_DUPLICATE);
    ck_assert_int_eq(out[1], BS_EVENT_DUPLICATE);
    ck_assert_int_eq(out[2], BS_EVENT_CONFLICT);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.usage_events"
                                   " WHERE event_id = 'victim'"),
                     1);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.event_id_collisions"
                                   " WHERE event_id = 'victim'"),
                     1);
    drop_db(c);
}
END_TEST

/*
 * Two connections claim overlapping ids at once. Claimer A stores ids
 * <p>000..<p>099 and keeps its transaction open; claimer B (a child
 * process, its own connection) offers <p>050..<p>149, of which 050..074
 * have A's content and 075..099 other content, and blocks on A's
 * uncommitted claims. Once B is seen waiting for the lock, A commits
 * (round 'r') or rolls back (round 's'). Exactly one claimer wins each
 * id: after a commit B stores 50 new ids and counts 25 duplicates and 25
 * conflicts; after a rollback B stores all 100. Each id has one row.
 */
#define RACE_IDS 100
#define RACE_WAIT_MS 30000

/* The @n events of ids <@prefix><from>.. into @ev (ids in @ids); quantity 2 from @other on. */
static void race_events(bs_event *ev, char (*ids)[16], char prefix, int from, int n, int other)
{
    billing_time_t t = INT64_C(1767571200000000000);
    int i;

    for (i = 0; i < n; i++) {
        snprintf(ids[i], sizeof(ids[i]), "%c%03d", prefix, from + i);
        ev[i] =
            make_event(ids[i], from + i >= other ? "2" : "1", t + (from + i) * BILLING_NS_PER_SEC);
    }
}

/* Claimer B: offers 050..149, writes "status new duplicates conflicts" to @fd. */
static int race_child(int fd, char prefix)
{
    bs_event ev[RACE_IDS];
    bs_event_outcome out[RACE_IDS];
    char ids[RACE_IDS][16];
    char line[64];
    size_t stored = 0;
    int counts[3] = {0, 0, 0};
    bs_conn *c = child_connect();
    bs_error err;
    bs_status st;
    int i;

    if (c == NULL)
        return 1;
    race_events(ev, ids, prefix, 50, RACE_IDS, 75);
    st = bs_begin(c, &err);
    if (st == BS_OK)
        st = bs_events_ingest(c, ev, RACE_IDS, BS_COPY_BINARY, out, &stored, &err);
    if (st == BS_OK)
        st = bs_commit(c, &err);
    if (st != BS_OK)
        fprintf(stderr, "race child: %s\n", err.message);
    for (i = 0; i < RACE_IDS; i++)
        counts[out[i]]++;
    snprintf(line, sizeof(line), "%d %zu %d %d", (int)st, stored, counts[BS_EVENT_DUPLICATE],
             counts[BS_EVENT_CONFLICT]);
    if (write(fd, line, strlen(line)) != (ssize_t)strlen(line))
        return 1;
    bs_close(c);
    return 0;
}

/* Wait until another backend of this database waits for a lock. */
static void wait_for_blocked(bs_conn *watch)
{
    int waited;

    for (waited = 0; waited < RACE_WAIT_MS; waited += 5) {
        if (query_long(watch, "SELECT count(*) FROM pg_stat_activity WHERE datname ="
                              " current_database() AND wait_event_type = 'Lock'") > 0)
            return;
        bs_sleep_ms(5);
    }
    ck_abort_msg("the other session never waited for a lock");
}

/* A child of blocked_round: the writer end of its pipe, and what it runs. */
typedef int (*blocked_fn)(int fd, const void *arg);

/*
 * blocked_round - fork a child that runs @fn(@arg) on its own connection;
 * once it waits for a lock (seen by @watch), end @holder's open
 * transaction (commit if @commit, else roll back). The child's outcome,
 * the line it wrote to its pipe, goes to @line.
 */
static void blocked_round(bs_conn *holder, bs_conn *watch, int commit, blocked_fn fn,
                          const void *arg, char *line, size_t size)
{
    bs_error err;
    int fds[2];
    int status;
    pid_t pid;
    ssize_t got;

    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        _exit(fn(fds[1], arg));
    }
    close(fds[1]);
    wait_for_blocked(watch);
    if (commit)
        ck_assert_msg(bs_commit(holder, &err) == BS_OK, "commit: %s", err.message);
    else
        bs_rollback(holder);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed (%d)", status);
    got = read(fds[0], line, size - 1);
    close(fds[0]);
    ck_assert_int_gt(got, 0);
    line[got] = '\0';
}

/* race_child as a blocked_fn: @arg is the prefix. */
static int race_child_fn(int fd, const void *arg)
{
    return race_child(fd, *(const char *)arg);
}

/* One round: A claims, B blocks on it, A commits (@commit) or rolls back; B's result in @line. */
static void race_round(bs_conn *a, bs_conn *watch, char prefix, int commit, char *line, size_t size)
{
    bs_event ev[RACE_IDS];
    bs_event_outcome out[RACE_IDS];
    char ids[RACE_IDS][16];
    size_t stored = 0;
    bs_error err;

    race_events(ev, ids, prefix, 0, RACE_IDS, RACE_IDS);
    ck_assert_int_eq(bs_begin(a, &err), BS_OK);
    ck_assert_int_eq(bs_events_ingest(a, ev, RACE_IDS, BS_COPY_BINARY, out, &stored, &err), BS_OK);
    ck_assert_uint_eq(stored, RACE_IDS);
    blocked_round(a, watch, commit, race_child_fn, &prefix, line, size);
}

START_TEST(test_events_claim_race)
{
    bs_conn *c = migrated_db("claim_race");
    bs_conn *watch = connect_db(db_name);
    char line[64];

    seed(c);
    race_round(c, watch, 'r', 1, line, sizeof(line));
    ck_assert_str_eq(line, "0 50 25 25");
    race_round(c, watch, 's', 0, line, sizeof(line));
    ck_assert_str_eq(line, "0 100 0 0");
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.event_ids"), 250);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.usage_events"), 250);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM (SELECT event_id FROM"
                                   " billing.usage_events GROUP BY 1 HAVING count(*) > 1) d"),
                     0);
    /* The conflicting ids kept the first claimer's content. */
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.usage_events"
                                   " WHERE event_id BETWEEN 'r075' AND 'r099' AND quantity = 1"),
                     25);
    bs_close(watch);
    drop_db(c);
}
END_TEST

#define LINE_COLS                                                                          \
    "INSERT INTO billing.invoice_lines (invoice_id, line_no, kind, meter, quantity, unit," \
    " unit_price, amount) VALUES "

/* A blocked_fn: runs @arg (SQL) in autocommit, writes "ok" or "SQLSTATE constraint" to @fd. */
static int blocked_sql(int fd, const void *arg)
{
    const char *sql = arg;
    char line[128];
    bs_conn *c = child_connect();
    bs_error err;
    bs_status st;

    if (c == NULL)
        return 1;
    st = bs_command(c, sql, 0, NULL, NULL, &err);
    if (st == BS_OK)
        snprintf(line, sizeof(line), "ok");
    else
        snprintf(line, sizeof(line), "%s %s", err.sqlstate, err.constraint);
    bs_close(c);
    return write(fd, line, strlen(line)) == (ssize_t)strlen(line) ? 0 : 1;
}

/*
 * Migration 0026: a line's invoice checked once per INSERT statement (by
 * the guard that locks the statement's invoices FOR SHARE) instead of by
 * the foreign key: the same name and SQLSTATE 23503 for a line alone or
 * among good ones, from the referenced side (a DELETE of an invoice that
 * has lines), and against a concurrent delete, whichever comes first.
 */
START_TEST(test_line_invoice_key_once)
{
    bs_conn *c = migrated_db("line_invoice_key");
    bs_conn *watch = connect_db(db_name);
    char sql[SQL_MAX];
    char line[128];
    long id;
    long done;
    long empty;

    seed(c);
    done = draft(c, "acct-1", "2026-01-01");
    ck_assert_int_eq(finalize(c, done), 1);
    id = draft(c, "acct-1", "2026-02-01");
    empty = draft(c, "acct-1", "2026-03-01");
    exec_fmt(c, "DELETE FROM billing.invoice_lines WHERE invoice_id = %ld", empty);
    expect_refused_state(c, LINE_COLS "(987654321, 1, 'usage', 'gpu', 1, 'GPU-hour', 1, 1)",
                         BS_ERR_CONSTRAINT, "invoice_lines_invoice_id_fkey", "23503");
    /* Among good lines, and named before a finalized invoice, as the key's row checks were. */
    snprintf(sql, sizeof(sql),
             LINE_COLS "(%ld, 2, 'usage', 'gpu', 1, 'GPU-hour', 1, 1),"
                       " (987654321, 1, 'usage', 'gpu', 1, 'GPU-hour', 1, 1),"
                       " (%ld, 2, 'usage', 'gpu', 1, 'GPU-hour', 1, 1)",
             id, done);
    expect_refused_state(c, sql, BS_ERR_CONSTRAINT, "invoice_lines_invoice_id_fkey", "23503");
    snprintf(sql, sizeof(sql), LINE_COLS "(%ld, 2, 'usage', 'gpu', 1, 'GPU-hour', 1, 1)", done);
    expect_refused(c, sql, BS_ERR_CONSTRAINT, "invoices_finalized_immutable");
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.invoice_lines"), 2);
    /* The referenced side: an invoice with lines cannot go; one without can. */
    snprintf(sql, sizeof(sql), "DELETE FROM billing.invoices WHERE id IN (%ld, %ld)", empty, id);
    expect_refused_state(c, sql, BS_ERR_CONSTRAINT, "invoice_lines_invoice_id_fkey", "23503");
    /* ... under READ COMMITTED only: a REPEATABLE READ snapshot would miss a new line. */
    exec_ok(c, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    snprintf(sql, sizeof(sql), "DELETE FROM billing.invoices WHERE id = %ld", empty);
    expect_refused_state(c, sql, BS_ERR_RETRY, "invoice_lines_invoice_id_fkey", "40001");
    exec_ok(c, "ROLLBACK");
    /* A line being added holds its invoice: the DELETE waits, then sees the line. */
    exec_ok(c, "BEGIN");
    exec_fmt(c, LINE_COLS "(%ld, 1, 'usage', 'gpu', 1, 'GPU-hour', 1, 1)", empty);
    blocked_round(c, watch, 1, blocked_sql, sql, line, sizeof(line));
    ck_assert_str_eq(line, "23503 invoice_lines_invoice_id_fkey");
    exec_fmt(c, "DELETE FROM billing.invoice_lines WHERE invoice_id = %ld", empty);
    /* A DELETE first: the line waits for it, then finds its invoice gone. */
    exec_ok(c, "BEGIN");
    exec_fmt(c, "DELETE FROM billing.invoices WHERE id = %ld", empty);
    snprintf(sql, sizeof(sql), LINE_COLS "(%ld, 1, 'usage', 'gpu', 1, 'GPU-hour', 1, 1)", empty);
    blocked_round(c, watch, 1, blocked_sql, sql, line, sizeof(line));
    ck_assert_str_eq(line, "23503 invoice_lines_invoice_id_fkey");
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.invoice_lines l WHERE NOT EXISTS"
                                   " (SELECT 1 FROM billing.invoices i WHERE i.id = l.invoice_id)"),
                     0);
    bs_close(watch);
    drop_db(c);
}
END_TEST

/*
 * bs_text_array: what PostgreSQL reads back from the literal is exactly
 * the strings given, whatever they hold of the literal's own syntax
 * (quotes, backslashes, commas, braces, blanks, NULL spelled out, "").
 */
START_TEST(test_text_array)
{
    static const char *const items[] = {"a",   "b\"c", "d\\e", "f,g",  "{h}",
                                        " i ", "NULL", "",     "\\\"", "acct-1"};
    bs_conn *c = migrated_db("text_array");
    const char *params[1];
    char *array = bs_text_array(items, N_CASES(items));
    bs_error err;
    PGresult *res;
    size_t i;

    ck_assert_ptr_nonnull(array);
    params[0] = array;
    res = bs_query(c,
                   "SELECT x, x IS NULL FROM unnest($1::text[]) WITH ORDINALITY u (x, i)"
                   " ORDER BY i",
                   1, params, &err);
    ck_assert_msg(res != NULL, "%s", err.message);
    ck_assert_int_eq(PQntuples(res), (int)N_CASES(items));
    for (i = 0; i < N_CASES(items); i++) {
        ck_assert_str_eq(PQgetvalue(res, (int)i, 0), items[i]);
        ck_assert_str_eq(PQgetvalue(res, (int)i, 1), "f");
    }
    PQclear(res);
    free(array);
    array = bs_text_array(items, 0);
    ck_assert_str_eq(array, "{}");
    free(array);
    {
        /* Sorted, with repeats at the start, the middle and the end. */
        const char *sorted[] = {"a", "a", "b", "b\"c", "b\"c", "c", "c"};

        array = bs_text_array_distinct(sorted, N_CASES(sorted));
        ck_assert_str_eq(array, "{\"a\",\"b\",\"b\\\"c\",\"c\"}");
        free(array);
        array = bs_text_array_distinct(sorted, 0);
        ck_assert_str_eq(array, "{}");
        free(array);
    }
    drop_db(c);
}
END_TEST

/*
 * A database at 0005 with events in it, migrated past 0007: the stored
 * events still dedupe (replays are duplicates, other content conflicts),
 * through the C fingerprint against the SQL one they were stored with.
 */
START_TEST(test_migrate_0005_events_kept)
{
    bs_conn *c = fresh_db("lean_from_5");
    /* make_event's instants: 2026-01-05T00:00:00.123456789Z and one hour + 7 ns later. */
    billing_time_t t = INT64_C(1767571200123456789);
    bs_event ev[3];
    bs_event_outcome out[3];
    int i;

    migrate_to(c, 5, 5);
    seed(c);
    exec_ok(c, "SELECT billing.ensure_event_partitions('2026-01-01', '2026-01-01')");
    for (i = 1; i <= 2; i++) {
        exec_fmt(c,
                 "INSERT INTO billing.event_ids (event_id, start_time, fingerprint)"
                 " VALUES ('old%d', '2026-01-05 00:00:00.123456Z', billing.event_fingerprint("
                 "'acct-1', 'i-1', 'gpu', '2026-01-05 00:00:00.123456Z', 789::smallint,"
                 " '2026-01-05 01:00:00.123456Z', 796::smallint, 1.50, 'RTX4090', 'cn-east-1'))",
                 i);
        exec_fmt(c,
                 "INSERT INTO billing.usage_events (event_id, account_id, resource_id, meter,"
                 " start_time, start_nanos, end_time, end_nanos, quantity, model, region)"
                 " VALUES ('old%d', 'acct-1', 'i-1', 'gpu', '2026-01-05 00:00:00.123456Z', 789,"
                 " '2026-01-05 01:00:00.123456Z', 796, 1.50, 'RTX4090', 'cn-east-1')",
                 i);
    }
    migrate_to(c, 0, (int)bs_migration_count - 5);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.event_ids"
                                   " WHERE id_hash = decode(md5(event_id), 'hex')"),
                     2);
    ev[0] = make_event("old1", "1.5", t); /* a replay */
    ev[1] = make_event("old2", "2", t);   /* other content */
    ev[2] = make_event("new1", "1.5", t);
    ck_assert_uint_eq(ingest(c, ev, 3, BS_COPY_BINARY, out), 1);
    ck_assert_int_eq(out[0], BS_EVENT_DUPLICATE);
    ck_assert_int_eq(out[1], BS_EVENT_CONFLICT);
    ck_assert_int_eq(out[2], BS_EVENT_NEW);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.usage_events"), 3);
    drop_db(c);
}
END_TEST

START_TEST(test_event_partitions)
{
    bs_conn *c = migrated_db("partitions");
    bs_event ev[3];
    bs_event_outcome out[3];
    bs_error err;
    int created = -1;
    billing_time_t ahead8;
    char name[DBNAME_MAX];
    char sql[SQL_MAX];

    seed(c);
    /*
     * Eight months ahead (partitions may be made up to twelve) and January
     * 2026 have no partition: their events wait in the default one.
     */
    ahead8 = (billing_time_t)query_long(c, "SELECT extract(epoch FROM date_trunc('month', now())"
                                           " + interval '8 months')::bigint") *
             BILLING_NS_PER_SEC;
    query_value(c, "SELECT billing.event_partition_name((now() + interval '8 months')::date)", name,
                sizeof(name));
    ev[0] = make_event("p1", "1", ahead8);
    ev[1] = make_event("p2", "1", ahead8 + 86400 * BILLING_NS_PER_SEC);
    ev[2] = make_event("p3", "1", INT64_C(1767571200000000000));
    ck_assert_uint_eq(ingest(c, ev, 3, BS_COPY_BINARY, out), 3);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.usage_events_default"), 3);
    ck_assert_int_eq(query_long(c, "SELECT billing.ensure_event_partitions((now() + interval"
                                   " '7 months')::date, (now() + interval '9 months')::date)"),
                     3);
    ck_assert_int_eq(query_long(c, "SELECT billing.ensure_event_partitions((now() + interval"
                                   " '7 months')::date, (now() + interval '9 months')::date)"),
                     0);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.usage_events_default"), 1);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM billing.%s", name);
    ck_assert_int_eq(query_long(c, sql), 2);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.usage_events"), 3);
    /* The moved events keep their guards. */
    expect_refused(c, "UPDATE billing.usage_events SET quantity = 5 WHERE event_id = 'p1'",
                   BS_ERR_CONSTRAINT, "usage_events_immutable");
    expect_refused(c, "SELECT billing.ensure_event_partitions('2031-01-01', '2045-01-01')",
                   BS_ERR_FATAL, NULL);
    /* The months around now exist since the migration; more can be added. */
    ck_assert_int_eq(bs_event_partitions(c, 1, 3, &created, &err), BS_OK);
    ck_assert_int_eq(created, 0);
    ck_assert_int_eq(bs_event_partitions(c, 0, 6, &created, &err), BS_OK);
    ck_assert_int_eq(created, 3);
    ck_assert_int_eq(bs_event_partitions(c, 0, 61, &created, &err), BS_ERR_INVALID);
    drop_db(c);
}
END_TEST

/*
 * Migration 0027: usage_events is indexed by account alone. The parent and
 * every partition (those of the migration, one made from the default
 * partition's events by ensure_event_partitions, the default itself) have
 * exactly one index, on account_id, and 0005's (account_id, start_time)
 * is gone: a second index, or the old shape back, is another B-tree insert
 * per stored event.
 */
#define EVENT_INDEXES                                                               \
    "SELECT count(*) FROM pg_inherits i JOIN pg_index x ON x.indrelid = i.inhrelid" \
    " WHERE i.inhparent = 'billing.usage_events'::regclass"
START_TEST(test_events_account_index)
{
    bs_conn *c = migrated_db("events_account_index");
    bs_event ev[2];
    bs_event_outcome out[2];
    billing_time_t ahead8;
    char def[SQL_MAX];
    long parts;

    seed(c);
    ahead8 = (billing_time_t)query_long(c, "SELECT extract(epoch FROM date_trunc('month', now())"
                                           " + interval '8 months')::bigint") *
             BILLING_NS_PER_SEC;
    ev[0] = make_event("x1", "1", ahead8);
    ev[1] = make_event("x2", "1", INT64_C(1767571200000000000));
    ck_assert_uint_eq(ingest(c, ev, 2, BS_COPY_BINARY, out), 2);
    ck_assert_int_eq(query_long(c, "SELECT billing.ensure_event_partitions((now() + interval"
                                   " '7 months')::date, (now() + interval '9 months')::date)"),
                     3);
    query_value(c,
                "SELECT string_agg(indexdef, ';') FROM pg_indexes WHERE schemaname = 'billing'"
                " AND tablename = 'usage_events'",
                def, sizeof(def));
    ck_assert_str_eq(def, "CREATE INDEX usage_events_account ON ONLY billing.usage_events"
                          " USING btree (account_id)");
    parts = query_long(c, "SELECT count(*) FROM pg_inherits"
                          " WHERE inhparent = 'billing.usage_events'::regclass");
    ck_assert_int_gt(parts, 3);
    ck_assert_int_eq(query_long(c, EVENT_INDEXES), parts);
    ck_assert_int_eq(query_long(c, EVENT_INDEXES
                                " AND x.indnatts = 1 AND NOT x.indisunique"
                                " AND pg_get_indexdef(x.indexrelid, 1, false) = 'account_id'"),
                     parts);
    /* The account's events come back by the index as before. */
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.usage_events"
                                   " WHERE account_id = 'acct-1'"),
                     2);
    drop_db(c);
}
END_TEST

START_TEST(test_rejects_and_offsets)
{
    bs_conn *c = migrated_db("rejects");
    bs_rejection r;
    bs_error err;
    int64_t next;
    int found;

    memset(&r, 0, sizeof(r));
    r.source = "kafka:usage/3@42";
    r.kafka_topic = "usage";
    r.kafka_partition = 3;
    r.kafka_offset = 42;
    r.reason_code = "invalid";
    r.reason = "field 'end': not after 'start'";
    r.payload = "\x00\x01\xff";
    r.payload_len = 3;
    ck_assert_int_eq(bs_reject(c, &r, &err), BS_OK);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.rejected_events WHERE payload"
                                   " = '\\x0001ff'::bytea AND kafka_offset = 42"),
                     1);
    r.reason_code = "Not A Code";
    ck_assert_int_eq(bs_reject(c, &r, &err), BS_ERR_CONSTRAINT);
    expect_refused(c, "UPDATE billing.rejected_events SET reason = 'x'", BS_ERR_CONSTRAINT,
                   "rejected_events_immutable");

    ck_assert_int_eq(bs_offset_get(c, "g", "usage", 3, &next, &found, &err), BS_OK);
    ck_assert_int_eq(found, 0);
    ck_assert_int_eq(bs_offset_put(c, "g", "usage", 3, -1, 10, &err), BS_OK);
    ck_assert_int_eq(bs_offset_put(c, "g", "usage", 3, -1, 10, &err), BS_ERR_RETRY);
    ck_assert_int_eq(bs_offset_put(c, "g", "usage", 3, 10, 25, &err), BS_OK);
    ck_assert_int_eq(bs_offset_put(c, "g", "usage", 3, 10, 30, &err), BS_ERR_RETRY);
    ck_assert_int_eq(bs_offset_get(c, "g", "usage", 3, &next, &found, &err), BS_OK);
    ck_assert_int_eq(found, 1);
    ck_assert_int_eq(next, 25);
    drop_db(c);
}
END_TEST

/*
 * The pipelined forms (one round trip for a batch's rejects and
 * positions): each position's row count comes back from
 * bs_pipeline_end, a stale one is told apart by bs_offset_moved, and a
 * reject that fails in the pipeline makes bs_pipeline_end fail.
 */
START_TEST(test_rejects_and_offsets_pipelined)
{
    bs_conn *c = migrated_db("rejpipe");
    bs_rejection r;
    bs_error err;
    int64_t moved[3] = {-7, -7, -7};
    int64_t next;
    int found;

    memset(&r, 0, sizeof(r));
    r.source = "kafka:usage/1@5";
    r.kafka_topic = "usage";
    r.kafka_partition = 1;
    r.kafka_offset = 5;
    r.reason_code = "parse";
    r.reason = "not JSON";
    r.payload = "{x";
    r.payload_len = 2;
    ck_assert_int_eq(bs_offset_put(c, "g", "usage", 2, -1, 10, &err), BS_OK);
    ck_assert_int_eq(bs_begin(c, &err), BS_OK);
    ck_assert_int_eq(bs_pipeline_begin(c, &err), BS_OK);
    ck_assert_int_eq(bs_reject_send(c, &r, &err), BS_OK);
    ck_assert_int_eq(bs_offset_send(c, "g", "usage", 1, -1, 6, &moved[0], &err), BS_OK);
    /* Partition 2 is at 10, not 4: another consumer moved it. */
    ck_assert_int_eq(bs_offset_send(c, "g", "usage", 2, 4, 12, &moved[1], &err), BS_OK);
    ck_assert_int_eq(bs_offset_send(c, "g", "usage", 2, 10, 11, &moved[2], &err), BS_OK);
    ck_assert_int_eq(bs_pipeline_end(c, &err), BS_OK);
    ck_assert_int_eq(moved[0], 1);
    ck_assert_int_eq(moved[1], 0);
    ck_assert_int_eq(moved[2], 1);
    ck_assert_int_eq(bs_offset_moved("g", "usage", 1, -1, moved[0], &err), BS_OK);
    ck_assert_int_eq(bs_offset_moved("g", "usage", 2, 4, moved[1], &err), BS_ERR_RETRY);
    ck_assert_ptr_nonnull(strstr(err.message, "another consumer moved it"));
    ck_assert_int_eq(bs_commit(c, &err), BS_OK);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.rejected_events WHERE payload"
                                   " = '\\x7b78'::bytea AND kafka_offset = 5"),
                     1);
    ck_assert_int_eq(bs_offset_get(c, "g", "usage", 1, &next, &found, &err), BS_OK);
    ck_assert_int_eq(next, 6);
    ck_assert_int_eq(bs_offset_get(c, "g", "usage", 2, &next, &found, &err), BS_OK);
    ck_assert_int_eq(next, 11);
    /* A reject the table refuses fails the pipeline, and its transaction with it. */
    r.reason_code = "Not A Code";
    ck_assert_int_eq(bs_begin(c, &err), BS_OK);
    ck_assert_int_eq(bs_pipeline_begin(c, &err), BS_OK);
    ck_assert_int_eq(bs_offset_send(c, "g", "usage", 1, 6, 9, &moved[0], &err), BS_OK);
    bs_reject_send(c, &r, &err);
    ck_assert_int_eq(bs_pipeline_end(c, &err), BS_ERR_CONSTRAINT);
    bs_rollback(c);
    ck_assert_int_eq(bs_offset_get(c, "g", "usage", 1, &next, &found, &err), BS_OK);
    ck_assert_int_eq(next, 6);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.rejected_events"), 1);
    /* An incomplete rejection is refused before anything is sent. */
    r.reason = NULL;
    ck_assert_int_eq(bs_reject_send(c, &r, &err), BS_ERR_INVALID);
    drop_db(c);
}
END_TEST

/* Pipelines: many windows, row counts, and a failure in the middle. */
START_TEST(test_pipeline)
{
    enum { N = 3 * BS_PIPELINE_WINDOW + 7 };
    static int64_t affected[N];
    bs_conn *c = fresh_db("pipeline");
    const char *params[1];
    char value[16];
    bs_error err;
    int i;

    exec_ok(c, "CREATE TABLE t (v integer CONSTRAINT t_small CHECK (v < 1000))");
    ck_assert_int_eq(bs_prepare(c, "ins", "INSERT INTO t SELECT $1::integer", 1, &err), BS_OK);
    ck_assert_int_eq(bs_begin(c, &err), BS_OK);
    ck_assert_int_eq(bs_pipeline_begin(c, &err), BS_OK);
    for (i = 0; i < N; i++) {
        snprintf(value, sizeof(value), "%d", i % 900);
        params[0] = value;
        affected[i] = -1;
        ck_assert_int_eq(bs_pipeline_send(c, "ins", NULL, 1, params, &affected[i], &err), BS_OK);
    }
    ck_assert_int_eq(bs_pipeline_end(c, &err), BS_OK);
    ck_assert_int_eq(bs_commit(c, &err), BS_OK);
    for (i = 0; i < N; i++)
        ck_assert_int_eq(affected[i], 1);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM t"), N);

    /* The 300th statement fails: the rest is skipped, the failure named. */
    ck_assert_int_eq(bs_begin(c, &err), BS_OK);
    ck_assert_int_eq(bs_pipeline_begin(c, &err), BS_OK);
    for (i = 0; i < N; i++) {
        snprintf(value, sizeof(value), "%d", i == 300 ? 5000 : 1);
        params[0] = value;
        bs_pipeline_send(c, NULL, "INSERT INTO t SELECT $1::integer", 1, params, NULL, NULL);
    }
    ck_assert_int_eq(bs_pipeline_end(c, &err), BS_ERR_CONSTRAINT);
    ck_assert_str_eq(err.constraint, "t_small");
    ck_assert_int_eq(bs_commit(c, &err), BS_ERR_FATAL);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM t"), N);
    /* A statement that was not prepared fails the pipeline before sending. */
    ck_assert_int_eq(bs_pipeline_begin(c, &err), BS_OK);
    ck_assert_int_eq(bs_pipeline_send(c, "nope", NULL, 0, NULL, NULL, &err), BS_ERR_INVALID);
    ck_assert_int_eq(bs_pipeline_end(c, &err), BS_ERR_INVALID);
    ck_assert_int_eq(query_long(c, "SELECT 1"), 1);
    drop_db(c);
}
END_TEST

/*
 * The server cuts the session while a pipeline's results are unread (an
 * administrator's pg_terminate_backend, a restart): the connection must
 * not stay in libpq's pipeline mode, where every later query fails while
 * its status still reads OK and nobody reconnects it (billingd's catalog
 * reloads failed that way for good, and it stalled). The cut comes from a
 * child process once the pipeline's first statement is seen running.
 */
START_TEST(test_pipeline_session_cut)
{
    bs_conn *c = fresh_db("pipecut");
    static char big[100 * 1024];
    const char *params[1] = {big};
    char sql[SQL_MAX];
    bs_error err;
    long sessions = (long)bs_sessions(c);
    int pid = PQbackendPID(bs_pg(c));
    int status;
    pid_t child;
    int i;

    memset(big, 'x', sizeof(big) - 1);
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        bs_conn *admin = connect_db(db_name);
        struct timespec tick = {0, 10 * 1000 * 1000};
        time_t deadline = time(NULL) + 60;

        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM pg_stat_activity WHERE pid = %d AND state = 'active'"
                 " AND query LIKE 'SELECT pg_sleep%%'",
                 pid);
        while (query_long(admin, sql) == 0 && time(NULL) < deadline)
            nanosleep(&tick, NULL); /* the poll's pace, not a wait for the other side */
        snprintf(sql, sizeof(sql), "SELECT count(pg_terminate_backend(%d))", pid);
        _exit(query_long(admin, sql) == 1 ? 0 : 1);
    }
    ck_assert_int_eq(bs_begin(c, &err), BS_OK);
    ck_assert_int_eq(bs_pipeline_begin(c, &err), BS_OK);
    bs_pipeline_send(c, NULL, "SELECT pg_sleep(60)", 0, NULL, NULL, NULL);
    /* Statements past libpq's output threshold: it sends them, the sleep starts. */
    for (i = 0; i < 5; i++)
        bs_pipeline_send(c, NULL, "SELECT length($1)", 1, params, NULL, NULL);
    /* Cut before the pipeline's end: its sync then meets a closed session. */
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the cut did not happen");
    ck_assert_int_ne(bs_pipeline_end(c, &err), BS_OK);
    bs_rollback(c);
    /* Out of pipeline mode, on a new session that answers. */
    ck_assert_int_eq(PQpipelineStatus(bs_pg(c)), PQ_PIPELINE_OFF);
    ck_assert_int_gt((long)bs_sessions(c), sessions);
    ck_assert_int_ne(PQbackendPID(bs_pg(c)), pid);
    ck_assert_int_eq(query_long(c, "SELECT 7"), 7);
    drop_db(c);
}
END_TEST

/* Binary NUMERIC encoding against PostgreSQL's own parser, value by value. */
START_TEST(test_numeric_binary_copy)
{
    static const char *const values[] = {"0",
                                         "-0",
                                         "0.00",
                                         "-0.00",
                                         "1",
                                         "1.50",
                                         "+7",
                                         "0.0001",
                                         "0.00001",
                                         "12345.6",
                                         "10000",
                                         "100000000",
                                         "-99999999.999999999",
                                         "123456789012345678901234567890.123456789",
                                         "0.000000001",
                                         "9999",
                                         "10000.0001",
                                         "-1"};
    size_t n = sizeof(values) / sizeof(values[0]);
    bs_conn *c = fresh_db("numeric");
    bs_copy *cp;
    bs_error err;
    uint64_t rows = 0;
    size_t i;

    exec_ok(c, "CREATE TABLE nums (i integer, v numeric)");
    ck_assert_int_eq(bs_begin(c, &err), BS_OK);
    cp = bs_copy_begin(c, "COPY nums (i, v) FROM STDIN (FORMAT binary)", 2, BS_COPY_BINARY, &err);
    ck_assert_msg(cp != NULL, "%s", err.message);
    for (i = 0; i < n; i++) {
        bs_copy_row(cp);
        bs_copy_int4(cp, (int32_t)i);
        bs_copy_numeric(cp, values[i]);
    }
    ck_assert_int_eq(bs_copy_end(cp, &rows, &err), BS_OK);
    ck_assert_int_eq(bs_commit(c, &err), BS_OK);
    ck_assert_uint_eq(rows, n);
    for (i = 0; i < n; i++) {
        const char *params[2];
        char idx[16];
        PGresult *res;

        snprintf(idx, sizeof(idx), "%zu", i);
        params[0] = idx;
        params[1] = values[i];
        res = bs_query(c, "SELECT v::text, $2::numeric::text FROM nums WHERE i = $1::integer", 2,
                       params, &err);
        ck_assert_msg(res != NULL, "%s", err.message);
        ck_assert_msg(strcmp(PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1)) == 0,
                      "%s: binary COPY gave %s, text input %s", values[i], PQgetvalue(res, 0, 0),
                      PQgetvalue(res, 0, 1));
        PQclear(res);
    }
    /* A malformed value aborts the COPY: nothing of it is kept. */
    cp = bs_copy_begin(c, "COPY nums (i, v) FROM STDIN (FORMAT binary)", 2, BS_COPY_BINARY, &err);
    ck_assert_msg(cp != NULL, "%s", err.message);
    bs_copy_row(cp);
    bs_copy_int4(cp, 99);
    bs_copy_numeric(cp, "1e5");
    ck_assert_int_eq(bs_copy_end(cp, &rows, &err), BS_ERR_INVALID);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM nums"), (long)n);
    drop_db(c);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Loading                                                                 */
/* ---------------------------------------------------------------------- */

static const char pricebook_json[] =
    "{\"currency\": \"CNY\", \"rounding\": \"half-up\",\n"
    " \"plans\": [{\"id\": \"p-month\", \"period\": \"month\", \"model\": \"RTX4090\","
    " \"region\": \"r1\", \"refundable\": true}],\n"
    " \"versions\": [{\"id\": \"v1\", \"effective_from\": \"2026-01-01T00:00:00+08:00\",\n"
    "   \"rates\": [{\"meter\": \"gpu\", \"model\": \"RTX4090\", \"region\": \"r1\","
    " \"price\": \"@PRICE@\"},\n"
    "             {\"meter\": \"traffic\", \"model\": \"*\", \"region\": \"*\", \"price\": "
    "\"0\"}],\n"
    "   \"plan_fees\": [{\"plan\": \"p-month\", \"fee\": \"2599.00\"}]}]}\n";

static const char accounts_json[] =
    "{\"accounts\": [{\"id\": \"a1\", \"currency\": \"CNY\", \"time_zone\": \"Asia/Shanghai\","
    " \"tax_rate\": \"@TAX@\"},\n"
    "               {\"id\": \"a2\", \"currency\": \"CNY\", \"time_zone\": \"UTC\","
    " \"tax_rate\": \"0\"}],\n"
    " \"subscriptions\": [{\"id\": \"s1\", \"account\": \"a1\", \"resource\": \"i-1\","
    " \"plan\": \"p-month\", \"start\": \"2026-01-05T09:00:00+08:00\", \"terms\": 3,"
    " \"cancelled_at\": @CANCEL@}],\n"
    " \"grants\": [{\"id\": \"g1\", \"account\": \"a1\", \"amount\": \"@GRANT@\","
    " \"granted_at\": \"2026-01-02T10:00:00+08:00\", \"expires_at\": \"2026-02-01T10:00:00+08:00\","
    " \"applies_to\": [\"usage\"]}]}\n";

/* Write @tmpl with "@KEY@" replaced by @value (twice at most) into @path. */
static void write_file(const char *path, const char *tmpl, const char *const *subst)
{
    char text[4096];
    const char *const *s;
    FILE *f;

    snprintf(text, sizeof(text), "%s", tmpl);
    for (s = subst; s[0] != NULL; s += 2) {
        char *at = strstr(text, s[0]);
        char rest[4096];

        ck_assert_ptr_nonnull(at);
        snprintf(rest, sizeof(rest), "%s", at + strlen(s[0]));
        snprintf(at, sizeof(text) - (size_t)(at - text), "%s%s", s[1], rest);
    }
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

typedef struct catalog_files {
    char pricebook[256];
    char accounts[256];
} catalog_files;

static void write_catalog(catalog_files *cf, const char *price, const char *tax, const char *cancel,
                          const char *grant)
{
    const char *pb[] = {"@PRICE@", price, NULL};
    const char *ac[] = {"@TAX@", tax, "@CANCEL@", cancel, "@GRANT@", grant, NULL};

    snprintf(cf->pricebook, sizeof(cf->pricebook), "/tmp/itest_store_%ld_pricebook.json",
             (long)getpid());
    snprintf(cf->accounts, sizeof(cf->accounts), "/tmp/itest_store_%ld_accounts.json",
             (long)getpid());
    write_file(cf->pricebook, pricebook_json, pb);
    write_file(cf->accounts, accounts_json, ac);
}

static size_t total_changed(const bs_load_counts *k)
{
    size_t n = 0;
    int i;

    for (i = 0; i < BS_LOAD_KINDS; i++)
        n += k->added[i] + k->changed[i];
    return n;
}

static bs_status load(bs_conn *c, const catalog_files *cf, bs_load_counts *k, bs_error *err)
{
    return bs_load_catalog(c, "book", cf->pricebook, cf->accounts, k, err);
}

/*
 * A grant's opening ledger entry: written with the grants a load adds (in
 * the same statement), and for a grant of the file stored before without
 * one (added by hand here) when the file also has grants stored before;
 * one entry per grant, with the grant's amount in minor units.
 */
START_TEST(test_load_grant_entries)
{
    static const char grants[] =
        "{\"accounts\": [{\"id\": \"a1\", \"currency\": \"CNY\", \"time_zone\": \"UTC\","
        " \"tax_rate\": \"0\"}],\n"
        " \"grants\": [{\"id\": \"g1\", \"account\": \"a1\", \"amount\": \"10.00\","
        " \"granted_at\": \"2026-01-02T00:00:00Z\", \"expires_at\": \"2026-02-01T00:00:00Z\","
        " \"applies_to\": [\"usage\"]}@MORE@]}\n";
    static const char more[] =
        ", {\"id\": \"g2\", \"account\": \"a1\", \"amount\": \"2.50\","
        " \"granted_at\": \"2026-01-02T00:00:00Z\", \"expires_at\": \"2026-02-01T00:00:00Z\","
        " \"applies_to\": [\"usage\"]},"
        " {\"id\": \"g3\", \"account\": \"a1\", \"amount\": \"0.07\","
        " \"granted_at\": \"2026-01-03T00:00:00Z\", \"expires_at\": \"2026-02-01T00:00:00Z\","
        " \"applies_to\": [\"usage\"]}";
    const char *first[] = {"@MORE@", "", NULL};
    const char *then[] = {"@MORE@", more, NULL};
    catalog_files cf;
    bs_conn *c = migrated_db("load_entries");
    bs_load_counts k;
    bs_error err;

    write_catalog(&cf, "0.60", "0", "null", "10.00");
    write_file(cf.accounts, grants, first);
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(k.added[BS_LOAD_GRANTS], 1);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.credit_ledger"), 1);
    ck_assert_int_eq(query_long(c, "SELECT amount_minor FROM billing.credit_ledger"
                                   " WHERE grant_id = 'g1' AND entry = 'grant'"),
                     1000);
    /* g2 stored without its entry (as before migration 0019's load, or by hand). */
    exec_ok(c, "INSERT INTO billing.credit_grants (id, account_id, currency, amount, granted_at,"
               " expires_at, kinds, priority) VALUES ('g2', 'a1', 'CNY', 2.50, '2026-01-02Z',"
               " '2026-02-01Z', 1, 0)");
    write_file(cf.accounts, grants, then);
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(k.added[BS_LOAD_GRANTS], 1);
    ck_assert_uint_eq(k.unchanged[BS_LOAD_GRANTS], 2);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.credit_ledger"), 3);
    ck_assert_int_eq(query_long(c, "SELECT amount_minor FROM billing.credit_ledger"
                                   " WHERE grant_id = 'g2' AND entry = 'grant'"),
                     250);
    ck_assert_int_eq(query_long(c, "SELECT amount_minor FROM billing.credit_ledger"
                                   " WHERE grant_id = 'g3' AND entry = 'grant'"),
                     7);
    /* Again: nothing to add. */
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(total_changed(&k), 0);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.credit_ledger"), 3);
    drop_db(c);
}
END_TEST
/*
 * Parties (issue 27): the issuer of the price book (with its PNG logo,
 * named relative to the book) and the accounts' names, e-mail, address,
 * tax id and language are stored and read back; a reload changes nothing;
 * a changed name or issuer field is an update, counted as changed.
 */
START_TEST(test_load_parties)
{
    static const char png[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    static const char issuer[] =
        "{\"currency\": \"CNY\", \"issuer\": {\"legal_name\": \"@ISSUER@\","
        " \"address\": \"1 Road\\nShanghai\", \"tax_id\": \"T-9\", \"contact\": \"b@x.example\","
        " \"payment_instructions\": \"Bank 1\", \"footer\": \"Thanks\", \"logo\": \"logo.png\","
        " \"payment_terms_days\": 15},\n"
        " \"versions\": [{\"id\": \"v1\", \"effective_from\": \"2026-01-01T00:00:00Z\","
        " \"rates\": [{\"meter\": \"gpu\", \"model\": \"*\", \"region\": \"*\", \"price\": "
        "\"1\"}]}]}\n";
    static const char parties[] =
        "{\"accounts\": [{\"id\": \"a1\", \"name\": \"@NAME@\", \"email\": \"a1@x.example\","
        " \"billing_address\": \"2 Street\", \"tax_id\": \"A-1\", \"language\": \"zh-Hans\","
        " \"currency\": \"CNY\", \"time_zone\": \"UTC\", \"tax_rate\": \"0\"},\n"
        " {\"id\": \"a2\", \"currency\": \"CNY\", \"time_zone\": \"UTC\", \"tax_rate\": \"0\"}]}\n";
    const char *names1[] = {"@NAME@", "\xe7\x8e\x8b\xe5\xb0\x8f\xe6\x98\x8e", NULL};
    const char *names2[] = {"@NAME@", "Wang Xiaoming", NULL};
    const char *issuer1[] = {"@ISSUER@", "Seller Co.", NULL};
    const char *issuer2[] = {"@ISSUER@", "Seller Co., Ltd.", NULL};
    char dir[] = "/tmp/itest_parties.XXXXXX";
    catalog_files cf;
    char logo[512];
    char value[512];
    bs_conn *c = migrated_db("parties");
    bs_load_counts k;
    bs_error err;
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(logo, sizeof(logo), "%s/logo.png", dir);
    f = fopen(logo, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(png, 1, sizeof(png) - 1, f), sizeof(png) - 1);
    fclose(f);
    snprintf(cf.pricebook, sizeof(cf.pricebook), "%s/pb.json", dir);
    snprintf(cf.accounts, sizeof(cf.accounts), "%s/ac.json", dir);
    write_file(cf.pricebook, issuer, issuer1);
    write_file(cf.accounts, parties, names1);
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(k.added[BS_LOAD_ISSUERS], 1);
    query_value(c,
                "SELECT name || '|' || email || '|' || billing_address || '|' || tax_id"
                " || '|' || language FROM billing.accounts WHERE id = 'a1'",
                value, sizeof(value));
    ck_assert_str_eq(value,
                     "\xe7\x8e\x8b\xe5\xb0\x8f\xe6\x98\x8e|a1@x.example|2 Street|A-1|zh-Hans");
    query_value(c,
                "SELECT coalesce(name, '-') || '|' || language FROM billing.accounts"
                " WHERE id = 'a2'",
                value, sizeof(value));
    ck_assert_str_eq(value, "-|en");
    query_value(c,
                "SELECT legal_name || '|' || address || '|' || tax_id || '|' || contact"
                " || '|' || payment_instructions || '|' || footer || '|'"
                " || encode(logo_png, 'hex') || '|' || payment_terms_days"
                " FROM billing.issuers WHERE book_id = 'book'",
                value, sizeof(value));
    ck_assert_str_eq(value, "Seller Co.|1 Road\nShanghai|T-9|b@x.example|Bank 1|Thanks|"
                            "89504e470d0a1a0a0000000d49484452|15");
    /* Again: nothing changes. */
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(total_changed(&k), 0);
    ck_assert_uint_eq(k.unchanged[BS_LOAD_ISSUERS], 1);
    /* A new name and a new legal name: updates. */
    write_file(cf.pricebook, issuer, issuer2);
    write_file(cf.accounts, parties, names2);
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(k.changed[BS_LOAD_ISSUERS], 1);
    ck_assert_uint_eq(k.changed[BS_LOAD_ACCOUNTS], 1);
    ck_assert_uint_eq(total_changed(&k), 2);
    query_value(c, "SELECT name FROM billing.accounts WHERE id = 'a1'", value, sizeof(value));
    ck_assert_str_eq(value, "Wang Xiaoming");
    query_value(c, "SELECT legal_name FROM billing.issuers", value, sizeof(value));
    ck_assert_str_eq(value, "Seller Co., Ltd.");
    unlink(logo);
    unlink(cf.pricebook);
    unlink(cf.accounts);
    rmdir(dir);
    drop_db(c);
}
END_TEST

START_TEST(test_load_idempotent)
{
    bs_conn *c = migrated_db("load");
    catalog_files cf;
    bs_load_counts k;
    bs_error err;

    write_catalog(&cf, "0.60", "0.06", "null", "10.00");
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(k.added[BS_LOAD_ACCOUNTS], 2);
    ck_assert_uint_eq(k.added[BS_LOAD_VERSIONS], 1);
    ck_assert_uint_eq(total_changed(&k), 1 + 1 + 1 + 2 + 1 + 1);
    /* Twice: nothing changes, and no row is touched. */
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(total_changed(&k), 0);
    ck_assert_uint_eq(k.unchanged[BS_LOAD_ACCOUNTS], 2);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.credit_ledger"), 1);
    ck_assert_int_eq(query_long(c, "SELECT amount_minor FROM billing.credit_ledger"), 1000);
    /* The same prices written differently are the same version. */
    write_catalog(&cf, "0.600", "0.060", "null", "10.00");
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(total_changed(&k), 0);
    /* A changed price: a new revision; the old one and its rates stay as they were. */
    write_catalog(&cf, "0.65", "0.06", "null", "10.00");
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(k.changed[BS_LOAD_VERSIONS], 1);
    ck_assert_uint_eq(total_changed(&k), 1);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.price_versions"), 2);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.rates r JOIN"
                                   " billing.price_versions v ON v.id = r.version_id"
                                   " WHERE v.revision = 1 AND r.meter = 'gpu' AND r.price = 0.60"),
                     1);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.current_price_versions v"
                                   " JOIN billing.rates r ON r.version_id = v.id"
                                   " WHERE r.meter = 'gpu' AND r.price = 0.65"),
                     1);
    /* A cancellation and a new tax rate are changes; then all is stable again. */
    write_catalog(&cf, "0.65", "0.09", "\"2026-02-10T00:00:00Z\"", "10.00");
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(k.changed[BS_LOAD_SUBSCRIPTIONS], 1);
    ck_assert_uint_eq(k.changed[BS_LOAD_ACCOUNTS], 1);
    ck_assert_uint_eq(total_changed(&k), 2);
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(total_changed(&k), 0);
    drop_db(c);
}
END_TEST

START_TEST(test_load_refuses_rewriting_history)
{
    bs_conn *c = migrated_db("load_history");
    catalog_files cf;
    bs_load_counts k;
    bs_error err;

    write_catalog(&cf, "0.60", "0.06", "\"2026-02-10T00:00:00Z\"", "10.00");
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    /* A changed grant, an un-cancelled subscription: refused, nothing loaded. */
    write_catalog(&cf, "0.70", "0.06", "\"2026-02-10T00:00:00Z\"", "20.00");
    ck_assert_int_eq(load(c, &cf, &k, &err), BS_ERR_CONSTRAINT);
    ck_assert_msg(strstr(err.message, "g1") != NULL, "%s", err.message);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.price_versions"), 1);
    write_catalog(&cf, "0.60", "0.06", "null", "10.00");
    ck_assert_int_eq(load(c, &cf, &k, &err), BS_ERR_CONSTRAINT);
    ck_assert_msg(strstr(err.message, "s1") != NULL, "%s", err.message);
    /* Invalid files never reach the database; sub-microsecond instants neither. */
    write_catalog(&cf, "-1", "0.06", "null", "10.00");
    ck_assert_int_eq(load(c, &cf, &k, &err), BS_ERR_INVALID);
    write_catalog(&cf, "0.60", "0.06", "\"2026-02-10T00:00:00.0000001Z\"", "10.00");
    ck_assert_int_eq(load(c, &cf, &k, &err), BS_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "microsecond") != NULL, "%s", err.message);
    /* The runtime role may load. */
    exec_ok(c, "GRANT billing_app TO CURRENT_USER");
    exec_ok(c, "SET ROLE billing_app");
    write_catalog(&cf, "0.60", "0.06", "\"2026-02-10T00:00:00Z\"", "10.00");
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(total_changed(&k), 0);
    unlink(cf.pricebook);
    unlink(cf.accounts);
    drop_db(c);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Guards of migration 0004 (issue 9, items 10-17)                         */
/* ---------------------------------------------------------------------- */

/* Like expect_refused, and the message must contain @text. */
static void expect_refused_saying(bs_conn *c, const char *sql, bs_status want, const char *text)
{
    bs_error err;
    bs_status st = bs_command(c, sql, 0, NULL, NULL, &err);

    ck_assert_msg(st == want, "%s: expected %s, got %s (%s)", sql, bs_strerror(want),
                  bs_strerror(st), st == BS_OK ? "accepted" : err.message);
    ck_assert_msg(strstr(err.message, text) != NULL, "%s: '%s' does not say '%s'", sql, err.message,
                  text);
}

/*
 * make_login - a login role "billing_test_<pid>_<tag>" in billing_app
 * (and, with a @password, in billing_password_login, which scripts/pg.sh
 * makes give it), its name in @role. Roles are cluster-wide: drop it with
 * drop_login; main() sweeps those of failed tests.
 */
static void make_login(bs_conn *c, const char *tag, const char *password, char *role, size_t size)
{
    char sql[SQL_MAX];
    const char *params[1];
    PGresult *res;
    bs_error err;

    snprintf(role, size, "billing_test_%ld_%s", (long)run_pid, tag);
    exec_fmt(c, "DROP ROLE IF EXISTS %s", role);
    exec_fmt(c, "CREATE ROLE %s LOGIN IN ROLE billing_app", role);
    if (password == NULL)
        return;
    exec_ok(c, "DO $$BEGIN CREATE ROLE billing_password_login NOLOGIN;"
               " EXCEPTION WHEN duplicate_object THEN NULL; END$$");
    exec_fmt(c, "GRANT billing_password_login TO %s", role);
    /* The password as a parameter of format(): never pasted into SQL. */
    snprintf(sql, sizeof(sql), "SELECT format('ALTER ROLE %%I PASSWORD %%L', '%s', $1::text)",
             role);
    params[0] = password;
    res = bs_query(c, sql, 1, params, &err);
    ck_assert_msg(res != NULL, "%s", err.message);
    exec_ok(c, PQgetvalue(res, 0, 0));
    PQclear(res);
}

static void drop_login(const char *role)
{
    bs_conn *admin = connect_db("postgres");

    exec_fmt(admin, "DROP ROLE IF EXISTS %s", role);
    bs_close(admin);
}

/* Connect to @dbname as @user (no password given here); NULL with @err on failure. */
static bs_conn *connect_as(const char *dbname, const char *user, bs_error *err)
{
    char conninfo[CONNINFO_MAX];
    bs_retry retry = {1, 10, 10};

    conninfo_for(dbname, conninfo, sizeof(conninfo));
    ck_assert_int_eq(append_kv(conninfo, sizeof(conninfo), "user", user), 0);
    return bs_connect(conninfo, &retry, err);
}

/* The value of connection keyword @key in BILLING_PG_CONNINFO, or "". */
static void base_keyword(const char *key, char *out, size_t size)
{
    PQconninfoOption *opts = PQconninfoParse(base_conninfo(), NULL);
    PQconninfoOption *o;

    ck_assert_ptr_nonnull(opts);
    out[0] = '\0';
    for (o = opts; o->keyword != NULL; o++) {
        if (strcmp(o->keyword, key) == 0 && o->val != NULL)
            snprintf(out, size, "%s", o->val);
    }
    PQconninfoFree(opts);
}

/*
 * run_billing - run the billing tool of this build with @argv (NULL
 * terminated, argv[0] ignored), its output in @out_path. Returns its exit
 * status, or -1 if it did not exit.
 */
static int run_billing(const char *const *argv, const char *out_path)
{
    const char *top = getenv("top_builddir");
    char path[512];
    pid_t pid;
    int status;
    FILE *f;

    snprintf(path, sizeof(path), "%s/billing/billing", top != NULL ? top : "..");
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        f = freopen(out_path, "w", stdout);
        if (f == NULL || dup2(fileno(stdout), 2) < 0)
            _exit(127);
        execv(path, (char *const *)argv);
        _exit(127);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Does file @path contain @text? */
static int file_says(const char *path, const char *text)
{
    char buf[8192];
    size_t n;
    FILE *f = fopen(path, "r");

    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

/*
 * Item 10: the runtime role, logged in as itself, loads a new credit grant
 * (its ledger entry takes the grant's row lock) and applies credit.
 */
START_TEST(test_runtime_login_loads_new_grant)
{
    bs_conn *c = migrated_db("app_grant");
    char role[DBNAME_MAX];
    char conninfo[CONNINFO_MAX];
    char out[256];
    const char *load_argv[] = {"billing",    "load", "--db",   conninfo, "--pricebook", NULL,
                               "--accounts", NULL,   "--book", "book",   NULL};
    catalog_files cf;
    bs_load_counts k;
    bs_error err;
    bs_conn *app;
    long id;

    make_login(c, "app", NULL, role, sizeof(role));
    app = connect_as(db_name, role, &err);
    ck_assert_msg(app != NULL, "%s", err.message);
    /* `billing load` as that login, as an operator would run it. */
    conninfo_for(db_name, conninfo, sizeof(conninfo));
    ck_assert_int_eq(append_kv(conninfo, sizeof(conninfo), "user", role), 0);
    snprintf(out, sizeof(out), "/tmp/itest_store_%ld_out.txt", (long)getpid());
    write_catalog(&cf, "0.60", "0.06", "null", "10.00");
    load_argv[5] = cf.pricebook;
    load_argv[7] = cf.accounts;
    ck_assert_msg(run_billing(load_argv, out) == 0, "billing load as %s failed", role);
    ck_assert_int_eq(query_long(c, "SELECT balance_minor FROM billing.credit_balances"), 1000);
    /* Through the store's API, the same files change nothing. */
    ck_assert_msg(load(app, &cf, &k, &err) == BS_OK, "load as %s: %s", role, err.message);
    ck_assert_uint_eq(total_changed(&k), 0);
    /* 3.00 of it pays part of a draft, which is then finalized. */
    id = draft(app, "a1", "2026-01-01");
    exec_fmt(app,
             "INSERT INTO billing.invoice_credits (invoice_id, grant_id, amount)"
             " VALUES (%ld, 'g1', 3.00)",
             id);
    exec_fmt(app,
             "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, invoice_id,"
             " effective_at) VALUES ('g1', 'apply', -300, %ld, '2026-01-31Z')",
             id);
    exec_fmt(app, "UPDATE billing.invoices SET credits = 3.00, total = 7.60 WHERE id = %ld", id);
    ck_assert_int_eq(finalize(app, id), 1);
    ck_assert_int_eq(query_long(c, "SELECT balance_minor FROM billing.credit_balances"), 700);
    bs_close(app);
    unlink(cf.pricebook);
    unlink(cf.accounts);
    unlink(out);
    drop_db(c);
    drop_login(role);
}
END_TEST

/* Item 12: no TRUNCATE or row DELETE on any partition, whoever made it. */
START_TEST(test_event_partitions_guarded)
{
    /* Months ahead of now, and whether an event is there to delete. */
    static const struct {
        const char *ahead;
        int has_event;
    } months[] = {{"0", 1}, {"7", 1}, {"8", 0}};
    bs_conn *c = migrated_db("part_guard");
    char sql[SQL_MAX];
    char name[DBNAME_MAX];
    size_t i;

    seed(c);
    /*
     * Month now+7 has an event in DEFAULT when its partition is made (the
     * move); 2001 stays there (beyond what partitions may be made for).
     */
    exec_ok(c, "INSERT INTO billing.event_ids (event_id, start_time, fingerprint)"
               " SELECT id, t, decode(md5(id), 'hex') FROM (VALUES"
               " ('d1', date_trunc('month', now()) + interval '7 months 1 day'),"
               " ('d2', date_trunc('month', now()) + interval '1 day'),"
               " ('d3', '2001-01-05Z')) v (id, t)");
    exec_ok(c, INSERT_EVENT
            "('d1', 'acct-1', 'r', 'gpu',"
            " date_trunc('month', now()) + interval '7 months 1 day',"
            " date_trunc('month', now()) + interval '7 months 2 days', 1),"
            " ('d2', 'acct-1', 'r', 'gpu', date_trunc('month', now()) + interval '1 day',"
            " date_trunc('month', now()) + interval '2 days', 1),"
            " ('d3', 'acct-1', 'r', 'gpu', '2001-01-05Z', '2001-01-06Z', 1)");
    ck_assert_int_eq(query_long(c, "SELECT billing.ensure_event_partitions((now() + interval"
                                   " '7 months')::date, (now() + interval '8 months')::date)"),
                     2);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.usage_events_default"), 1);
    expect_refused(c, "TRUNCATE billing.usage_events_default", BS_ERR_CONSTRAINT,
                   "usage_events_no_truncate");
    expect_refused(c, "DELETE FROM billing.usage_events_default", BS_ERR_CONSTRAINT,
                   "usage_events_append_only");
    /* This month's (made by the migration), and the two just made, by move and plainly. */
    for (i = 0; i < N_CASES(months); i++) {
        snprintf(sql, sizeof(sql),
                 "SELECT billing.event_partition_name((now() + interval '%s months')::date)",
                 months[i].ahead);
        query_value(c, sql, name, sizeof(name));
        snprintf(sql, sizeof(sql), "TRUNCATE billing.%s", name);
        expect_refused(c, sql, BS_ERR_CONSTRAINT, "usage_events_no_truncate");
        snprintf(sql, sizeof(sql), "DELETE FROM billing.%s", name);
        if (months[i].has_event)
            expect_refused(c, sql, BS_ERR_CONSTRAINT, "usage_events_append_only");
    }
    expect_refused(c, "DELETE FROM billing.usage_events WHERE event_id = 'd2'", BS_ERR_CONSTRAINT,
                   "usage_events_append_only");
    /* The partition move's marker is no way around it for anyone but the function. */
    exec_ok(c, "SET billing.partition_move = 'on'");
    expect_refused(c, "DELETE FROM billing.usage_events", BS_ERR_CONSTRAINT,
                   "usage_events_append_only");
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.usage_events"), 3);
    drop_db(c);
}
END_TEST

/*
 * The ledger's balance rules hold entry by entry within one statement, in
 * insertion order: a statement whose final balance is fine is still
 * refused when an entry before the last takes the balance below zero or
 * reverses what was not yet taken; a grant's opening entry counts for the
 * entries after it in the same statement; and a concurrent writer of the
 * same grant waits, then sees the entries committed before it. (Kept from
 * branch h57, whose statement-level version of credit_ledger_balance did
 * not land: it passes on the row trigger and failed there with the running
 * sums or the grants' lock mutated.)
 */
#define LEDGER_COLS                                                                 \
    "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, invoice_id," \
    " effective_at) VALUES "
START_TEST(test_ledger_balance_once)
{
    char sql[SQL_MAX];
    long mine;
    long theirs;
    bs_conn *c = migrated_db("ledger_once");
    bs_conn *other;

    seed(c);
    exec_ok(c, "INSERT INTO billing.accounts (id, currency) VALUES ('acct-2', 'CNY')");
    exec_ok(c, GRANT_COLS "('g1', 'acct-1', 'CNY', " GRANT_TIMES);
    exec_ok(c, LEDGER_COLS "('g1', 'grant', 1000, NULL, '2026-01-01Z')");
    mine = draft(c, "acct-1", "2026-01-01");
    theirs = draft(c, "acct-2", "2026-01-01");
    /* Down to -500 and back to 1000: the first entry is refused. */
    snprintf(sql, sizeof(sql),
             LEDGER_COLS "('g1', 'apply', -1500, %ld, '2026-01-31Z'),"
                         " ('g1', 'reverse', 1500, %ld, '2026-01-31Z')",
             mine, mine);
    expect_refused(c, sql, BS_ERR_CONSTRAINT, "credit_ledger_nonnegative_balance");
    /* A reverse before the apply it would give back. */
    snprintf(sql, sizeof(sql),
             LEDGER_COLS "('g1', 'reverse', 300, %ld, '2026-01-31Z'),"
                         " ('g1', 'apply', -300, %ld, '2026-01-31Z')",
             mine, mine);
    expect_refused(c, sql, BS_ERR_CONSTRAINT, "credit_ledger_reverse_applied");
    /* A good entry, then another account's invoice. */
    snprintf(sql, sizeof(sql),
             LEDGER_COLS "('g1', 'apply', -100, %ld, '2026-01-31Z'),"
                         " ('g1', 'apply', -100, %ld, '2026-01-31Z')",
             mine, theirs);
    expect_refused(c, sql, BS_ERR_CONSTRAINT, "credit_ledger_invoice_account");
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.credit_ledger"), 1);
    /* The other order passes: taken, then given back. */
    snprintf(sql, sizeof(sql),
             LEDGER_COLS "('g1', 'apply', -1000, %ld, '2026-01-31Z'),"
                         " ('g1', 'reverse', 1000, %ld, '2026-01-31Z')",
             mine, mine);
    exec_ok(c, sql);
    /* An opening entry counts for the entries after it, not before. */
    exec_ok(c, GRANT_COLS "('g2', 'acct-1', 'CNY', " GRANT_TIMES);
    expect_refused(c,
                   LEDGER_COLS "('g2', 'expire', -1000, NULL, '2026-03-01Z'),"
                               " ('g2', 'grant', 1000, NULL, '2026-01-01Z')",
                   BS_ERR_CONSTRAINT, "credit_ledger_nonnegative_balance");
    exec_ok(c, LEDGER_COLS "('g2', 'grant', 1000, NULL, '2026-01-01Z'),"
                           " ('g2', 'expire', -1000, NULL, '2026-03-01Z')");
    ck_assert_int_eq(
        query_long(c, "SELECT balance_minor FROM billing.credit_balances WHERE grant_id = 'g2'"),
        0);
    /*
     * Concurrent writers of one grant (another session, which gives up
     * after 300 ms): the second waits for the first, then sees its entry.
     */
    other = connect_db(db_name);
    exec_ok(other, "SET lock_timeout = '300ms'");
    exec_ok(c, "BEGIN");
    snprintf(sql, sizeof(sql), LEDGER_COLS "('g1', 'apply', -600, %ld, '2026-01-31Z')", mine);
    exec_ok(c, sql);
    expect_lock_wait(other, sql);
    exec_ok(c, "COMMIT");
    expect_refused(other, sql, BS_ERR_CONSTRAINT, "credit_ledger_nonnegative_balance");
    snprintf(sql, sizeof(sql), LEDGER_COLS "('g1', 'apply', -400, %ld, '2026-01-31Z')", mine);
    exec_ok(other, sql);
    ck_assert_int_eq(
        query_long(c, "SELECT balance_minor FROM billing.credit_balances WHERE grant_id = 'g1'"),
        0);
    bs_close(other);
    drop_db(c);
}
END_TEST

/*
 * Item 13: the ledger and invoice invariants hold against direct writes,
 * for the runtime role and for the tables' owner alike.
 */
START_TEST(test_ledger_and_numbering_invariants)
{
    bs_conn *c = migrated_db("ledger_guard");
    char sql[SQL_MAX];
    long mine;
    long theirs;
    int as_app;

    seed(c);
    exec_ok(c, "INSERT INTO billing.accounts (id, currency) VALUES ('acct-2', 'CNY')");
    exec_ok(c, "INSERT INTO billing.credit_grants (id, account_id, currency, amount, granted_at,"
               " expires_at) VALUES ('g1', 'acct-1', 'CNY', 1000, '2026-01-01Z', '2026-03-01Z')");
    exec_ok(c, "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, effective_at)"
               " VALUES ('g1', 'grant', 100000, '2026-01-01Z')");
    mine = draft(c, "acct-1", "2026-01-01");
    theirs = draft(c, "acct-2", "2026-01-01");
    exec_ok(c, "GRANT billing_app TO CURRENT_USER");
    for (as_app = 0; as_app <= 1; as_app++) {
        if (as_app)
            exec_ok(c, "SET ROLE billing_app");
        /* acct-1's grant never pays acct-2's invoice. */
        snprintf(sql, sizeof(sql),
                 "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, invoice_id,"
                 " effective_at) VALUES ('g1', 'apply', -100, %ld, '2026-01-31Z')",
                 theirs);
        expect_refused(c, sql, BS_ERR_CONSTRAINT, "credit_ledger_invoice_account");
        snprintf(sql, sizeof(sql),
                 "INSERT INTO billing.invoice_credits (invoice_id, grant_id, amount)"
                 " VALUES (%ld, 'g1', 1.00)",
                 theirs);
        expect_refused(c, sql, BS_ERR_CONSTRAINT, "invoice_credits_grant_account");
        /* A reverse returns at most what was applied: never above the grant. */
        snprintf(sql, sizeof(sql),
                 "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, invoice_id,"
                 " effective_at) VALUES ('g1', 'reverse', 100000000, %ld, '2026-01-31Z')",
                 mine);
        expect_refused(c, sql, BS_ERR_CONSTRAINT, "credit_ledger_reverse_applied");
    }
    exec_ok(c, "RESET ROLE");
    snprintf(sql, sizeof(sql),
             "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, invoice_id,"
             " effective_at) VALUES ('g1', 'apply', -300, %ld, '2026-01-31Z')",
             mine);
    exec_ok(c, sql);
    snprintf(sql, sizeof(sql),
             "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, invoice_id,"
             " effective_at) VALUES ('g1', 'reverse', 300, %ld, '2026-02-01Z')",
             mine);
    exec_ok(c, sql);
    snprintf(sql, sizeof(sql),
             "INSERT INTO billing.credit_ledger (grant_id, entry, amount_minor, invoice_id,"
             " effective_at) VALUES ('g1', 'reverse', 1, %ld, '2026-02-01Z')",
             mine);
    expect_refused(c, sql, BS_ERR_CONSTRAINT, "credit_ledger_reverse_applied");
    ck_assert_int_eq(query_long(c, "SELECT balance_minor FROM billing.credit_balances"), 100000);
    /* A number taken by hand is a gap: refused when the transaction commits. */
    expect_refused(c,
                   "UPDATE billing.invoice_series SET next_number = next_number + 1"
                   " WHERE series = 'INV'",
                   BS_ERR_CONSTRAINT, "invoice_series_number_used");
    /* Finalizing by UPDATE, with a number properly taken, still checks the lines. */
    snprintf(sql, sizeof(sql),
             "UPDATE billing.invoices SET subtotal = 11, total = 11.60"
             " WHERE id = %ld",
             mine);
    exec_ok(c, sql);
    snprintf(sql, sizeof(sql),
             "DO $$BEGIN UPDATE billing.invoice_series SET next_number = next_number + 1"
             " WHERE series = 'INV'; UPDATE billing.invoices SET status = 'finalized', number = 1,"
             " finalized_at = now() WHERE id = %ld; END$$",
             mine);
    expect_refused(c, sql, BS_ERR_CONSTRAINT, "invoices_lines_reconcile");
    ck_assert_int_eq(query_long(c, "SELECT next_number FROM billing.invoice_series"
                                   " WHERE series = 'INV'"),
                     1);
    ck_assert_int_eq(finalize(c, theirs), 1);
    drop_db(c);
}
END_TEST

/* Item 14: a recorded version missing below the current one is refused everywhere. */
START_TEST(test_schema_gap_refused)
{
    bs_conn *c = migrated_db("schema_gap");
    char conninfo[CONNINFO_MAX];
    char out[256];
    const char *status_argv[] = {"billing", "db", "status", "--db", conninfo, NULL};
    const char *migrate_argv[] = {"billing", "db", "migrate", "--db", conninfo, NULL};
    const char *load_argv[] = {"billing", "load", "--db", conninfo, "--pricebook", NULL, NULL};
    bs_schema_status *st;
    catalog_files cf;
    bs_error err;

    /* Only the maintenance path (migration 0010) can remove a recorded version. */
    exec_ok(c, "SET billing.maintenance = on");
    exec_ok(c, "DELETE FROM billing.schema_version WHERE version = 2");
    exec_ok(c, "RESET billing.maintenance");
    ck_assert_int_eq(bs_schema_inspect(c, &st, &err), BS_OK);
    ck_assert_int_eq(st->gaps, 1);
    bs_schema_status_free(st);
    ck_assert_int_eq(bs_schema_require(c, &err), BS_ERR_SCHEMA);
    ck_assert_msg(strstr(err.message, "gap") != NULL, "%s", err.message);
    ck_assert_int_eq(bs_migrate(c, 0, NULL, NULL, NULL, &err), BS_ERR_SCHEMA);
    /* The tool: status, migrate and load all refuse (exit 5). */
    conninfo_for(db_name, conninfo, sizeof(conninfo));
    snprintf(out, sizeof(out), "/tmp/itest_store_%ld_out.txt", (long)getpid());
    ck_assert_int_eq(run_billing(status_argv, out), 5);
    ck_assert_msg(file_says(out, "MISSING"), "db status does not show the gap");
    ck_assert_int_eq(run_billing(migrate_argv, out), 5);
    write_catalog(&cf, "0.60", "0.06", "null", "10.00");
    load_argv[5] = cf.pricebook;
    ck_assert_int_eq(run_billing(load_argv, out), 5);
    ck_assert_msg(file_says(out, "gap"), "billing load does not name the gap");
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.price_books"), 0);
    unlink(cf.pricebook);
    unlink(cf.accounts);
    unlink(out);
    drop_db(c);
}
END_TEST

/* Item 15: what the runtime role may make partitions for is bounded. */
START_TEST(test_event_partitions_bounded)
{
    static const char *const refused[] = {
        "SELECT billing.ensure_event_partitions('0001-01-01', '0010-12-01')",
        "SELECT billing.ensure_event_partitions(now()::date, (now() + interval '12 months')::date)",
        "SELECT billing.ensure_event_partitions((now() + interval '13 months')::date,"
        " (now() + interval '13 months')::date)",
        "SELECT billing.ensure_event_partitions((now() - interval '121 months')::date,"
        " (now() - interval '121 months')::date)",
    };
    bs_conn *c = migrated_db("part_bound");
    long before;
    size_t i;

    before = query_long(c, "SELECT count(*) FROM pg_inherits"
                           " WHERE inhparent = 'billing.usage_events'::regclass");
    exec_ok(c, "GRANT billing_app TO CURRENT_USER");
    exec_ok(c, "SET ROLE billing_app");
    for (i = 0; i < N_CASES(refused); i++)
        expect_refused_saying(c, refused[i], BS_ERR_FATAL, "at most 12 months");
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM pg_inherits"
                                   " WHERE inhparent = 'billing.usage_events'::regclass"),
                     before);
    /* Within the bounds it works: months 4..12 ahead (the migration made -1..3). */
    ck_assert_int_eq(query_long(c, "SELECT billing.ensure_event_partitions("
                                   "(now() + interval '4 months')::date,"
                                   " (now() + interval '12 months')::date)"),
                     9);
    drop_db(c);
}
END_TEST

/* Item 16: the database refuses host-dependent zone names too. */
START_TEST(test_time_zone_host_dependent)
{
    static const char *const zones[] = {"Factory", "localtime", "posixrules", "posix/Asia/Shanghai",
                                        "right/UTC"};
    bs_conn *c = migrated_db("zones");
    char sql[SQL_MAX];
    bs_error err;
    int added = -1;
    size_t i;

    exec_ok(c, "INSERT INTO billing.accounts (id, currency, time_zone)"
               " VALUES ('a1', 'CNY', 'Asia/Shanghai')");
    for (i = 0; i < N_CASES(zones); i++) {
        snprintf(sql, sizeof(sql),
                 "INSERT INTO billing.accounts (id, currency, time_zone)"
                 " VALUES ('a2', 'CNY', '%s')",
                 zones[i]);
        expect_refused(c, sql, BS_ERR_CONSTRAINT, "accounts_time_zone_known");
        snprintf(sql, sizeof(sql), "UPDATE billing.accounts SET time_zone = '%s'", zones[i]);
        expect_refused(c, sql, BS_ERR_CONSTRAINT, "accounts_time_zone_known");
    }
    /* A name the table lacks (as after a tzdata update) comes back with the refresh. */
    exec_ok(c, "DELETE FROM billing.time_zone_names WHERE name = 'America/Argentina/Salta'");
    expect_refused(c, "UPDATE billing.accounts SET time_zone = 'America/Argentina/Salta'",
                   BS_ERR_CONSTRAINT, "accounts_time_zone_known");
    ck_assert_int_eq(bs_time_zones_refresh(c, &added, &err), BS_OK);
    ck_assert_int_eq(added, 1);
    exec_ok(c, "UPDATE billing.accounts SET time_zone = 'America/Argentina/Salta'");
    drop_db(c);
}
END_TEST

/* Write @text to a new file @path readable by its owner only (libpq wants that of .pgpass). */
static void write_private(const char *path, const char *text)
{
    FILE *f;

    unlink(path);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(chmod(path, 0600), 0);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
}

/*
 * Item 17: a login with a password reaches the store through
 * PGPASSFILE, PGPASSWORD or a service file; `--db` is optional.
 */
START_TEST(test_password_sources)
{
    bs_conn *c = migrated_db("passwords");
    char role[DBNAME_MAX];
    char password[64];
    char pgpass[256];
    char service[256];
    char out[256];
    char text[1024];
    char host[512];
    char port[16];
    const char *status_argv[] = {"billing", "db", "status", NULL};
    const char *status_db_argv[] = {"billing", "db", "status", "--db", "service=billing_itest",
                                    NULL};
    char base[CONNINFO_MAX];
    bs_error err;
    bs_conn *app;
    int rc;

    snprintf(password, sizeof(password), "pw-%ld-%d", (long)run_pid, (int)getpid());
    make_login(c, "pw", password, role, sizeof(role));
    snprintf(pgpass, sizeof(pgpass), "/tmp/itest_store_%ld.pgpass", (long)getpid());
    snprintf(service, sizeof(service), "/tmp/itest_store_%ld.service", (long)getpid());
    snprintf(out, sizeof(out), "/tmp/itest_store_%ld_out.txt", (long)getpid());
    unsetenv("PGPASSWORD");
    unsetenv("PGSERVICE");
    setenv("PGPASSFILE", "/nonexistent/pgpass", 1);
    /* Without a password the server refuses: the test cluster really checks. */
    app = connect_as(db_name, role, &err);
    ck_assert_msg(app == NULL,
                  "%s connected without a password: is pg_hba.conf from "
                  "scripts/pg.sh start?",
                  role);
    ck_assert_msg(strstr(err.message, "password") != NULL, "%s", err.message);
    /* A password file. */
    snprintf(text, sizeof(text), "*:*:*:%s:%s\n", role, password);
    write_private(pgpass, text);
    setenv("PGPASSFILE", pgpass, 1);
    app = connect_as(db_name, role, &err);
    ck_assert_msg(app != NULL, "PGPASSFILE: %s", err.message);
    bs_close(app);
    /* PGPASSWORD. */
    setenv("PGPASSFILE", "/nonexistent/pgpass", 1);
    setenv("PGPASSWORD", password, 1);
    app = connect_as(db_name, role, &err);
    ck_assert_msg(app != NULL, "PGPASSWORD: %s", err.message);
    bs_close(app);
    unsetenv("PGPASSWORD");
    /* A service file naming everything but the password, which comes from PGPASSFILE. */
    base_keyword("host", host, sizeof(host));
    base_keyword("port", port, sizeof(port));
    snprintf(text, sizeof(text), "[billing_itest]\nhost=%s\nport=%s\ndbname=%s\nuser=%s\n", host,
             port[0] != '\0' ? port : "5432", db_name, role);
    write_private(service, text);
    setenv("PGSERVICEFILE", service, 1);
    setenv("PGPASSFILE", pgpass, 1);
    app = bs_connect("service=billing_itest", NULL, &err);
    ck_assert_msg(app != NULL, "service file: %s", err.message);
    query_value(app, "SELECT current_user", text, sizeof(text));
    ck_assert_str_eq(text, role);
    bs_close(app);
    /* The tool: with --db naming the service, and with no --db at all. */
    ck_assert_int_eq(run_billing(status_db_argv, out), 0);
    ck_assert_msg(file_says(out, db_name), "db status --db service=...: wrong database");
    snprintf(base, sizeof(base), "%s", base_conninfo());
    unsetenv("BILLING_PG_CONNINFO");
    setenv("PGSERVICE", "billing_itest", 1);
    rc = run_billing(status_argv, out);
    unsetenv("PGSERVICE");
    setenv("BILLING_PG_CONNINFO", base, 1);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(file_says(out, "up to date"), "db status without --db");
    ck_assert_msg(file_says(out, db_name), "db status without --db: wrong database");
    unlink(pgpass);
    unlink(service);
    unlink(out);
    drop_db(c);
    drop_login(role);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Issue 23, items 11-13                                                   */
/* ---------------------------------------------------------------------- */

/*
 * The line of file @path that contains @text, from @from on (the part
 * after the program's own prefix), into @out; asserts there is one.
 */
static void message_from(const char *path, const char *text, const char *from, char *out,
                         size_t size)
{
    char buf[8192];
    char *at;
    char *start;
    size_t n;
    FILE *f = fopen(path, "r");

    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    at = strstr(buf, text);
    ck_assert_msg(at != NULL, "no '%s' in: %s", text, buf);
    while (at > buf && at[-1] != '\n')
        at--;
    start = strstr(at, from);
    ck_assert_msg(start != NULL, "no '%s' in: %s", from, at);
    n = strcspn(start, "\n");
    ck_assert_uint_lt(n, size);
    memcpy(out, start, n);
    out[n] = '\0';
}

/*
 * Item 11: `billing rate` billed catalogs with instants finer than the
 * microsecond that `billing load` then refused (the store keeps
 * microseconds), with a message naming neither the file nor the element.
 * Now both refuse, with one message naming file, element and field: a
 * subscription's cancellation (the element-by-element reader's slow
 * path), a grant's start (its fast path), a price version's start.
 */
START_TEST(test_catalog_precision_one_rule)
{
    static const char events[] =
        "{\"id\":\"e1\",\"account\":\"a1\",\"resource\":\"r\",\"meter\":\"gpu\","
        "\"start\":\"2026-01-05T00:00:00Z\",\"end\":\"2026-01-05T01:00:00Z\",\"quantity\":\"1\","
        "\"model\":\"RTX4090\",\"region\":\"r1\"}\n";
    static const char grant_tmpl[] =
        "{\"accounts\": [{\"id\": \"a1\", \"currency\": \"CNY\", \"time_zone\": \"UTC\","
        " \"tax_rate\": \"0\"}],\n"
        " \"grants\": [{\"id\": \"g1\", \"account\": \"a1\", \"amount\": \"1\","
        " \"granted_at\": \"2026-01-02T10:00:00.000000001Z\","
        " \"expires_at\": \"2026-02-01T10:00:00Z\", \"applies_to\": [\"usage\"]}]}\n";
    static const struct {
        const char *file;  /* which file is bad: 'p'rice book or 'a'ccounts */
        const char *where; /* the message names it */
        const char *value;
    } cases[] = {
        {"a", "subscriptions[0].cancelled_at", "2026-11-10T03:44:28.58978158Z"},
        {"g", "grants[0].granted_at", "2026-01-02T10:00:00.000000001Z"},
        {"p", "versions[0].effective_from", "2026-01-01T00:00:00.0000005+08:00"},
    };
    bs_conn *c = migrated_db("precision");
    const char *none[] = {NULL};
    char conninfo[CONNINFO_MAX];
    char ev_path[256];
    char rate_out[256];
    char load_out[256];
    char rate_msg[1024];
    char load_msg[1024];
    char quoted[128];
    const char *rate_argv[] = {"billing",    "rate", "--pricebook", NULL,
                               "--accounts", NULL,   NULL,          NULL};
    const char *load_argv[] = {"billing",    "load", "--db",   conninfo, "--pricebook", NULL,
                               "--accounts", NULL,   "--book", "book",   NULL};
    catalog_files cf;
    size_t i;

    conninfo_for(db_name, conninfo, sizeof(conninfo));
    snprintf(ev_path, sizeof(ev_path), "/tmp/itest_store_%ld_events.jsonl", (long)getpid());
    snprintf(rate_out, sizeof(rate_out), "/tmp/itest_store_%ld_rate.txt", (long)getpid());
    snprintf(load_out, sizeof(load_out), "/tmp/itest_store_%ld_load.txt", (long)getpid());
    write_file(ev_path, events, none);
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char cancel[96];
        const char *path;

        snprintf(cancel, sizeof(cancel), "\"%s\"", cases[i].value);
        write_catalog(&cf, "0.60", "0", cases[i].file[0] == 'a' ? cancel : "null", "10.00");
        if (cases[i].file[0] == 'g')
            write_file(cf.accounts, grant_tmpl, none);
        if (cases[i].file[0] == 'p') {
            const char *pb[] = {"@PRICE@", "0.60", "2026-01-01T00:00:00+08:00", cases[i].value,
                                NULL};

            write_file(cf.pricebook, pricebook_json, pb);
        }
        path = cases[i].file[0] == 'p' ? cf.pricebook : cf.accounts;
        rate_argv[3] = cf.pricebook;
        rate_argv[5] = cf.accounts;
        rate_argv[6] = ev_path;
        load_argv[5] = cf.pricebook;
        load_argv[7] = cf.accounts;
        ck_assert_int_eq(run_billing(rate_argv, rate_out), 3);
        ck_assert_int_eq(run_billing(load_argv, load_out), 3);
        message_from(rate_out, "finer than a microsecond", path, rate_msg, sizeof(rate_msg));
        message_from(load_out, "finer than a microsecond", path, load_msg, sizeof(load_msg));
        ck_assert_str_eq(rate_msg, load_msg);
        ck_assert_msg(strstr(rate_msg, cases[i].where) != NULL, "%s", rate_msg);
        snprintf(quoted, sizeof(quoted), "'%s'", cases[i].value);
        ck_assert_msg(strstr(rate_msg, quoted) != NULL, "%s", rate_msg);
    }
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.price_versions"), 0);
    /* Nanosecond digits that are whole microseconds are fine on both paths. */
    write_catalog(&cf, "0.60", "0", "\"2026-02-10T00:00:00.123456000Z\"", "10.00");
    rate_argv[6] = ev_path;
    ck_assert_int_eq(run_billing(rate_argv, rate_out), 0);
    ck_assert_int_eq(run_billing(load_argv, load_out), 0);
    ck_assert_int_eq(query_long(c, "SELECT extract(microseconds FROM cancelled_at)::bigint"
                                   " % 1000000 FROM billing.subscriptions"),
                     123456);
    unlink(cf.pricebook);
    unlink(cf.accounts);
    unlink(ev_path);
    unlink(rate_out);
    unlink(load_out);
    drop_db(c);
}
END_TEST

/* A migrated database with the test catalog, a dead letter, a Kafka position, an aggregate. */
static bs_conn *history_db(const char *tag, catalog_files *cf)
{
    bs_conn *c = migrated_db(tag);
    bs_load_counts k;
    bs_error err;

    write_catalog(cf, "0.60", "0.06", "null", "10.00");
    ck_assert_msg(load(c, cf, &k, &err) == BS_OK, "%s", err.message);
    exec_ok(c, "INSERT INTO billing.rejected_events (source, reason_code, reason, payload)"
               " VALUES ('file:x:1', 'invalid', 'test', '\\x00')");
    exec_ok(c, "INSERT INTO billing.kafka_offsets (consumer_group, topic, partition, next_offset)"
               " VALUES ('g', 't', 0, 42)");
    exec_ok(c, "INSERT INTO billing.usage_aggregates (account_id, month, meter, rate_kind)"
               " VALUES ('a1', '2026-01-01', 'traffic', 'zero')");
    return c;
}

/*
 * Item 13: as billing_owner (any migrator) TRUNCATE passed on rates,
 * rejected_events, schema_version, usage_aggregates and kafka_offsets, and
 * DELETE on rejected_events: TRUNCATE billing.rates then a close billed
 * drafts at 0.00. Since 0010 every table of the schema refuses TRUNCATE,
 * and history refuses DELETE, for the owner and superusers alike; only a
 * superuser that sets billing.maintenance = on passes the new guards.
 */
START_TEST(test_history_refuses_truncate_and_delete)
{
    static const refusal deletes[] = {
        {"DELETE FROM billing.rejected_events", BS_ERR_CONSTRAINT, "rejected_events_no_delete"},
        {"DELETE FROM billing.kafka_offsets", BS_ERR_CONSTRAINT, "kafka_offsets_no_delete"},
        {"DELETE FROM billing.usage_aggregates", BS_ERR_CONSTRAINT, "usage_aggregates_no_delete"},
        {"DELETE FROM billing.schema_version WHERE version = 1", BS_ERR_CONSTRAINT,
         "schema_version_append_only"},
        {"UPDATE billing.schema_version SET checksum = md5('x')", BS_ERR_CONSTRAINT,
         "schema_version_append_only"},
        {"DELETE FROM billing.accounts WHERE id = 'a2'", BS_ERR_CONSTRAINT, "accounts_no_delete"},
        {"UPDATE billing.price_books SET rounding = 'down'", BS_ERR_CONSTRAINT,
         "price_books_append_only"},
        {"TRUNCATE billing.rates", BS_ERR_CONSTRAINT, "rates_no_truncate"},
        {"TRUNCATE billing.rejected_events", BS_ERR_CONSTRAINT, "rejected_events_no_truncate"},
        {"TRUNCATE billing.schema_version", BS_ERR_CONSTRAINT, "schema_version_no_truncate"},
        {"TRUNCATE billing.usage_aggregates", BS_ERR_CONSTRAINT, "usage_aggregates_no_truncate"},
        {"TRUNCATE billing.kafka_offsets", BS_ERR_CONSTRAINT, "kafka_offsets_no_truncate"},
        {"TRUNCATE billing.plan_fees", BS_ERR_CONSTRAINT, "plan_fees_no_truncate"},
        {"TRUNCATE billing.invoice_returned_credits", BS_ERR_CONSTRAINT,
         "invoice_returned_credits_no_truncate"},
    };
    static const char *const roles[] = {"RESET ROLE", "SET ROLE billing_owner"};
    catalog_files cf;
    bs_conn *c = history_db("history", &cf);
    PGresult *res;
    bs_error err;
    char sql[SQL_MAX];
    size_t r;
    int i;

    for (r = 0; r < sizeof(roles) / sizeof(roles[0]); r++) {
        exec_ok(c, roles[r]);
        expect_all_refused(c, deletes, sizeof(deletes) / sizeof(deletes[0]));
        /* Every table, whatever references it: CASCADE reaches a guard every time. */
        res = bs_query(c,
                       "SELECT c.relname FROM pg_class c JOIN pg_namespace n"
                       " ON n.oid = c.relnamespace WHERE n.nspname = 'billing'"
                       " AND c.relkind IN ('r', 'p') ORDER BY 1",
                       0, NULL, &err);
        ck_assert_msg(res != NULL, "%s", err.message);
        ck_assert_int_ge(PQntuples(res), 20);
        for (i = 0; i < PQntuples(res); i++) {
            snprintf(sql, sizeof(sql), "TRUNCATE billing.%s CASCADE", PQgetvalue(res, i, 0));
            expect_refused(c, sql, BS_ERR_CONSTRAINT, NULL);
        }
        PQclear(res);
        /* Setting the variable does nothing for a role that is not a superuser. */
        if (r == 1) {
            exec_ok(c, "SET billing.maintenance = on");
            expect_all_refused(c, deletes, sizeof(deletes) / sizeof(deletes[0]));
            exec_ok(c, "RESET billing.maintenance");
        }
    }
    exec_ok(c, "RESET ROLE");
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.rejected_events"), 1);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.rates"), 2);
    /* The maintenance path: a superuser purges dead letters in one transaction. */
    exec_ok(c, "BEGIN");
    exec_ok(c, "SET LOCAL billing.maintenance = on");
    exec_ok(c, "DELETE FROM billing.rejected_events");
    exec_ok(c, "COMMIT");
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.rejected_events"), 0);
    expect_refused(c, "TRUNCATE billing.kafka_offsets", BS_ERR_CONSTRAINT,
                   "kafka_offsets_no_truncate");
    unlink(cf.pricebook);
    unlink(cf.accounts);
    drop_db(c);
}
END_TEST

/*
 * Item 13: credit returned on a finalized invoice could be deleted or
 * changed (0005 gave invoice_returned_credits no draft guard); now it
 * changes only while its invoice is a draft, like lines and credits.
 */
START_TEST(test_returned_credits_frozen_when_finalized)
{
    catalog_files cf;
    bs_conn *c = history_db("returned_frozen", &cf);
    long id = draft(c, "a1", "2026-01-01");

    exec_fmt(c,
             "INSERT INTO billing.invoice_returned_credits (invoice_id, grant_id, amount)"
             " VALUES (%ld, 'g1', 1.00)",
             id);
    exec_fmt(c, "UPDATE billing.invoices SET returned = 1.00, total = 11.60 WHERE id = %ld", id);
    ck_assert_int_eq(finalize(c, id), 1);
    expect_refused(c, "DELETE FROM billing.invoice_returned_credits", BS_ERR_CONSTRAINT,
                   "invoices_finalized_immutable");
    expect_refused(c, "UPDATE billing.invoice_returned_credits SET amount = 2.00",
                   BS_ERR_CONSTRAINT, "invoices_finalized_immutable");
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.invoice_returned_credits"), 1);
    unlink(cf.pricebook);
    unlink(cf.accounts);
    drop_db(c);
}
END_TEST

/*
 * Item 13: `billing load` trusted the content hash recorded with a price
 * version: with its rates gone (TRUNCATE billing.rates, then possible),
 * a reload of the same files said "0 changed" and the close went on
 * billing at 0.00. It now compares the stored rows, and repairs a
 * version that differs from its file with a new revision.
 */
START_TEST(test_load_repairs_lost_rates)
{
    catalog_files cf;
    bs_conn *c = history_db("load_repair", &cf);
    bs_load_counts k;
    bs_error err;

    /* Lost through the maintenance path (before 0010: any owner's TRUNCATE). */
    exec_ok(c, "BEGIN");
    exec_ok(c, "SET LOCAL billing.maintenance = on");
    exec_ok(c, "TRUNCATE billing.rates");
    exec_ok(c, "COMMIT");
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.rates"), 0);
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(k.changed[BS_LOAD_VERSIONS], 1);
    ck_assert_uint_eq(total_changed(&k), 1);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.current_price_versions v"
                                   " JOIN billing.rates r ON r.version_id = v.id"),
                     2);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.current_price_versions v"
                                   " JOIN billing.plan_fees f ON f.version_id = v.id"),
                     1);
    /* Repaired: stable again. */
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(total_changed(&k), 0);
    /* A rate added by hand to the version in force (the runtime role may insert rates). */
    exec_ok(c, "INSERT INTO billing.rates (version_id, meter, model, region, price)"
               " SELECT id, 'storage', '*', '*', 9 FROM billing.current_price_versions");
    ck_assert_msg(load(c, &cf, &k, &err) == BS_OK, "%s", err.message);
    ck_assert_uint_eq(k.changed[BS_LOAD_VERSIONS], 1);
    ck_assert_int_eq(query_long(c, "SELECT count(*) FROM billing.current_price_versions v"
                                   " JOIN billing.rates r ON r.version_id = v.id"),
                     2);
    ck_assert_int_eq(query_long(c, "SELECT max(revision) FROM billing.price_versions"), 3);
    unlink(cf.pricebook);
    unlink(cf.accounts);
    drop_db(c);
}
END_TEST

/* The text of @rel under the source tree (top_srcdir), malloc'd; asserts it is read. */
static char *source_text(const char *rel)
{
    const char *top = getenv("top_srcdir");
    char path[512];
    char *text;
    size_t n;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", top != NULL ? top : "..", rel);
    f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: cannot open", path);
    text = malloc(1 << 20);
    ck_assert_ptr_nonnull(text);
    n = fread(text, 1, (1 << 20) - 1, f);
    ck_assert_msg(feof(f), "%s: larger than 1 MiB", path);
    fclose(f);
    text[n] = '\0';
    return text;
}

/* Does the schema define @name: constraint, trigger, table, index, column, or guard's name? */
static int schema_names(bs_conn *c, const char *name)
{
    const char *params[1];
    PGresult *res;
    bs_error err;
    int found;

    params[0] = name;
    res = bs_query(c,
                   "SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = $1)"
                   " OR EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = $1 AND NOT tgisinternal)"
                   " OR EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n"
                   "  ON n.oid = c.relnamespace WHERE n.nspname = 'billing' AND c.relname = $1)"
                   " OR EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
                   "  JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'billing'"
                   "  AND a.attname = $1 AND a.attnum > 0 AND NOT a.attisdropped)"
                   " OR EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n"
                   "  ON n.oid = p.pronamespace WHERE n.nspname = 'billing'"
                   "  AND (p.proname = $1 OR strpos(p.prosrc, quote_literal($1)) > 0))",
                   1, params, &err);
    ck_assert_msg(res != NULL, "%s", err.message);
    found = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return found;
}

/* What check_doc_table looks at, and what it counted. */
typedef struct doc_check {
    bs_conn *c;
    const char *events_c; /* store/events.c: the batch checks of bs_events_ingest */
    const char *tests_c;  /* this file */
    int names;
    int tests;
} doc_check;

/* Backquoted @token of cell @col: a schema name if @col is @name_col, a test if @test_col. */
static void check_doc_token(doc_check *dc, const char *token, int col, int name_col, int test_col)
{
    char want[160];

    /* Names only: not "_delete" (a suffix), "usage_events_*_length", "bs_error.constraint". */
    if (token[strspn(token, "abcdefghijklmnopqrstuvwxyz0123456789_")] != '\0' ||
        strchr(token, '_') == NULL || token[0] == '_')
        return;
    if (col == name_col) {
        ck_assert_msg(schema_names(dc->c, token) || strstr(dc->events_c, token) != NULL,
                      "doc/database.md names '%s', which the schema after migration %zu "
                      "does not have",
                      token, bs_migration_count);
        dc->names++;
    } else if (col == test_col && strncmp(token, "test_", 5) == 0) {
        snprintf(want, sizeof(want), "START_TEST(%s)", token);
        ck_assert_msg(strstr(dc->tests_c, want) != NULL,
                      "doc/database.md names test '%s', which tests/itest_store.c does not have",
                      token);
        dc->tests++;
    }
}

/*
 * The table (rows "| a | b | c |") under heading @heading of @doc (which
 * is modified): backquoted names in cell @name_col (0-based) must exist
 * in the schema, tests in cell @test_col (-1: none) in this file.
 */
static void check_doc_table(doc_check *dc, char *doc, const char *heading, int name_col,
                            int test_col)
{
    char *section = strstr(doc, heading);
    char *end;
    char *line;
    char *next;
    char token[128];

    ck_assert_msg(section != NULL, "doc/database.md has no '%s'", heading);
    end = strstr(section + 1, "\n## ");
    ck_assert_ptr_nonnull(end);
    *end = '\0';
    for (line = section + 1; line != NULL; line = next) {
        char *cell[4] = {NULL, NULL, NULL, NULL};
        char *p;
        int col = 0;

        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        if (strncmp(line, "| ", 2) != 0 || strstr(line, "|---") != NULL)
            continue;
        for (p = line; *p != '\0' && col < 4; p++) {
            if (*p == '|')
                cell[col++] = p + 1;
        }
        ck_assert_msg(col == 4, "not a row of three cells: %s", line);
        for (col = 0; col < 3; col++) {
            for (p = strchr(cell[col], '`'); p != NULL && p < cell[col + 1];
                 p = strchr(p + 1, '`')) {
                char *close = strchr(p + 1, '`');
                size_t n;

                ck_assert_ptr_nonnull(close);
                n = (size_t)(close - p - 1);
                p = close;
                if (n >= sizeof(token))
                    continue;
                memcpy(token, close - n, n);
                token[n] = '\0';
                check_doc_token(dc, token, col, name_col, test_col);
            }
        }
    }
    *end = '\n';
}

/*
 * Item 12: doc/database.md listed subscriptions_cancel_after_start, which
 * migration 0004 dropped. Every name in the "enforced by" column of its
 * table of invariants and in the "notable rules" of its table of tables
 * must exist after all migrations (as a constraint, trigger, table,
 * index, column or the name a guard function raises; the batch checks of
 * bs_events_ingest in store/events.c), and every test the invariants name
 * in this file.
 */
START_TEST(test_doc_invariants_exist)
{
    doc_check dc;
    char *doc = source_text("doc/database.md");
    char *events_c = source_text("store/events.c");
    char *tests_c = source_text("tests/itest_store.c");

    dc.c = migrated_db("doc_names");
    dc.events_c = events_c;
    dc.tests_c = tests_c;
    dc.names = 0;
    dc.tests = 0;
    check_doc_table(&dc, doc, "\n## Invariants the database enforces", 1, 2);
    ck_assert_int_ge(dc.names, 40);
    ck_assert_int_ge(dc.tests, 10);
    check_doc_table(&dc, doc, "\n| table | what | notable rules |", 2, -1);
    ck_assert_int_ge(dc.names, 45);
    free(doc);
    free(events_c);
    free(tests_c);
    drop_db(dc.c);
}
END_TEST

/* ---------------------------------------------------------------------- */

static Suite *store_suite(void)
{
    Suite *s = suite_create("store");
    TCase *mig = tcase_create("migrations");
    TCase *inv = tcase_create("invariants");
    TCase *ev = tcase_create("events");
    TCase *ld = tcase_create("load");
    TCase *guards = tcase_create("guards");

    tcase_set_timeout(mig, 120);
    tcase_set_timeout(inv, 120);
    tcase_set_timeout(ev, 120);
    tcase_set_timeout(ld, 120);
    tcase_set_timeout(guards, 120);
    tcase_add_test(mig, test_migrate_from_empty);
    tcase_add_test(mig, test_migrate_from_each_version);
    tcase_add_test(mig, test_migrate_refuses_newer_database);
    tcase_add_test(mig, test_migrate_refuses_changed_migration);
    tcase_add_test(mig, test_concurrent_migrators);
    tcase_add_test(inv, test_invariants_catalog);
    tcase_add_test(inv, test_invariants_events);
    tcase_add_test(inv, test_invariants_invoices);
    tcase_add_test(inv, test_invariants_ledger);
    tcase_add_test(inv, test_account_keys_once);
    tcase_add_test(inv, test_line_invoice_key_once);
    tcase_add_test(inv, test_runtime_role);
    tcase_add_test(inv, test_concurrent_finalizers);
    tcase_add_test(inv, test_concurrent_set_finalizers);
    tcase_add_test(inv, test_finalize_after);
    tcase_add_test(ev, test_events_ingest);
    tcase_add_test(ev, test_events_refused_batch);
    tcase_add_test(ev, test_fingerprint_matches_sql);
    tcase_add_test(ev, test_id_hash_collision);
    tcase_add_test(ev, test_events_claim_race);
    tcase_add_test(ev, test_events_claim_sorted_batch);
    tcase_add_test(ev, test_text_array);
    tcase_add_test(mig, test_migrate_0005_events_kept);
    tcase_add_test(ev, test_event_partitions);
    tcase_add_test(ev, test_events_account_index);
    tcase_add_test(ev, test_rejects_and_offsets);
    tcase_add_test(ev, test_rejects_and_offsets_pipelined);
    tcase_add_test(ev, test_numeric_binary_copy);
    tcase_add_test(ev, test_pipeline);
    tcase_add_test(ev, test_pipeline_session_cut);
    tcase_add_test(ld, test_load_idempotent);
    tcase_add_test(ld, test_load_grant_entries);
    tcase_add_test(ld, test_load_parties);
    tcase_add_test(ld, test_load_refuses_rewriting_history);
    suite_add_tcase(s, mig);
    suite_add_tcase(s, inv);
    suite_add_tcase(s, ev);
    tcase_add_test(guards, test_runtime_login_loads_new_grant);
    tcase_add_test(guards, test_event_partitions_guarded);
    tcase_add_test(guards, test_ledger_and_numbering_invariants);
    tcase_add_test(guards, test_ledger_balance_once);
    tcase_add_test(guards, test_schema_gap_refused);
    tcase_add_test(guards, test_event_partitions_bounded);
    tcase_add_test(guards, test_time_zone_host_dependent);
    tcase_add_test(guards, test_password_sources);
    suite_add_tcase(s, ld);
    suite_add_tcase(s, guards);
    /* Issue 23. */
    tcase_add_test(ld, test_catalog_precision_one_rule);
    tcase_add_test(guards, test_history_refuses_truncate_and_delete);
    tcase_add_test(guards, test_returned_credits_frozen_when_finalized);
    tcase_add_test(ld, test_load_repairs_lost_rates);
    tcase_add_test(mig, test_doc_invariants_exist);
    return s;
}

/* Run each statement that query @sql (with $1 = @like) returns. */
static void run_returned(PGconn *pg, const char *sql, const char *like)
{
    const char *params[1];
    PGresult *res;
    int i;

    params[0] = like;
    res = PQexecParams(pg, sql, 1, NULL, params, NULL, NULL, 0);
    for (i = 0; PQresultStatus(res) == PGRES_TUPLES_OK && i < PQntuples(res); i++)
        PQclear(PQexec(pg, PQgetvalue(res, i, 0)));
    PQclear(res);
}

/* Drop what failed tests of this run left behind (their teardown did not run). */
static void sweep(void)
{
    char conninfo[CONNINFO_MAX];
    char like[64];
    PGconn *pg;

    if (getenv("BILLING_PG_CONNINFO") == NULL ||
        build_conninfo(getenv("BILLING_PG_CONNINFO"), "postgres", conninfo, sizeof(conninfo)) != 0)
        return;
    pg = PQconnectdb(conninfo);
    if (PQstatus(pg) == CONNECTION_OK) {
        snprintf(like, sizeof(like), "billing\\_test\\_%ld\\_%%", (long)run_pid);
        run_returned(pg,
                     "SELECT format('DROP DATABASE %I WITH (FORCE)', datname)"
                     " FROM pg_database WHERE datname LIKE $1",
                     like);
        /* Login roles of make_login, once no database of theirs is left. */
        run_returned(pg,
                     "SELECT format('DROP ROLE %I', rolname) FROM pg_roles"
                     " WHERE rolname LIKE $1",
                     like);
    }
    PQfinish(pg);
}

int main(void)
{
    SRunner *sr;
    int failed;

    run_pid = getpid();
    sr = srunner_create(store_suite());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    sweep();
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
