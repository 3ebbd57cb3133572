/*
 * cli.c - the command line of every subcommand: one parser over the
 * option table (options.c) that checks each argument by its kind, one
 * --help generator for the option lists, and the error messages.
 */
#include "config.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing.h"
#include "cli.h"

/* Most rows one command takes (getopt_long's table is built on the stack). */
#define CMD_OPTIONS_MAX 48
/* The column where --help's option texts start. */
#define HELP_COLUMN 25

void cli_error(const char *fmt, ...)
{
    va_list ap;

    fputs("billing: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
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
 * The option being handled, as the user typed it ("-j/--jobs" or "--jobs"),
 * while cli_parse checks it and runs the take function; "" otherwise.
 * Messages name it so that a user who typed -j0 is told about -j.
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

/* ---------------------------------------------------------------------- */
/* The kinds                                                               */
/* ---------------------------------------------------------------------- */

/* "YYYY-MM" into year * 12 + month - 1. Returns 0 or -1. */
static int parse_month(const char *s, int32_t *out)
{
    int year = 0;
    int month = 0;
    int i;

    if (strlen(s) != 7 || s[4] != '-')
        return -1;
    for (i = 0; i < 7; i++) {
        if (i != 4 && (s[i] < '0' || s[i] > '9'))
            return -1;
    }
    for (i = 0; i < 4; i++)
        year = year * 10 + (s[i] - '0');
    month = (s[5] - '0') * 10 + (s[6] - '0');
    if (year < 1900 || year > 2199 || month < 1 || month > 12)
        return -1;
    *out = year * 12 + month - 1;
    return 0;
}

/* "SIZE" with an optional K, M or G suffix (powers of 1024) into bytes, within @min..@max. */
static int parse_size(const char *arg, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    unsigned shift = 0;
    const char *p = arg;

    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > ((uint64_t)1 << 40))
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (*p == 'K' || *p == 'k')
        shift = 10;
    else if (*p == 'M' || *p == 'm')
        shift = 20;
    else if (*p == 'G' || *p == 'g')
        shift = 30;
    if (shift != 0)
        p++;
    if (*p != '\0' || v > (SIZE_MAX >> 1 >> shift) || (v << shift) < min || (v << shift) > max)
        return -1;
    *out = v << shift;
    return 0;
}

/* A size as the shortest exact spelling with a suffix: 64K, 64G. */
static void size_text(uint64_t n, char *out, size_t size)
{
    static const char suffix[] = "KMG";
    int i;

    for (i = 2; i >= 0; i--) {
        if (n != 0 && n % ((uint64_t)1 << (10 * (i + 1))) == 0) {
            snprintf(out, size, "%llu%c", (unsigned long long)(n >> (10 * (i + 1))), suffix[i]);
            return;
        }
    }
    snprintf(out, size, "%llu", (unsigned long long)n);
}

/* "3d", "12h", "30m", "45s" or "0" into seconds; -1 if malformed. */
static int64_t parse_duration(const char *s)
{
    char *end;
    long long v = strtoll(s, &end, 10);

    if (end == s || v < 0 || v > 3660LL * 86400)
        return -1;
    if (*end == '\0')
        return v == 0 ? 0 : -1;
    if (end[1] != '\0')
        return -1;
    switch (*end) {
    case 'd':
        return v * 86400;
    case 'h':
        return v * 3600;
    case 'm':
        return v * 60;
    case 's':
        return v;
    }
    return -1;
}

/* The index of @arg among the '|'-separated @words, or -1. */
static int choice_index(const char *words, const char *arg)
{
    size_t n = strlen(arg);
    const char *w = words;
    int i;

    if (strchr(arg, '|') != NULL)
        return -1;
    for (i = 0; w != NULL; i++) {
        if (strncmp(w, arg, n) == 0 && (w[n] == '|' || w[n] == '\0'))
            return i;
        w = strchr(w, '|');
        if (w != NULL)
            w++;
    }
    return -1;
}

/* "json, table or csv" from "json|table|csv". */
static void choice_text(const char *words, char *out, size_t size)
{
    const char *bar;
    size_t n = 0;
    int len;

    out[0] = '\0';
    while (n < size) {
        bar = strchr(words, '|');
        len = bar != NULL ? (int)(bar - words) : (int)strlen(words);
        n += (size_t)snprintf(out + n, size - n, "%.*s%s", len, words,
                              bar == NULL                    ? ""
                              : strchr(bar + 1, '|') != NULL ? ", "
                                                             : " or ");
        if (bar == NULL)
            break;
        words = bar + 1;
    }
}

/* Check @arg by @o's kind into *@v; CLI_EXIT_OK, or CLI_EXIT_USAGE after a message. */
static int convert(const char *cmd, const cli_option *o, const char *arg, cli_value *v)
{
    const char *name = cli_option_typed(o->name);
    char text[160];
    char lo[32];
    char hi[32];

    memset(v, 0, sizeof(*v));
    v->text = arg;
    switch (o->kind) {
    case CLI_ARG_BOOL:
    case CLI_ARG_STRING:
    case CLI_ARG_FILE:
        return CLI_EXIT_OK;
    case CLI_ARG_COUNT:
        return cli_count(cmd, name, arg, o->max, o->what, &v->n);
    case CLI_ARG_MONTH:
        if (parse_month(arg, &v->month) == 0)
            return CLI_EXIT_OK;
        return cli_usage_error(cmd, "%s '%s': expected YYYY-MM (1900-01..2199-12)", name, arg);
    case CLI_ARG_SIZE:
        if (parse_size(arg, o->min, o->max, &v->n) == 0)
            return CLI_EXIT_OK;
        size_text(o->min, lo, sizeof(lo));
        size_text(o->max, hi, sizeof(hi));
        return cli_usage_error(cmd, "%s '%s': expected %s from %s to %s (suffix K, M or G)", name,
                               arg, o->what, lo, hi);
    case CLI_ARG_CHOICE:
        v->choice = choice_index(o->what, arg);
        if (v->choice >= 0)
            return CLI_EXIT_OK;
        choice_text(o->what, text, sizeof(text));
        return cli_usage_error(cmd, "%s '%s': expected %s", name, arg, text);
    case CLI_ARG_INSTANT:
        if (billing_time_parse(arg, &v->instant, NULL, 0) == BILLING_OK)
            return CLI_EXIT_OK;
        return cli_usage_error(cmd,
                               "%s '%s': expected an RFC 3339 instant with an offset "
                               "(2026-01-05T12:00:00+08:00)",
                               name, arg);
    case CLI_ARG_DURATION:
        v->seconds = parse_duration(arg);
        if (v->seconds >= 0)
            return CLI_EXIT_OK;
        return cli_usage_error(cmd, "%s '%s': expected a duration such as 3d, 12h, 30m, 45s or 0",
                               name, arg);
    }
    return cli_usage_error(cmd, "%s: unknown kind of option", name);
}

/* ---------------------------------------------------------------------- */
/* Parsing                                                                 */
/* ---------------------------------------------------------------------- */

/*
 * getopt_long's table for the rows of @bit into @longs (@rows: the row of
 * each), and the short options: those with a letter, after a ':' that
 * makes a missing argument ':' rather than '?'. A long option's value is
 * 256 + its index; a short one's, its letter. Returns the count, or -1 if
 * the command has more rows than CMD_OPTIONS_MAX.
 */
static int command_options(unsigned bit, struct option *longs, const cli_option **rows,
                           char *shorts, size_t size)
{
    const cli_option *o;
    size_t s = 0;
    int n = 0;

    shorts[s++] = ':';
    shorts[s++] = 'h';
    for (o = cli_options; o->name != NULL; o++) {
        if ((o->cmds & bit) == 0)
            continue;
        if (n == CMD_OPTIONS_MAX)
            return -1;
        rows[n] = o;
        longs[n].name = o->name;
        longs[n].has_arg = o->kind == CLI_ARG_BOOL ? no_argument : required_argument;
        longs[n].flag = NULL;
        longs[n].val = o->letter != 0 ? o->letter : 256 + n;
        if (o->letter != 0 && s + 3 < size) {
            shorts[s++] = o->letter;
            if (o->kind != CLI_ARG_BOOL)
                shorts[s++] = ':';
        }
        n++;
    }
    shorts[s] = '\0';
    memset(&longs[n], 0, sizeof(longs[n]));
    return n;
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
 * The row getopt_long returned as @opt, and typed_option set to it as
 * typed: "--jobs", or "-j/--jobs" for the short form (both, so that the
 * message reads the same to a script that looks for the long name).
 */
static const cli_option *returned_row(const cli_option *const *rows, int n, int opt, int longindex)
{
    int i;

    if (longindex >= 0) {
        snprintf(typed_option, sizeof(typed_option), "--%s", rows[longindex]->name);
        return rows[longindex];
    }
    if (opt >= 256 && opt - 256 < n) {
        snprintf(typed_option, sizeof(typed_option), "--%s", rows[opt - 256]->name);
        return rows[opt - 256];
    }
    for (i = 0; i < n; i++) {
        if (rows[i]->letter == opt) {
            snprintf(typed_option, sizeof(typed_option), "-%c/--%s", opt, rows[i]->name);
            return rows[i];
        }
    }
    return NULL;
}

/* One option getopt_long returned: -1 for --help, else an exit code. */
static int take_one(const char *cmd, const cli_option *row, const char *arg, cli_take_fn take,
                    void *ctx)
{
    cli_value v;
    int rc;

    if (row->id == CLI_OPT_HELP)
        return -1;
    rc = convert(cmd, row, arg, &v);
    if (rc == CLI_EXIT_OK)
        rc = take(ctx, row->id, &v);
    typed_option[0] = '\0';
    return rc;
}

int cli_parse(const char *cmd, unsigned bit, int argc, char **argv, cli_take_fn take, void *ctx,
              int *first_arg)
{
    struct option longs[CMD_OPTIONS_MAX + 1];
    const cli_option *rows[CMD_OPTIONS_MAX];
    const cli_option *row;
    char shorts[64];
    char bad[48];
    int longindex;
    int opt;
    int n;
    int rc;

    n = command_options(bit, longs, rows, shorts, sizeof(shorts));
    if (n < 0) {
        cli_error("%s: more than %d options", cmd, CMD_OPTIONS_MAX);
        return CLI_EXIT_INTERNAL;
    }
    /*
     * Reset getopt's global state: a subcommand may run after another
     * parse. glibc forgets the place inside the last word (a cluster such
     * as -jx, or the end of a long option) only when optind is 0.
     */
#ifdef __GLIBC__
    optind = 0;
#else
    optind = 1;
#endif
    opterr = 0;
    for (;;) {
        longindex = -1;
        optopt = 0;
        opt = getopt_long(argc, argv, shorts, longs, &longindex);
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
        row = returned_row(rows, n, opt, longindex);
        if (row == NULL)
            return cli_usage_error(cmd, "unknown option");
        rc = take_one(cmd, row, optarg, take, ctx);
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    *first_arg = optind;
    return CLI_EXIT_OK;
}

int cli_verb_parse(const char *cmd, unsigned bit, const char *const *verbs, int argc, char **argv,
                   cli_take_fn take, void *ctx, int *verb, int *first_arg)
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
    rc = cli_parse(cmd, bit, argc - 1, argv + 1, take, ctx, first_arg);
    *first_arg += 1;
    return rc;
}

/* ---------------------------------------------------------------------- */
/* --help                                                                  */
/* ---------------------------------------------------------------------- */

void cli_help_options(FILE *out, unsigned bit)
{
    const cli_option *o;
    const char *line;
    const char *nl;
    int n;

    for (o = cli_options; o->name != NULL; o++) {
        if ((o->cmds & bit) == 0 || o->help == NULL)
            continue;
        if (o->letter != 0)
            n = fprintf(out, "  -%c, --%s", o->letter, o->name);
        else
            n = fprintf(out, "  --%s", o->name);
        if (o->arg != NULL)
            n += fprintf(out, " %s", o->arg);
        /* Two spaces at least between an option and its text. */
        fprintf(out, "%*s", n + 2 > HELP_COLUMN ? 2 : HELP_COLUMN - n, "");
        for (line = o->help; line != NULL; line = nl != NULL ? nl + 1 : NULL) {
            nl = strchr(line, '\n');
            if (line != o->help)
                fprintf(out, "%*s", HELP_COLUMN, "");
            fprintf(out, "%.*s\n", nl != NULL ? (int)(nl - line) : (int)strlen(line), line);
        }
    }
}
