/*
 * itestdb.c - a private database per integration test. See itestdb.h.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "itestdb.h"
#include "migrate.h"

#define SQL_MAX 512

/* Append "key='value'" with libpq's quoting; -1 if it does not fit. */
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

void itdb_conninfo(const char *dbname, char *out, size_t size)
{
    const char *base = getenv("BILLING_PG_CONNINFO");
    PQconninfoOption *opts;
    PQconninfoOption *o;
    int rc = 0;

    ck_assert_msg(base != NULL && base[0] != '\0',
                  "BILLING_PG_CONNINFO is not set: scripts/services.sh start && . "
                  "var/services.env, or scripts/test.sh");
    opts = PQconninfoParse(base, NULL);
    ck_assert_msg(opts != NULL, "BILLING_PG_CONNINFO '%s' cannot be parsed", base);
    out[0] = '\0';
    for (o = opts; o->keyword != NULL && rc == 0; o++) {
        if (o->val != NULL && o->val[0] != '\0' && strcmp(o->keyword, "dbname") != 0)
            rc = append_kv(out, size, o->keyword, o->val);
    }
    if (rc == 0)
        rc = append_kv(out, size, "dbname", dbname);
    PQconninfoFree(opts);
    ck_assert_msg(rc == 0, "connection string for %s too long", dbname);
}

bs_conn *itdb_connect(const char *dbname)
{
    char conninfo[2048];
    bs_retry retry = {3, 100, 500};
    bs_error err;
    bs_conn *c;

    itdb_conninfo(dbname, conninfo, sizeof(conninfo));
    c = bs_connect(conninfo, &retry, &err);
    ck_assert_msg(c != NULL, "connecting to %s: %s", dbname, err.message);
    return c;
}

void itdb_exec(bs_conn *c, const char *sql)
{
    bs_error err;

    ck_assert_msg(bs_command(c, sql, 0, NULL, NULL, &err) == BS_OK, "%s: %s", sql, err.message);
}

bs_conn *itdb_fresh(const char *tag, char *name, size_t size)
{
    char sql[SQL_MAX];
    bs_conn *admin = itdb_connect("postgres");
    bs_conn *c;
    bs_error err;

    snprintf(name, size, "billing_it_%ld_%s", (long)getpid(), tag);
    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
    itdb_exec(admin, sql);
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
    itdb_exec(admin, sql);
    bs_close(admin);
    c = itdb_connect(name);
    ck_assert_msg(bs_migrate(c, 0, NULL, NULL, NULL, &err) == BS_OK, "migrate: %s", err.message);
    return c;
}

void itdb_drop(bs_conn *c, const char *name)
{
    char sql[SQL_MAX];
    bs_conn *admin;

    bs_close(c);
    admin = itdb_connect("postgres");
    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
    itdb_exec(admin, sql);
    bs_close(admin);
}

long itdb_long(bs_conn *c, const char *sql)
{
    bs_error err;
    PGresult *res = bs_query(c, sql, 0, NULL, &err);
    long v;

    ck_assert_msg(res != NULL, "%s: %s", sql, err.message);
    ck_assert_msg(PQntuples(res) == 1, "%s: %d rows", sql, PQntuples(res));
    v = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return v;
}

char *itdb_text(bs_conn *c, const char *sql)
{
    bs_error err;
    PGresult *res = bs_query(c, sql, 0, NULL, &err);
    size_t len = 0;
    size_t cap = 1024;
    char *out = malloc(cap);
    size_t need;
    int i;
    int j;

    ck_assert_msg(res != NULL, "%s: %s", sql, err.message);
    ck_assert_ptr_nonnull(out);
    out[0] = '\0';
    for (i = 0; i < PQntuples(res); i++) {
        for (j = 0; j < PQnfields(res); j++) {
            need = len + strlen(PQgetvalue(res, i, j)) + 3;
            if (need > cap) {
                cap = need * 2;
                out = realloc(out, cap);
                ck_assert_ptr_nonnull(out);
            }
            len += (size_t)sprintf(out + len, "%s%s", PQgetvalue(res, i, j),
                                   j + 1 < PQnfields(res) ? "|" : "\n");
        }
    }
    PQclear(res);
    return out;
}

/* `rm -rf DIR` (and `mkdir -p DIR` with @make); asserts success. */
static void scratch_dir(const char *dir, int make)
{
    char cmd[3 * sizeof(((itdb_work *)NULL)->dir)];

    if (make)
        ck_assert(snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", dir, dir) <
                  (int)sizeof(cmd));
    else
        ck_assert(snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir) < (int)sizeof(cmd));
    ck_assert_msg(system(cmd) == 0, "failed: %s", cmd);
}

bs_conn *itdb_work_fresh(itdb_work *w, const char *suite, const char *tag)
{
    char name[64];
    bs_conn *c;

    ck_assert(snprintf(name, sizeof(name), "%s_%s", suite, tag) < (int)sizeof(name));
    c = itdb_fresh(name, w->db, sizeof(w->db));
    itdb_conninfo(w->db, w->conninfo, sizeof(w->conninfo));
    ck_assert(snprintf(w->dir, sizeof(w->dir), "/tmp/itest_%s_%ld_%s", suite, (long)getpid(), tag) <
              (int)sizeof(w->dir));
    scratch_dir(w->dir, 1);
    return c;
}

void itdb_work_drop(bs_conn *c, const itdb_work *w)
{
    itdb_drop(c, w->db);
    scratch_dir(w->dir, 0);
}

void itdb_work_path(const itdb_work *w, char *out, size_t size, const char *name)
{
    int n = snprintf(out, size, "%s/%s", w->dir, name);

    ck_assert(n > 0 && (size_t)n < size);
}

void itdb_work_write(const itdb_work *w, const char *name, const char *text)
{
    char path[sizeof(w->dir) + 256];
    FILE *f;

    itdb_work_path(w, path, sizeof(path), name);
    f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}
