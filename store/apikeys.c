/*
 * apikeys.c - the HTTP API's keys (apikeys.h): libsodium for the secret
 * and its hash, the SQL of billing.api_keys.
 */
#include "config.h"

#include <inttypes.h>
#include <libpq-fe.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apikeys.h"

#define SECRET_BYTES 32
#define HASH_BYTES 32
/* base64url of 32 bytes without padding. */
#define SECRET_TEXT 43

#define TIME_TEXT(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"

#define SQL_CREATE                                                          \
    "INSERT INTO billing.api_keys (secret_hash, scopes, account_id, label)" \
    " VALUES (decode($1::text, 'hex'), $2::text[], $3::text, $4::text) RETURNING id"
#define SQL_LIST                                                              \
    "SELECT id, array_to_string(scopes, ','), account_id, label, " TIME_TEXT( \
        "created_at") ", " TIME_TEXT("revoked_at") " FROM billing.api_keys ORDER BY id"
#define SQL_REVOKE                                                         \
    "UPDATE billing.api_keys SET revoked_at = greatest(now(), created_at)" \
    " WHERE id = $1::bigint AND revoked_at IS NULL"
#define SQL_CHECK                                                                 \
    "SELECT encode(secret_hash, 'hex'), array_to_string(scopes, ','), account_id" \
    " FROM billing.api_keys WHERE id = $1::bigint AND revoked_at IS NULL"

static const char *const scope_names[] = {"events:write", "accounts:read", "invoices:read",
                                          "admin"};
#define N_SCOPES (sizeof(scope_names) / sizeof(scope_names[0]))

int bs_apikey_init(void)
{
    return sodium_init() < 0 ? -1 : 0;
}

unsigned bs_apikey_scope(const char *name)
{
    size_t i;

    for (i = 0; i < N_SCOPES; i++)
        if (strcmp(name, scope_names[i]) == 0)
            return 1u << i;
    return 0;
}

const char *bs_apikey_scope_name(unsigned bit)
{
    size_t i;

    for (i = 0; i < N_SCOPES; i++)
        if (bit == 1u << i)
            return scope_names[i];
    return NULL;
}

/* The bits of a comma-separated list of scope names (unknown names count for nothing). */
static unsigned scopes_parse(const char *list)
{
    char name[32];
    unsigned bits = 0;
    size_t n;

    while (*list != '\0') {
        n = strcspn(list, ",");
        if (n < sizeof(name)) {
            memcpy(name, list, n);
            name[n] = '\0';
            bits |= bs_apikey_scope(name);
        }
        list += n;
        if (*list == ',')
            list++;
    }
    return bits;
}

static void hash_hex(const unsigned char *secret, char hex[2 * HASH_BYTES + 1])
{
    unsigned char h[HASH_BYTES];

    crypto_generichash(h, sizeof(h), secret, SECRET_BYTES, NULL, 0);
    sodium_bin2hex(hex, 2 * HASH_BYTES + 1, h, sizeof(h));
    sodium_memzero(h, sizeof(h));
}

bs_status bs_apikey_create(bs_conn *c, unsigned scopes, const char *account, const char *label,
                           char key[BS_APIKEY_TEXT_MAX], int64_t *id, bs_error *err)
{
    unsigned char secret[SECRET_BYTES];
    char secret_text[SECRET_TEXT + 1];
    char hex[2 * HASH_BYTES + 1];
    const char *names[N_SCOPES];
    const char *params[4];
    char *array;
    PGresult *res;
    size_t n = 0;
    size_t i;

    if (scopes == 0 || (scopes & ~BS_SCOPE_ALL) != 0)
        return bs_error_set(err, BS_ERR_INVALID, "apikey: no scope, or an unknown one");
    for (i = 0; i < N_SCOPES; i++)
        if (scopes & (1u << i))
            names[n++] = scope_names[i];
    array = bs_text_array(names, n);
    if (array == NULL)
        return bs_error_set(err, BS_ERR_NOMEM, "out of memory");
    randombytes_buf(secret, sizeof(secret));
    hash_hex(secret, hex);
    sodium_bin2base64(secret_text, sizeof(secret_text), secret, sizeof(secret),
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    sodium_memzero(secret, sizeof(secret));
    params[0] = hex;
    params[1] = array;
    params[2] = account;
    params[3] = label;
    res = bs_query(c, SQL_CREATE, 4, params, err);
    free(array);
    if (res == NULL) {
        sodium_memzero(secret_text, sizeof(secret_text));
        return err->status;
    }
    *id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    snprintf(key, BS_APIKEY_TEXT_MAX, "bk_%" PRId64 "_%s", *id, secret_text);
    sodium_memzero(secret_text, sizeof(secret_text));
    return BS_OK;
}

static const char *nullable(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

bs_status bs_apikey_list(bs_conn *c, bs_apikey_fn fn, void *arg, bs_error *err)
{
    PGresult *res;
    int i;

    res = bs_query(c, SQL_LIST, 0, NULL, err);
    if (res == NULL)
        return err->status;
    for (i = 0; i < PQntuples(res); i++) {
        bs_apikey k;

        k.id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        k.scopes = scopes_parse(PQgetvalue(res, i, 1));
        k.account = nullable(res, i, 2);
        k.label = nullable(res, i, 3);
        k.created_at = PQgetvalue(res, i, 4);
        k.revoked_at = nullable(res, i, 5);
        if (fn(arg, &k) != 0)
            break;
    }
    PQclear(res);
    return BS_OK;
}

bs_status bs_apikey_revoke(bs_conn *c, int64_t id, int *done, bs_error *err)
{
    char idtext[24];
    const char *params[1] = {idtext};
    int64_t n = 0;
    bs_status st;

    snprintf(idtext, sizeof(idtext), "%" PRId64, id);
    st = bs_command(c, SQL_REVOKE, 1, params, &n, err);
    *done = st == BS_OK && n == 1;
    return st;
}

/* Parse "bk_<id>_<secret>" into @id and the secret's bytes; 0 if well formed, else -1. */
static int key_parse(const char *key, int64_t *id, unsigned char secret[SECRET_BYTES])
{
    const char *p = key;
    const char *end;
    size_t len;
    int64_t v = 0;

    if (strncmp(p, "bk_", 3) != 0)
        return -1;
    p += 3;
    for (end = p; *end >= '0' && *end <= '9' && end - p < 18; end++)
        v = v * 10 + (*end - '0');
    if (end == p || *end != '_' || v < 1)
        return -1;
    end++;
    if (strlen(end) != SECRET_TEXT)
        return -1;
    if (sodium_base642bin(secret, SECRET_BYTES, end, SECRET_TEXT, NULL, &len, NULL,
                          sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
        len != SECRET_BYTES)
        return -1;
    *id = v;
    return 0;
}

const char bs_apikey_check_sql[] = SQL_CHECK;

int bs_apikey_check_id(const char *key, char idtext[24])
{
    unsigned char secret[SECRET_BYTES];
    int64_t id;
    int bad = key_parse(key, &id, secret);

    sodium_memzero(secret, sizeof(secret));
    if (bad)
        return -1;
    snprintf(idtext, 24, "%" PRId64, id);
    return 0;
}

void bs_apikey_check_rows(const PGresult *res, const char *key, bs_apikey_auth *out, int *valid)
{
    unsigned char secret[SECRET_BYTES];
    unsigned char want[HASH_BYTES];
    unsigned char got[HASH_BYTES];
    const char *account;
    int64_t id;
    size_t len;

    *valid = 0;
    memset(out, 0, sizeof(*out));
    if (key_parse(key, &id, secret) != 0)
        return;
    if (PQntuples(res) == 1 &&
        sodium_hex2bin(want, sizeof(want), PQgetvalue(res, 0, 0), 2 * HASH_BYTES, NULL, &len,
                       NULL) == 0 &&
        len == HASH_BYTES) {
        crypto_generichash(got, sizeof(got), secret, sizeof(secret), NULL, 0);
        account = nullable(res, 0, 2);
        if (sodium_memcmp(got, want, HASH_BYTES) == 0 &&
            (account == NULL || strlen(account) < sizeof(out->account))) {
            out->id = id;
            out->scopes = scopes_parse(PQgetvalue(res, 0, 1));
            out->bound = account != NULL;
            if (account != NULL)
                snprintf(out->account, sizeof(out->account), "%s", account);
            *valid = 1;
        }
    }
    sodium_memzero(secret, sizeof(secret));
}

bs_status bs_apikey_check(bs_conn *c, const char *key, bs_apikey_auth *out, int *valid,
                          bs_error *err)
{
    char idtext[24];
    const char *params[1] = {idtext};
    PGresult *res;

    *valid = 0;
    memset(out, 0, sizeof(*out));
    if (bs_apikey_check_id(key, idtext) != 0)
        return BS_OK;
    res = bs_query_prepared(c, BS_APIKEY_CHECK_STMT, SQL_CHECK, 1, params, err);
    if (res == NULL)
        return err->status;
    bs_apikey_check_rows(res, key, out, valid);
    PQclear(res);
    return BS_OK;
}
