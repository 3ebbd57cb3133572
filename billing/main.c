/*
 * main.c - the `billing` batch tool: dispatch to a subcommand.
 *
 *   billing [--help | --version]
 *   billing help [COMMAND]
 *   billing COMMAND [OPTIONS] [ARGS]
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing.h"
#include "cli.h"

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
