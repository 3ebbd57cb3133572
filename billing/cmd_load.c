/*
 * cmd_load.c - `billing load`: put the price book, accounts,
 * subscriptions and credit grants that `billing rate` reads into the
 * PostgreSQL store, idempotently (store/load.h).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "dbcli.h"
#include "migrate.h"
#include "load.h"
#include "progress.h"

#define DEFAULT_BOOK CLI_DEFAULT_BOOK

typedef struct load_opts {
    const char *db;
    const char *pricebook;
    const char *accounts;
    const char *book;
} load_opts;

static void usage(FILE *out)
{
    fputs("Usage: billing load --pricebook FILE [--accounts FILE] [--book ID] [--db CONNINFO]\n"
          "\n"
          "Load a price book (its plans and price versions) and, with --accounts, the\n"
          "accounts, subscriptions and credit grants into the database, in one\n"
          "transaction. The files are checked exactly as `billing rate` checks them.\n"
          "Loading the same files again changes nothing. History is never rewritten:\n"
          "a price version whose content changed is stored as a new revision (what was\n"
          "rated keeps the old one), and so is one whose stored rates and fees no longer\n"
          "match the file, which repairs it; changed plans or credit grants are refused\n"
          "(use new ids); a subscription may only gain a cancellation; accounts take\n"
          "their new currency, time zone and tax rate.\n"
          "\n"
          "Options:\n",
          out);
    cli_help_options(out, CLI_CMD_LOAD);
    fputs("\n"
          "Prints what was added, changed and left unchanged, then \"N changed\".\n"
          "Exit status: 0 loaded; 2 usage error; 3 invalid files, or files that would\n"
          "rewrite stored history; 4 internal error; 5 database unreachable, failed, or\n"
          "not migrated (run `billing db migrate`).\n",
          out);
}

/* Store one option, checked by its kind (a cli_take_fn). */
static int take_option(void *ctx, cli_opt_id id, const cli_value *v)
{
    load_opts *o = ctx;

    switch (id) {
    case CLI_OPT_DB:
        o->db = v->text;
        break;
    case CLI_OPT_PRICEBOOK:
        o->pricebook = v->text;
        break;
    case CLI_OPT_ACCOUNTS:
        o->accounts = v->text;
        break;
    case CLI_OPT_BOOK:
        o->book = v->text;
        break;
    default:
        return cli_usage_error("load", "bad option");
    }
    return CLI_EXIT_OK;
}

/*
 * The rule of the database's billing.ident domain (sql/migrations/0001),
 * checked here so that a bad id is refused naming the option and the rule
 * rather than with the domain's generic message.
 */
static int valid_ident(const char *id)
{
    size_t n = strlen(id);
    size_t i;

    if (n < 1 || n > 128)
        return 0;
    for (i = 0; i < n; i++) {
        if (id[i] < '!' || id[i] > '~')
            return 0;
    }
    return 1;
}

/* Returns CLI_EXIT_OK, CLI_EXIT_USAGE, or -1 for --help. */
static int parse_args(load_opts *o, int argc, char **argv)
{
    int first;
    int rc;

    memset(o, 0, sizeof(*o));
    o->book = DEFAULT_BOOK;
    rc = cli_parse("load", CLI_CMD_LOAD, argc, argv, take_option, o, &first);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (first != argc)
        return cli_usage_error("load", "unexpected argument '%s'", argv[first]);
    if (o->pricebook == NULL)
        return cli_usage_error("load", "--pricebook is required (accounts need its currency "
                                       "and plans)");
    if (!valid_ident(o->book))
        return cli_usage_error("load",
                               "--book '%s': an id is 1 to 128 bytes of printable ASCII "
                               "without spaces",
                               o->book);
    return CLI_EXIT_OK;
}

static void print_counts(const bs_load_counts *k)
{
    size_t changed = 0;
    int i;

    for (i = 0; i < BS_LOAD_KINDS; i++) {
        printf("%-15s %zu added, %zu changed, %zu unchanged\n", bs_load_kind_name((bs_load_kind)i),
               k->added[i], k->changed[i], k->unchanged[i]);
        changed += k->added[i] + k->changed[i];
    }
    printf("%zu changed\n", changed);
}

static void show_progress(void *arg, size_t done, size_t total)
{
    progress_meter *m = arg;

    m->total = total;
    progress_meter_update(m, done, NULL);
}

int cmd_load(int argc, char **argv)
{
    progress_meter meter;
    load_opts o;
    bs_load_counts counts;
    bs_error err;
    bs_conn *c;
    int rc = parse_args(&o, argc, argv);

    if (rc < 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    c = dbcli_connect(o.db);
    if (c == NULL)
        return CLI_EXIT_DATABASE;
    if (bs_schema_require(c, &err) != BS_OK)
        rc = dbcli_fail("load", &err);
    else {
        progress_meter_start(&meter, stderr, progress_mode(stderr, 0), "load", "rows",
                             PROGRESS_UNKNOWN);
        if (bs_load_catalog_progress(c, o.book, o.pricebook, o.accounts, &counts, show_progress,
                                     &meter, &err) != BS_OK)
            rc = dbcli_fail("load", &err);
        progress_meter_end(&meter, 0, NULL, 0);
        if (rc == CLI_EXIT_OK)
            print_counts(&counts);
    }
    bs_close(c);
    return rc;
}
