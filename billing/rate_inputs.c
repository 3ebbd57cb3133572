/*
 * rate_inputs.c - which inputs `billing rate` rates: every one the user
 * names, or the shipped GPU-cloud example when none at all is given.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "rate_ctx.h"

/* ---------------------------------------------------------------------- */
/* The shipped example                                                     */
/* ---------------------------------------------------------------------- */

/* @out (PATH_LEN bytes) = @dir / @file; -1 when it does not fit. */
static int example_file(const char *dir, const char *file, char *out)
{
    size_t dl = strlen(dir);
    size_t fl = strlen(file);

    if (dl + 1 + fl >= PATH_LEN)
        return -1;
    memcpy(out, dir, dl);
    out[dl] = '/';
    memcpy(out + dl + 1, file, fl + 1);
    return 0;
}

/* @out (PATH_LEN bytes) = the example directory / @file. */
static int example_path(const rate_ctx *c, char *out, const char *file)
{
    if (example_file(c->example_dir, file, out) != 0) {
        cli_error("%s: path too long", c->example_dir);
        return -1;
    }
    return 0;
}

/*
 * The directory of the running program into @out (PATH_LEN bytes), with a
 * trailing "/.libs" removed: libtool runs an uninstalled program from
 * there. 0, or -1 when /proc/self/exe cannot be read.
 */
static int program_dir(char *out)
{
    ssize_t n = readlink("/proc/self/exe", out, PATH_LEN - 1);
    char *slash;

    if (n <= 0)
        return -1;
    out[n] = '\0';
    slash = strrchr(out, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    n = (ssize_t)strlen(out);
    if (n >= 6 && strcmp(out + n - 6, "/.libs") == 0)
        out[n - 6] = '\0';
    return 0;
}

/*
 * Where the GPU-cloud example lives: installed under pkgdatadir, or,
 * for a program run from its build tree, in billing/examples beside it
 * (a link to the source tree's examples, made by the build). No path of
 * the build machine is compiled in.
 */
static int find_example(rate_ctx *c)
{
    static const char sub[] = "/examples/gpu-cloud";
    char dirs[2][PATH_LEN];
    char probe[PATH_LEN];
    size_t n_dirs = 1;
    size_t len;
    size_t i;

    snprintf(dirs[0], PATH_LEN, "%s", BILLING_PKGDATADIR "/examples/gpu-cloud");
    if (program_dir(dirs[1]) == 0) {
        len = strlen(dirs[1]);
        if (len + sizeof(sub) <= PATH_LEN) {
            memcpy(dirs[1] + len, sub, sizeof(sub));
            n_dirs = 2;
        }
    }
    for (i = 0; i < n_dirs; i++) {
        if (example_file(dirs[i], "pricebook.json", probe) == 0 && access(probe, R_OK) == 0) {
            memcpy(c->example_dir, dirs[i], PATH_LEN);
            return 0;
        }
    }
    cli_error("no --pricebook, --accounts or event file given, and the shipped example is "
              "not installed (looked in %s%s%s)",
              dirs[0], n_dirs > 1 ? " and " : "", n_dirs > 1 ? dirs[1] : "");
    return -1;
}

/* Standard input is a pipe, socket or file: events were piped in, whether or not '-' says so. */
static int stdin_piped(void)
{
    struct stat st;

    if (fstat(STDIN_FILENO, &st) != 0)
        return 0;
    return S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISREG(st.st_mode);
}

/* The shipped example, for a run given no input at all; stderr says so. */
static int use_example(rate_ctx *c)
{
    rate_opts *o = &c->opts;

    if (find_example(c) != 0)
        return -1;
    if (example_path(c, c->example_pricebook, "pricebook.json") != 0 ||
        example_path(c, c->example_accounts, "accounts.json") != 0 ||
        example_path(c, c->example_events, "events.jsonl") != 0)
        return -1;
    o->pricebook = c->example_pricebook;
    o->accounts = c->example_accounts;
    c->example_argv[0] = c->example_events;
    o->files = c->example_argv;
    o->n_files = 1;
    cli_error("no input given: rating the shipped example (%s, %s, %s)", o->pricebook, o->accounts,
              c->example_events);
    return 0;
}

/*
 * The inputs: the example serves only a run given none at all (no price
 * book, no accounts, no event file, nothing piped in). Once any is given,
 * every one must be, or the run stops naming what is missing: mixing a
 * user's price book with the example's accounts or events only produces
 * confusing errors about files the user never named.
 */
int rate_check_inputs(rate_ctx *c)
{
    rate_opts *o = &c->opts;
    int piped = stdin_piped();
    char missing[200];

    if (o->pricebook == NULL && o->accounts == NULL && o->n_files == 0 && !piped)
        return use_example(c) == 0 ? CLI_EXIT_OK : CLI_EXIT_INPUT;
    if (o->n_files == 0 && piped) {
        c->example_argv[0] = (char *)"-";
        o->files = c->example_argv;
        o->n_files = 1;
    }
    if (o->pricebook != NULL && o->accounts != NULL && o->n_files > 0)
        return CLI_EXIT_OK;
    snprintf(missing, sizeof(missing), "%s%s%s%s%s", o->pricebook == NULL ? "--pricebook FILE" : "",
             o->pricebook == NULL && o->accounts == NULL ? ", " : "",
             o->accounts == NULL ? "--accounts FILE" : "",
             (o->pricebook == NULL || o->accounts == NULL) && o->n_files == 0 ? ", " : "",
             o->n_files == 0 ? "an event file ('-' for standard input)" : "");
    return cli_usage_error("rate", "missing %s%s", missing,
                           o->accounts == NULL && o->account != NULL
                               ? " (--account ID only picks one account to print; the "
                                 "accounts file is --accounts FILE)"
                               : "");
}
