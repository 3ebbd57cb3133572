/*
 * dbcli.c - connection and error reporting of the database subcommands.
 */
#include "config.h"

#include <stdio.h>

#include "cli.h"
#include "dbcli.h"

bs_conn *dbcli_connect(const char *option)
{
    bs_error err;
    bs_conn *c = bs_connect(bs_conninfo(option), NULL, &err);

    if (c == NULL)
        cli_error("%s", err.message);
    return c;
}

int dbcli_fail(const char *what, const bs_error *err)
{
    if (err->constraint[0] != '\0')
        cli_error("%s: %s [%s, SQLSTATE %s]", what, err->message, err->constraint, err->sqlstate);
    else if (err->sqlstate[0] != '\0')
        cli_error("%s: %s [SQLSTATE %s]", what, err->message, err->sqlstate);
    else
        cli_error("%s: %s", what, err->message);
    switch (err->status) {
    case BS_ERR_INVALID:
    case BS_ERR_CONSTRAINT:
        return CLI_EXIT_INPUT;
    case BS_ERR_NOMEM:
        return CLI_EXIT_INTERNAL;
    default:
        return CLI_EXIT_DATABASE;
    }
}
