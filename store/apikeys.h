/*
 * apikeys.h - the keys of billingd's HTTP API (billing.api_keys,
 * migration 0015): made by `billing apikey create`, listed, revoked, and
 * checked by the server on every request.
 *
 * A key reads bk_<id>_<secret>: <id> the row's id in decimal, <secret>
 * 32 random bytes from libsodium (randombytes_buf) in base64url without
 * padding (43 characters). It is shown once; the table keeps only the
 * BLAKE2b-256 hash of the secret bytes (crypto_generichash), compared in
 * constant time (sodium_memcmp). For a 256-bit random secret a fast hash
 * is enough: there is no dictionary to try, and a slow key derivation
 * would only cost the server time on every request.
 *
 * Every function needs bs_apikey_init to have succeeded once.
 */
#ifndef BILLING_STORE_APIKEYS_H
#define BILLING_STORE_APIKEYS_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* Scopes, as bits. */
#define BS_SCOPE_EVENTS_WRITE 0x1u  /* "events:write": POST /v1/events */
#define BS_SCOPE_ACCOUNTS_READ 0x2u /* "accounts:read": balances, usage, grants, subscriptions */
#define BS_SCOPE_INVOICES_READ 0x4u /* "invoices:read": invoices */
#define BS_SCOPE_ADMIN 0x8u         /* "admin": everything, catalog included */
#define BS_SCOPE_ALL 0xfu

/* Bytes of a key's text with its NUL ("bk_" + 19 digits + "_" + 43 + 1, rounded up). */
#define BS_APIKEY_TEXT_MAX 72
/* Most bytes of a label (200 characters of UTF-8). */
#define BS_APIKEY_LABEL_MAX 800

/*
 * bs_apikey_init - initialize libsodium (sodium_init). Returns 0, or -1
 * if it cannot be (no random source). Thread-safe, idempotent.
 */
int bs_apikey_init(void);

/* bs_apikey_scope - the bit of scope @name ("events:write", ...), 0 if unknown. */
unsigned bs_apikey_scope(const char *name);

/* bs_apikey_scope_name - the name of the scope bit @bit, NULL if not exactly one known bit. */
const char *bs_apikey_scope_name(unsigned bit);

/*
 * bs_apikey_create - make a key with the scopes @scopes (non-zero bits of
 * BS_SCOPE_ALL), bound to account @account (NULL: every account), with
 * @label (NULL: none; 1..200 characters): store its hash and write the
 * key's text, which is never stored, into @key (BS_APIKEY_TEXT_MAX
 * bytes); *@id gets its id. Returns BS_OK, BS_ERR_INVALID for bad
 * scopes, BS_ERR_CONSTRAINT for an account id or label the table refuses,
 * or a database error.
 */
bs_status bs_apikey_create(bs_conn *c, unsigned scopes, const char *account, const char *label,
                           char key[BS_APIKEY_TEXT_MAX], int64_t *id, bs_error *err);

/* A stored key as listed or checked. Texts are valid during the callback only (list). */
typedef struct bs_apikey {
    int64_t id;
    unsigned scopes;        /* BS_SCOPE_* bits */
    const char *account;    /* the account it is bound to, NULL for every account */
    const char *label;      /* NULL when none */
    const char *created_at; /* RFC 3339 UTC, whole seconds */
    const char *revoked_at; /* NULL while valid */
} bs_apikey;

/* bs_apikey_fn - receives each key of bs_apikey_list; non-zero stops the listing. */
typedef int (*bs_apikey_fn)(void *arg, const bs_apikey *k);

/* bs_apikey_list - every key, revoked ones too, by id. Returns BS_OK (also when @fn stopped). */
bs_status bs_apikey_list(bs_conn *c, bs_apikey_fn fn, void *arg, bs_error *err);

/*
 * bs_apikey_revoke - revoke key @id from now on. *@done is 1 if it was
 * valid and is now revoked, 0 if there is no such key or it was revoked
 * already. Returns BS_OK or a database error.
 */
bs_status bs_apikey_revoke(bs_conn *c, int64_t id, int *done, bs_error *err);

/* What bs_apikey_check found: a valid key's id, scopes and bound account. */
typedef struct bs_apikey_auth {
    int64_t id;
    unsigned scopes;
    int bound;         /* 1: it reads @account alone */
    char account[129]; /* the bound account (an ident: at most 128 bytes) */
} bs_apikey_auth;

/*
 * bs_apikey_check - whether @key (the text a client sent, any length) is
 * a valid key: well formed, stored, its secret's hash equal (constant
 * time), not revoked. *@valid gets 1 and @out its id, scopes and account,
 * or 0 (the reason is not told: a client learns nothing from it).
 * Returns BS_OK or a database error. Uses a prepared statement.
 */
bs_status bs_apikey_check(bs_conn *c, const char *key, bs_apikey_auth *out, int *valid,
                          bs_error *err);

/*
 * The check of bs_apikey_check in steps, for a caller that sends it with
 * other statements in one round trip (balance.h's bs_balance_fetch):
 * bs_apikey_check_sql, prepared as BS_APIKEY_CHECK_STMT, takes the key's
 * id as its one parameter.
 */
#define BS_APIKEY_CHECK_STMT "bs_apikey_check"
extern const char bs_apikey_check_sql[];

/*
 * bs_apikey_check_id - the id of @key as text into @idtext (24 bytes):
 * returns 0, or -1 for a malformed key (nothing to ask the database).
 */
int bs_apikey_check_id(const char *key, char idtext[24]);

/*
 * bs_apikey_check_rows - what bs_apikey_check says of @key given @res,
 * the rows of bs_apikey_check_sql for its id: *@valid and @out as there.
 */
void bs_apikey_check_rows(const PGresult *res, const char *key, bs_apikey_auth *out, int *valid);

#endif
