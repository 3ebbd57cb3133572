/*
 * check_options.c - the option table of the `billing` tool
 * (billing/options.c) and its parser and --help generator (billing/cli.c):
 * the table's rows are consistent for every command (no name or letter
 * twice, an argument name exactly for the kinds that take one, bounds and
 * words where a kind needs them), every kind converts what it accepts and
 * refuses the rest, a command takes only its own rows, and --help's
 * option list is laid out from the rows.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing.h"
#include "cli.h"

/* Every command bit, with its name for messages. */
static const struct {
    unsigned bit;
    const char *name;
} commands[] = {
    {CLI_CMD_ACCOUNT, "account"}, {CLI_CMD_APIKEY, "apikey"}, {CLI_CMD_CLOSE, "close"},
    {CLI_CMD_DB, "db"},           {CLI_CMD_INGEST, "ingest"}, {CLI_CMD_INVOICE, "invoice"},
    {CLI_CMD_LOAD, "load"},       {CLI_CMD_RATE, "rate"},     {CLI_CMD_REJECTED, "rejected"},
    {CLI_CMD_RERATE, "rerate"},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

/* ---------------------------------------------------------------------- */
/* The table                                                               */
/* ---------------------------------------------------------------------- */

START_TEST(test_rows_unique_per_command)
{
    const cli_option *a;
    const cli_option *b;
    size_t k;
    int help;

    for (k = 0; k < N_COMMANDS; k++) {
        help = 0;
        for (a = cli_options; a->name != NULL; a++) {
            if ((a->cmds & commands[k].bit) == 0)
                continue;
            help += a->id == CLI_OPT_HELP;
            ck_assert_msg(a->letter != 'h', "%s --%s: -h is --help", commands[k].name, a->name);
            for (b = a + 1; b->name != NULL; b++) {
                if ((b->cmds & commands[k].bit) == 0)
                    continue;
                ck_assert_msg(strcmp(a->name, b->name) != 0, "%s: --%s twice", commands[k].name,
                              a->name);
                ck_assert_msg(a->letter == 0 || a->letter != b->letter, "%s: -%c twice",
                              commands[k].name, a->letter);
            }
        }
        ck_assert_msg(help == 1, "%s: --help rows: %d", commands[k].name, help);
    }
}
END_TEST

START_TEST(test_rows_complete)
{
    const cli_option *o;

    for (o = cli_options; o->name != NULL; o++) {
        ck_assert_msg(o->cmds != 0, "--%s: no command takes it", o->name);
        ck_assert_msg((o->kind == CLI_ARG_BOOL) == (o->arg == NULL),
                      "--%s: an argument name exactly when it takes an argument", o->name);
        if (o->kind == CLI_ARG_COUNT)
            ck_assert_msg(o->max >= 1 && o->what != NULL, "--%s: a count needs max, what", o->name);
        if (o->kind == CLI_ARG_SIZE)
            ck_assert_msg(o->min < o->max && o->what != NULL, "--%s: a size needs min < max",
                          o->name);
        if (o->kind == CLI_ARG_CHOICE)
            ck_assert_msg(o->what != NULL && o->what[0] != '\0', "--%s: a choice needs words",
                          o->name);
        if (o->help != NULL)
            ck_assert_msg(o->help[strlen(o->help) - 1] != '\n', "--%s: help ends in a newline",
                          o->name);
    }
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Parsing                                                                 */
/* ---------------------------------------------------------------------- */

/* What the take function was handed, last call. */
typedef struct taken {
    int calls;
    cli_opt_id id;
    cli_value v;
} taken;

static int take(void *ctx, cli_opt_id id, const cli_value *v)
{
    taken *t = ctx;

    t->calls++;
    t->id = id;
    t->v = *v;
    return CLI_EXIT_OK;
}

/* Parse the words of @line (at most 8, space-separated) for @bit; the status. */
static int parse(unsigned bit, const char *line, taken *t, int *first)
{
    static char buf[256]; /* the values handed over point into it */
    char *argv[10];
    char *save = NULL;
    char *w;
    int argc = 0;

    memset(t, 0, sizeof(*t));
    snprintf(buf, sizeof(buf), "%s", line);
    argv[argc++] = (char *)"cmd";
    for (w = strtok_r(buf, " ", &save); w != NULL && argc < 9; w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    argv[argc] = NULL;
    *first = -1;
    return cli_parse("cmd", bit, argc, argv, take, t, first);
}

START_TEST(test_kinds_convert)
{
    taken t;
    int first;

    ck_assert_int_eq(parse(CLI_CMD_RATE, "--month 2026-02", &t, &first), CLI_EXIT_OK);
    ck_assert_int_eq(t.id, CLI_OPT_MONTH);
    ck_assert_int_eq(t.v.month, 2026 * 12 + 1);
    ck_assert_int_eq(parse(CLI_CMD_RATE, "--format csv", &t, &first), CLI_EXIT_OK);
    ck_assert_int_eq(t.v.choice, 2);
    ck_assert_int_eq(parse(CLI_CMD_RATE, "--layout=full", &t, &first), CLI_EXIT_OK);
    ck_assert_int_eq(t.v.choice, 1);
    ck_assert_int_eq(parse(CLI_CMD_RATE, "--dedupe-memory 64K", &t, &first), CLI_EXIT_OK);
    ck_assert_uint_eq(t.v.n, 65536);
    ck_assert_int_eq(parse(CLI_CMD_RATE, "--dedupe-memory 3m", &t, &first), CLI_EXIT_OK);
    ck_assert_uint_eq(t.v.n, 3u << 20);
    ck_assert_int_eq(parse(CLI_CMD_RATE, "-j3 a.jsonl", &t, &first), CLI_EXIT_OK);
    ck_assert_int_eq(t.id, CLI_OPT_JOBS);
    ck_assert_uint_eq(t.v.n, 3);
    ck_assert_int_eq(first, 2);
    ck_assert_int_eq(parse(CLI_CMD_RATE, "--exact", &t, &first), CLI_EXIT_OK);
    ck_assert_int_eq(t.id, CLI_OPT_EXACT);
    ck_assert_ptr_null(t.v.text);
    ck_assert_int_eq(parse(CLI_CMD_CLOSE, "--grace 12h", &t, &first), CLI_EXIT_OK);
    ck_assert_int_eq(t.v.seconds, 12 * 3600);
    ck_assert_int_eq(parse(CLI_CMD_CLOSE, "--grace 0", &t, &first), CLI_EXIT_OK);
    ck_assert_int_eq(t.v.seconds, 0);
    ck_assert_int_eq(parse(CLI_CMD_ACCOUNT, "--at 1970-01-01T08:00:01+08:00", &t, &first),
                     CLI_EXIT_OK);
    ck_assert_int_eq(t.v.instant, BILLING_NS_PER_SEC);
    ck_assert_int_eq(parse(CLI_CMD_INVOICE, "--status void", &t, &first), CLI_EXIT_OK);
    ck_assert_int_eq(t.v.choice, 2);
    ck_assert_str_eq(t.v.text, "void");
    ck_assert_int_eq(parse(CLI_CMD_DB, "--to 9999", &t, &first), CLI_EXIT_OK);
    ck_assert_uint_eq(t.v.n, 9999);
}
END_TEST

START_TEST(test_kinds_refuse)
{
    static const struct {
        unsigned bit;
        const char *line;
    } bad[] = {
        {CLI_CMD_RATE, "--month 2026-13"},
        {CLI_CMD_RATE, "--month 1899-12"},
        {CLI_CMD_RATE, "--from 2200-01"},
        {CLI_CMD_RATE, "--to 2026-1"},
        {CLI_CMD_RATE, "--format xml"},
        {CLI_CMD_RATE, "--format jso"},
        {CLI_CMD_RATE, "--format json|table"},
        {CLI_CMD_RATE, "--by resources"},
        {CLI_CMD_RATE, "--dedupe-memory 63K"},
        {CLI_CMD_RATE, "--dedupe-memory 65G"},
        {CLI_CMD_RATE, "--dedupe-memory 1T"},
        {CLI_CMD_RATE, "--dedupe-memory K"},
        {CLI_CMD_RATE, "-j0"},
        {CLI_CMD_RATE, "--jobs 65"},
        {CLI_CMD_RATE, "--at 2026-01-05"},
        {CLI_CMD_CLOSE, "--grace 3w"},
        {CLI_CMD_CLOSE, "--grace 5"},
        {CLI_CMD_CLOSE, "--grace 316224001s"},
        {CLI_CMD_CLOSE, "--period 2026-00"},
        {CLI_CMD_INGEST, "--format table"},
        {CLI_CMD_RERATE, "--finalize"},
        {CLI_CMD_RATE, "--db x"},
        {CLI_CMD_DB, "--to 10000"},
        {CLI_CMD_INVOICE, "--method card"},
        {CLI_CMD_RATE, "--pricebook"},
        {CLI_CMD_LOAD, "-j 2"},
    };
    taken t;
    size_t i;
    int first;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(parse(bad[i].bit, bad[i].line, &t, &first) == CLI_EXIT_USAGE, "%s accepted",
                      bad[i].line);
        ck_assert_msg(t.calls == 0, "%s handed to the command", bad[i].line);
    }
}
END_TEST

START_TEST(test_help_and_operands)
{
    taken t;
    int first;
    size_t k;

    for (k = 0; k < N_COMMANDS; k++) {
        ck_assert_int_eq(parse(commands[k].bit, "--help", &t, &first), -1);
        ck_assert_int_eq(parse(commands[k].bit, "-h", &t, &first), -1);
        ck_assert_int_eq(t.calls, 0);
    }
    ck_assert_int_eq(parse(CLI_CMD_LOAD, "--book b --db x", &t, &first), CLI_EXIT_OK);
    ck_assert_int_eq(t.calls, 2);
    ck_assert_int_eq(t.id, CLI_OPT_DB);
    ck_assert_str_eq(t.v.text, "x");
    ck_assert_int_eq(first, 5);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* --help                                                                  */
/* ---------------------------------------------------------------------- */

START_TEST(test_help_layout)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    ck_assert_ptr_nonnull(f);
    cli_help_options(f, CLI_CMD_DB);
    cli_help_options(f, CLI_CMD_INGEST);
    fclose(f);
    ck_assert_str_eq(
        text, "  --db CONNINFO          libpq connection string or URI (default:\n"
              "                         $BILLING_PG_CONNINFO, else the PG* variables)\n"
              "  --to VERSION           migrate: stop at this version (default: the latest)\n"
              "  --help                 print this help\n"
              "  --format jsonl|protobuf  input format (default: from the file name; stdin\n"
              "                         is JSON Lines)\n"
              "  --batch N              records per transaction (1..50000, default 5000)\n"
              "  -j, --jobs N           decode and rate each batch on N threads (1..64,\n"
              "                         default 1); what is stored is the same for every N\n"
              "  --book ID              price book to rate with (default: the only one)\n"
              "  --quiet                no progress, and no rejected records listed on\n"
              "                         stderr (the summary is still printed)\n"
              "  --db CONNINFO          libpq connection string or URI (default:\n"
              "                         $BILLING_PG_CONNINFO, else the PG* variables)\n"
              "  --help                 print this help\n");
    free(text);
}
END_TEST

static Suite *options_suite(void)
{
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("table");

    tcase_add_test(tc, test_rows_unique_per_command);
    tcase_add_test(tc, test_rows_complete);
    tcase_add_test(tc, test_kinds_convert);
    tcase_add_test(tc, test_kinds_refuse);
    tcase_add_test(tc, test_help_and_operands);
    tcase_add_test(tc, test_help_layout);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(options_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
