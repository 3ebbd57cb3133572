/*
 * cli.h - what the subcommands of the `billing` tool share: exit codes,
 * the command table entry, and error printing.
 *
 * To add a subcommand: write billing/cmd_NAME.c with
 * `int cmd_NAME(int argc, char **argv)` (argv[0] is "NAME"; it must
 * handle --help), declare it below, and add a line to the table in
 * main.c and to billing_SOURCES in billing/Makefile.am.
 */
#ifndef BILLING_CLI_H
#define BILLING_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes of every subcommand; billing(1) documents them. */
enum {
    CLI_EXIT_OK = 0,        /* success */
    CLI_EXIT_REJECTED = 1,  /* some input records were rejected (output still printed) */
    CLI_EXIT_USAGE = 2,     /* bad command line */
    CLI_EXIT_INPUT = 3,     /* unreadable or invalid input or configuration */
    CLI_EXIT_INTERNAL = 4,  /* out of memory or internal error */
    CLI_EXIT_DATABASE = 5   /* database unreachable, failing, or at the wrong schema version */
};

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} cli_command;

/* cli_error - print "billing: MESSAGE\n" on stderr. */
void cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* cli_usage_error - cli_error, then a hint to run `billing CMD --help`; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/*
 * cli_count - the argument @arg of option @name (as "--jobs") of
 * subcommand @cmd as a whole number from 1 to @max (at most 10^18):
 * decimal digits only, no sign, space or suffix, so that every command
 * takes the same spellings. Returns CLI_EXIT_OK with the number in *@out,
 * or CLI_EXIT_USAGE after a message naming the option and saying what it
 * wants (@what: "a number of threads", "a size in bytes", ...). Inside a
 * cli_getopt callback the message names the option as the user typed it
 * ("-j/--jobs" for -j0, "--jobs" for --jobs=0).
 */
int cli_count(const char *cmd, const char *name, const char *arg, uint64_t max, const char *what,
              uint64_t *out);

/*
 * cli_option_typed - inside a cli_getopt callback, the option being
 * handled as the user typed it ("-j/--jobs" or "--jobs"; a static buffer valid
 * until the callback returns); @dflt elsewhere.
 */
const char *cli_option_typed(const char *dflt);

/*
 * cli_option_fn - handle one option of a subcommand: @opt is the value
 * from the struct option table, @arg its argument or NULL. Returns
 * CLI_EXIT_OK, CLI_EXIT_USAGE (message printed), or -1 for --help.
 */
typedef int (*cli_option_fn)(void *ctx, int opt, const char *arg);

/*
 * cli_getopt - the getopt_long loop every subcommand needs: long options
 * (and the short ones whose value is a letter: -j N, -jN), from argv[1]
 * (argv[0] is the subcommand's name), each handed to @take; -h is --help. Returns CLI_EXIT_OK with the index of the first operand in
 * *@first_arg, CLI_EXIT_USAGE for an unknown or malformed option, or -1
 * when @take asked for --help.
 */
int cli_getopt(const char *cmd, int argc, char **argv, const struct option *options,
               cli_option_fn take, void *ctx, int *first_arg);

/*
 * cli_verb_getopt - cli_getopt for a command with verbs ("billing
 * rejected list|replay"): argv[1] must be one of the NULL-terminated
 * @verbs (its index into *@verb) or --help; the options follow it.
 * *@first_arg indexes argv. Returns as cli_getopt (-1 for --help).
 */
int cli_verb_getopt(const char *cmd, const char *const *verbs, int argc, char **argv,
                    const struct option *options, cli_option_fn take, void *ctx, int *verb,
                    int *first_arg);

/* Subcommands. */
int cmd_rate(int argc, char **argv);
int cmd_db(int argc, char **argv);
int cmd_load(int argc, char **argv);
int cmd_ingest(int argc, char **argv);
int cmd_rejected(int argc, char **argv);
int cmd_account(int argc, char **argv);
int cmd_close(int argc, char **argv);
int cmd_rerate(int argc, char **argv);
int cmd_invoice(int argc, char **argv);

#endif /* BILLING_CLI_H */
