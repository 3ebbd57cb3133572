/*
 * api.h - billingd's HTTP API (doc/http-api.md, doc/openapi.yaml): a
 * versioned JSON API over libmicrohttpd on its own listener (api.listen,
 * loopback by default; TLS through GnuTLS with api.tls_cert and
 * api.tls_key), served by a pool of threads each with its own store
 * connection, catalog and ingest pipeline:
 *
 *   GET  /v1/accounts/{id}/balance        accounts:read
 *   GET  /v1/accounts/{id}/grants         accounts:read
 *   GET  /v1/accounts/{id}/subscriptions  accounts:read
 *   GET  /v1/accounts/{id}/usage          accounts:read
 *   GET  /v1/accounts?q=&limit=           accounts:read (api_accounts.h; a bound key: its own)
 *   POST /v1/events                       events:write
 *   GET  /v1/rejected?reason=&limit=&all= admin, unbound (api_ops.h)
 *   GET  /v1/ops/status                   admin, unbound (api_ops.h)
 *   GET  /v1/price-books, /v1/plans       admin, or an unbound accounts:read key
 *
 * Keys are `billing apikey`'s (store/apikeys.h), sent as
 * "Authorization: Bearer <key>"; a key bound to an account finds no other
 * (404). Limits: body size (413), the whole request's time (408),
 * connections per client address, a token bucket per key (429 with
 * Retry-After). Errors are RFC 9457 problem details. Each request is
 * counted by route and status in /metrics (bd_api_metrics). The web
 * console's static files are served under /console/ (console.h).
 */
#ifndef BILLINGD_API_H
#define BILLINGD_API_H

#include <stddef.h>

#include "conf.h"

typedef struct bd_api bd_api;

/*
 * bd_api_new - start the API on @cfg->api_listen ("HOST:PORT") with the
 * configuration's limits, database and price book. Returns NULL (logged
 * with the reason) if the address is bad, the port cannot be bound, the
 * TLS files cannot be read or libsodium cannot start. Before listening it
 * opens its store connections, each with the catalog read and the
 * balance's statements prepared (when that fails, logged, they are opened
 * on first use); the catalog is read again when `billing load` announces
 * a change.
 */
bd_api *bd_api_new(const bd_config *cfg);

/* bd_api_free - stop accepting, finish the requests in flight, and free; NULL is a no-op. */
void bd_api_free(bd_api *api);

/*
 * bd_api_metrics - write the API's counters (Prometheus text: requests
 * and their duration by route and status) into @buf of @size bytes, as
 * much as fits. Returns the bytes written. Thread-safe. @arg is the
 * bd_api (the signature of a bd_metrics extra renderer).
 */
size_t bd_api_metrics(void *arg, char *buf, size_t size);

#endif
