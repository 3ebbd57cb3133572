/*
 * cmd_apikey.c - `billing apikey create|list|revoke`: the keys of
 * billingd's HTTP API (doc/http-api.md). A key is printed once, when
 * made; the store keeps only its hash (store/apikeys.h).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apikeys.h"
#include "cli.h"
#include "dbcli.h"
#include "migrate.h"

typedef struct apikey_opts {
    const char *db;
    const char *account;
    const char *label;
    unsigned scopes;
} apikey_opts;

static void usage(FILE *out)
{
    fputs("Usage: billing apikey create --scope SCOPE... [--account ID] [--label TEXT]\n"
          "                             [--db CONNINFO]\n"
          "       billing apikey list [--db CONNINFO]\n"
          "       billing apikey revoke ID [--db CONNINFO]\n"
          "\n"
          "The keys of billingd's HTTP API (api.listen). create: make a key and print it\n"
          "once, as bk_ID_SECRET (only a hash of the secret is stored). list: every key,\n"
          "revoked ones too: id, scopes, account, created, revoked, label. revoke: the\n"
          "key is refused from now on.\n"
          "\n"
          "Options:\n",
          out);
    cli_help_options(out, CLI_CMD_APIKEY);
    fputs("\n"
          "Exit status: 0 done; 2 usage error; 3 invalid input (revoke: no such valid\n"
          "key); 4 internal error; 5 database error.\n",
          out);
}

/* Store one option, checked by its kind (a cli_take_fn). */
static int take_option(void *ctx, cli_opt_id id, const cli_value *v)
{
    apikey_opts *o = ctx;
    unsigned bit;

    switch (id) {
    case CLI_OPT_DB:
        o->db = v->text;
        return CLI_EXIT_OK;
    case CLI_OPT_SCOPE:
        bit = bs_apikey_scope(v->text);
        if (bit == 0)
            return cli_usage_error("apikey",
                                   "--scope: '%s' is not a scope (events:write, accounts:read, "
                                   "invoices:read, admin)",
                                   v->text);
        o->scopes |= bit;
        return CLI_EXIT_OK;
    case CLI_OPT_ACCOUNT:
        if (strlen(v->text) < 1 || strlen(v->text) > 128)
            return cli_usage_error("apikey", "--account: an account id has 1 to 128 bytes");
        o->account = v->text;
        return CLI_EXIT_OK;
    case CLI_OPT_LABEL:
        if (strlen(v->text) < 1 || strlen(v->text) > BS_APIKEY_LABEL_MAX)
            return cli_usage_error("apikey", "--label: 1 to 200 characters");
        o->label = v->text;
        return CLI_EXIT_OK;
    default:
        return cli_usage_error("apikey", "bad option");
    }
}

static int create(bs_conn *c, const apikey_opts *o)
{
    char key[BS_APIKEY_TEXT_MAX];
    bs_error err;
    int64_t id = 0;

    if (bs_apikey_create(c, o->scopes, o->account, o->label, key, &id, &err) != BS_OK)
        return dbcli_fail("apikey create", &err);
    printf("%s\n", key);
    fflush(stdout);
    return CLI_EXIT_OK;
}

/* A bs_apikey_fn: one line per key. */
static int print_key(void *arg, const bs_apikey *k)
{
    char scopes[80] = "";
    unsigned bit;

    (void)arg;
    for (bit = 1; bit <= BS_SCOPE_ALL; bit <<= 1) {
        if ((k->scopes & bit) == 0)
            continue;
        if (scopes[0] != '\0')
            strcat(scopes, ",");
        strcat(scopes, bs_apikey_scope_name(bit));
    }
    printf("%" PRId64 " %s account=%s created=%s revoked=%s %s\n", k->id, scopes,
           k->account != NULL ? k->account : "*", k->created_at,
           k->revoked_at != NULL ? k->revoked_at : "-", k->label != NULL ? k->label : "");
    return 0;
}

static int revoke(bs_conn *c, const char *arg)
{
    bs_error err;
    int64_t id = 0;
    int done = 0;
    const char *p;

    for (p = arg; *p >= '0' && *p <= '9' && p - arg < 18; p++)
        id = id * 10 + (*p - '0');
    if (p == arg || *p != '\0' || id < 1)
        return cli_usage_error("apikey", "revoke '%s': expected a key id (a positive number)", arg);
    if (bs_apikey_revoke(c, id, &done, &err) != BS_OK)
        return dbcli_fail("apikey revoke", &err);
    if (!done) {
        cli_error("apikey revoke: no valid key %" PRId64 " (unknown or already revoked)", id);
        return CLI_EXIT_INPUT;
    }
    printf("revoked %" PRId64 "\n", id);
    return CLI_EXIT_OK;
}

int cmd_apikey(int argc, char **argv)
{
    static const char *const verbs[] = {"create", "list", "revoke", NULL};
    apikey_opts o;
    bs_error err;
    bs_conn *c;
    int first = 0;
    int verb = 0;
    int rc;

    memset(&o, 0, sizeof(o));
    rc =
        cli_verb_parse("apikey", CLI_CMD_APIKEY, verbs, argc, argv, take_option, &o, &verb, &first);
    if (rc < 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    if (verb == 2 && first != argc - 1)
        return cli_usage_error("apikey", "revoke: one key ID needed");
    if (verb != 2 && first != argc)
        return cli_usage_error("apikey", "unexpected argument '%s'", argv[first]);
    if (verb == 0 && o.scopes == 0)
        return cli_usage_error("apikey", "create: at least one --scope needed");
    if (verb != 0 && (o.scopes != 0 || o.account != NULL || o.label != NULL))
        return cli_usage_error("apikey", "--scope, --account and --label are for create");
    if (bs_apikey_init() != 0) {
        cli_error("apikey: libsodium cannot be initialized");
        return CLI_EXIT_INTERNAL;
    }
    c = dbcli_connect(o.db);
    if (c == NULL)
        return CLI_EXIT_DATABASE;
    if (bs_schema_require(c, &err) != BS_OK)
        rc = dbcli_fail("apikey", &err);
    else if (verb == 0)
        rc = create(c, &o);
    else if (verb == 1)
        rc = bs_apikey_list(c, print_key, NULL, &err) == BS_OK ? CLI_EXIT_OK
                                                               : dbcli_fail("apikey list", &err);
    else
        rc = revoke(c, argv[first]);
    bs_close(c);
    return rc;
}
