/*
 * cli.h - what the subcommands of the `billing` tool share: exit codes,
 * the command table entry, error printing, and the one option table
 * (options.c) with its parser and --help generator (cli.c).
 *
 * To add a subcommand: write billing/cmd_NAME.c with
 * `int cmd_NAME(int argc, char **argv)` (argv[0] is "NAME"; it must
 * handle --help), declare it below with a CLI_CMD_ bit, add its options
 * as rows of options.c, a line to the table in main.c and to
 * billing_SOURCES in billing/Makefile.am.
 *
 * To add an option: a row in options.c (its kind checks and converts the
 * argument, its help text goes into --help) and, when it is new, a
 * CLI_OPT_ id below that the command's take function stores.
 */
#ifndef BILLING_CLI_H
#define BILLING_CLI_H

#include <stdint.h>
#include <stdio.h>

/* Exit codes of every subcommand; billing(1) documents them. */
enum {
    CLI_EXIT_OK = 0,       /* success */
    CLI_EXIT_REJECTED = 1, /* some input records were rejected (output still printed) */
    CLI_EXIT_USAGE = 2,    /* bad command line */
    CLI_EXIT_INPUT = 3,    /* unreadable or invalid input or configuration */
    CLI_EXIT_INTERNAL = 4, /* out of memory or internal error */
    CLI_EXIT_DATABASE = 5  /* database unreachable, failing, or at the wrong schema version */
};

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} cli_command;

/* Bounds of option values the table (options.c) and the commands share. */
#define CLI_LIMIT_MAX 100000000L   /* --limit of invoice list|export and rejected list */
#define CLI_BATCH_MAX 50000        /* ingest --batch: records per transaction */
#define CLI_EXPORT_JOBS_MAX 64     /* invoice export -j: connections */
#define CLI_DEFAULT_BOOK "default" /* --book of load, close and rerate when not given */

/* The subcommands, as bits: a row of the option table names those that take it. */
enum {
    CLI_CMD_ACCOUNT = 1u << 0,
    CLI_CMD_APIKEY = 1u << 1,
    CLI_CMD_CLOSE = 1u << 2,
    CLI_CMD_DB = 1u << 3,
    CLI_CMD_INGEST = 1u << 4,
    CLI_CMD_INVOICE = 1u << 5,
    CLI_CMD_LOAD = 1u << 6,
    CLI_CMD_RATE = 1u << 7,
    CLI_CMD_REJECTED = 1u << 8,
    CLI_CMD_RERATE = 1u << 9
};

/* The database commands: those that take --db. */
#define CLI_CMD_WITH_DB                                                               \
    (CLI_CMD_ACCOUNT | CLI_CMD_APIKEY | CLI_CMD_CLOSE | CLI_CMD_DB | CLI_CMD_INGEST | \
     CLI_CMD_INVOICE | CLI_CMD_LOAD | CLI_CMD_REJECTED | CLI_CMD_RERATE)

/*
 * What an option's argument is, as curl's tool has ARG_BOOL, ARG_STRG and
 * ARG_FILE: the parser checks and converts it before the command sees it,
 * and the message of a bad one names the option and the value.
 */
typedef enum cli_arg {
    CLI_ARG_BOOL,    /* none: the option is a switch */
    CLI_ARG_STRING,  /* text the command checks itself (an id, a connection string) */
    CLI_ARG_FILE,    /* a path (a file, or a directory), opened by the command */
    CLI_ARG_COUNT,   /* a whole number from 1 to the row's max (cli_count): value.n */
    CLI_ARG_MONTH,   /* YYYY-MM, 1900-01..2199-12: value.month = year * 12 + month - 1 */
    CLI_ARG_SIZE,    /* bytes, suffix K, M or G (powers of 1024), min..max: value.n */
    CLI_ARG_CHOICE,  /* one of the row's words ("json|table|csv"): value.choice, its index */
    CLI_ARG_INSTANT, /* an RFC 3339 instant with an offset: value.instant */
    CLI_ARG_DURATION /* 3d, 12h, 30m, 45s or 0 (a number up to 316224000): value.seconds */
} cli_arg;

/*
 * What a command's take function is told an option means (the row's id).
 * Several rows may share an id: the same option of several commands with
 * another help text or bound.
 */
typedef enum cli_opt_id {
    CLI_OPT_HELP,
    CLI_OPT_DB,
    CLI_OPT_BOOK,
    CLI_OPT_JOBS,
    CLI_OPT_QUIET,
    CLI_OPT_FORMAT,
    CLI_OPT_PERIOD,
    CLI_OPT_ACCOUNT,
    CLI_OPT_ACCOUNTS,
    CLI_OPT_PRICEBOOK,
    CLI_OPT_LIMIT,
    CLI_OPT_REASON,
    CLI_OPT_AT,
    CLI_OPT_TO,
    /* rate */
    CLI_OPT_INPUT_FORMAT,
    CLI_OPT_LAYOUT,
    CLI_OPT_THOUSANDS,
    CLI_OPT_EXACT,
    CLI_OPT_MONTH,
    CLI_OPT_FROM,
    CLI_OPT_REJECTS,
    CLI_OPT_BY,
    CLI_OPT_STRICT,
    CLI_OPT_DEDUPE_MEMORY,
    CLI_OPT_TEMP_DIR,
    CLI_OPT_NO_PROGRESS,
    CLI_OPT_VERBOSE,
    CLI_OPT_NO_DEDUPE,
    CLI_OPT_CHUNK_BYTES,
    /* close */
    CLI_OPT_FULL,
    CLI_OPT_FINALIZE,
    CLI_OPT_GRACE,
    /* ingest, rejected */
    CLI_OPT_BATCH,
    CLI_OPT_ALL,
    /* invoice */
    CLI_OPT_STATUS,
    CLI_OPT_SERIES,
    CLI_OPT_OUT,
    CLI_OPT_AMOUNT,
    CLI_OPT_REFERENCE,
    CLI_OPT_METHOD,
    /* apikey */
    CLI_OPT_SCOPE,
    CLI_OPT_LABEL
} cli_opt_id;

/*
 * One row of the option table: an option of the commands in @cmds.
 * @help is its --help text, lines after the first without their indent
 * (cli_help_options adds it); NULL for an option the usage lines above
 * the option list describe. @max bounds a COUNT or SIZE, @min a SIZE;
 * @what says what a COUNT or SIZE counts ("a number of threads") or lists
 * a CHOICE's words ("json|table|csv").
 */
typedef struct cli_option {
    const char *name; /* the long name, without "--" */
    char letter;      /* its short form (-j), or 0 */
    cli_arg kind;
    unsigned cmds; /* CLI_CMD_* bits */
    cli_opt_id id;
    const char *arg; /* the argument's name in --help ("FILE"); NULL for a switch */
    const char *help;
    uint64_t min;
    uint64_t max;
    const char *what;
} cli_option;

/* The table (options.c), ending with a row whose name is NULL. */
extern const cli_option cli_options[];

/* An option's argument, as its kind made it; only the fields of that kind are set. */
typedef struct cli_value {
    const char *text; /* as given (NULL for a switch) */
    uint64_t n;       /* COUNT, SIZE */
    int32_t month;    /* MONTH */
    int64_t instant;  /* INSTANT: a billing_time_t */
    int64_t seconds;  /* DURATION */
    int choice;       /* CHOICE */
} cli_value;

/*
 * cli_take_fn - store one option of a command: @id is the row's, @v its
 * checked argument (valid while the command runs: the text points into
 * argv). Returns CLI_EXIT_OK, or CLI_EXIT_USAGE after a message for a
 * value the kind lets through but the command refuses.
 */
typedef int (*cli_take_fn)(void *ctx, cli_opt_id id, const cli_value *v);

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
 * wants (@what: "a number of threads", "a size in bytes", ...). While
 * cli_parse handles an option the message names it as the user typed it
 * ("-j/--jobs" for -j0, "--jobs" for --jobs=0).
 */
int cli_count(const char *cmd, const char *name, const char *arg, uint64_t max, const char *what,
              uint64_t *out);

/*
 * cli_option_typed - while cli_parse handles an option, that option as
 * the user typed it ("-j/--jobs" or "--jobs"; a static buffer valid until
 * the take function returns); @dflt elsewhere.
 */
const char *cli_option_typed(const char *dflt);

/*
 * cli_parse - the options of subcommand @cmd (its CLI_CMD_ bit @bit) in
 * argv from argv[1] (argv[0] is the subcommand's name): the rows of the
 * table with @bit, long ones (--jobs N, --jobs=N) and short ones (-j N,
 * -jN), each checked by its kind and handed to @take; -h is --help.
 * Returns CLI_EXIT_OK with the index of the first operand in *@first_arg,
 * CLI_EXIT_USAGE (message printed) for an unknown, malformed or refused
 * option, or -1 for --help.
 */
int cli_parse(const char *cmd, unsigned bit, int argc, char **argv, cli_take_fn take, void *ctx,
              int *first_arg);

/*
 * cli_verb_parse - cli_parse for a command with verbs ("billing
 * rejected list|replay"): argv[1] must be one of the NULL-terminated
 * @verbs (its index into *@verb) or --help; the options follow it.
 * *@first_arg indexes argv. Returns as cli_parse (-1 for --help).
 */
int cli_verb_parse(const char *cmd, unsigned bit, const char *const *verbs, int argc, char **argv,
                   cli_take_fn take, void *ctx, int *verb, int *first_arg);

/*
 * cli_help_options - the option list of @bit's --help on @out: each row
 * of the table with @bit and a help text, in table order, as
 * "  -j, --jobs N           text" with the text's further lines indented
 * to the same column.
 */
void cli_help_options(FILE *out, unsigned bit);

/* Subcommands. */
int cmd_rate(int argc, char **argv);
int cmd_db(int argc, char **argv);
int cmd_load(int argc, char **argv);
int cmd_ingest(int argc, char **argv);
int cmd_rejected(int argc, char **argv);
int cmd_account(int argc, char **argv);
int cmd_apikey(int argc, char **argv);
int cmd_close(int argc, char **argv);
int cmd_rerate(int argc, char **argv);
int cmd_invoice(int argc, char **argv);

#endif /* BILLING_CLI_H */
