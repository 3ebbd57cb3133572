/*
 * api_documents.h - the HTTP API's invoice, usage and quote routes
 * (doc/http-api-documents.md): GET /v1/invoices, GET /v1/invoices/{ref}
 * (JSON, .pdf, .csv), GET /v1/accounts/{id}/usage and POST /v1/quote.
 * api.c routes, checks keys and scopes, and sends what these handlers
 * fill in: an answer (status, type, bytes, caching headers) or a problem.
 * The documents are those of `billing invoice export` (documents/export.h,
 * linked from documents/libbillingdoc.la); the figures those of libbilling.
 */
#ifndef BILLINGD_API_DOCUMENTS_H
#define BILLINGD_API_DOCUMENTS_H

#include <microhttpd.h>
#include <stddef.h>

#include "dbcatalog.h"
#include "store.h"

/* Invoices listed per page by default, and at most (the `limit` parameter). */
#define BD_INVOICES_PAGE 100
#define BD_INVOICES_PAGE_MAX 1000

/* What a handler answers: a body, or a problem (slug set), or a database error (db set). */
typedef struct bd_answer {
    unsigned status;  /* 200, 304, or the problem's status */
    const char *type; /* Content-Type of @body */
    char *body;       /* owned (malloc): the caller frees it */
    size_t len;
    char etag[64];     /* strong ETag with its quotes, "" for none */
    const char *cache; /* Cache-Control */
    const char *slug;  /* a problem: urn:billing:problem:<slug> */
    const char *field; /* the problem's input, or NULL */
    char detail[512];  /* the problem's detail */
    int db;            /* a database error: in @err */
    bs_error err;
} bd_answer;

/*
 * bd_doc_invoices - GET /v1/invoices: the invoices matching the query's
 * filters (account, period YYYY-MM, status, kind, number; limit, after),
 * only account @bound's when @bound is not NULL. Fills @a; returns 0.
 */
int bd_doc_invoices(bs_conn *c, struct MHD_Connection *conn, const char *bound, bd_answer *a);

/*
 * bd_doc_invoice - GET /v1/invoices/@ref (an invoice number or id, with
 * ".json", ".pdf" or ".csv" or none: then the Accept header chooses,
 * JSON by default): the bytes `billing invoice export` writes. Finalized
 * and void documents get a strong ETag and Cache-Control, and a matching
 * If-None-Match a 304; drafts "no-store". An invoice of another account
 * than @bound (not NULL) is not found. Fills @a; returns 0.
 */
int bd_doc_invoice(bs_conn *c, struct MHD_Connection *conn, const char *ref, const char *bound,
                   bd_answer *a);

/*
 * bd_doc_usage - GET /v1/accounts/@account/usage?from=YYYY-MM&to=YYYY-MM
 * &group_by=meter|model|region|month|resource|day: the account's stored
 * aggregates rated at @cat's prices (as `billing account balance` rates
 * them), quantities exact with their unit, amounts as decimal strings;
 * resource and day from the raw events (day: cut at the account's local
 * midnights, at most 3 months, from and to may be YYYY-MM-DD; a month's
 * days add up to its month row exactly). Fills @a; returns 0.
 */
int bd_doc_usage(bs_conn *c, bs_catalog *cat, struct MHD_Connection *conn, const char *account,
                 bd_answer *a);

/*
 * bd_doc_quote - POST /v1/quote with the JSON body @body (@len bytes):
 * hypothetical usage priced on a copy of the account's state (stored
 * usage and credit, bs_balance_rater), nothing stored. An account other
 * than @bound (not NULL) is not found. Fills @a; returns 0.
 */
int bd_doc_quote(bs_conn *c, bs_catalog *cat, const char *body, size_t len, const char *bound,
                 bd_answer *a);

#endif /* BILLINGD_API_DOCUMENTS_H */
