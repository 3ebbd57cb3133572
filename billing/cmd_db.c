/*
 * cmd_db.c - `billing db migrate|status`: bring a PostgreSQL database to
 * this program's schema, or show where it stands. The migrations are
 * compiled in (store/migrate.h); doc/database.md describes them and the
 * rights they need.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dbcli.h"
#include "migrate.h"
#include "events.h"

/* Event partitions `migrate` keeps ready: last month to three months ahead. */
#define PARTITION_MONTHS_BACK 1
#define PARTITION_MONTHS_AHEAD 3

typedef struct db_opts {
    const char *db;
    int target; /* migrate --to; 0 = latest */
} db_opts;

static void usage(FILE *out)
{
    fputs("Usage: billing db migrate [--db CONNINFO] [--to VERSION]\n"
          "       billing db status [--db CONNINFO]\n"
          "\n"
          "migrate  apply the schema migrations this program carries that the database\n"
          "         lacks, each in its own transaction (concurrent runs wait for each\n"
          "         other; running it again changes nothing). Refuses a database whose\n"
          "         schema is newer than this program, whose applied migrations differ, or\n"
          "         whose recorded versions have a gap.\n"
          "         Then creates the monthly event partitions from last month to three\n"
          "         months ahead that are missing, and adds the server's time zone names\n"
          "         that accounts may not use yet (after a tzdata update).\n"
          "status   list the migrations: applied (when), pending, unknown or changed.\n"
          "\n"
          "Options:\n",
          out);
    cli_help_options(out, CLI_CMD_DB);
    fputs("\n"
          "Exit status: 0 done / up to date; 1 status: migrations pending; 2 usage error;\n"
          "4 internal error; 5 database unreachable, failed, newer than this program,\n"
          "with changed migrations, or with a gap in its versions.\n",
          out);
}

/* Store one option, checked by its kind (a cli_take_fn). */
static int take_option(void *ctx, cli_opt_id id, const cli_value *v)
{
    db_opts *o = ctx;

    switch (id) {
    case CLI_OPT_DB:
        o->db = v->text;
        break;
    case CLI_OPT_TO:
        o->target = (int)v->n;
        break;
    default:
        return cli_usage_error("db", "bad option");
    }
    return CLI_EXIT_OK;
}

/* Options after the action word; returns CLI_EXIT_OK, CLI_EXIT_USAGE or -1 for --help. */
static int parse_args(db_opts *o, int argc, char **argv)
{
    int first;
    int rc;

    memset(o, 0, sizeof(*o));
    rc = cli_parse("db", CLI_CMD_DB, argc, argv, take_option, o, &first);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (first != argc)
        return cli_usage_error("db", "unexpected argument '%s'", argv[first]);
    return CLI_EXIT_OK;
}

static void print_applied(const bs_migration *m, void *arg)
{
    (void)arg;
    printf("applied %04d %s\n", m->version, m->name);
    fflush(stdout);
}

static int run_migrate(bs_conn *c, const db_opts *o)
{
    bs_error err;
    int applied = 0;
    bs_status st = bs_migrate(c, o->target, print_applied, NULL, &applied, &err);

    int created = 0;

    if (st != BS_OK)
        return dbcli_fail("migrate", &err);
    printf("schema version %d: %s\n", o->target != 0 ? o->target : (int)bs_migration_count,
           applied == 0 ? "already there, nothing to do" : "done");
    /* Partitions are data, not schema: keep them coming at every run. */
    if (o->target != 0 && o->target < (int)bs_migration_count)
        return CLI_EXIT_OK;
    if (bs_event_partitions(c, PARTITION_MONTHS_BACK, PARTITION_MONTHS_AHEAD, &created, &err) !=
        BS_OK)
        return dbcli_fail("migrate: event partitions", &err);
    printf("event partitions: %d created\n", created);
    /* Zone names of a tzdata update since, for accounts to use. */
    if (bs_time_zones_refresh(c, &created, &err) != BS_OK)
        return dbcli_fail("migrate: time zone names", &err);
    printf("time zone names: %d added\n", created);
    return CLI_EXIT_OK;
}

static const char *entry_state(const bs_schema_entry *e, int current)
{
    if (!e->known)
        return "applied, UNKNOWN to this program";
    if (!e->applied && e->version < current)
        return "MISSING (gap: later versions are applied)";
    if (!e->applied)
        return "pending";
    if (!e->checksum_ok)
        return "applied, CHANGED since";
    return "applied";
}

static int run_status(bs_conn *c)
{
    bs_schema_status *st;
    bs_error err;
    char where[512];
    size_t i;
    int rc = CLI_EXIT_OK;

    if (bs_schema_inspect(c, &st, &err) != BS_OK)
        return dbcli_fail("status", &err);
    bs_where(c, where, sizeof(where));
    printf("%s\n", where);
    for (i = 0; i < st->count; i++)
        printf("  %04d %-32s %s%s%s\n", st->entries[i].version, st->entries[i].name,
               entry_state(&st->entries[i], st->current), st->entries[i].applied ? " " : "",
               st->entries[i].applied_at);
    if (st->newer || st->mismatches > 0 || st->gaps > 0) {
        printf("schema version %d: NOT usable by this program (%s)\n", st->current,
               st->newer            ? "newer than it knows"
               : st->mismatches > 0 ? "migrations changed"
                                    : "versions missing below the current one");
        rc = CLI_EXIT_DATABASE;
    } else if (st->current < st->latest) {
        printf("schema version %d of %d: run `billing db migrate`\n", st->current, st->latest);
        rc = CLI_EXIT_REJECTED;
    } else {
        printf("schema version %d: up to date\n", st->current);
    }
    bs_schema_status_free(st);
    return rc;
}

int cmd_db(int argc, char **argv)
{
    db_opts o;
    bs_conn *c;
    const char *action = argc > 1 ? argv[1] : NULL;
    int rc;

    if (action == NULL)
        return cli_usage_error("db", "expected 'migrate' or 'status'");
    if (strcmp(action, "--help") == 0 || strcmp(action, "-h") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(action, "migrate") != 0 && strcmp(action, "status") != 0)
        return cli_usage_error("db", "unknown action '%s': expected migrate or status", action);
    rc = parse_args(&o, argc - 1, argv + 1);
    if (rc < 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    if (o.target != 0 && strcmp(action, "migrate") != 0)
        return cli_usage_error("db", "--to applies to migrate only");
    c = dbcli_connect(o.db);
    if (c == NULL)
        return CLI_EXIT_DATABASE;
    rc = strcmp(action, "migrate") == 0 ? run_migrate(c, &o) : run_status(c);
    bs_close(c);
    return rc;
}
