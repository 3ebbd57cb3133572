/*
 * main.c - the `billing` batch tool: dispatch to a subcommand.
 *
 *   billing [--help | --version]
 *   billing help [COMMAND]
 *   billing COMMAND [OPTIONS] [ARGS]
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing.h"
#include "cli.h"

int cmd_apikey(int argc, char **argv); /* cmd_apikey.c */

/* One line per subcommand; keep it sorted by name. */
static const cli_command commands[] = {
    {"account", cmd_account, "show an account's live credit balance and month from PostgreSQL"},
    {"apikey", cmd_apikey, "create, list or revoke keys of billingd's HTTP API"},
    {"close", cmd_close, "close a month: draft invoices in PostgreSQL; --finalize numbers them"},
    {"db", cmd_db, "migrate the PostgreSQL schema, or show its version"},
    {"ingest", cmd_ingest, "store usage event files in PostgreSQL (the billingd pipeline)"},
    {"invoice", cmd_invoice, "list, show, export or void stored invoices"},
    {"load", cmd_load, "load a price book and accounts into PostgreSQL"},
    {"rate", cmd_rate, "rate usage event files offline and print the invoices"},
    {"rejected", cmd_rejected, "list rejected records, or replay them after a catalog fix"},
    {"rerate", cmd_rerate, "recompute a period's draft invoices from the raw events"},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

void cli_error(const char *fmt, ...)
{
    va_list ap;

    fputs("billing: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/*
 * The option being handled, as the user typed it ("-j/--jobs" or "--jobs"),
 * while cli_getopt runs a callback; "" otherwise. Messages name it so that
 * a user who typed -j0 is told about -j.
 */
static char typed_option[48];

const char *cli_option_typed(const char *dflt)
{
    return typed_option[0] != '\0' ? typed_option : dflt;
}

int cli_count(const char *cmd, const char *name, const char *arg, uint64_t max, const char *what,
              uint64_t *out)
{
    uint64_t n = 0;
    const char *p;

    name = cli_option_typed(name);

    for (p = arg; *p >= '0' && *p <= '9' && n <= max; p++)
        n = n * 10 + (uint64_t)(*p - '0');
    if (p == arg || *p != '\0' || n < 1 || n > max)
        return cli_usage_error(cmd, "%s '%s': expected %s from 1 to %llu", name, arg, what,
                               (unsigned long long)max);
    *out = n;
    return CLI_EXIT_OK;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;

    fputs("billing: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'billing %s%s--help'.\n", cmd ? cmd : "", cmd ? " " : "");
    return CLI_EXIT_USAGE;
}

/*
 * The short options of @options: those whose value is a letter (-j for
 * {"jobs", ..., 'j'}), after a ':' that makes a missing argument ':'
 * rather than '?'.
 */
static void short_options(const struct option *options, char *out, size_t size)
{
    size_t n = 0;

    out[n++] = ':';
    out[n++] = 'h';
    for (; options->name != NULL && n + 3 < size; options++) {
        if (options->flag != NULL || options->val > 'z' || options->val < 'A')
            continue;
        out[n++] = (char)options->val;
        if (options->has_arg == required_argument)
            out[n++] = ':';
    }
    out[n] = '\0';
}

/*
 * The option getopt_long just refused, as typed: a short option inside a
 * cluster ("-x" of "-jx") is not argv[optind - 1], which may be the
 * previous option's argument.
 */
static void refused_option(char **argv, char *out, size_t size)
{
    const char *arg = argv[optind - 1];

    if (optopt > 0 && optopt < 128 && !(arg[0] == '-' && arg[1] == '-'))
        snprintf(out, size, "-%c", optopt);
    else
        snprintf(out, size, "%s", arg);
}

/*
 * Set typed_option for the option getopt_long returned as @opt: "--jobs",
 * or "-j/--jobs" for the short form (both, so that the message reads the
 * same to a script that looks for the long name).
 */
static void set_typed(const struct option *options, int opt, int longindex)
{
    const struct option *o;

    if (longindex >= 0) {
        snprintf(typed_option, sizeof(typed_option), "--%s", options[longindex].name);
        return;
    }
    snprintf(typed_option, sizeof(typed_option), "-%c", opt);
    for (o = options; o->name != NULL; o++) {
        if (o->flag == NULL && o->val == opt) {
            snprintf(typed_option, sizeof(typed_option), "-%c/--%s", opt, o->name);
            return;
        }
    }
}

int cli_getopt(const char *cmd, int argc, char **argv, const struct option *options,
               cli_option_fn take, void *ctx, int *first_arg)
{
    char shorts[64];
    char bad[48];
    int longindex;
    int opt;
    int rc;

    /* Reset getopt's global state: a subcommand may run after another parse. */
    optind = 1;
    opterr = 0;
    short_options(options, shorts, sizeof(shorts));
    for (;;) {
        longindex = -1;
        optopt = 0;
        opt = getopt_long(argc, argv, shorts, options, &longindex);
        if (opt == -1)
            break;
        if (opt == ':' || opt == '?') {
            refused_option(argv, bad, sizeof(bad));
            if (opt == ':')
                return cli_usage_error(cmd, "option '%s' needs an argument", bad);
            return cli_usage_error(cmd, "unknown or ambiguous option '%s'", bad);
        }
        /* -h is --help in every command. */
        if (opt == 'h' && longindex < 0)
            return -1;
        set_typed(options, opt, longindex);
        rc = take(ctx, opt, optarg);
        typed_option[0] = '\0';
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    *first_arg = optind;
    return CLI_EXIT_OK;
}

int cli_verb_getopt(const char *cmd, const char *const *verbs, int argc, char **argv,
                    const struct option *options, cli_option_fn take, void *ctx, int *verb,
                    int *first_arg)
{
    int rc;
    int i;

    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        return -1;
    for (i = 0; argc >= 2 && verbs[i] != NULL; i++) {
        if (strcmp(argv[1], verbs[i]) == 0)
            break;
    }
    if (argc < 2 || verbs[i] == NULL)
        return cli_usage_error(cmd, "'%s' needs one of its verbs first (see --help)", cmd);
    *verb = i;
    rc = cli_getopt(cmd, argc - 1, argv + 1, options, take, ctx, first_arg);
    *first_arg += 1;
    return rc;
}

static void usage(FILE *out)
{
    size_t i;

    fputs("Usage: billing COMMAND [OPTIONS] [ARGS]\n"
          "       billing help [COMMAND]\n"
          "       billing --version\n"
          "\n"
          "The batch tool of the billing engine.\n"
          "\n"
          "Commands:\n",
          out);
    for (i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fputs("\n'billing COMMAND --help' describes a command; 'man billing' has the details,\n"
          "file formats and exit codes.\n",
          out);
}

static const cli_command *find_command(const char *name)
{
    size_t i;

    for (i = 0; i < N_COMMANDS; i++) {
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    }
    return NULL;
}

/* `billing help [COMMAND]`: the command's own --help. */
static int help(int argc, char **argv)
{
    const cli_command *cmd;
    char *args[3];

    if (argc < 3) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    cmd = find_command(argv[2]);
    if (cmd == NULL)
        return cli_usage_error(NULL, "no command '%s'", argv[2]);
    args[0] = argv[2];
    args[1] = (char *)"--help";
    args[2] = NULL;
    return cmd->run(2, args);
}

int main(int argc, char **argv)
{
    const cli_command *cmd;

    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("billing %s (libbilling %s)\n", PACKAGE_VERSION, billing_version());
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "help") == 0)
        return help(argc, argv);
    cmd = find_command(argv[1]);
    if (cmd == NULL)
        return cli_usage_error(NULL, "no command '%s'", argv[1]);
    return cmd->run(argc - 1, argv + 1);
}
