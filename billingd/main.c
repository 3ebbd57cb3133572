/*
 * main.c - billingd: consume usage events from Kafka, rate them and keep
 * PostgreSQL current, exactly once. Options, configuration and signals
 * here; the consumer in daemon.c. See billingd(8).
 */
#include "config.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "billing.h"
#include "conf.h"
#include "daemon.h"
#include "log.h"
#include "metrics.h"

#define MSG_MAX 1024

enum { EXIT_USAGE = 2, EXIT_CONFIG = 3 };

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void usage(FILE *out)
{
    fputs("Usage: billingd [--config FILE] [--set KEY=VALUE]...\n"
          "       billingd --help | --version\n"
          "\n"
          "Consume billing.v1.UsageEvent records from Kafka as a member of a consumer\n"
          "group, rate them with libbilling and store the events, their exact aggregates,\n"
          "the rejected records and the consumer positions in PostgreSQL, one\n"
          "transaction per batch: exactly once across crashes and rebalances.\n"
          "\n"
          "Options:\n"
          "  --config FILE          configuration file of KEY = VALUE lines\n"
          "  --set KEY=VALUE        set one key after the file (repeatable)\n"
          "  --help                 print this help\n"
          "  --version              print the version\n"
          "\n"
          "Keys: db, book, group (billingd), topics (required), dead_letter_topic,\n"
          "batch.size (5000), batch.linger.ms (200), retry.max.ms (30000),\n"
          "commit.connections (2), rate.threads (1), alerts.topic,\n"
          "alerts.thresholds (50,80,100), alerts.cache_accounts (100000),\n"
          "alerts.cache_events (1000000),\n"
          "http.listen (/metrics and /healthz),\n"
          "api.listen (the HTTP API; with it, topics may be left out), api.tls_cert,\n"
          "api.tls_key, api.body_max (16777216), api.request_ms (30000),\n"
          "api.connections_per_ip (64), api.rate (1000), api.console_dir (the files of\n"
          "the web console at /console/), api.events (kafka with topics: POST /v1/events\n"
          "produced to api.events_topic; else store: stored at once),\n"
          "api.events_topic (the first of topics), api.produce_ms (10000), and\n"
          "kafka.* passed to librdkafka (kafka.bootstrap.servers=...). See billingd(8).\n"
          "\n"
          "Logs key=value lines on stderr. SIGTERM or SIGINT: commit the batch in\n"
          "flight, leave the group, exit 0.\n"
          "Exit status: 0 stopped by a signal; 1 could not start; 2 usage error;\n"
          "3 invalid configuration; 4 a configured topic does not exist; 5 the\n"
          "database schema is not the version this billingd needs.\n",
          out);
}

enum { OPT_CONFIG = 256, OPT_SET, OPT_HELP, OPT_VERSION };

static const struct option long_options[] = {
    {"config", required_argument, NULL, OPT_CONFIG},
    {"set", required_argument, NULL, OPT_SET},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* Options in order: the file first wherever it appears, then the --set lines. */
static int configure(bd_config *cfg, int argc, char **argv)
{
    char msg[MSG_MAX];
    const char *file = NULL;
    int opt;

    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":", long_options, NULL)) != -1) {
        if (opt == OPT_HELP || opt == OPT_VERSION)
            return opt;
        if (opt == OPT_CONFIG)
            file = optarg;
        if (opt == ':' || opt == '?') {
            fprintf(stderr, "billingd: bad or incomplete option '%s'\nTry 'billingd --help'.\n",
                    argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "billingd: unexpected argument '%s'\nTry 'billingd --help'.\n",
                argv[optind]);
        return EXIT_USAGE;
    }
    if (file != NULL && bd_config_file(cfg, file, msg, sizeof(msg)) != 0)
        goto bad;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":", long_options, NULL)) != -1) {
        if (opt == OPT_SET && bd_config_set(cfg, optarg, "--set", msg, sizeof(msg)) != 0)
            goto bad;
    }
    if (bd_config_check(cfg, msg, sizeof(msg)) != 0)
        goto bad;
    return 0;
bad:
    fprintf(stderr, "billingd: %s\n", msg);
    return EXIT_CONFIG;
}

/* No topics: serve the HTTP API (and /metrics, /healthz) alone until a signal. */
static int serve_api_only(const bd_config *cfg)
{
    struct timespec tick = {0, 100 * 1000000L};
    bd_metrics *m = bd_metrics_new(cfg->http_listen);

    if (m == NULL)
        return BD_EXIT_START;
    bd_log("info", "started", "mode=api-only");
    while (!stop_requested)
        nanosleep(&tick, NULL); /* the signal handler only sets the flag */
    bd_metrics_free(m);
    return 0;
}

int main(int argc, char **argv)
{
    struct sigaction sa;
    bd_config cfg;
    bd_api *api = NULL;
    int rc;

    bd_config_init(&cfg);
    rc = configure(&cfg, argc, argv);
    if (rc == OPT_HELP || rc == OPT_VERSION) {
        if (rc == OPT_HELP)
            usage(stdout);
        else
            printf("billingd %s (libbilling %s)\n", PACKAGE_VERSION, billing_version());
        bd_config_free(&cfg);
        return 0;
    }
    if (rc == 0 && cfg.group == NULL && (cfg.group = strdup("billingd")) == NULL)
        rc = 1;
    if (rc != 0) {
        bd_config_free(&cfg);
        return rc;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (cfg.api_listen != NULL && cfg.api_listen[0] != '\0') {
        api = bd_api_new(&cfg);
        if (api == NULL) {
            bd_config_free(&cfg);
            return BD_EXIT_START;
        }
        bd_metrics_extra(bd_api_metrics, api);
    }
    rc = cfg.n_topics == 0 ? serve_api_only(&cfg) : bd_run(&cfg, &stop_requested);
    /* Stops accepting, answers the requests in flight. */
    bd_api_free(api);
    bd_config_free(&cfg);
    return rc;
}
