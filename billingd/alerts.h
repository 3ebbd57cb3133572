/*
 * alerts.h - live credit alerts: after each batch, for every account of
 * the batch that has credit (however many), the thresholds of credit
 * used (alerts.thresholds, percent, default 50,80,100) that the stored
 * events make due are found by alertcheck.h (exact libbilling balances
 * per credit epoch, from the stored aggregates, inside the batch's
 * transaction; the same alerts whatever the order of arrival and the
 * batch sizes, each recorded in billing.credit_alerts and sent once).
 * Each publishes one billing.v1.CreditAlert to alerts.topic, keyed by its
 * alert_id, with the fields alertcheck.h describes.
 *
 * Once per alert: a batch replayed after a crash before its COMMIT (its
 * records rolled back) publishes the same alert_id again (account,
 * threshold, credit total and grant ids), by which consumers tell the
 * repeat.
 */
#ifndef BILLINGD_ALERTS_H
#define BILLINGD_ALERTS_H

#include "alertcheck.h"
#include "conf.h"
#include "dbcatalog.h"
#include "ingest.h"

typedef struct bd_alerts bd_alerts;

/* bd_alerts_new - alerts to cfg->alerts_topic rated with **@cat (the current catalog). */
bd_alerts *bd_alerts_new(const bd_config *cfg, bs_catalog **cat);

/* bd_alerts_free - flush and free; NULL is a no-op. */
void bd_alerts_free(bd_alerts *a);

/* bd_alerts_hook - a bs_ingest_hook (@arg: bd_alerts). */
bs_status bd_alerts_hook(void *arg, bs_conn *c, const bs_record *recs,
                         const bs_record_result *results, size_t n, bs_error *err);

/*
 * bd_alerts_done - the batch whose bd_alerts_hook ran on @c committed
 * (@committed 1) or not (0): the accounts' credit states kept between
 * batches (alerts.cache_accounts, alertcheck.h) move on with it or stay.
 * Call after every commit attempt that ran the hook. NULL @a: no-op.
 */
void bd_alerts_done(bd_alerts *a, bs_conn *c, int committed);

/* bd_alerts_forget - drop every kept state: before the catalog is replaced. NULL: no-op. */
void bd_alerts_forget(bd_alerts *a);

/* bd_alerts_published - the alerts the last bd_alerts_hook call published. */
int bd_alerts_published(const bd_alerts *a);

#endif
