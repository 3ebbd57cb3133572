/*
 * conf.h - billingd's configuration: a file of "key = value" lines
 * ('#' starts a comment line), then --set KEY=VALUE options on top.
 * Keys (doc/billingd.8.in, examples/billingd.conf):
 *
 *   db                 libpq conninfo (default: $BILLING_PG_CONNINFO, else PG*)
 *   book               price book to rate with (default: the only one)
 *   group              Kafka consumer group (default billingd)
 *   topics             comma-separated topics to consume (required)
 *   dead_letter_topic  topic for rejected records ("" : none; default none)
 *   batch.size         records per transaction, 1..50000 (default 5000)
 *   batch.linger.ms    longest wait to fill a batch, 1..60000 (default 200)
 *   commit.connections batches committing at once, on as many connections,
 *                      each for its own partitions, 1..8 (default 2)
 *   rate.threads       threads decoding and rating each batch, 1..64 (default 1)
 *   retry.max.ms       longest pause between database retries (default 30000)
 *   alerts.topic       topic of billing.v1.CreditAlert ("": no alerts; default none)
 *   alerts.thresholds  percents of credit used that alert, default 50,80,100
 *   alerts.cache_accounts  accounts whose credit state the alert check keeps
 *                      between batches, 1..10000000 (default 100000)
 *   http.listen        /metrics and /healthz address (default 127.0.0.1:9464; "": off)
 *   api.listen         the HTTP API's address (default "": off; doc/http-api.md)
 *   api.tls_cert, api.tls_key  PEM files: serve the API over TLS (GnuTLS)
 *   api.body_max       largest request body in bytes, 1024..268435456 (default 16777216)
 *   api.request_ms     longest time for a whole request, 100..600000 (default 30000)
 *   api.connections_per_ip  connections from one address, 1..1024 (default 64)
 *   api.rate           requests per second per key (and burst), 1..1000000 (default 1000)
 *   api.events         POST /v1/events: "store" (stored at once, as `billing ingest`) or
 *                      "kafka" (produced to the usage topic, stored by the consumer);
 *                      default kafka when topics are set, else store
 *   api.events_topic   the topic api.events=kafka produces to (default: the first of topics)
 *   api.produce_ms     longest wait for the broker's acknowledgement, 100..600000 (default 10000)
 *   kafka.PROPERTY     any librdkafka property, passed through (bootstrap.servers...)
 *
 * Errors name the file, the line and the key.
 */
#ifndef BILLINGD_CONF_H
#define BILLINGD_CONF_H

#include <stddef.h>

#define BD_MAX_TOPICS 64
#define BD_MAX_KAFKA 64

typedef struct bd_kv {
    char *key; /* without the "kafka." prefix */
    char *value;
} bd_kv;

typedef struct bd_config {
    char *db;
    char *book;
    char *group;
    char *dead_letter_topic;
    char *http_listen;
    char *api_listen;
    char *api_tls_cert;
    char *api_tls_key;
    long api_body_max;
    long api_request_ms;
    long api_connections_per_ip;
    long api_rate;
    char *api_console_dir;  /* the console's files (NULL: the installed ones) */
    char *api_events;       /* "store", "kafka"; NULL until bd_config_check picks the default */
    char *api_events_topic; /* api.events=kafka: the topic (bd_config_check: topics[0]) */
    long api_produce_ms;
    char *alerts_topic;
    char *alerts_thresholds;
    long alerts_cache_accounts;
    long alerts_cache_events; /* stored events kept in the credit states, in all */
    char *topics[BD_MAX_TOPICS];
    size_t n_topics;
    long batch_size;
    long linger_ms;
    long commit_connections;
    long rate_threads;
    long retry_max_ms;
    bd_kv kafka[BD_MAX_KAFKA];
    size_t n_kafka;
} bd_config;

/* bd_config_init - the defaults. */
void bd_config_init(bd_config *c);

/* bd_config_free - free what the config holds (not @c itself). */
void bd_config_free(bd_config *c);

/*
 * bd_config_file - apply the file @path. Returns 0, or -1 with a message
 * in @errbuf ("billingd.conf:12: key 'batch.size': ...").
 */
int bd_config_file(bd_config *c, const char *path, char *errbuf, size_t errsize);

/*
 * bd_config_set - apply one "KEY=VALUE" (@where names its origin in
 * messages). Returns 0, or -1 with a message.
 */
int bd_config_set(bd_config *c, const char *assignment, const char *where, char *errbuf,
                  size_t errsize);

/*
 * bd_config_check - after everything is applied: required keys, and the
 * defaults of keys left unset. Topics may be left out when api.listen is
 * set (billingd then serves the API alone). api.events defaults to kafka
 * when topics are set (the consumer then stores every event, in the
 * usage topic's order), else store; kafka needs a topic (api.events_topic
 * or topics). 0 or -1 with a message.
 */
int bd_config_check(bd_config *c, char *errbuf, size_t errsize);

#endif
