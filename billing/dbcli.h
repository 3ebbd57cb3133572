/*
 * dbcli.h - what the database subcommands (`billing db`, `billing load`)
 * share: the --db option, connecting, and turning store errors into
 * messages and exit codes.
 */
#ifndef BILLING_DBCLI_H
#define BILLING_DBCLI_H

#include "store.h"

/*
 * dbcli_connect - connect to the store named by @option (see
 * bs_conninfo), retrying a few times. Prints the reason and returns NULL
 * on failure.
 */
bs_conn *dbcli_connect(const char *option);

/*
 * dbcli_fail - print @err (prefixed by @what) on stderr, with the
 * constraint name when there is one, and return the exit code for it:
 * CLI_EXIT_INPUT for invalid input or input that the database's rules
 * refuse, CLI_EXIT_INTERNAL when out of memory, CLI_EXIT_DATABASE else.
 */
int dbcli_fail(const char *what, const bs_error *err);

#endif /* BILLING_DBCLI_H */
