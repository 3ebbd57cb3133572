/*
 * metrics.c - /metrics and /healthz. See metrics.h.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "metrics.h"

/* Bounds: reason codes are a fixed set; partitions shown are capped. */
#define REASONS 8
#define LAG_MAX 1024
#define TOPIC_MAX 249
#define PAGE_MAX (256u * 1024u)
#define REASON_MAX 400
#define MHD_MSG_MAX 256

/*
 * The HTTP server's bounds. Connections at once, and from one client
 * address, so that one client cannot take them all; and the longest a
 * request may take from its connection (or the end of the previous
 * request on it) to its answer, whatever the client trickles: MHD's own
 * timeout only bounds the silence between two reads.
 */
#define HTTP_CONNECTIONS 16
#define HTTP_PER_IP 8
#define HTTP_IDLE_S 5
#define HTTP_REQUEST_MS 5000
#define WATCH_MS 100

/* Histogram bounds (upper, inclusive): batch sizes in records, commit times in ms. */
static const uint64_t size_bounds[] = {10, 100, 1000, 5000, 10000, 50000};
static const uint64_t ms_bounds[] = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000};
#define N_SIZE (sizeof(size_bounds) / sizeof(size_bounds[0]))
#define N_MS (sizeof(ms_bounds) / sizeof(ms_bounds[0]))

static const char *const reason_names[REASONS] = {
    "too_large", "parse", "invalid", "range", "unknown_account", "no_price", "conflict", "other"};

typedef struct lag_entry {
    char topic[TOPIC_MAX + 1];
    int32_t partition;
    int64_t lag;
} lag_entry;

/* A connection of the HTTP server, watched for its whole-request bound. */
typedef struct http_slot {
    int used;
    int cut; /* shut down by the watchdog already */
    int fd;
    int64_t since; /* connection, or end of its last request, ms (monotonic) */
} http_slot;

struct bd_metrics {
    pthread_mutex_t lock;
    struct MHD_Daemon *http;
    int healthy;
    char reason[REASON_MAX];   /* why not healthy */
    int topics_missing;        /* configured topics the broker's metadata lacks */
    char missing[REASON_MAX];  /* which, "role=name ..."; "" when none */
    char mhd_msg[MHD_MSG_MAX]; /* MHD's last message while starting */
    uint64_t consumed, stored, duplicates, batches, failures, reloads, dl_dropped, http_cut;
    uint64_t rejected[REASONS];
    uint64_t size_buckets[N_SIZE + 1];
    uint64_t size_sum;
    uint64_t ms_buckets[N_MS + 1];
    uint64_t ms_sum;
    uint64_t check_buckets[N_MS + 1]; /* the alert check of a batch, ms */
    uint64_t check_sum;
    uint64_t alerts;
    lag_entry lags[LAG_MAX];
    size_t n_lags;
    int64_t started_ms; /* bd_metrics_new, monotonic */
    /* The watchdog: its thread, its slots (under lock), and when to stop. */
    pthread_t watchdog;
    int watching;
    int stopping;
    http_slot slots[HTTP_CONNECTIONS];
};

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A growing page with a hard cap: rendering stops adding at PAGE_MAX. */
typedef struct page {
    char *buf;
    size_t len;
} page;

static void emit(page *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(page *p, const char *fmt, ...)
{
    va_list ap;
    int w;

    if (p->len >= PAGE_MAX - 1)
        return;
    va_start(ap, fmt);
    w = vsnprintf(p->buf + p->len, PAGE_MAX - p->len, fmt, ap);
    va_end(ap);
    if (w > 0)
        p->len += (size_t)w < PAGE_MAX - p->len ? (size_t)w : PAGE_MAX - 1 - p->len;
}

static void counter(page *p, const char *name, const char *help, uint64_t v)
{
    emit(p, "# HELP %s %s\n# TYPE %s counter\n%s %" PRIu64 "\n", name, help, name, name, v);
}

static void histogram(page *p, const char *name, const char *help, const uint64_t *bounds, size_t n,
                      const uint64_t *buckets, uint64_t sum)
{
    uint64_t cum = 0;
    size_t i;

    emit(p, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (i = 0; i < n; i++) {
        cum += buckets[i];
        emit(p, "%s_bucket{le=\"%" PRIu64 "\"} %" PRIu64 "\n", name, bounds[i], cum);
    }
    cum += buckets[n];
    emit(p, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n%s_sum %" PRIu64 "\n%s_count %" PRIu64 "\n", name,
         cum, name, sum, name, cum);
}

/* @ms milliseconds as seconds, exactly ("2.5", "0.005", "12"), into @buf. */
static void seconds_text(uint64_t ms, char *buf, size_t size)
{
    char frac[4];
    int len = 3;

    snprintf(frac, sizeof(frac), "%03" PRIu64, ms % 1000);
    while (len > 0 && frac[len - 1] == '0')
        frac[--len] = '\0';
    snprintf(buf, size, "%" PRIu64 "%s%s", ms / 1000, len > 0 ? "." : "", frac);
}

/*
 * A histogram of durations kept in milliseconds, shown in seconds
 * (Prometheus's base unit): bounds and sum exact decimals of seconds.
 */
static void histogram_seconds(page *p, const char *name, const char *help,
                              const uint64_t *bounds_ms, size_t n, const uint64_t *buckets,
                              uint64_t sum_ms)
{
    char le[32];
    char sum[32];
    uint64_t cum = 0;
    size_t i;

    emit(p, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (i = 0; i < n; i++) {
        cum += buckets[i];
        seconds_text(bounds_ms[i], le, sizeof(le));
        emit(p, "%s_bucket{le=\"%s\"} %" PRIu64 "\n", name, le, cum);
    }
    cum += buckets[n];
    seconds_text(sum_ms, sum, sizeof(sum));
    emit(p, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n%s_sum %s\n%s_count %" PRIu64 "\n", name, cum,
         name, sum, name, cum);
}

/*
 * The standard process_* metrics of the Prometheus client libraries, from
 * /proc/self (Linux): CPU time, memory, open and allowed descriptors,
 * start time. A figure /proc does not give is left out.
 */
static void process_metrics(page *p)
{
    char buf[1024];
    char cpu[32];
    unsigned long utime = 0;
    unsigned long stime = 0;
    unsigned long long start = 0;
    unsigned long vsize = 0;
    long rss = 0;
    long tick = sysconf(_SC_CLK_TCK);
    long pagesize = sysconf(_SC_PAGESIZE);
    unsigned long long boot = 0;
    struct rlimit rl;
    struct dirent *e;
    DIR *fds;
    FILE *f;
    char *at;
    long n = 0;

    f = fopen("/proc/self/stat", "r");
    if (f != NULL && fgets(buf, sizeof(buf), f) != NULL && (at = strrchr(buf, ')')) != NULL &&
        sscanf(at + 2,
               "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %*d "
               "%*d %llu %lu %ld",
               &utime, &stime, &start, &vsize, &rss) == 5 &&
        tick > 0) {
        /* Ticks to seconds, exactly as a decimal of milliseconds. */
        seconds_text((uint64_t)(utime + stime) * 1000 / (uint64_t)tick, cpu, sizeof(cpu));
        emit(p,
             "# HELP process_cpu_seconds_total User and system CPU time, seconds.\n"
             "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %s\n",
             cpu);
        emit(p,
             "# HELP process_virtual_memory_bytes Virtual memory size, bytes.\n"
             "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %lu\n",
             vsize);
        emit(p,
             "# HELP process_resident_memory_bytes Resident memory size, bytes.\n"
             "# TYPE process_resident_memory_bytes gauge\n"
             "process_resident_memory_bytes %lld\n",
             (long long)rss * pagesize);
    }
    if (f != NULL)
        fclose(f);
    f = fopen("/proc/stat", "r");
    while (f != NULL && fgets(buf, sizeof(buf), f) != NULL) {
        if (sscanf(buf, "btime %llu", &boot) == 1)
            break;
    }
    if (f != NULL)
        fclose(f);
    if (boot > 0 && start > 0 && tick > 0)
        emit(p,
             "# HELP process_start_time_seconds Start time since the Unix epoch, seconds.\n"
             "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %llu\n",
             boot + start / (unsigned long long)tick);
    fds = opendir("/proc/self/fd");
    while (fds != NULL && (e = readdir(fds)) != NULL) {
        if (e->d_name[0] != '.')
            n++;
    }
    if (fds != NULL) {
        closedir(fds);
        emit(p,
             "# HELP process_open_fds Open file descriptors.\n"
             "# TYPE process_open_fds gauge\nprocess_open_fds %ld\n",
             n - 1); /* the directory's own */
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        emit(p,
             "# HELP process_max_fds Most open file descriptors.\n"
             "# TYPE process_max_fds gauge\nprocess_max_fds %llu\n",
             (unsigned long long)rl.rlim_cur);
}

/* The extra renderer of bd_metrics_extra, and its argument. */
static size_t (*extra_fn)(void *arg, char *buf, size_t size);
static void *extra_arg;

void bd_metrics_extra(size_t (*fn)(void *arg, char *buf, size_t size), void *arg)
{
    extra_fn = fn;
    extra_arg = arg;
}

static void render(bd_metrics *m, page *p)
{
    size_t i;

    counter(p, "billingd_events_consumed_total", "Records taken from Kafka into batches.",
            m->consumed);
    counter(p, "billingd_events_stored_total", "New events committed.", m->stored);
    counter(p, "billingd_events_duplicate_total", "Records whose id was stored before.",
            m->duplicates);
    emit(p, "# HELP billingd_events_rejected_total Records rejected, by reason.\n"
            "# TYPE billingd_events_rejected_total counter\n");
    for (i = 0; i < REASONS; i++)
        emit(p, "billingd_events_rejected_total{reason=\"%s\"} %" PRIu64 "\n", reason_names[i],
             m->rejected[i]);
    counter(p, "billingd_batches_total", "Batches committed.", m->batches);
    counter(p, "billingd_postgresql_errors_total", "Batches rolled back after a failure.",
            m->failures);
    counter(p, "billingd_catalog_reloads_total", "Catalog reloads after billing load.", m->reloads);
    counter(p, "billingd_dead_letters_dropped_total",
            "Rejected records the dead-letter topic refused for good (kept in "
            "billing.rejected_events).",
            m->dl_dropped);
    counter(p, "billingd_http_requests_cut_total",
            "HTTP connections closed for taking longer than the request bound.", m->http_cut);
    histogram(p, "billingd_batch_size", "Records per committed batch.", size_bounds, N_SIZE,
              m->size_buckets, m->size_sum);
    histogram_seconds(p, "billingd_commit_latency_seconds", "Time to run and commit a batch.",
                      ms_bounds, N_MS, m->ms_buckets, m->ms_sum);
    histogram_seconds(p, "billingd_alert_check_seconds",
                      "Time of a batch's credit alert check, publishing included.", ms_bounds, N_MS,
                      m->check_buckets, m->check_sum);
    counter(p, "billingd_alerts_published_total",
            "Credit alerts published (again when their batch rolled back and ran again).",
            m->alerts);
    emit(p, "# HELP billingd_consumer_lag Records behind the high watermark, per partition.\n"
            "# TYPE billingd_consumer_lag gauge\n");
    for (i = 0; i < m->n_lags; i++) {
        if (m->lags[i].lag >= 0)
            emit(p, "billingd_consumer_lag{topic=\"%s\",partition=\"%" PRId32 "\"} %" PRId64 "\n",
                 m->lags[i].topic, m->lags[i].partition, m->lags[i].lag);
    }
    emit(p,
         "# HELP billingd_topics_missing Configured topics the broker does not have.\n"
         "# TYPE billingd_topics_missing gauge\nbillingd_topics_missing %d\n",
         m->topics_missing);
    emit(p,
         "# HELP billingd_up 1 while consuming normally.\n# TYPE billingd_up gauge\n"
         "billingd_up %d\n",
         m->healthy && m->topics_missing == 0);
    process_metrics(p);
    if (extra_fn != NULL && p->len < PAGE_MAX - 1)
        p->len += extra_fn(extra_arg, p->buf + p->len, PAGE_MAX - p->len);
}

/* /healthz: "ok", or each reason for 503 on a line (a missing topic, failing batches). */
static void health(const bd_metrics *m, page *p, unsigned *status)
{
    if (m->healthy && m->topics_missing == 0) {
        emit(p, "ok\n");
        return;
    }
    *status = MHD_HTTP_SERVICE_UNAVAILABLE;
    if (m->topics_missing > 0)
        emit(p, "unhealthy: topic missing on the broker: %s\n", m->missing);
    if (!m->healthy)
        emit(p, "unhealthy: %s\n", m->reason);
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **state)
{
    bd_metrics *m = cls;
    struct MHD_Response *r;
    page p = {NULL, 0};
    unsigned status = MHD_HTTP_OK;
    enum MHD_Result ret;

    (void)version;
    (void)upload;
    (void)upload_size;
    (void)state;
    if (strcmp(method, "GET") != 0)
        return MHD_NO;
    p.buf = malloc(PAGE_MAX);
    if (p.buf == NULL)
        return MHD_NO;
    pthread_mutex_lock(&m->lock);
    if (strcmp(url, "/metrics") == 0) {
        render(m, &p);
    } else if (strcmp(url, "/healthz") == 0) {
        health(m, &p, &status);
    } else {
        emit(&p, "not found: /metrics or /healthz\n");
        status = MHD_HTTP_NOT_FOUND;
    }
    pthread_mutex_unlock(&m->lock);
    r = MHD_create_response_from_buffer(p.len, p.buf, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(p.buf);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
    ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* "HOST:PORT" (IPv4) into @sa; 0 or -1. */
static int parse_listen(const char *listen, struct sockaddr_in *sa)
{
    char host[64];
    const char *colon = strrchr(listen, ':');
    long port;
    char *end;

    if (colon == NULL || (size_t)(colon - listen) >= sizeof(host))
        return -1;
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 1 || port > 65535)
        return -1;
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

/* Connections come and go (MHD's thread): a slot each, watched by the watchdog. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    bd_metrics *m = cls;
    const union MHD_ConnectionInfo *fd;
    http_slot *s = *socket_context;
    size_t i;

    pthread_mutex_lock(&m->lock);
    if (code == MHD_CONNECTION_NOTIFY_CLOSED && s != NULL) {
        /* Before MHD closes the socket: the watchdog never shuts down a reused number. */
        s->used = 0;
        *socket_context = NULL;
    } else if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        for (i = 0; fd != NULL && i < HTTP_CONNECTIONS && m->slots[i].used; i++)
            ;
        if (fd != NULL && i < HTTP_CONNECTIONS) {
            m->slots[i].used = 1;
            m->slots[i].cut = 0;
            m->slots[i].fd = fd->connect_fd;
            m->slots[i].since = now_ms();
            *socket_context = &m->slots[i];
        }
    }
    pthread_mutex_unlock(&m->lock);
}

/* A request answered: the bound of the next one on the connection starts now. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    bd_metrics *m = cls;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    http_slot *s = info != NULL ? info->socket_context : NULL;

    (void)con_cls;
    (void)toe;
    pthread_mutex_lock(&m->lock);
    if (s != NULL && s->used)
        s->since = now_ms();
    pthread_mutex_unlock(&m->lock);
}

/*
 * The whole-request bound: shut down (not close: the socket stays MHD's)
 * every connection older than HTTP_REQUEST_MS; MHD then reads its end
 * and closes it.
 */
static void *watchdog(void *arg)
{
    bd_metrics *m = arg;
    struct timespec tick = {0, WATCH_MS * 1000000L};
    int64_t now;
    size_t i;

    for (;;) {
        pthread_mutex_lock(&m->lock);
        if (m->stopping) {
            pthread_mutex_unlock(&m->lock);
            return NULL;
        }
        now = now_ms();
        for (i = 0; i < HTTP_CONNECTIONS; i++) {
            if (m->slots[i].used && !m->slots[i].cut && now - m->slots[i].since > HTTP_REQUEST_MS) {
                shutdown(m->slots[i].fd, SHUT_RDWR);
                m->slots[i].cut = 1;
                m->http_cut++;
            }
        }
        pthread_mutex_unlock(&m->lock);
        nanosleep(&tick, NULL); /* the watchdog's period */
    }
}

/* MHD's messages while it starts: the reason a bind fails. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    bd_metrics *m = cls;
    size_t len;

    vsnprintf(m->mhd_msg, sizeof(m->mhd_msg), fmt, ap);
    len = strlen(m->mhd_msg);
    while (len > 0 && (m->mhd_msg[len - 1] == '\n' || m->mhd_msg[len - 1] == '\r'))
        m->mhd_msg[--len] = '\0';
}

static struct MHD_Daemon *start_http(bd_metrics *m, struct sockaddr_in *sa)
{
    return MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, ntohs(sa->sin_port), NULL, NULL,
        answer, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)sa, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_log, m, MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNECTIONS,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTP_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)HTTP_IDLE_S, MHD_OPTION_NOTIFY_CONNECTION, on_connection, m,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, m, MHD_OPTION_END);
}

/* The metrics bd_metrics_status reads: the last made and not freed. */
static pthread_mutex_t status_lock = PTHREAD_MUTEX_INITIALIZER;
static bd_metrics *status_of;

static bd_metrics *status_register(bd_metrics *m)
{
    pthread_mutex_lock(&status_lock);
    status_of = m;
    pthread_mutex_unlock(&status_lock);
    return m;
}

json_t *bd_metrics_status(void)
{
    json_t *o = NULL;
    json_t *lags;
    json_t *rej;
    bd_metrics *m;
    size_t i;
    int bad = 0;

    pthread_mutex_lock(&status_lock);
    m = status_of;
    if (m == NULL) {
        pthread_mutex_unlock(&status_lock);
        return json_null();
    }
    pthread_mutex_lock(&m->lock);
    lags = json_array();
    rej = json_object();
    for (i = 0; lags != NULL && i < m->n_lags; i++)
        bad |= json_array_append_new(
            lags, json_pack("{s:s, s:i, s:o}", "topic", m->lags[i].topic, "partition",
                            (int)m->lags[i].partition, "lag",
                            m->lags[i].lag >= 0 ? json_integer(m->lags[i].lag) : json_null()));
    for (i = 0; rej != NULL && i < REASONS; i++)
        bad |= json_object_set_new(rej, reason_names[i], json_integer((json_int_t)m->rejected[i]));
    if (lags != NULL && rej != NULL && !bad)
        o = json_pack("{s:b, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:O, s:O}",
                      "healthy", m->healthy && m->topics_missing == 0, "reason",
                      m->topics_missing > 0 ? m->missing : m->reason, "uptime_ms",
                      (json_int_t)(now_ms() - m->started_ms), "consumed", (json_int_t)m->consumed,
                      "stored", (json_int_t)m->stored, "duplicates", (json_int_t)m->duplicates,
                      "batches", (json_int_t)m->batches, "failures", (json_int_t)m->failures,
                      "commit_ms_sum", (json_int_t)m->ms_sum, "alerts_published",
                      (json_int_t)m->alerts, "dead_letters_dropped",
                      json_integer((json_int_t)m->dl_dropped), "rejected", rej, "lag", lags);
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_unlock(&status_lock);
    json_decref(lags);
    json_decref(rej);
    return o;
}

bd_metrics *bd_metrics_new(const char *listen)
{
    bd_metrics *m = calloc(1, sizeof(*m));
    struct sockaddr_in sa;
    int e;

    if (m == NULL)
        return NULL;
    pthread_mutex_init(&m->lock, NULL);
    m->healthy = 1;
    m->started_ms = now_ms();
    if (listen == NULL || listen[0] == '\0')
        return status_register(m);
    if (parse_listen(listen, &sa) != 0) {
        bd_log("error", "http_config", "http.listen=%s error=\"need IPv4:PORT\"", listen);
        bd_metrics_free(m);
        return NULL;
    }
    errno = 0;
    m->http = start_http(m, &sa);
    e = errno;
    if (m->http == NULL) {
        bd_log("error", "http_start_failed", "http.listen=%s error=%s reason=%s", listen,
               bd_q(e != 0 ? strerror(e) : "unknown"), bd_q(m->mhd_msg));
        bd_metrics_free(m);
        return NULL;
    }
    if (pthread_create(&m->watchdog, NULL, watchdog, m) != 0) {
        bd_log("error", "http_start_failed", "http.listen=%s error=\"no watchdog thread\"", listen);
        bd_metrics_free(m);
        return NULL;
    }
    m->watching = 1;
    bd_log("info", "http_listening", "http.listen=%s", listen);
    return status_register(m);
}

void bd_metrics_free(bd_metrics *m)
{
    if (m == NULL)
        return;
    pthread_mutex_lock(&status_lock);
    if (status_of == m)
        status_of = NULL;
    pthread_mutex_unlock(&status_lock);
    if (m->watching) {
        pthread_mutex_lock(&m->lock);
        m->stopping = 1;
        pthread_mutex_unlock(&m->lock);
        pthread_join(m->watchdog, NULL);
    }
    if (m->http != NULL)
        MHD_stop_daemon(m->http);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static size_t reason_index(const char *code)
{
    size_t i;

    for (i = 0; code != NULL && i + 1 < REASONS; i++) {
        if (strcmp(code, reason_names[i]) == 0)
            return i;
    }
    return REASONS - 1;
}

static size_t bucket(const uint64_t *bounds, size_t n, uint64_t v)
{
    size_t i;

    for (i = 0; i < n && v > bounds[i]; i++)
        ;
    return i;
}

void bd_metrics_batch(bd_metrics *m, const bs_ingest_counts *k, const bs_record_result *res,
                      size_t n, int64_t commit_ms)
{
    size_t i;
    uint64_t ms = commit_ms > 0 ? (uint64_t)commit_ms : 0;

    pthread_mutex_lock(&m->lock);
    m->stored += k->stored;
    m->duplicates += k->duplicates;
    m->batches++;
    for (i = 0; i < n; i++) {
        if (res[i].outcome == BS_RECORD_REJECTED)
            m->rejected[reason_index(res[i].reason_code)]++;
    }
    m->size_buckets[bucket(size_bounds, N_SIZE, n)]++;
    m->size_sum += n;
    m->ms_buckets[bucket(ms_bounds, N_MS, ms)]++;
    m->ms_sum += ms;
    pthread_mutex_unlock(&m->lock);
}

void bd_metrics_alert_check(bd_metrics *m, int64_t check_ms, uint64_t published)
{
    uint64_t ms = check_ms > 0 ? (uint64_t)check_ms : 0;

    pthread_mutex_lock(&m->lock);
    m->check_buckets[bucket(ms_bounds, N_MS, ms)]++;
    m->check_sum += ms;
    m->alerts += published;
    pthread_mutex_unlock(&m->lock);
}

void bd_metrics_failed(bd_metrics *m, const char *why)
{
    pthread_mutex_lock(&m->lock);
    m->failures++;
    m->healthy = 0;
    snprintf(m->reason, sizeof(m->reason), "batches failing, retrying: %s", why != NULL ? why : "");
    pthread_mutex_unlock(&m->lock);
}

void bd_metrics_unhealthy(bd_metrics *m, const char *reason)
{
    pthread_mutex_lock(&m->lock);
    m->healthy = 0;
    snprintf(m->reason, sizeof(m->reason), "%s", reason);
    pthread_mutex_unlock(&m->lock);
}

void bd_metrics_dead_letters_dropped(bd_metrics *m, uint64_t n)
{
    pthread_mutex_lock(&m->lock);
    m->dl_dropped += n;
    pthread_mutex_unlock(&m->lock);
}

void bd_metrics_topics_missing(bd_metrics *m, int n, const char *which)
{
    pthread_mutex_lock(&m->lock);
    m->topics_missing = n;
    snprintf(m->missing, sizeof(m->missing), "%s", n > 0 && which != NULL ? which : "");
    pthread_mutex_unlock(&m->lock);
}

void bd_metrics_ok(bd_metrics *m)
{
    pthread_mutex_lock(&m->lock);
    m->healthy = 1;
    pthread_mutex_unlock(&m->lock);
}

void bd_metrics_consumed(bd_metrics *m, uint64_t n)
{
    pthread_mutex_lock(&m->lock);
    m->consumed += n;
    pthread_mutex_unlock(&m->lock);
}

void bd_metrics_reload(bd_metrics *m)
{
    pthread_mutex_lock(&m->lock);
    m->reloads++;
    pthread_mutex_unlock(&m->lock);
}

void bd_metrics_lag(bd_metrics *m, const char *topic, int32_t partition, int64_t lag)
{
    size_t i;

    pthread_mutex_lock(&m->lock);
    for (i = 0; i < m->n_lags; i++) {
        if (m->lags[i].partition == partition && strcmp(m->lags[i].topic, topic) == 0)
            break;
    }
    if (i == m->n_lags && m->n_lags < LAG_MAX) {
        snprintf(m->lags[i].topic, sizeof(m->lags[i].topic), "%s", topic);
        m->lags[i].partition = partition;
        m->n_lags++;
    }
    if (i < m->n_lags)
        m->lags[i].lag = lag;
    pthread_mutex_unlock(&m->lock);
}

void bd_metrics_lag_clear(bd_metrics *m)
{
    pthread_mutex_lock(&m->lock);
    m->n_lags = 0;
    pthread_mutex_unlock(&m->lock);
}
