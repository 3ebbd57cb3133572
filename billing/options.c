/*
 * options.c - every option of every `billing` subcommand, one row each
 * (as curl's tool drives its options from one table with argument kinds):
 * long name, short form, kind, the commands that take it, what the
 * command is told, and the --help text. cli.c parses argv and writes
 * --help's option lists from it; a command file only stores the values.
 *
 * Order: a command's --help lists its rows in table order. The same
 * option of several commands is one row when its help reads the same
 * everywhere (--db, --accounts, --help), else a row per wording.
 */
#include "config.h"

#include <stddef.h>

#include "cli.h"
#include "close.h"
#include "dedupe.h"
#include "ingest.h"
#include "rate.h"

/* Continuation lines of --db's help: shared by the rows below. */
#define DB_HELP \
    "libpq connection string or URI (default:\n$BILLING_PG_CONNINFO, else the PG* variables)"

/* clang-format off */
const cli_option cli_options[] = {
    /* billing rate */
    {"pricebook", 0, CLI_ARG_FILE, CLI_CMD_RATE, CLI_OPT_PRICEBOOK, "FILE",
     "price book (JSON); several as --pricebook ID=FILE, each\n"
     "account naming its book (\"book\": ID): one run, an\n"
     "invoice per account in its book's currency", 0, 0, NULL},
    {"pricebook", 0, CLI_ARG_FILE, CLI_CMD_LOAD, CLI_OPT_PRICEBOOK, "FILE",
     "price book (JSON, as for `billing rate`)", 0, 0, NULL},
    {"accounts", 0, CLI_ARG_FILE, CLI_CMD_RATE | CLI_CMD_LOAD, CLI_OPT_ACCOUNTS, "FILE",
     "accounts, subscriptions and credit grants (JSON)", 0, 0, NULL},
    {"input-format", 0, CLI_ARG_CHOICE, CLI_CMD_RATE, CLI_OPT_INPUT_FORMAT, "FMT",
     "jsonl or protobuf (default: by file extension,\n"
     ".jsonl/.json/.ndjson or .pb/.bin/.protobuf; stdin: jsonl)", 0, 0, "jsonl|protobuf"},
    {"format", 0, CLI_ARG_CHOICE, CLI_CMD_RATE, CLI_OPT_FORMAT, "FMT",
     "json (default), table (for people) or csv (RFC 4180:\n"
     "a row per line and per figure; counts on stderr)", 0, 0, "json|table|csv"},
    {"layout", 0, CLI_ARG_CHOICE, CLI_CMD_RATE, CLI_OPT_LAYOUT, "L",
     "table: compact (leave out VERSION and empty columns;\n"
     "default on a terminal) or full (default otherwise)", 0, 0, "compact|full"},
    {"thousands", 0, CLI_ARG_STRING, CLI_CMD_RATE, CLI_OPT_THOUSANDS, "SEP",
     "table: group digits with SEP (',', ' ', '\\'', '_')\n"
     "or 'none' (default: the locale's on a terminal, none\n"
     "otherwise)", 0, 0, NULL},
    {"exact", 0, CLI_ARG_BOOL, CLI_CMD_RATE, CLI_OPT_EXACT, NULL,
     "table: quantities exact (\"60000/31\"), not rounded", 0, 0, NULL},
    {"month", 0, CLI_ARG_MONTH, CLI_CMD_RATE, CLI_OPT_MONTH, "YYYY-MM",
     "print this month only", 0, 0, NULL},
    {"from", 0, CLI_ARG_MONTH, CLI_CMD_RATE, CLI_OPT_FROM, "YYYY-MM",
     "print months from this one ...", 0, 0, NULL},
    {"to", 0, CLI_ARG_MONTH, CLI_CMD_RATE, CLI_OPT_TO, "YYYY-MM",
     "... to this one (default: every month with charges)", 0, 0, NULL},
    {"account", 0, CLI_ARG_STRING, CLI_CMD_RATE, CLI_OPT_ACCOUNT, "ID",
     "print this account only (with a bounded range,\n"
     "every month of it, charged or not)", 0, 0, NULL},
    {"rejects", 0, CLI_ARG_FILE, CLI_CMD_RATE, CLI_OPT_REJECTS, "FILE",
     "write each rejected event record, as read, with its\n"
     "place and reason to FILE (JSON Lines; stderr says\n"
     "how many went there)", 0, 0, NULL},
    {"by", 0, CLI_ARG_CHOICE, CLI_CMD_RATE, CLI_OPT_BY, "resource",
     "under each invoice, the usage lines of each resource\n"
     "(instance, disk) alone (json or table)", 0, 0, "resource"},
    {"at", 0, CLI_ARG_INSTANT, CLI_CMD_RATE, CLI_OPT_AT, "INSTANT",
     "print, instead of invoices, each account's credit left\n"
     "at INSTANT and, at the price of the usage running\n"
     "then, when it reaches zero (json or table)", 0, 0, NULL},
    {"strict", 0, CLI_ARG_BOOL, CLI_CMD_RATE, CLI_OPT_STRICT, NULL,
     "stop at the first rejected event, print no invoices\n"
     "(conflicting repeats are found after the last file)", 0, 0, NULL},
    {"dedupe-memory", 0, CLI_ARG_SIZE, CLI_CMD_RATE, CLI_OPT_DEDUPE_MEMORY, "SIZE",
     "memory for finding repeated event ids before using\n"
     "temporary files (default 64M; suffix K, M or G)",
     RATE_DEDUPE_MEMORY_MIN, RATE_DEDUPE_MEMORY_MAX, "a size"},
    {"temp-dir", 0, CLI_ARG_FILE, CLI_CMD_RATE, CLI_OPT_TEMP_DIR, "DIR",
     "where those files go (default: $TMPDIR or /tmp)", 0, 0, NULL},
    {"no-progress", 0, CLI_ARG_BOOL, CLI_CMD_RATE, CLI_OPT_NO_PROGRESS, NULL,
     "no progress line (shown only when stderr is a terminal:\n"
     "events read, rate, elapsed time, a bar for files)", 0, 0, NULL},
    {"verbose", 0, CLI_ARG_BOOL, CLI_CMD_RATE, CLI_OPT_VERBOSE, NULL,
     "say on stderr how the dedupe went (ids, runs, bytes)", 0, 0, NULL},
    {"no-dedupe", 0, CLI_ARG_BOOL, CLI_CMD_RATE, CLI_OPT_NO_DEDUPE, NULL,
     "do not look for repeated event ids (faster; only for\n"
     "input known to be unique)", 0, 0, NULL},
    {"jobs", 'j', CLI_ARG_COUNT, CLI_CMD_RATE, CLI_OPT_JOBS, "N",
     "read and rate on N threads (1 to 64; default: the\n"
     "number of processors online); the output is the\n"
     "same for every N. One thread is used for standard\n"
     "input and pipes, several price books, --strict,\n"
     "--at and --by", 0, JOBS_MAX, "a number of threads"},
    {"chunk-bytes", 0, CLI_ARG_COUNT, CLI_CMD_RATE, CLI_OPT_CHUNK_BYTES, "N",
     "with -j, cut files into chunks of about N bytes\n"
     "(default 4194304; for tests and tuning)", 0, CHUNK_BYTES_MAX, "a size in bytes"},

    /* billing close and billing rerate */
    {"period", 0, CLI_ARG_MONTH, CLI_CMD_CLOSE, CLI_OPT_PERIOD, "YYYY-MM",
     "the month to close (required)", 0, 0, NULL},
    {"period", 0, CLI_ARG_MONTH, CLI_CMD_RERATE, CLI_OPT_PERIOD, "YYYY-MM",
     "the month to recompute (required)", 0, 0, NULL},
    {"jobs", 'j', CLI_ARG_COUNT, CLI_CMD_CLOSE | CLI_CMD_RERATE, CLI_OPT_JOBS, "N",
     "worker threads, each with a connection (1..64, default 1)",
     0, CLOSE_JOBS_MAX, "a number of connections"},
    {"full", 0, CLI_ARG_BOOL, CLI_CMD_CLOSE, CLI_OPT_FULL, NULL,
     "re-rate every account, changed or not", 0, 0, NULL},
    {"finalize", 0, CLI_ARG_BOOL, CLI_CMD_CLOSE, CLI_OPT_FINALIZE, NULL,
     "then number and freeze the drafts past their grace", 0, 0, NULL},
    {"grace", 0, CLI_ARG_DURATION, CLI_CMD_CLOSE, CLI_OPT_GRACE, "DURATION",
     "grace after the month ends: 3d (default), 12h, 0", 0, 0, NULL},
    {"quiet", 0, CLI_ARG_BOOL, CLI_CMD_CLOSE, CLI_OPT_QUIET, NULL,
     "no progress (the summary is still printed)", 0, 0, NULL},
    {"book", 0, CLI_ARG_STRING, CLI_CMD_CLOSE | CLI_CMD_RERATE, CLI_OPT_BOOK, "ID",
     "the price book (default: " CLI_DEFAULT_BOOK ")", 0, 0, NULL},

    /* billing ingest */
    {"format", 0, CLI_ARG_CHOICE, CLI_CMD_INGEST, CLI_OPT_FORMAT, "jsonl|protobuf",
     "input format (default: from the file name; stdin\n"
     "is JSON Lines)", 0, 0, "jsonl|protobuf"},
    {"batch", 0, CLI_ARG_COUNT, CLI_CMD_INGEST, CLI_OPT_BATCH, "N",
     "records per transaction (1..50000, default 5000)", 0, CLI_BATCH_MAX,
     "a number of records"},
    {"jobs", 'j', CLI_ARG_COUNT, CLI_CMD_INGEST, CLI_OPT_JOBS, "N",
     "decode and rate each batch on N threads (1..64,\n"
     "default 1); what is stored is the same for every N", 0, BS_INGEST_THREADS_MAX,
     "a number of threads"},
    {"book", 0, CLI_ARG_STRING, CLI_CMD_INGEST, CLI_OPT_BOOK, "ID",
     "price book to rate with (default: the only one)", 0, 0, NULL},
    {"quiet", 0, CLI_ARG_BOOL, CLI_CMD_INGEST, CLI_OPT_QUIET, NULL,
     "no progress, and no rejected records listed on\n"
     "stderr (the summary is still printed)", 0, 0, NULL},

    /* billing rejected */
    {"reason", 0, CLI_ARG_STRING, CLI_CMD_REJECTED, CLI_OPT_REASON, "CODE",
     "only this reason (invalid, parse, conflict,\n"
     "unknown_account, no_price, range, too_large)", 0, 0, NULL},
    {"limit", 0, CLI_ARG_COUNT, CLI_CMD_REJECTED, CLI_OPT_LIMIT, "N",
     "list at most N rows (default 100)", 0, CLI_LIMIT_MAX, "a number of rows"},
    {"all", 0, CLI_ARG_BOOL, CLI_CMD_REJECTED, CLI_OPT_ALL, NULL,
     "list resolved rows too", 0, 0, NULL},
    {"book", 0, CLI_ARG_STRING, CLI_CMD_REJECTED, CLI_OPT_BOOK, "ID",
     "price book to rate with (default: the only one)", 0, 0, NULL},

    /* billing account */
    {"at", 0, CLI_ARG_INSTANT, CLI_CMD_ACCOUNT, CLI_OPT_AT, "TIME",
     "RFC 3339 instant (default: now)", 0, 0, NULL},
    {"format", 0, CLI_ARG_CHOICE, CLI_CMD_ACCOUNT, CLI_OPT_FORMAT, "FMT",
     "text (default: key=value lines) or json (the\n"
     "document of billingd's GET .../balance?at=TIME)", 0, 0, "text|json"},
    {"book", 0, CLI_ARG_STRING, CLI_CMD_ACCOUNT, CLI_OPT_BOOK, "ID",
     "price book (default: the only one)", 0, 0, NULL},

    /* billing load */
    {"book", 0, CLI_ARG_STRING, CLI_CMD_LOAD, CLI_OPT_BOOK, "ID",
     "the price book's id in the database (default: " CLI_DEFAULT_BOOK ")", 0, 0, NULL},

    /* billing apikey */
    {"scope", 0, CLI_ARG_STRING, CLI_CMD_APIKEY, CLI_OPT_SCOPE, "SCOPE",
     "a scope of the key (repeat for more): events:write,\n"
     "accounts:read, invoices:read, admin", 0, 0, NULL},
    {"account", 0, CLI_ARG_STRING, CLI_CMD_APIKEY, CLI_OPT_ACCOUNT, "ID",
     "bind the key to account ID: it reads that account\n"
     "alone (others are not found)", 0, 0, NULL},
    {"label", 0, CLI_ARG_STRING, CLI_CMD_APIKEY, CLI_OPT_LABEL, "TEXT",
     "a note on the key (1 to 200 characters)", 0, 0, NULL},

    /* billing invoice: the usage lines describe all but -j */
    {"period", 0, CLI_ARG_MONTH, CLI_CMD_INVOICE, CLI_OPT_PERIOD, "YYYY-MM", NULL, 0, 0, NULL},
    {"account", 0, CLI_ARG_STRING, CLI_CMD_INVOICE, CLI_OPT_ACCOUNT, "ID", NULL, 0, 0, NULL},
    {"status", 0, CLI_ARG_CHOICE, CLI_CMD_INVOICE, CLI_OPT_STATUS, "S", NULL, 0, 0,
     "draft|finalized|void"},
    {"series", 0, CLI_ARG_STRING, CLI_CMD_INVOICE, CLI_OPT_SERIES, "S", NULL, 0, 0, NULL},
    {"format", 0, CLI_ARG_STRING, CLI_CMD_INVOICE, CLI_OPT_FORMAT, "FMT", NULL, 0, 0, NULL},
    {"out", 0, CLI_ARG_FILE, CLI_CMD_INVOICE, CLI_OPT_OUT, "DIR", NULL, 0, 0, NULL},
    {"reason", 0, CLI_ARG_STRING, CLI_CMD_INVOICE, CLI_OPT_REASON, "TEXT", NULL, 0, 0, NULL},
    {"amount", 0, CLI_ARG_STRING, CLI_CMD_INVOICE, CLI_OPT_AMOUNT, "X", NULL, 0, 0, NULL},
    {"reference", 0, CLI_ARG_STRING, CLI_CMD_INVOICE, CLI_OPT_REFERENCE, "KEY", NULL, 0, 0,
     NULL},
    {"method", 0, CLI_ARG_CHOICE, CLI_CMD_INVOICE, CLI_OPT_METHOD, "M", NULL, 0, 0,
     "out_of_band"},
    {"limit", 0, CLI_ARG_COUNT, CLI_CMD_INVOICE, CLI_OPT_LIMIT, "N", NULL, 0, CLI_LIMIT_MAX,
     "a number of invoices"},
    {"jobs", 'j', CLI_ARG_COUNT, CLI_CMD_INVOICE, CLI_OPT_JOBS, "N",
     "export: worker threads, each with a connection,\n"
     "writing the same files (1..64, default 1)", 0, CLI_EXPORT_JOBS_MAX,
     "a number of connections"},

    /* every database command */
    {"db", 0, CLI_ARG_STRING, CLI_CMD_WITH_DB, CLI_OPT_DB, "CONNINFO", DB_HELP, 0, 0, NULL},
    {"to", 0, CLI_ARG_COUNT, CLI_CMD_DB, CLI_OPT_TO, "VERSION",
     "migrate: stop at this version (default: the latest)", 0, 9999, "a schema version"},

    /* every command */
    {"help", 0, CLI_ARG_BOOL, ~0u, CLI_OPT_HELP, NULL, "print this help", 0, 0, NULL},
    {NULL, 0, CLI_ARG_BOOL, 0, CLI_OPT_HELP, NULL, NULL, 0, 0, NULL},
};
/* clang-format on */
