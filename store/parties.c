/*
 * parties.c - the customer and the seller of invoices, read from the
 * catalog. See parties.h.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "parties.h"
#include "rowtext.h"

#define SQL_PARTY                                                                             \
    "SELECT a.id AS account, coalesce(a.name, a.id) AS name, coalesce(a.email, '') AS email," \
    " coalesce(a.billing_address, '') AS billing_address, coalesce(a.tax_id, '') AS tax_id,"  \
    " a.language FROM billing.accounts a WHERE a.id = $1::text"

static const bs_rowtext_field party_fields[] = {
    BS_ROWTEXT(bs_party, account), BS_ROWTEXT(bs_party, name),
    BS_ROWTEXT(bs_party, email),   BS_ROWTEXT(bs_party, billing_address),
    BS_ROWTEXT(bs_party, tax_id),  BS_ROWTEXT(bs_party, language),
};

#define SQL_ISSUER                                                                     \
    "SELECT book_id AS book, legal_name, coalesce(address, '') AS address,"            \
    " coalesce(tax_id, '') AS tax_id, coalesce(contact, '') AS contact,"               \
    " coalesce(payment_instructions, '') AS payment_instructions,"                     \
    " coalesce(footer, '') AS footer, payment_terms_days::text AS payment_terms_days," \
    " coalesce(encode(logo_png, 'hex'), '') AS logo_hex"                               \
    " FROM billing.issuers WHERE book_id = $1::text"

static const bs_rowtext_field issuer_fields[] = {
    BS_ROWTEXT(bs_issuer, book),     BS_ROWTEXT(bs_issuer, legal_name),
    BS_ROWTEXT(bs_issuer, address),  BS_ROWTEXT(bs_issuer, tax_id),
    BS_ROWTEXT(bs_issuer, contact),  BS_ROWTEXT(bs_issuer, payment_instructions),
    BS_ROWTEXT(bs_issuer, footer),   BS_ROWTEXT(bs_issuer, payment_terms_days),
    BS_ROWTEXT(bs_issuer, logo_hex),
};

/* Row 0 of @res as a struct of @size bytes with its text behind it, or NULL. */
static void *one_row(const PGresult *res, const bs_rowtext_field *map, size_t n, size_t size)
{
    char *p = malloc(size + bs_rowtext_size(res, 0, map, n));

    if (p != NULL)
        bs_rowtext_fill(res, 0, map, n, p, p + size);
    return p;
}

/* One row by key @key of @sql into *@out, NULL when no row. */
static bs_status get(bs_conn *c, const char *name, const char *sql, const char *key,
                     const bs_rowtext_field *map, size_t n, size_t size, void **out, bs_error *err)
{
    const char *params[1] = {key};
    PGresult *res;
    bs_status st = BS_OK;

    *out = NULL;
    res = bs_query_prepared(c, name, sql, 1, params, err);
    if (res == NULL)
        return err != NULL ? err->status : BS_ERR_FATAL;
    if (bs_rowtext_check(res, map, n) != 0)
        st = bs_error_set(err, BS_ERR_FATAL, "%s: a column is missing from the query", name);
    else if (PQntuples(res) == 1 && (*out = one_row(res, map, n, size)) == NULL)
        st = bs_error_set(err, BS_ERR_NOMEM, "out of memory");
    PQclear(res);
    return st;
}

bs_status bs_party_get(bs_conn *c, const char *account, bs_party **out, bs_error *err)
{
    void *p;
    bs_status st = get(c, "bs_party_get", SQL_PARTY, account, party_fields,
                       sizeof(party_fields) / sizeof(party_fields[0]), sizeof(bs_party), &p, err);

    *out = p;
    if (st == BS_OK && p == NULL)
        return bs_error_set(err, BS_ERR_INVALID, "no account '%s'", account);
    return st;
}

bs_status bs_issuer_get(bs_conn *c, const char *book, bs_issuer **out, bs_error *err)
{
    void *p;
    bs_status st =
        get(c, "bs_issuer_get", SQL_ISSUER, book, issuer_fields,
            sizeof(issuer_fields) / sizeof(issuer_fields[0]), sizeof(bs_issuer), &p, err);

    *out = p;
    return st;
}
