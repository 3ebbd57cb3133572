/*
 * refrater.h - a reference rater for the tests: the rules of
 * doc/pricing.md written out a second time, simply and slowly, so that
 * random streams can be compared with libbilling invoice by invoice and
 * line by line (tests/check_reference.c).
 *
 * It shares no code with libbilling: local time comes from the C
 * library (localtime_r with TZ set), quantities are exact GMP rationals
 * per event piece, nothing is aggregated, cached or kept in integers.
 * Where doc/pricing.md leaves a detail open (the order in which one
 * grant pays the charges it may pay, which month lists a cancellation)
 * the rule is a small function of its own in refrater.c, named ref_rule_*,
 * so that it can be changed alone when the library's rules change.
 *
 * Not thread-safe: it sets the TZ environment variable.
 */
#ifndef BILLING_REFRATER_H
#define BILLING_REFRATER_H

#include "billing.h"

#define REF_ID 40  /* bytes of an id or attribute, NUL included */
#define REF_DEC 48 /* bytes of a decimal, NUL included */
#define REF_MAX_VERSIONS 8
#define REF_MAX_RATES 96
#define REF_MAX_PLANS 8
#define REF_MAX_FEES (REF_MAX_VERSIONS * REF_MAX_PLANS)
#define REF_MAX_ACCOUNTS 8
#define REF_MAX_SUBS 48
#define REF_MAX_GRANTS 48

typedef struct ref_version {
    char id[REF_ID];
    billing_time_t from;
} ref_version;

typedef struct ref_rate {
    int version; /* index into versions */
    billing_meter meter;
    char model[REF_ID];  /* "*" = any */
    char region[REF_ID]; /* "*" = any */
    char price[REF_DEC];
} ref_rate;

typedef struct ref_plan {
    char id[REF_ID];
    billing_period period;
    char model[REF_ID];
    char region[REF_ID];
    int refundable;
} ref_plan;

typedef struct ref_fee {
    int version;
    int plan;
    char fee[REF_DEC];
} ref_fee;

typedef struct ref_account {
    char id[REF_ID];
    char zone[REF_ID]; /* IANA name, or "UTC" */
    char tax[REF_DEC];
} ref_account;

typedef struct ref_sub {
    char id[REF_ID];
    int account;
    char resource[REF_ID];
    int plan;
    billing_time_t start;
    int terms;
    billing_time_t cancelled; /* 0 = none */
} ref_sub;

typedef struct ref_grant {
    char id[REF_ID];
    int account;
    char amount[REF_DEC];
    billing_time_t granted;
    billing_time_t expires;
    unsigned kinds; /* billing_charge_kind bits */
    int priority;
} ref_grant;

/* A catalog as plain data: what both libbilling and the reference are given. */
typedef struct ref_spec {
    char currency[4];
    int digits; /* ISO 4217 minor digits of currency, from the test's own table */
    billing_rounding rounding;
    ref_version versions[REF_MAX_VERSIONS];
    int n_versions;
    ref_rate rates[REF_MAX_RATES];
    int n_rates;
    ref_plan plans[REF_MAX_PLANS];
    int n_plans;
    ref_fee fees[REF_MAX_FEES];
    int n_fees;
    ref_account accounts[REF_MAX_ACCOUNTS];
    int n_accounts;
    ref_sub subs[REF_MAX_SUBS];
    int n_subs;
    ref_grant grants[REF_MAX_GRANTS];
    int n_grants;
} ref_spec;

typedef struct ref_event {
    char id[REF_ID];
    char account[REF_ID];
    char resource[REF_ID];
    billing_meter meter;
    billing_time_t start;
    billing_time_t end;
    char qty[REF_DEC];
    char model[REF_ID];
    char region[REF_ID];
} ref_event;

typedef struct ref_rater ref_rater;

/* ref_new - a reference rater for @spec (borrowed; must outlive it). */
ref_rater *ref_new(const ref_spec *spec);

/* ref_destroy - free it; NULL is a no-op. */
void ref_destroy(ref_rater *r);

/*
 * ref_add - what billing_rater_add must answer for @ev: BILLING_OK (kept),
 * BILLING_DUPLICATE, BILLING_ERR_CONFLICT, BILLING_ERR_UNKNOWN_ACCOUNT or
 * BILLING_ERR_NO_PRICE. Only well-formed events are expected.
 */
billing_status ref_add(ref_rater *r, const ref_event *ev);

/*
 * ref_invoices - the invoices of account @account (index into the spec)
 * for every month from @first to @last (year * 12 + month - 1), as the
 * canonical text of ref_invoice_join, into @out[0 .. last - first]
 * (caller frees each). Months are walked in order so that credit carries.
 */
void ref_invoices(ref_rater *r, int account, int first, int last, char **out);

/*
 * ref_balance - what billing_rater_credit_balance must say for @account at
 * @now: grants spent exactly, in order, on every charge of each month up
 * to the one holding @now; the sum of the remainders of grants valid at
 * @now, as exact text (malloc'd).
 */
char *ref_balance(ref_rater *r, int account, billing_time_t now);

/*
 * ref_exhaustion - what billing_rater_credit_exhaustion must say for
 * @account with the resources @evs (@n; only meter, quantity, model and
 * region count) running from @now, into *@out. BILLING_OK or
 * BILLING_ERR_NO_PRICE.
 */
billing_status ref_exhaustion(ref_rater *r, int account, billing_time_t now, const ref_event *evs,
                              size_t n, billing_time_t *out);

/*
 * ref_months - the months (year * 12 + month - 1) in which @account has
 * charges, ascending and distinct, into @out (room for @cap); returns
 * how many there are.
 */
int ref_months(ref_rater *r, int account, int *out, int cap);

/*
 * ref_invoice_join - the canonical text of an invoice: @head, then the
 * @n lines sorted (so that the order of lines is not compared), then
 * @tail. Each piece ends in a newline. Returns a malloc'd string.
 */
char *ref_invoice_join(const char *head, char **lines, size_t n, const char *tail);

/*
 * ref_line_text - one line of the canonical text (malloc'd), from the
 * fields of an invoice line as billing_invoice_line_* return them.
 */
char *ref_line_text(int kind, const char *meter, const char *model, const char *region,
                    const char *plan, const char *version, const char *qty, const char *unit,
                    const char *unit_price, const char *amount, const char *rounded);

/*
 * ref_local_to_utc - the instant of a local wall time in @zone (in a gap:
 * shifted forward by the gap; repeated: the earlier).
 */
billing_time_t ref_local_to_utc(const char *zone, int year, int month, int day, int hour,
                                int minute, int second);

/*
 * ref_sub_status - what billing_catalog_add_subscription must answer for
 * subscription @sub once the price book is in: BILLING_OK, or
 * BILLING_ERR_NO_PRICE when a charged term has no fee in force. A refused
 * one is not in the catalog: the reference charges nothing for it.
 */
billing_status ref_sub_status(const ref_rater *r, int sub);

/* ref_sub_bound - the instant term @k of subscription @sub starts (k = terms: the last end). */
billing_time_t ref_sub_bound(const ref_rater *r, int sub, int k);

/* ref_utc_to_local - the local date and hour of instant @t in @zone. */
void ref_utc_to_local(const char *zone, billing_time_t t, int *year, int *month, int *day,
                      int *hour);

/*
 * ref_zone_transitions - the instants @zone changes offset in [@from, @to),
 * up to @cap of them; returns the count.
 */
int ref_zone_transitions(const char *zone, billing_time_t from, billing_time_t to,
                         billing_time_t *out, int cap);

#endif /* BILLING_REFRATER_H */
