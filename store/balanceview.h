/*
 * balanceview.h - an account's balance as one document, the same for
 * every program that shows it: the answer of billingd's GET
 * /v1/accounts/{id}/balance and `billing account balance --format json`
 * (doc/http-api.md). Its figures come from a rater of bs_balance_rater
 * (balance.h) and from the store (the grants, the events running at the
 * instant); nothing here computes money itself.
 */
#ifndef BILLING_STORE_BALANCEVIEW_H
#define BILLING_STORE_BALANCEVIEW_H

#include <billing/billing.h>
#include <jansson.h>

#include "balance.h"
#include "dbcatalog.h"
#include "store.h"

/* Grants listed per balance at most (more valid at once are left out of "grants"). */
#define BS_BALANCE_GRANTS_MAX 256

/*
 * bs_balance_json - the balance of @account at instant @at as a JSON
 * object, from rater @r (bs_balance_rater of the same catalog @cat,
 * account and instant): "account", "at", "currency", "credit_remaining"
 * (billing_rater_credit_balance), the account's local month containing
 * @at ("month") and its "subtotal", "credits", "tax", "total",
 * "account_credit" and "account_credit_left" (billing_rater_invoice),
 * "grants" (every grant valid at @at, in id order, with what it has
 * left, billing_rater_credit_grants, and its expiry), "exhausts_at" (when the credit runs out
 * at the burn of the stored events running at @at,
 * billing_rater_credit_exhaustion; null if never) and "running_events"
 * (how many): from @in (bs_balance_fetch at @at) when non-NULL, else read
 * on @c (bs_balance_running). Returns BS_OK with the object in *@out (the caller
 * json_decrefs it); BS_ERR_INVALID when the catalog has no such account
 * (the message says "no account '...'"); BS_ERR_FATAL when libbilling
 * refuses the month or a stored event running at @at (the message says
 * why, naming the event); BS_ERR_NOMEM; or a database
 * error. *@out is NULL on error.
 */
bs_status bs_balance_json(bs_conn *c, bs_catalog *cat, billing_rater *r, const char *account,
                          billing_time_t at, const bs_balance_input *in, json_t **out,
                          bs_error *err);

#endif
