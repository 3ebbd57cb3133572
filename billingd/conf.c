/*
 * conf.c - billingd's configuration file and --set options. See conf.h.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"

/* Bounds on outside input: a configuration file is small. */
#define FILE_MAX (64L * 1024L)
#define LINE_MAX_LEN 4096
#define VALUE_MAX 2048

void bd_config_init(bd_config *c)
{
    memset(c, 0, sizeof(*c));
    c->batch_size = 5000;
    c->linger_ms = 200;
    c->commit_connections = 2;
    c->rate_threads = 1;
    c->alerts_cache_accounts = 100000;
    c->alerts_cache_events = 1000000;
    c->retry_max_ms = 30000;
    c->api_body_max = 16777216;
    c->api_request_ms = 30000;
    c->api_connections_per_ip = 64;
    c->api_rate = 1000;
    c->api_produce_ms = 10000;
}

void bd_config_free(bd_config *c)
{
    size_t i;

    free(c->db);
    free(c->book);
    free(c->group);
    free(c->dead_letter_topic);
    free(c->http_listen);
    free(c->api_listen);
    free(c->api_console_dir);
    free(c->api_events);
    free(c->api_events_topic);
    free(c->api_tls_cert);
    free(c->api_tls_key);
    free(c->alerts_topic);
    free(c->alerts_thresholds);
    for (i = 0; i < c->n_topics; i++)
        free(c->topics[i]);
    for (i = 0; i < c->n_kafka; i++) {
        free(c->kafka[i].key);
        free(c->kafka[i].value);
    }
    memset(c, 0, sizeof(*c));
}

static char *trim(char *s)
{
    char *end;

    while (isspace((unsigned char)*s))
        s++;
    end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1]))
        *--end = '\0';
    return s;
}

static int set_string(char **field, const char *value)
{
    char *copy = strdup(value);

    if (copy == NULL)
        return -1;
    free(*field);
    *field = copy;
    return 0;
}

static int set_long(long *field, const char *value, long lo, long hi)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(value, &end, 10);
    if (*value == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi)
        return -1;
    *field = v;
    return 0;
}

static int set_topics(bd_config *c, const char *value)
{
    char buf[VALUE_MAX];
    char *save = NULL;
    char *t;
    size_t i;

    snprintf(buf, sizeof(buf), "%s", value);
    for (i = 0; i < c->n_topics; i++)
        free(c->topics[i]);
    c->n_topics = 0;
    for (t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        t = trim(t);
        if (*t == '\0' || strlen(t) > 249 || c->n_topics == BD_MAX_TOPICS)
            return -1;
        c->topics[c->n_topics] = strdup(t);
        if (c->topics[c->n_topics] == NULL)
            return -1;
        c->n_topics++;
    }
    return c->n_topics > 0 ? 0 : -1;
}

static int set_kafka(bd_config *c, const char *key, const char *value)
{
    size_t i;

    for (i = 0; i < c->n_kafka; i++) {
        if (strcmp(c->kafka[i].key, key) == 0)
            return set_string(&c->kafka[i].value, value);
    }
    if (c->n_kafka == BD_MAX_KAFKA || *key == '\0')
        return -1;
    c->kafka[c->n_kafka].key = strdup(key);
    c->kafka[c->n_kafka].value = strdup(value);
    if (c->kafka[c->n_kafka].key == NULL || c->kafka[c->n_kafka].value == NULL)
        return -1;
    c->n_kafka++;
    return 0;
}

/* Apply @key = @value; returns 0, or -1 with what was wrong in @why. */
static int apply(bd_config *c, const char *key, const char *value, const char **why)
{
    *why = "invalid value";
    if (strlen(value) >= VALUE_MAX) {
        *why = "value too long";
        return -1;
    }
    if (strcmp(key, "db") == 0)
        return set_string(&c->db, value);
    if (strcmp(key, "book") == 0)
        return set_string(&c->book, value);
    if (strcmp(key, "group") == 0)
        return *value ? set_string(&c->group, value) : -1;
    if (strcmp(key, "dead_letter_topic") == 0)
        return set_string(&c->dead_letter_topic, value);
    if (strcmp(key, "http.listen") == 0)
        return set_string(&c->http_listen, value);
    if (strcmp(key, "api.listen") == 0)
        return set_string(&c->api_listen, value);
    if (strcmp(key, "api.tls_cert") == 0)
        return set_string(&c->api_tls_cert, value);
    if (strcmp(key, "api.tls_key") == 0)
        return set_string(&c->api_tls_key, value);
    if (strcmp(key, "api.body_max") == 0) {
        *why = "need a number in 1024..268435456";
        return set_long(&c->api_body_max, value, 1024, 268435456);
    }
    if (strcmp(key, "api.request_ms") == 0) {
        *why = "need a number in 100..600000";
        return set_long(&c->api_request_ms, value, 100, 600000);
    }
    if (strcmp(key, "api.connections_per_ip") == 0) {
        *why = "need a number in 1..1024";
        return set_long(&c->api_connections_per_ip, value, 1, 1024);
    }
    if (strcmp(key, "api.rate") == 0) {
        *why = "need a number in 1..1000000";
        return set_long(&c->api_rate, value, 1, 1000000);
    }
    if (strcmp(key, "api.console_dir") == 0)
        return set_string(&c->api_console_dir, value);
    if (strcmp(key, "api.events") == 0) {
        *why = "need store or kafka";
        if (strcmp(value, "store") != 0 && strcmp(value, "kafka") != 0)
            return -1;
        return set_string(&c->api_events, value);
    }
    if (strcmp(key, "api.events_topic") == 0) {
        *why = "need a topic name of 1..249 bytes";
        if (*value == '\0' || strlen(value) > 249)
            return -1;
        return set_string(&c->api_events_topic, value);
    }
    if (strcmp(key, "api.produce_ms") == 0) {
        *why = "need a number in 100..600000";
        return set_long(&c->api_produce_ms, value, 100, 600000);
    }
    if (strcmp(key, "alerts.topic") == 0)
        return set_string(&c->alerts_topic, value);
    if (strcmp(key, "alerts.thresholds") == 0)
        return set_string(&c->alerts_thresholds, value);
    if (strcmp(key, "alerts.cache_accounts") == 0) {
        *why = "need a number in 1..10000000";
        return set_long(&c->alerts_cache_accounts, value, 1, 10000000);
    }
    if (strcmp(key, "alerts.cache_events") == 0) {
        *why = "need a number in 0..100000000";
        return set_long(&c->alerts_cache_events, value, 0, 100000000);
    }
    if (strcmp(key, "topics") == 0) {
        *why = "need 1..64 comma-separated topic names";
        return set_topics(c, value);
    }
    if (strcmp(key, "batch.size") == 0) {
        *why = "need a number in 1..50000";
        return set_long(&c->batch_size, value, 1, 50000);
    }
    if (strcmp(key, "batch.linger.ms") == 0) {
        *why = "need a number in 1..60000";
        return set_long(&c->linger_ms, value, 1, 60000);
    }
    if (strcmp(key, "commit.connections") == 0) {
        *why = "need a number in 1..8";
        return set_long(&c->commit_connections, value, 1, 8);
    }
    if (strcmp(key, "rate.threads") == 0) {
        *why = "need a number in 1..64";
        return set_long(&c->rate_threads, value, 1, 64);
    }
    if (strcmp(key, "retry.max.ms") == 0) {
        *why = "need a number in 100..600000";
        return set_long(&c->retry_max_ms, value, 100, 600000);
    }
    if (strncmp(key, "kafka.", 6) == 0) {
        *why = "too many kafka.* properties";
        return set_kafka(c, key + 6, value);
    }
    *why = "unknown key";
    return -1;
}

int bd_config_set(bd_config *c, const char *assignment, const char *where, char *errbuf,
                  size_t errsize)
{
    char buf[LINE_MAX_LEN];
    const char *why;
    char *eq;
    char *key;

    if (strlen(assignment) >= sizeof(buf)) {
        snprintf(errbuf, errsize, "%s: line longer than %d bytes", where, LINE_MAX_LEN - 1);
        return -1;
    }
    snprintf(buf, sizeof(buf), "%s", assignment);
    eq = strchr(buf, '=');
    if (eq == NULL) {
        snprintf(errbuf, errsize, "%s: expected KEY = VALUE", where);
        return -1;
    }
    *eq = '\0';
    key = trim(buf);
    if (apply(c, key, trim(eq + 1), &why) != 0) {
        snprintf(errbuf, errsize, "%s: key '%.64s': %s", where, key, why);
        return -1;
    }
    return 0;
}

int bd_config_file(bd_config *c, const char *path, char *errbuf, size_t errsize)
{
    char line[LINE_MAX_LEN];
    char where[LINE_MAX_LEN];
    char *s;
    FILE *f = fopen(path, "r");
    long lineno = 0;
    long total = 0;
    int rc = 0;

    if (f == NULL) {
        snprintf(errbuf, errsize, "%s: %s", path, strerror(errno));
        return -1;
    }
    while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        total += (long)strlen(line);
        snprintf(where, sizeof(where), "%.1024s:%ld", path, lineno);
        if (total > FILE_MAX || (strchr(line, '\n') == NULL && !feof(f))) {
            snprintf(errbuf, errsize, "%s: file over %ld bytes or line over %d", where, FILE_MAX,
                     LINE_MAX_LEN - 2);
            rc = -1;
            break;
        }
        s = trim(line);
        if (*s == '\0' || *s == '#')
            continue;
        rc = bd_config_set(c, s, where, errbuf, errsize);
    }
    if (rc == 0 && ferror(f)) {
        snprintf(errbuf, errsize, "%s: read error", path);
        rc = -1;
    }
    fclose(f);
    return rc;
}

int bd_config_check(bd_config *c, char *errbuf, size_t errsize)
{
    if (c->http_listen == NULL && set_string(&c->http_listen, "127.0.0.1:9464") != 0) {
        snprintf(errbuf, errsize, "out of memory");
        return -1;
    }
    if ((c->api_tls_cert == NULL || *c->api_tls_cert == '\0') !=
        (c->api_tls_key == NULL || *c->api_tls_key == '\0')) {
        snprintf(errbuf, errsize, "api.tls_cert and api.tls_key go together");
        return -1;
    }
    if (c->n_topics == 0 && (c->api_listen == NULL || *c->api_listen == '\0')) {
        snprintf(errbuf, errsize,
                 "no topics: set 'topics' in the file or --set topics=... (or api.listen to "
                 "serve the HTTP API alone)");
        return -1;
    }
    if (c->api_events == NULL &&
        set_string(&c->api_events, c->n_topics > 0 ? "kafka" : "store") != 0) {
        snprintf(errbuf, errsize, "out of memory");
        return -1;
    }
    if (strcmp(c->api_events, "kafka") == 0 && c->api_events_topic == NULL) {
        if (c->n_topics == 0) {
            snprintf(errbuf, errsize,
                     "api.events=kafka: set api.events_topic (or topics) to the usage topic");
            return -1;
        }
        if (set_string(&c->api_events_topic, c->topics[0]) != 0) {
            snprintf(errbuf, errsize, "out of memory");
            return -1;
        }
    }
    return 0;
}
