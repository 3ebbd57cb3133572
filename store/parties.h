/*
 * parties.h - the two parties of an invoice, read from the catalog
 * (migration 0014): the customer (billing.accounts: name, e-mail, billing
 * address, tax id, language) and the seller of a price book
 * (billing.issuers). `billing load` writes them (store/load.c); this is
 * the read side the documents use (documents/document.h).
 *
 * Every text field is "" when the cell is NULL. A result is one
 * allocation: free it with free(). Not thread-safe per connection.
 */
#ifndef BILLING_STORE_PARTIES_H
#define BILLING_STORE_PARTIES_H

#include "store.h"

/* The customer: an account as its documents name it. */
typedef struct bs_party {
    const char *account; /* the account id */
    const char *name;    /* the account's name, its id when it has none */
    const char *email;
    const char *billing_address; /* lines separated by "\n" */
    const char *tax_id;
    const char *language; /* "en" or "zh-Hans" */
} bs_party;

/* The seller of the invoices rated with a price book. */
typedef struct bs_issuer {
    const char *book; /* the price book's id */
    const char *legal_name;
    const char *address; /* lines separated by "\n" */
    const char *tax_id;
    const char *contact;
    const char *payment_instructions;
    const char *footer;
    const char *payment_terms_days; /* days from issue to due date, "0".."365" */
    const char *logo_hex;           /* the logo's PNG bytes in hex ("" for none) */
} bs_issuer;

/*
 * bs_party_get - the customer fields of account @account into *@out
 * (caller frees with free()). Returns BS_OK, BS_ERR_INVALID when there is
 * no such account (message names it), or a database error (*@out NULL).
 */
bs_status bs_party_get(bs_conn *c, const char *account, bs_party **out, bs_error *err);

/*
 * bs_issuer_get - the seller of price book @book into *@out (caller frees
 * with free()); *@out is NULL with BS_OK when the book has no issuer row
 * (documents then fall back to BILLING_PDF_SELLER). Returns BS_OK or a
 * database error.
 */
bs_status bs_issuer_get(bs_conn *c, const char *book, bs_issuer **out, bs_error *err);

#endif /* BILLING_STORE_PARTIES_H */
